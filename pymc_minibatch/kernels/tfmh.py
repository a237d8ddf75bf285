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

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.random_walk import log_accept_to_prob
from pymc_minibatch.kernels.tuna import (
    RowBounds,
    draw_counts,
    evaluate_rows,
    full_data_mh,
    whole_groups,
)


class TFMHInfo(NamedTuple):
    accept: float
    """Probability of acceptance given the rows drawn (prior factor times row factors)."""
    accepted: bool
    batch_size: int
    expected_batch_size: float
    nonfinite: bool
    bound_ratio: float


def tfmh_step(
    rng: np.random.Generator,
    exact_log_ratio: float,
    metrics,
    bounds: RowBounds,
    loglik_pair: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    full_loglik_diff: Callable[[], float] | None = None,
    n_data: int = 0,
    full_data: bool = False,
) -> TFMHInfo:
    """Decide one TFMH proposal; the caller moves to it when ``info.accepted``.

    ``metrics``: ``M_g(theta, theta')`` of each group of rows (a scalar for one group; with
    several, row ``i`` is thinned with its group's ``c_i m_g``, and a group whose expected
    draws reach its number of rows is one exact factor, evaluated whole).
    ``exact_log_ratio`` (the log-prior difference, plus any control-variate remainder) is
    tested as one exact factor. With ``full_data`` (a symmetric function of the two points,
    such as both lying in a trust region), the step is a full-data MH step on
    ``full_loglik_diff()`` over the ``n_data`` rows instead.
    """
    metrics = np.atleast_1d(np.asarray(metrics, dtype=np.float64))
    rates = metrics * bounds.group_totals
    lam = float(rates.sum())
    if not np.isfinite(exact_log_ratio):
        return TFMHInfo(0.0, False, 0, lam, True, 0.0)
    if full_data:
        accept, accepted, nonfinite = full_data_mh(rng, exact_log_ratio, full_loglik_diff)
        return TFMHInfo(accept, accepted, n_data, lam, nonfinite, np.nan)
    whole = np.union1d(bounds.always_whole, whole_groups(rates, bounds))
    counts = draw_counts(rng, rates, lam, whole, bounds)
    exact_accept = log_accept_to_prob(exact_log_ratio)
    if counts.sum() == 0 and whole.size == 0:
        return TFMHInfo(exact_accept, bool(rng.uniform() < exact_accept), 0, lam, False, 0.0)
    idx, groups, delta, whole_delta, evaluated = evaluate_rows(
        rng, bounds, loglik_pair, counts, whole
    )
    if delta is None:
        return TFMHInfo(0.0, False, evaluated, lam, True, np.nan)
    # the rows evaluated whole are one more exact factor
    exact_accept *= log_accept_to_prob(-whole_delta)
    c_m = bounds.c[idx].astype(np.float64) * metrics[groups]
    bound_ratio = float(np.max(np.abs(delta) / c_m)) if idx.size else 0.0
    reject_prob = np.clip(delta / c_m, 0.0, 1.0)
    accept = exact_accept * float(np.prod(1.0 - reject_prob))
    fired = rng.random(idx.size) < reject_prob
    accepted = bool(rng.uniform() < exact_accept) and not fired.any()
    return TFMHInfo(accept, accepted, evaluated, lam, False, bound_ratio)
