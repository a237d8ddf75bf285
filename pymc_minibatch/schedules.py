"""Step-size schedules for the stochastic-gradient samplers (``step_size=`` argument).

A schedule maps the update count ``t = 0, 1, ...`` of a chain (tuning included) to a step
size ``h(t)``. The SG-MCMC step methods and :func:`pymc_minibatch.sample_particles` accept one
wherever they accept a number.

Examples
--------
>>> import pymc_minibatch as pmm
>>> schedule = pmm.schedules.polynomial_decay(0.1, b=10.0, power=0.55)
>>> round(float(schedule(0)), 4)
0.0282
"""

from pymc_minibatch.kernels.schedules import (
    ConstantSchedule,
    CyclicalSchedule,
    PolynomialDecay,
    constant,
    cyclical,
    polynomial_decay,
)

__all__ = [
    "ConstantSchedule",
    "CyclicalSchedule",
    "PolynomialDecay",
    "constant",
    "cyclical",
    "polynomial_decay",
]
