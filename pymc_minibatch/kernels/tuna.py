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
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.random_walk import log_accept_to_prob


class RowBounds(NamedTuple):
    c: np.ndarray
    """Per-row constants, shape (N,) (float32 or float64; the kernel computes in float64)."""
    total: float
    """``C = sum(c)``."""
    sample: Callable[[np.random.Generator, int], np.ndarray]
    """Draws ``size`` rows with probability ``c_i / C``."""


class TunaInfo(NamedTuple):
    accept: float
    accepted: bool
    batch_size: int
    """Rows drawn (B), or N on a full-data fallback step."""
    kept: int
    """Rows kept in the auxiliary multiset (|I|)."""
    expected_batch_size: float
    """lambda = chi C^2 m^2 + C m."""
    fallback: bool
    nonfinite: bool
    """A log-density at the proposal was NaN or infinite; the proposal was rejected."""
    bound_ratio: float
    """max_i |Delta_i| / (c_i m) over the evaluated rows: above 1 the bounds are violated."""


def expected_batch_size(chi: float, total: float, m: float) -> float:
    """``lambda = chi C^2 m^2 + C m``."""
    return chi * total**2 * m**2 + total * m


def tuna_log_ratio(
    rng: np.random.Generator,
    m: float,
    chi: float,
    bounds: RowBounds,
    loglik_pair: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    batch_size: int,
):
    """Likelihood part of the log acceptance ratio on a fresh Poisson minibatch.

    Returns ``(log_ratio, kept, bound_ratio, finite)``; ``loglik_pair(idx)`` gives the
    log-likelihood of rows ``idx`` at the current point and at the proposal.
    """
    if batch_size == 0:
        return 0.0, 0, 0.0, True
    idx = bounds.sample(rng, batch_size)
    loglik_current, loglik_proposal = loglik_pair(idx)
    delta = loglik_current - loglik_proposal  # U_i(theta') - U_i(theta)
    if not np.all(np.isfinite(delta)):
        return -np.inf, 0, np.nan, False
    c = bounds.c[idx].astype(np.float64)
    c_m = c * m
    bound_ratio = float(np.max(np.abs(delta) / c_m))
    base = chi * c * bounds.total * m**2
    phi_forward = np.clip(0.5 * (delta + c_m), 0.0, c_m)
    phi_reverse = c_m - phi_forward
    keep = rng.random(batch_size) * (base + c_m) < base + phi_forward
    with np.errstate(divide="ignore"):
        log_ratio = float(
            np.sum(np.log(base[keep] + phi_reverse[keep]) - np.log(base[keep] + phi_forward[keep]))
        )
    return log_ratio, int(keep.sum()), bound_ratio, True


def tuna_step(
    rng: np.random.Generator,
    exact_log_ratio: float,
    m: float,
    chi: float,
    bounds: RowBounds,
    loglik_pair: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    full_loglik_diff: Callable[[], float],
    n_data: int,
    fallback: bool = True,
    full_data: bool = False,
) -> TunaInfo:
    """Decide one TunaMH proposal; the caller moves to it when ``info.accepted``.

    ``exact_log_ratio`` is the part of the log acceptance ratio computed exactly:
    ``log p(theta') - log p(theta)`` (priors and Jacobians), plus the linear remainder when
    ``loglik_pair`` gives control-variate residuals;
    ``full_loglik_diff()`` returns the full-data log-likelihood difference, used only on a
    fallback step: ``lambda >= n_data`` and ``fallback``, or ``full_data`` (set by the
    caller from a symmetric function of the two points, such as both lying in a trust
    region; exactness is kept for the same reason).
    """
    lam = expected_batch_size(chi, bounds.total, m)
    if not np.isfinite(exact_log_ratio):
        return TunaInfo(0.0, False, 0, 0, lam, False, True, 0.0)
    if full_data or (fallback and lam >= n_data):
        accept, accepted, nonfinite = full_data_mh(rng, exact_log_ratio, full_loglik_diff)
        return TunaInfo(accept, accepted, n_data, n_data, lam, True, nonfinite, np.nan)
    batch_size = int(rng.poisson(lam))
    log_lik_ratio, kept, bound_ratio, finite = tuna_log_ratio(
        rng, m, chi, bounds, loglik_pair, batch_size
    )
    if not finite:
        return TunaInfo(0.0, False, batch_size, 0, lam, False, True, bound_ratio)
    log_ratio = exact_log_ratio + log_lik_ratio
    accepted = bool(np.log(rng.uniform()) < log_ratio)
    return TunaInfo(
        log_accept_to_prob(log_ratio), accepted, batch_size, kept, lam, False, False, bound_ratio
    )


def full_data_mh(rng: np.random.Generator, exact_log_ratio: float,
                 full_loglik_diff: Callable[[], float]):  # fmt: skip
    """A Metropolis–Hastings decision on all rows: ``(accept, accepted, nonfinite)``."""
    log_ratio = exact_log_ratio + full_loglik_diff()
    if not np.isfinite(log_ratio):
        return 0.0, False, True
    return log_accept_to_prob(log_ratio), bool(np.log(rng.uniform()) < log_ratio), False
