"""Step-size schedules for the stochastic-gradient samplers (``step_size=`` argument).

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
