"""A check that an approximate sampler's draws are where the model puts its posterior.

Approximate samplers (stochastic-gradient chains, particles) have no accept step that would
reveal a bias: a step size too large for the curvature, a preconditioner that does not fit,
or particles that collapse in high dimension return draws far from the posterior without
any error. Two of Stein's identities say where the draws should be, from the model's score
``s = grad log p`` alone (integration by parts, for a density whose tails vanish; the
identities behind the kernel Stein discrepancies of Gorham & Mackey 2015, "Measuring sample
quality with Stein's method", NeurIPS): for every coordinate ``j`` and constant ``c``,

    E_p[s_j(theta)] = 0,        E_p[(theta_j - c) s_j(theta)] = -1.

Unlike a comparison with the Laplace approximation, they need no estimate of the
posterior's moments: in a hierarchical model the joint mode puts a group scale many Laplace
sds below its posterior mean (more than 5 with 1000 groups, asserted by
``tests/statistical/test_hierarchical.py``), and draws checked against the mode would be
flagged when exact. On draws ``theta`` with scores ``g`` (exact, or any unbiased
minibatch estimate: its noise widens the standard errors, not the statistics), in the units
``u = (theta - mode) / sigma`` and ``t = sigma g`` of the Laplace sds ``sigma``:

- ``offset_j = -mean(t_j)``: zero for the posterior; ``(mean_q - mean_p) / sd_p`` for a
  Gaussian posterior whose sd the Laplace sd matches.
- ``spread_j = -mean((u_j - mean(u_j)) t_j)``: one for the posterior; ``(sd_q / sd_p)^2``
  for a Gaussian posterior, whatever the units.
- ``overall spread``: the mean of ``spread_j`` over the coordinates, which sees a narrowing
  shared by every coordinate (particles collapsing in high dimension) long before any one
  coordinate is significant.

Their standard errors come from batch means (the draws of a chain are correlated): sums are
kept for at most :data:`MAX_BATCHES` consecutive batches, whose length doubles when they
are full, in O(d) memory. Batch means need batches longer than the chain's
autocorrelation time (Flegal & Jones 2010, "Batch means and spectral variance estimators
in Markov chain Monte Carlo", Annals of Statistics); early in a slowly mixing chain they
are shorter, and their means are themselves correlated. With ``rho`` the lag-1
autocorrelation of a statistic's batch means (at least 0, and at least its median over the
coordinates, which is less noisy than one coordinate's), its standard error is widened
as that of the mean of an AR(1) sequence, by ``sqrt((1 + rho) / (1 - rho))``; beyond
:data:`MAX_BATCH_CORRELATION` the batches are too short to tell, and the statistic waits
for a later check (its batches are then longer). A statistic is reported only when it is
beyond its limit by ``z`` standard errors (``z`` at least 4, Bonferroni over the
coordinates), so exact draws do not raise it and a run too short to tell is not accused.
"""

from typing import NamedTuple

import numpy as np
from scipy import stats

MEAN_LIMIT = 1.0
"""Largest accepted ``|offset_j|``: about one posterior sd between the draws' mean and the
posterior's."""
SPREAD_LIMIT = 3.0
"""Largest accepted ratio of a coordinate's sd to the posterior's (``sqrt(spread_j)``), and
the inverse of the smallest."""
OVERALL_SPREAD_RANGE = (0.64, 1.5625)
"""Accepted range of the overall spread (about the squared ratio of sds, shared over the
coordinates: 0.8 to 1.25 in sds)."""
MAX_BATCHES = 32
"""Batches kept; pairs are merged when they are full."""
MIN_BATCHES = 16
"""Complete batches needed for a verdict (their standard errors have 15 degrees of
freedom at least)."""
MAX_BATCH_CORRELATION = 0.5
"""Largest lag-1 autocorrelation of a statistic's batch means for a verdict on it (its
standard error then widened by at most ``sqrt(3)``)."""
FAMILY_ERROR = 1e-3
"""Family-wise false-alarm rate over the coordinates behind the ``z`` of the limits."""


class SteinState(NamedTuple):
    """Batch sums of ``u``, ``t`` and ``u t`` over the draws seen so far."""

    count: int
    batch_length: int
    sums: np.ndarray
    """Shape ``(MAX_BATCHES, 3, d)``: per batch, the sums of ``u``, ``t`` and ``u t``."""


class Disagreement(NamedTuple):
    """The statistic furthest beyond its limit."""

    coordinate: int | None
    """The coordinate (``None`` for the overall spread)."""
    kind: str
    """``"mean"`` (``offset_j``), ``"spread"`` (``spread_j``) or ``"overall spread"``."""
    value: float
    """The offset in posterior sds, or the ratio of sds (the root of a spread, 0 if
    negative)."""
    count: int
    """Draws checked (those of complete batches)."""


def init(ndim: int) -> SteinState:
    """No draws seen yet."""
    return SteinState(0, 1, np.zeros((MAX_BATCHES, 3, ndim)))


def update(state: SteinState, units: np.ndarray, scores: np.ndarray) -> SteinState:
    """Add draws ``units`` (``u``, shape (d,) or (n, d)) with their scores ``scores``
    (``t``, the same shape), one at a time in order. ``state.sums`` is updated in place
    (a copy per draw would cost more than a stochastic-gradient update in high dimension)."""
    units, scores = np.atleast_2d(units), np.atleast_2d(scores)
    count, length, sums = state.count, state.batch_length, state.sums
    for u, t in zip(units, scores, strict=True):
        batch = count // length
        if batch == MAX_BATCHES:  # full: merge neighbours, double the length
            half = MAX_BATCHES // 2
            sums[:half] = sums[0::2] + sums[1::2]
            sums[half:] = 0.0
            length *= 2
            batch = count // length
        sums[batch, 0] += u
        sums[batch, 1] += t
        sums[batch, 2] += u * t
        count += 1
    return SteinState(count, length, sums)


def z_limit(ndim: int) -> float:
    """Standard errors beyond a limit for a report: the two-sided Bonferroni quantile for
    :data:`FAMILY_ERROR` over ``ndim`` coordinates, at least 4."""
    return max(4.0, float(stats.norm.isf(FAMILY_ERROR / (2 * ndim))))


def statistics(state: SteinState):
    """``(offset, its standard error, spread, its, overall, its, draws used)`` over the
    complete batches, or None with fewer than :data:`MIN_BATCHES` of them."""
    n_batches = min(state.count // state.batch_length, MAX_BATCHES)
    if n_batches < MIN_BATCHES:
        return None
    means = state.sums[:n_batches] / state.batch_length  # (B, 3, d)
    mean_u = means[:, 0].mean(axis=0)
    offsets = -means[:, 1]
    spreads = -(means[:, 2] - mean_u * means[:, 1])
    overall = spreads.mean(axis=1)

    offset_rho, spread_rho = _lag_one(offsets), _lag_one(spreads)
    # one coordinate's rho from a few batches is noisy, and those that come out low by
    # chance would be judged on too small errors: the median over coordinates is a floor
    chain_rho = float(np.median(np.concatenate([offset_rho, spread_rho])))

    def mean_and_error(values, rho):
        rho = np.maximum(rho, chain_rho)
        widening = np.where(rho <= MAX_BATCH_CORRELATION, np.sqrt((1.0 + rho) / (1.0 - rho)),
                            np.inf)  # fmt: skip
        return values.mean(axis=0), widening * values.std(axis=0, ddof=1) / np.sqrt(n_batches)

    return (
        *mean_and_error(offsets, offset_rho),
        *mean_and_error(spreads, spread_rho),
        *mean_and_error(overall, _lag_one(overall)),
        n_batches * state.batch_length,
    )


def _lag_one(values):
    """The lag-1 autocorrelation of each column of ``values`` (batches by rows), at least 0
    (0 for a constant column)."""
    centred = values - values.mean(axis=0)
    squares = np.sum(centred**2, axis=0)
    lagged = np.sum(centred[1:] * centred[:-1], axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.maximum(np.where(squares > 0, lagged / squares, 0.0), 0.0)


def _beyond(value, margin, low, high):
    """How far ``value`` lies outside ``[low, high]`` by more than ``margin``, relative to
    the limit it crosses (positive: outside; no lower limit when ``low`` is 0)."""
    above = (value - margin) / high - 1.0
    below = (low - value - margin) / low if low > 0 else -1.0
    return np.maximum(above, below)


def disagreement(state: SteinState, spread_range=(1.0 / SPREAD_LIMIT, SPREAD_LIMIT),
                 overall_range=OVERALL_SPREAD_RANGE):  # fmt: skip
    """The coordinate's statistic furthest beyond its limit by more than its ``z``
    standard errors, else the overall spread if it is beyond its range by 4 standard
    errors, else None (also before :data:`MIN_BATCHES` complete batches).

    ``spread_range``: the accepted ratios of a coordinate's sd; ``overall_range``: of the
    overall spread. A lower end of 0 accepts any narrowing (for methods documented to
    narrow the posterior). A non-finite statistic is reported as a mean."""
    found = statistics(state)
    if found is None:
        return None
    offset, offset_se, spread, spread_se, overall, overall_se, used = found
    z = z_limit(offset.size)
    if not (np.all(np.isfinite(offset)) and np.all(np.isfinite(spread))):
        bad = int(np.argmin(np.isfinite(offset) & np.isfinite(spread)))
        return Disagreement(bad, "mean", float(offset[bad]), used)
    low, high = spread_range
    excess = {
        "mean": _beyond(np.abs(offset), z * offset_se, 0.0, MEAN_LIMIT),
        "spread": _beyond(spread, z * spread_se, low**2, high**2),
    }
    overall_excess = _beyond(overall, 4.0 * overall_se, *overall_range)
    kind = max(excess, key=lambda name: np.max(excess[name]))
    worst = int(np.argmax(excess[kind]))
    if excess[kind][worst] > 0:  # a coordinate named is more use than the overall spread
        value = offset[worst] if kind == "mean" else np.sqrt(max(spread[worst], 0.0))
        return Disagreement(worst, kind, float(value), used)
    if overall_excess > 0:
        return Disagreement(None, "overall spread", float(np.sqrt(max(overall, 0.0))), used)
    return None
