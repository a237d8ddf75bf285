"""Step-size schedules ``h(t)`` for stochastic-gradient samplers (``t = 0, 1, ...``)."""

from typing import NamedTuple

import numpy as np


def _positive(name, value):
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return float(value)


class ConstantSchedule(NamedTuple):
    """``h(t) = value``; build it with :func:`constant`.

    Examples
    --------
    >>> from pymc_minibatch.schedules import constant
    >>> constant(0.01)([0, 10, 100]).tolist()
    [0.01, 0.01, 0.01]
    """

    value: float

    def __call__(self, t):
        return self.value + 0.0 * np.asarray(t, dtype=np.float64)


class PolynomialDecay(NamedTuple):
    """``h(t) = a (b + t)^(-power)``.

    Welling & Teh (2011) use this form with ``power`` in ``(0.5, 1]``, so that the sum of
    the steps diverges and the sum of their squares converges (the Robbins–Monro
    conditions under which SGLD's bias vanishes). Build it with :func:`polynomial_decay`.

    Examples
    --------
    >>> from pymc_minibatch.schedules import polynomial_decay
    >>> schedule = polynomial_decay(1.0, b=1.0, power=1.0)
    >>> schedule([0, 1, 3]).tolist()
    [1.0, 0.5, 0.25]
    """

    a: float
    b: float = 1.0
    power: float = 0.55

    def __call__(self, t):
        return self.a * (self.b + np.asarray(t, dtype=np.float64)) ** (-self.power)


class CyclicalSchedule(NamedTuple):
    """``h(t) = (initial / 2) (cos(pi (t mod L) / L) + 1)`` with ``L = cycle_length``.

    Zhang, Li, Zhang, Chen & Wilson (2020), "Cyclical stochastic gradient MCMC for
    Bayesian deep learning", ICLR, eq. (1): each cycle starts large (exploration) and
    decays to almost 0 (sampling). Build it with :func:`cyclical`.

    Examples
    --------
    >>> from pymc_minibatch.schedules import cyclical
    >>> schedule = cyclical(0.1, cycle_length=4)
    >>> schedule([0, 2, 4]).round(6).tolist()
    [0.1, 0.05, 0.1]
    """

    initial: float
    cycle_length: int

    def __call__(self, t):
        phase = np.mod(np.asarray(t, dtype=np.float64), self.cycle_length) / self.cycle_length
        return 0.5 * self.initial * (np.cos(np.pi * phase) + 1.0)


class HoldThenDecay(NamedTuple):
    """``h(t) = initial`` for ``t <= half``, then ``initial * rate^(t - half)``.

    The default of :func:`pymc_minibatch.sample_particles` without control variates:
    ``rate`` takes the step from ``initial`` to ``final`` at ``t = n_steps - 1``. Build it
    with :func:`hold_then_decay`.

    Examples
    --------
    >>> from pymc_minibatch.kernels.schedules import hold_then_decay
    >>> hold_then_decay(0.1, 0.001, n_steps=5)([0, 2, 3, 4]).round(6).tolist()
    [0.1, 0.1, 0.01, 0.001]
    """

    initial: float
    half: int
    rate: float

    def __call__(self, t):
        return self.initial * self.rate ** np.maximum(np.asarray(t) - self.half, 0)


def hold_then_decay(initial, final, n_steps) -> HoldThenDecay:
    """``initial`` for the first half of ``n_steps`` steps, then a geometric decay to
    ``final`` at the last (:class:`HoldThenDecay`)."""
    half = n_steps // 2
    rate = (final / initial) ** (1.0 / max(n_steps - 1 - half, 1))
    return HoldThenDecay(float(initial), half, rate)


def constant(value) -> ConstantSchedule:
    """A constant step size ``h(t) = value``.

    Parameters
    ----------
    value : float
        Positive step size.

    Returns
    -------
    ConstantSchedule

    Examples
    --------
    >>> import pymc_minibatch as pmm
    >>> schedule = pmm.schedules.constant(0.05)
    >>> float(schedule(1000))
    0.05
    >>> step = pmm.SGLD(batch_size=100, step_size=schedule)  # doctest: +SKIP
    """
    return ConstantSchedule(_positive("step size", value))


def polynomial_decay(a, b=1.0, power=0.55) -> PolynomialDecay:
    """Polynomially decaying step size ``h(t) = a (b + t)^(-power)``.

    Parameters
    ----------
    a : float
        Positive scale.
    b : float, default 1.0
        Positive offset: ``h(0) = a b^(-power)``.
    power : float, default 0.55
        Decay exponent in ``[0, 1]``; ``(0.5, 1]`` satisfies the Robbins–Monro conditions
        (see :class:`PolynomialDecay`).

    Returns
    -------
    PolynomialDecay

    Examples
    --------
    >>> import pymc_minibatch as pmm
    >>> schedule = pmm.schedules.polynomial_decay(0.1, b=1.0, power=0.5)
    >>> schedule([0, 3, 99]).round(4).tolist()
    [0.1, 0.05, 0.01]
    """
    if not (np.isfinite(b) and b > 0):
        raise ValueError(f"b must be a positive finite number, got {b}")
    if not 0 <= power <= 1:
        raise ValueError(f"power must lie in [0, 1], got {power}")
    return PolynomialDecay(_positive("a", a), float(b), float(power))


def cyclical(initial, cycle_length) -> CyclicalSchedule:
    """Cosine cycles of ``cycle_length`` steps from ``initial`` down to 0.

    Parameters
    ----------
    initial : float
        Positive step size at the start of every cycle.
    cycle_length : int
        Updates per cycle.

    Returns
    -------
    CyclicalSchedule

    Examples
    --------
    >>> import pymc_minibatch as pmm
    >>> schedule = pmm.schedules.cyclical(0.2, cycle_length=1000)
    >>> schedule([0, 500, 999, 1000]).round(6).tolist()
    [0.2, 0.1, 0.0, 0.2]
    """
    if isinstance(cycle_length, bool) or not isinstance(cycle_length, int | np.integer):
        raise TypeError(f"cycle_length must be an integer, got {cycle_length!r}")
    if cycle_length < 1:
        raise ValueError(f"cycle_length must be positive, got {cycle_length}")
    return CyclicalSchedule(_positive("initial", initial), int(cycle_length))


def as_schedule(step_size):
    """A schedule from a positive float or one of this module's schedules."""
    if isinstance(step_size, ConstantSchedule | PolynomialDecay | CyclicalSchedule):
        return step_size
    if isinstance(step_size, bool) or not isinstance(step_size, int | float | np.number):
        raise TypeError(
            "step_size must be a positive number or a schedule from pymc_minibatch.schedules "
            f"(constant, polynomial_decay, cyclical), got {step_size!r}"
        )
    return constant(step_size)
