"""Truncated factorised Metropolis–Hastings (TFMH) with Poisson minibatches.

The factorised MH rule accepts with probability ``prod_k min(1, pi_k(theta') / pi_k(theta))``
over the factors of the target (Ceperley 1995; Michel, Kapfer & Krauth 2014); it is
reversible because ``pi_k(theta) min(1, pi_k(theta')/pi_k(theta))`` is symmetric. TFMH
(Zhang, Cooper & De Sa 2020, Section 3, and Cornish et al. 2019) evaluates the row factors
by Poisson thinning: with bounds ``|Delta_i| <= c_i m``, draw ``B ~ Poisson(C m)`` rows with
probability ``c_i / C`` and reject as soon as a row with ``Delta_i > 0`` fires with
probability ``Delta_i / (c_i m)``, so that row ``i`` accepts with probability
``exp(-c_i m * max(0, Delta_i) / (c_i m)) = exp(-max(0, Delta_i))``. The prior factor is
tested exactly.
"""

import numpy as np

from pymc_minibatch.kernels.exact_mh import Decision, Move, Params, full_data_mh
from pymc_minibatch.kernels.random_walk import log_accept_to_prob
from pymc_minibatch.kernels.tuna import draw_counts, evaluate_rows, whole_groups


def tfmh_rule(rng: np.random.Generator, exact_log_ratio: float, move: Move,
              params: Params) -> Decision:  # fmt: skip
    """TFMH's acceptance rule (:mod:`pymc_minibatch.kernels.exact_mh`).

    ``move.metrics``: ``M_g(theta, theta')`` of each group of rows (one for one group; with
    several, row ``i`` is thinned with its group's ``c_i m_g``, and a group whose expected
    draws reach its number of rows is one exact factor, evaluated whole); ``params.rows``
    the :class:`~pymc_minibatch.kernels.tuna.RowBounds`. ``exact_log_ratio`` (the log-prior
    difference, plus the proposal's density ratio and any control-variate remainder) is
    tested as one exact factor. With ``move.full_data`` (a symmetric function of the two
    points, such as both lying in a trust region), the step is a full-data MH step instead.
    """
    bounds, n_data = params.rows, params.n_data
    metrics = np.atleast_1d(np.asarray(move.metrics, dtype=np.float64))
    rates = metrics * bounds.group_totals
    lam = float(rates.sum())
    if not np.isfinite(exact_log_ratio):
        return _decision(0.0, False, 0, lam, True, 0.0)
    if move.full_data:
        accept, accepted, nonfinite = full_data_mh(rng, exact_log_ratio, move.full_loglik_diff)
        return _decision(accept, accepted, n_data, lam, nonfinite, np.nan, fallback=True)
    whole = np.union1d(bounds.always_whole, whole_groups(rates, bounds))
    counts = draw_counts(rng, rates, lam, whole, bounds)
    exact_accept = log_accept_to_prob(exact_log_ratio)
    if counts.sum() == 0 and whole.size == 0:
        return _decision(exact_accept, bool(rng.uniform() < exact_accept), 0, lam, False, 0.0)
    idx, groups, delta, whole_delta, evaluated = evaluate_rows(
        rng, bounds, move.row_pair, counts, whole
    )
    if delta is None:
        return _decision(0.0, False, evaluated, lam, True, np.nan)
    # the rows evaluated whole are one more exact factor
    exact_accept *= log_accept_to_prob(-whole_delta)
    c_m = bounds.c[idx].astype(np.float64) * metrics[groups]
    bound_ratio = float(np.max(np.abs(delta) / c_m)) if idx.size else 0.0
    reject_prob = np.clip(delta / c_m, 0.0, 1.0)
    accept = exact_accept * float(np.prod(1.0 - reject_prob))
    fired = rng.random(idx.size) < reject_prob
    accepted = bool(rng.uniform() < exact_accept) and not fired.any()
    return _decision(accept, accepted, evaluated, lam, False, bound_ratio)


def _decision(accept, accepted, batch_size, expected, nonfinite, bound_ratio, fallback=False):
    """A :class:`~pymc_minibatch.kernels.exact_mh.Decision` (TFMH keeps no rows)."""
    return Decision(accept, accepted, batch_size, 0, expected, fallback, nonfinite, bound_ratio)
