"""TunaMH: exact minibatch Metropolis–Hastings with Poisson auxiliary variables.

Zhang, Cooper & De Sa (2020), "Asymptotically Optimal Exact Minibatch Metropolis-Hastings",
NeurIPS, Algorithm 2; the docs page "TunaMH: exact minibatch Metropolis–Hastings" states it.
For a proposal ``theta'`` at distance ``m = M(theta, theta')``, with bounds
``|U_i(theta') - U_i(theta)| <= c_i m`` and ``C = sum_i c_i``:

1. ``lambda = chi C^2 m^2 + C m``; draw ``B ~ Poisson(lambda)`` and ``B`` rows with
   probability ``c_i / C`` (with replacement).
2. With ``Delta_i = U_i(theta') - U_i(theta)``, ``phi_i = (Delta_i + c_i m) / 2`` and
   ``phi'_i = (c_i m - Delta_i) / 2``, keep row ``i`` with probability
   ``(chi c_i C m^2 + phi_i) / (chi c_i C m^2 + c_i m)``.
3. Accept with probability ``min(1, r)``, ``r = exp(U_0(theta) - U_0(theta')) *
   prod_{kept} (chi c_i C m^2 + phi'_i) / (chi c_i C m^2 + phi_i)`` (symmetric proposal).

This is MH on ``(theta, s)`` with independent ``s_i ~ Poisson(chi C c_i m^2 + phi_i)``, so
the theta-marginal is the exact posterior. The prior term ``U_0`` (prior and Jacobians) is
evaluated exactly, which the reference Julia code omits. When ``lambda >= N`` a full-data
MH step is taken instead; the switch depends on ``lambda(theta, theta')``, which is
symmetric, so exactness is kept.

Rows in groups with a metric of their own (a hierarchical model's rows, whose bounds follow
the movement of their group's parameters and the shared ones: ``|U_i(theta') - U_i(theta)|
<= c_i m_g(i)``). The argument above needs, per row, a Poisson rate ``a_i + phi_i`` with
``a_i`` symmetric and ``phi_i(theta, theta') - phi_i(theta', theta) = Delta_i``, not one
metric for all rows: with ``phi_i = (Delta_i + c_i m_g) / 2`` and ``a_i = chi C c_i m_g^2``,
the expected batch is ``lambda = sum_g (chi C m_g^2 + m_g) C_g`` (``C_g`` the sum of ``c``
over group ``g``), drawn as ``Poisson(lambda_g)`` rows of each group with probability ``c_i /
C_g`` within it; keep and accept as above with ``m_g(i)`` in place of ``m``. A group whose
``lambda_g`` reaches its number of rows is evaluated whole instead (its rows' differences
enter the ratio exactly): the choice depends on the pair of points symmetrically, as the
fallback does; so are the groups evaluated whole at every step (``always_whole``), whose
``c`` then leave ``C``. See the docs page "TunaMH on hierarchical models".
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.exact_mh import Decision, Move, Params, full_data_mh
from pymc_minibatch.kernels.random_walk import log_accept_to_prob


class RowBounds(NamedTuple):
    """The rows' bounds, and how to draw rows by them, in groups of rows that share a
    metric (one group, every row, for a metric of the whole parameter vector)."""

    c: np.ndarray
    """Per-row constants, shape (N,) (float32 or float64; the kernel computes in float64)."""
    total: float
    """``C = sum(c)`` over the rows drawn from (every group but ``always_whole``)."""
    sample: Callable[[np.random.Generator, np.ndarray], tuple[np.ndarray, np.ndarray]]
    """``sample(rng, counts)``: ``counts[g]`` rows of each group ``g``, with probability
    ``c_i / C_g`` within it; returns the rows and their groups."""
    group_totals: np.ndarray
    """``C_g``, the sum of ``c`` over each group, shape (n_groups,)."""
    group_sizes: np.ndarray
    """Rows per group, shape (n_groups,)."""
    group_rows: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None
    """``group_rows(groups)``: every row of ``groups`` and their groups (None: one group)."""
    always_whole: np.ndarray = np.empty(0, dtype=np.intp)
    """Groups evaluated whole at every step (their ``group_totals`` are 0): those whose rows
    cost more to bound than to evaluate, such as a group of three rows whose parameter only
    its prior pins down."""


def single_group(c, total, sample):
    """:class:`RowBounds` of one group, from ``sample(rng, size)`` drawing by ``c``."""
    def sample_counts(rng, counts):
        size = int(counts[0])
        return sample(rng, size), np.zeros(size, dtype=np.intp)

    return RowBounds(c, float(total), sample_counts, np.array([float(total)]),
                     np.array([np.size(c)]))  # fmt: skip


def group_rates(chi: float, bounds: RowBounds, metrics) -> np.ndarray:
    """``lambda_g = (chi C m_g^2 + m_g) C_g``: the expected rows drawn in each group."""
    metrics = np.asarray(metrics, dtype=np.float64)
    return (chi * bounds.total * metrics**2 + metrics) * bounds.group_totals


def expected_batch_size(chi: float, total: float, m: float) -> float:
    """``lambda = chi C^2 m^2 + C m`` (one group)."""
    return chi * total**2 * m**2 + total * m


def whole_groups(rates, bounds: RowBounds) -> np.ndarray:
    """The groups (of several) whose expected draws reach their number of rows: cheaper to
    evaluate whole. A symmetric function of the two points, as the rates are."""
    if bounds.group_rows is None:
        return np.empty(0, dtype=np.intp)
    return np.flatnonzero((rates >= bounds.group_sizes) & (bounds.group_sizes > 0))


def draw_counts(rng, rates, expected, whole, bounds: RowBounds) -> np.ndarray:
    """Rows to draw from each group: ``Poisson(lambda_g)``, none from the groups ``whole``
    (``Poisson(lambda)`` in one group)."""
    if bounds.group_rows is None:
        return np.array([rng.poisson(expected)])
    return rng.poisson(np.where(np.isin(np.arange(rates.size), whole), 0.0, rates))


def evaluate_rows(rng, bounds: RowBounds, loglik_pair, counts, whole):
    """Draw ``counts[g]`` rows of each group and evaluate them with every row of the groups
    ``whole``: ``(idx, groups, delta, whole_delta, evaluated)``, ``delta`` the drawn rows'
    ``U_i(theta') - U_i(theta)`` and ``whole_delta`` the sum of it over the whole groups'
    rows; ``delta`` is None when a log-likelihood is not finite."""
    idx, groups = bounds.sample(rng, counts)
    if whole.size:
        loglik_current, loglik_proposal = loglik_pair(
            np.concatenate([idx, bounds.group_rows(whole)[0]])
        )
    else:
        loglik_current, loglik_proposal = loglik_pair(idx)
    delta_all = loglik_current - loglik_proposal  # U_i(theta') - U_i(theta)
    if not math.isfinite(delta_all.sum()):  # a NaN or an infinity makes the sum one
        return idx, groups, None, np.nan, delta_all.size
    whole_delta = float(delta_all[idx.size :].sum())
    return idx, groups, delta_all[: idx.size], whole_delta, delta_all.size


def tuna_log_ratio(
    rng: np.random.Generator,
    metrics,
    chi: float,
    bounds: RowBounds,
    loglik_pair: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    counts,
    whole=(),
):
    """Likelihood part of the log acceptance ratio on a fresh Poisson minibatch: ``counts[g]``
    rows drawn in each group ``g`` (metric ``metrics[g]``), and every row of the groups
    ``whole``, whose log-likelihood differences enter exactly.

    Returns ``(log_ratio, kept, bound_ratio, finite, evaluated)``; ``loglik_pair(idx)``
    gives the log-likelihood of rows ``idx`` at the current point and at the proposal.
    """
    counts = np.asarray(counts)
    whole = np.asarray(whole, dtype=np.intp)
    if counts.sum() == 0 and whole.size == 0:
        return 0.0, 0, 0.0, True, 0
    idx, groups, delta, whole_delta, evaluated = evaluate_rows(
        rng, bounds, loglik_pair, counts, whole
    )
    if delta is None:
        return -np.inf, 0, np.nan, False, evaluated
    exact = -whole_delta
    if idx.size == 0:
        return exact, 0, 0.0, True, evaluated
    m = np.asarray(metrics, dtype=np.float64)[groups]
    c = bounds.c[idx].astype(np.float64)
    c_m = c * m
    bound_ratio = float((np.abs(delta) / c_m).max())
    base = chi * bounds.total * c * m * m
    # phi clipped to [0, c m]: rounding may put |Delta_i| a hair above its bound
    phi_forward = np.minimum(np.maximum(0.5 * (delta + c_m), 0.0), c_m)
    keep = rng.random(idx.size) * (base + c_m) < base + phi_forward
    kept_base = base[keep]
    with np.errstate(divide="ignore"):
        log_ratio = float(np.log((kept_base + (c_m - phi_forward)[keep])
                                 / (kept_base + phi_forward[keep])).sum())  # fmt: skip
    return log_ratio + exact, int(keep.sum()), bound_ratio, True, evaluated


def tuna_rule(rng: np.random.Generator, exact_log_ratio: float, move: Move,
              params: Params) -> Decision:  # fmt: skip
    """TunaMH's acceptance rule (:mod:`pymc_minibatch.kernels.exact_mh`).

    ``move.metrics``: ``M_g(theta, theta')`` of each group of rows (one for one group);
    ``params.rows`` the :class:`RowBounds`, ``params.chi``. ``exact_log_ratio`` is the part
    of the log acceptance ratio computed exactly (priors, Jacobians, the proposal's density
    ratio and the control variates' remainder). The step is a full-data MH step when
    ``lambda >= n_data`` and ``params.fallback``, or when ``move.full_data`` (a symmetric
    function of the two points, such as both lying in a trust region; exactness is kept for
    the same reason). With several groups, a group whose expected draws reach its number of
    rows is evaluated whole (again a symmetric choice).
    """
    bounds, chi, n_data = params.rows, params.chi, params.n_data
    metrics = np.atleast_1d(np.asarray(move.metrics, dtype=np.float64))
    rates = group_rates(chi, bounds, metrics)
    expected = float(rates.sum())
    if not np.isfinite(exact_log_ratio):
        return Decision(0.0, False, 0, 0, expected, False, True, 0.0)
    if move.full_data or (params.fallback and expected >= n_data):
        accept, accepted, nonfinite = full_data_mh(rng, exact_log_ratio, move.full_loglik_diff)
        return Decision(accept, accepted, n_data, n_data, expected, True, nonfinite, np.nan)
    whole = whole_groups(rates, bounds)
    if bounds.always_whole.size:
        whole = np.union1d(bounds.always_whole, whole)
    counts = draw_counts(rng, rates, expected, whole, bounds)
    log_lik_ratio, kept, bound_ratio, finite, evaluated = tuna_log_ratio(
        rng, metrics, chi, bounds, move.row_pair, counts, whole
    )
    if not finite:
        return Decision(0.0, False, evaluated, 0, expected, False, True, bound_ratio)
    log_ratio = exact_log_ratio + log_lik_ratio
    accepted = bool(np.log(rng.uniform()) < log_ratio)
    accept = log_accept_to_prob(log_ratio)
    return Decision(accept, accepted, evaluated, kept, expected, False, False, bound_ratio)
