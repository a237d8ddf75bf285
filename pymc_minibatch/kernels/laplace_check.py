"""A check that an approximate sampler's draws are where the model puts its posterior.

Approximate samplers (stochastic-gradient chains, particles) have no accept step that would
reveal a bias: a step size too large for the curvature, or a preconditioner that does not
fit, returns draws far from the posterior without any error. The Laplace approximation at
the mode (``N(mode, Sigma)``, the full-data curvature) gives, at no cost per draw, the scale
against which "far" is measured: per coordinate ``j``, the draws' mean offset
``(mean_j - mode_j) / sqrt(Sigma_jj)`` and their spread ``sd_j / sqrt(Sigma_jj)``.

For the exact posterior of a model the Laplace approximation suits, the offsets are below
1-2 and the spreads near 1 (a skewed or heavy-tailed marginal moves them, by less than the
limits here); a sampler whose draws sit :data:`MEAN_LIMIT` Laplace sds from the mode, or
spread :data:`SPREAD_LIMIT` times too wide or too narrow, has not sampled the posterior.
The moments are accumulated online (Welford's algorithm, one pass, O(d) memory), so a chain
of PyMC draws can be checked as it runs.
"""

from typing import NamedTuple

import numpy as np

MEAN_LIMIT = 5.0
"""Largest accepted ``|mean_j - mode_j| / sqrt(Sigma_jj)``."""
SPREAD_LIMIT = 3.0
"""Largest accepted ratio ``sd_j / sqrt(Sigma_jj)``, and the inverse of the smallest."""


class MomentsState(NamedTuple):
    """Running moments of the draws in Laplace units ``u = (theta - mode) / sqrt(Sigma_jj)``."""

    count: int
    mean: np.ndarray
    """Mean of ``u``, shape (d,)."""
    squares: np.ndarray
    """Sum of squared deviations of ``u`` from its mean, shape (d,)."""


class Disagreement(NamedTuple):
    """The coordinate that disagrees most with the Laplace approximation."""

    coordinate: int
    kind: str
    """``"mean"`` (the draws' mean is far from the mode) or ``"spread"`` (their sd is far
    from the Laplace sd)."""
    value: float
    """The offset in Laplace sds, or the ratio of sds."""
    count: int
    """Draws checked."""


def init(ndim: int) -> MomentsState:
    """No draws seen yet."""
    return MomentsState(0, np.zeros(ndim), np.zeros(ndim))


def update(state: MomentsState, units: np.ndarray) -> MomentsState:
    """Add draws ``units`` (shape (d,) or (n, d), in Laplace units) to the moments."""
    units = np.atleast_2d(np.asarray(units, dtype=np.float64))
    n_new = units.shape[0]
    if n_new == 0:
        return state
    batch_mean = units.mean(axis=0)
    batch_squares = np.sum((units - batch_mean) ** 2, axis=0)
    count = state.count + n_new
    shift = batch_mean - state.mean
    mean = state.mean + shift * (n_new / count)
    squares = state.squares + batch_squares + shift**2 * (state.count * n_new / count)
    return MomentsState(count, mean, squares)


def disagreement(state: MomentsState, mean_limit=MEAN_LIMIT,
                 spread_range=(1.0 / SPREAD_LIMIT, SPREAD_LIMIT)):  # fmt: skip
    """The worst coordinate beyond the limits, or None if every coordinate is within them
    (or fewer than two draws were seen). ``spread_range``: the accepted ratios of sds (a
    lower end of 0 accepts any narrowing)."""
    if state.count < 2:
        return None
    offsets = np.abs(state.mean)
    worst = int(np.argmax(offsets))
    if not offsets[worst] <= mean_limit:  # NaN fails too
        return Disagreement(worst, "mean", float(state.mean[worst]), state.count)
    spread = np.sqrt(state.squares / (state.count - 1))
    low, high = spread_range
    excess = np.maximum(np.log(np.maximum(spread, 1e-300) / high),
                        np.log(low / np.maximum(spread, 1e-300)) if low > 0 else -np.inf)
    worst = int(np.argmax(excess))
    if excess[worst] > 0:
        return Disagreement(worst, "spread", float(spread[worst]), state.count)
    return None
