"""PoissonMH: exact minibatch Metropolis–Hastings with global bounds on every row's factor.

Zhang & De Sa (2019), "Poisson-Minibatching for Gibbs Sampling with Convergence Rate
Guarantees", NeurIPS (the MH variant), as described in Appendix D of Zhang, Cooper & De Sa
(2020), "Asymptotically Optimal Exact Minibatch Metropolis-Hastings", NeurIPS. With
``lower_i <= l_i(theta) <= upper_i`` for every ``theta`` in the support, write
``phi_i = l_i - lower_i`` in ``[0, M_i]``, ``M_i = upper_i - lower_i`` and
``L = sum_i M_i``. The auxiliary variables ``s_i ~ Poisson(lambda M_i / L + phi_i(theta))``
make the joint density of ``(theta, s)`` ``prod_i (lambda M_i / L + phi_i(theta))^{s_i} /
s_i!`` times the prior, whose ``theta``-marginal is the posterior. One transition is a Gibbs
update of ``s`` given ``theta`` followed by an MH update of ``theta`` given ``s``:

1. Draw ``B ~ Poisson(lambda + L)`` rows with probability ``M_i / L`` (with replacement)
   and keep each with probability ``(lambda M_i / L + phi_i(theta)) / (lambda M_i / L +
   M_i)``: the kept multiset has counts ``s_i`` (thinning).
2. Accept ``theta'`` with probability ``min(1, r)``, ``r = p(theta') / p(theta) *
   prod_{kept} (lambda M_i / L + phi_i(theta')) / (lambda M_i / L + phi_i(theta))``
   (symmetric proposal; ``p`` the prior with Jacobians).

The expected batch is ``lambda + L``, the same at every step; ``L`` grows with the width
of the support, which is why these bounds exist only on bounded parameter spaces and are
usually far looser than TunaMH's local ones.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.random_walk import log_accept_to_prob


class GlobalRowBounds(NamedTuple):
    lower: np.ndarray
    """``lower_i <= l_i(theta)`` over the support, shape (N,)."""
    spread: np.ndarray
    """``M_i = upper_i - lower_i``, shape (N,)."""
    total: float
    """``L = sum(M_i)``."""
    sample: Callable[[np.random.Generator, int], np.ndarray]
    """Draws ``size`` rows with probability ``M_i / L``."""


class PoissonMHInfo(NamedTuple):
    accept: float
    accepted: bool
    batch_size: int
    """Rows drawn (B), or N on a full-data fallback step."""
    kept: int
    """Size of the kept multiset (sum of the ``s_i``)."""
    expected_batch_size: float
    """``lambda + L``."""
    fallback: bool
    nonfinite: bool
    """A log-density at the proposal was NaN or infinite; the proposal was rejected."""
    bound_excess: float
    """Largest ``(l_i - upper_i)`` or ``(lower_i - l_i)``, relative to ``max(1, |l_i|)``,
    over the evaluated rows: above rounding level the bounds are violated."""


def bound_excess(loglik: np.ndarray, lower: np.ndarray, spread: np.ndarray) -> float:
    """How far ``loglik`` leaves ``[lower, lower + spread]``, relative to its magnitude."""
    if loglik.size == 0:
        return 0.0
    outside = np.maximum(lower - loglik, loglik - (lower + spread))
    return float(np.max(outside / np.maximum(1.0, np.abs(loglik))))


def poisson_mh_step(
    rng: np.random.Generator,
    exact_log_ratio: float,
    poisson_rate: float,
    bounds: GlobalRowBounds,
    loglik_current: Callable[[np.ndarray], np.ndarray],
    loglik_proposal: Callable[[np.ndarray], np.ndarray],
    full_loglik_diff: Callable[[], float],
    n_data: int,
    fallback: bool = True,
) -> PoissonMHInfo:
    """Decide one PoissonMH proposal; the caller moves to it when ``info.accepted``.

    ``exact_log_ratio`` is ``log p(theta') - log p(theta)`` (priors and Jacobians; ``-inf``
    outside the support, where the proposal is rejected without touching the data);
    ``loglik_current(idx)`` / ``loglik_proposal(idx)`` give rows' log-likelihoods at the two
    points; ``full_loglik_diff()`` the full-data difference, used when ``fallback`` and
    ``lambda + L >= n_data``; ``poisson_rate`` is ``lambda``.
    """
    expected = poisson_rate + bounds.total
    if not np.isfinite(exact_log_ratio):
        return PoissonMHInfo(0.0, False, 0, 0, expected, False, True, 0.0)
    if fallback and expected >= n_data:
        log_ratio = exact_log_ratio + full_loglik_diff()
        if not np.isfinite(log_ratio):
            return PoissonMHInfo(0.0, False, n_data, n_data, expected, True, True, 0.0)
        accepted = bool(np.log(rng.uniform()) < log_ratio)
        return PoissonMHInfo(
            log_accept_to_prob(log_ratio), accepted, n_data, n_data, expected, True, False, 0.0
        )
    batch_size = int(rng.poisson(expected))
    idx = bounds.sample(rng, batch_size)
    current = loglik_current(idx)
    excess = bound_excess(current, bounds.lower[idx], bounds.spread[idx])
    base = poisson_rate * bounds.spread[idx] / bounds.total
    phi = np.clip(current - bounds.lower[idx], 0.0, bounds.spread[idx])
    keep = rng.random(batch_size) * (base + bounds.spread[idx]) < base + phi
    rows, first, counts = np.unique(idx[keep], return_index=True, return_counts=True)
    proposed = loglik_proposal(rows)
    if not np.all(np.isfinite(proposed)):
        return PoissonMHInfo(0.0, False, batch_size, counts.sum(), expected, False, True, excess)
    excess = max(excess, bound_excess(proposed, bounds.lower[rows], bounds.spread[rows]))
    kept_base, kept_phi = base[keep][first], phi[keep][first]
    phi_proposed = np.clip(proposed - bounds.lower[rows], 0.0, bounds.spread[rows])
    with np.errstate(divide="ignore"):
        log_lik_ratio = float(
            np.sum(counts * (np.log(kept_base + phi_proposed) - np.log(kept_base + kept_phi)))
        )
    log_ratio = exact_log_ratio + log_lik_ratio
    accepted = bool(np.log(rng.uniform()) < log_ratio)
    return PoissonMHInfo(
        log_accept_to_prob(log_ratio),
        accepted,
        batch_size,
        int(counts.sum()),
        expected,
        False,
        False,
        excess,
    )
