"""TunaMH decisions for many groups at once, each accepted or rejected on its own rows.

Given the shared parameters ``theta_S``, a hierarchical model's posterior of the groups'
parameters factorises: ``pi(theta_1, ..., theta_G | theta_S) = prod_g pi_g(theta_g |
theta_S)``, each factor holding group ``g``'s prior term and its rows' likelihood. A
proposal for every group at once, accepted or rejected group by group, is then ``G``
independent Metropolis–Hastings steps, one per factor, and leaves the conditional
invariant. Each group's step is a TunaMH step (Zhang, Cooper & De Sa 2020, "Asymptotically
Optimal Exact Minibatch Metropolis-Hastings", NeurIPS, Algorithm 2) on the group's own rows,
with bounds ``|U_i(theta') - U_i(theta)| <= c_i m_g``: ``s_i ~ Poisson(a_i + phi_i)`` with
``a_i = chi c_i m_g^2`` and ``phi_i = (Delta_i + c_i m_g) / 2``, so group ``g`` draws
``Poisson(lambda_g)`` rows, ``lambda_g = (chi m_g^2 + m_g) C_g`` with ``C_g`` the sum of its
``c_i``, each with probability ``c_i / C_g``; a row is kept and enters the group's ratio as
in :mod:`pymc_minibatch.kernels.tuna`. (The one-group kernel writes ``a_i = chi C c_i m^2``;
here ``chi`` absorbs ``C``: the noise the auxiliary counts leave in group ``g``'s log ratio
has variance about ``sum_i Delta_i^2 / a_i <= C_g / chi``, which involves only the group's
own bounds, so ``chi`` can be small whatever the number of groups.)

As in the one-group kernel, a group whose ``lambda_g`` reaches its number of rows, or
whose rows are cheaper to evaluate than to bound (``always_whole``), or whose pair of
points leaves the trust region of its bounds (``outside``), is evaluated whole: its rows'
differences enter its ratio exactly. Each choice depends on the pair of points
symmetrically, so each group's step stays exact. A group whose parameters do not move
(``m_g = 0``) draws no row and is accepted on its exact part alone.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.tuna import RowBounds


class GroupTunaInfo(NamedTuple):
    accepted: np.ndarray
    """Whether each group moves to its proposal, shape (G,)."""
    accept: np.ndarray
    """Each group's acceptance probability, shape (G,) (0 for a non-finite proposal)."""
    batch_size: int
    """Rows evaluated: drawn, and every row of the groups evaluated whole."""
    kept: int
    expected_batch_size: float
    """``sum_g lambda_g`` over the groups drawn from."""
    nonfinite: int
    """Groups whose proposal had a non-finite log-density (rejected)."""
    bound_ratio: float
    """``max |Delta_i| / (c_i m_g)`` over the drawn rows: above 1 the bounds are violated."""


def group_rates(chi: float, bounds: RowBounds, metrics) -> np.ndarray:
    """``lambda_g = (chi m_g^2 + m_g) C_g`` of each group, shape (G,)."""
    n_groups = metrics.size
    return (chi * metrics**2 + metrics) * bounds.group_totals[:n_groups]


def group_tuna_step(
    rng: np.random.Generator,
    exact_log_ratios,
    metrics,
    chi: float,
    bounds: RowBounds,
    loglik_pair: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    outside=None,
) -> GroupTunaInfo:
    """Decide a proposal of every group's parameters, group by group.

    Parameters
    ----------
    rng : numpy.random.Generator
    exact_log_ratios : array, shape (G,)
        The part of each group's log acceptance ratio computed exactly (its prior terms,
        the proposal's density ratio, its rows' expansions with control variates).
    metrics : array, shape (G,)
        ``m_g(theta, theta')`` of each group (0 for a group that does not move).
    chi : float
        ``a_i = chi c_i m_g^2`` (see the module docstring).
    bounds : RowBounds
        With ``group_rows``: the rows of every group, ``group_totals`` and ``group_sizes``
        (shape ``(G + 1,)`` or more; the rows in no group are not evaluated).
    loglik_pair : callable
        ``loglik_pair(idx)``: the row terms of rows ``idx`` at the current point and at the
        proposal.
    outside : array of bool, shape (G,), optional
        Groups whose pair of points lies outside the trust region of their bounds.

    Returns
    -------
    GroupTunaInfo
    """
    exact = np.asarray(exact_log_ratios, dtype=np.float64)
    metrics = np.asarray(metrics, dtype=np.float64)
    n_groups = exact.size
    sizes = bounds.group_sizes[:n_groups]
    rates = group_rates(chi, bounds, metrics)
    moved = (metrics > 0) & (sizes > 0)
    whole = np.zeros(n_groups, dtype=bool)
    whole[bounds.always_whole[bounds.always_whole < n_groups]] = True
    if outside is not None:
        whole |= outside
    whole = moved & (whole | (rates >= sizes))
    drawn = np.where(moved & ~whole, rates, 0.0)
    counts = np.zeros(bounds.group_totals.size, dtype=np.int64)
    counts[:n_groups] = rng.poisson(drawn)
    idx, groups = bounds.sample(rng, counts)
    whole_idx, whole_groups = (
        bounds.group_rows(np.flatnonzero(whole)) if whole.any() else (np.empty(0, np.intp),) * 2
    )
    evaluated = idx.size + whole_idx.size
    log_ratio = exact.copy()
    bad = ~np.isfinite(exact)
    kept = 0
    bound_ratio = 0.0
    if evaluated:
        current, proposed = loglik_pair(np.concatenate([idx, whole_idx]))
        delta_all = current - proposed  # U_i(theta') - U_i(theta)
        finite = np.isfinite(delta_all)
        all_groups = np.concatenate([groups, whole_groups])
        bad |= np.bincount(all_groups[~finite], minlength=n_groups)[:n_groups] > 0
        delta_all = np.where(finite, delta_all, 0.0)
        log_ratio -= np.bincount(whole_groups, delta_all[idx.size :], minlength=n_groups)[
            :n_groups
        ]
        if idx.size:
            delta = delta_all[: idx.size]
            m = metrics[groups]
            c = bounds.c[idx].astype(np.float64)
            c_m = c * m
            bound_ratio = float(np.max(np.abs(delta) / c_m))
            base = chi * c * m**2
            phi_forward = np.clip(0.5 * (delta + c_m), 0.0, c_m)
            phi_reverse = c_m - phi_forward
            keep = rng.random(idx.size) * (base + c_m) < base + phi_forward
            with np.errstate(divide="ignore"):
                terms = np.log(base + phi_reverse) - np.log(base + phi_forward)
            log_ratio += np.bincount(groups[keep], terms[keep], minlength=n_groups)[:n_groups]
            kept = int(keep.sum())
    log_ratio[bad] = -np.inf
    accepted = np.log(rng.uniform(size=n_groups)) < log_ratio
    accept = np.exp(np.minimum(log_ratio, 0.0))
    return GroupTunaInfo(accepted, accept, evaluated, kept, float(drawn.sum()),
                         int(bad.sum()), bound_ratio)  # fmt: skip
