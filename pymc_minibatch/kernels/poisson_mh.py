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

from pymc_minibatch.kernels.exact_mh import Decision, Move, Params, full_data_mh
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


def bound_excess(loglik: np.ndarray, lower: np.ndarray, spread: np.ndarray) -> float:
    """How far ``loglik`` leaves ``[lower, lower + spread]``, relative to its magnitude."""
    if loglik.size == 0:
        return 0.0
    outside = np.maximum(lower - loglik, loglik - (lower + spread))
    return float(np.max(outside / np.maximum(1.0, np.abs(loglik))))


def poisson_mh_rule(rng: np.random.Generator, exact_log_ratio: float, move: Move,
                    params: Params) -> Decision:  # fmt: skip
    """PoissonMH's acceptance rule (:mod:`pymc_minibatch.kernels.exact_mh`).

    ``exact_log_ratio`` is ``log p(theta') - log p(theta)`` (priors and Jacobians; ``-inf``
    outside the support, where the proposal is rejected without touching the data);
    ``params.rows`` the :class:`GlobalRowBounds`, ``params.poisson_rate`` ``lambda``; the rows'
    log-likelihoods at each point come from ``move.model.loglik``. A full-data MH step is
    taken when ``params.fallback`` and ``lambda + L >= n_data``. The
    :class:`~pymc_minibatch.kernels.exact_mh.Decision`'s ``bound_excess`` is the largest
    relative excursion of an evaluated row out of its bounds.
    """
    bounds, poisson_rate, n_data = params.rows, params.poisson_rate, params.n_data
    expected = poisson_rate + bounds.total
    if not np.isfinite(exact_log_ratio):
        return Decision(0.0, False, 0, 0, expected, False, True, 0.0)
    if params.fallback and expected >= n_data:
        accept, accepted, nonfinite = full_data_mh(rng, exact_log_ratio, move.full_loglik_diff)
        return Decision(accept, accepted, n_data, n_data, expected, True, nonfinite, 0.0)
    loglik, theta, proposal = move.model.loglik, move.theta, move.proposal
    batch_size = int(rng.poisson(expected))
    idx = bounds.sample(rng, batch_size)
    current = loglik(theta, idx)
    excess = bound_excess(current, bounds.lower[idx], bounds.spread[idx])
    base = poisson_rate * bounds.spread[idx] / bounds.total
    phi = np.clip(current - bounds.lower[idx], 0.0, bounds.spread[idx])
    keep = rng.random(batch_size) * (base + bounds.spread[idx]) < base + phi
    rows, first, counts = np.unique(idx[keep], return_index=True, return_counts=True)
    proposed = loglik(proposal, rows)
    if not np.all(np.isfinite(proposed)):
        return Decision(0.0, False, batch_size, counts.sum(), expected, False, True, 0.0, excess)
    excess = max(excess, bound_excess(proposed, bounds.lower[rows], bounds.spread[rows]))
    kept_base, kept_phi = base[keep][first], phi[keep][first]
    phi_proposed = np.clip(proposed - bounds.lower[rows], 0.0, bounds.spread[rows])
    with np.errstate(divide="ignore"):
        log_lik_ratio = float(
            np.sum(counts * (np.log(kept_base + phi_proposed) - np.log(kept_base + kept_phi)))
        )
    log_ratio = exact_log_ratio + log_lik_ratio
    accepted = bool(np.log(rng.uniform()) < log_ratio)
    return Decision(log_accept_to_prob(log_ratio), accepted, batch_size, int(counts.sum()),
                    expected, False, False, 0.0, excess)  # fmt: skip
