"""Firefly Monte Carlo (FlyMC) with collapsible quadratic lower bounds.

Maclaurin & Adams (2014), "Firefly Monte Carlo: Exact MCMC with Subsets of Data", UAI.
Each row has a lower bound ``0 < B_n(theta) <= L_n(theta)`` and a binary ``z_n``; the joint

    p(theta, z) ∝ p(theta) prod_n B_n(theta)^(1 - z_n) (L_n(theta) - B_n(theta))^z_n

has the posterior as its theta-marginal. When ``log B_n`` is quadratic in a linear predictor
``eta_n`` — the Jaakkola–Jordan bound for logistic rows (Jaakkola & Jordan 2000), and
``|r| <= r^2 / (2 xi) + xi / 2`` for Laplace rows — ``prod_n B_n`` collapses to sufficient
statistics and a theta-move only touches the "bright" rows (``z_n = 1``).
Dark rows turn bright by a Metropolis proposal made to each with probability ``q``
(accepted with ``min(1, (L/B - 1) / q)``); bright rows are all proposed to turn dark
(accepted with ``min(1, q / (L/B - 1))``).

One transition (:func:`step`) is that update of ``z`` followed by a Gaussian random-walk
Metropolis move of ``theta`` given ``z``, whose log acceptance ratio is

    log p(theta') - log p(theta) + sum_n [log B_n(theta') - log B_n(theta)]
        + sum_{z_n = 1} [log(L_n/B_n - 1)(theta') - log(L_n/B_n - 1)(theta)].
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.random_walk import log_accept_to_prob, propose

#: Slack keeping the bound strictly below the likelihood (as in the reference code).
BOUND_SLACK = 1e-6


class QuadraticBound(NamedTuple):
    """``log B_n = a_n eta_n^2 + b_n eta_n + c_n`` (``a_n <= 0``)."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray


def _tightness(xi):
    return np.maximum(np.abs(np.asarray(xi, dtype=np.float64)), 1e-3)


def jaakkola_jordan(xi, y):
    """Bound of ``log sigmoid(t eta)`` (``t = 2y - 1``), tight at ``|eta| = xi``.

    ``log sigmoid(s) >= log sigmoid(xi) + (s - xi) / 2 - lam(xi) (s^2 - xi^2)`` with
    ``lam(xi) = tanh(xi / 2) / (4 xi)``.
    """
    xi = _tightness(xi)
    lam = np.tanh(xi / 2) / (4 * xi)
    c = -np.logaddexp(0.0, -xi) - xi / 2 + lam * xi**2 - BOUND_SLACK
    return QuadraticBound(a=-lam, b=np.asarray(y, dtype=np.float64) - 0.5, c=c)


def laplace_bound(xi, y, scale):
    """Bound of the Laplace ``-|y - eta| / scale - log(2 scale)``, tight at ``|y - eta| = xi``."""
    xi = _tightness(xi)
    y = np.asarray(y, dtype=np.float64)
    a = -1.0 / (2 * xi * scale)
    c = a * y**2 - xi / (2 * scale) - np.log(2 * scale) - BOUND_SLACK
    return QuadraticBound(
        a=np.broadcast_to(a, y.shape), b=-2 * a * y, c=np.broadcast_to(c, y.shape)
    )


def log_bound(bound: QuadraticBound, eta, idx):
    """``log B_n`` at the rows of indices ``idx`` with linear predictor values ``eta``."""
    return bound.a[idx] * eta**2 + bound.b[idx] * eta + bound.c[idx]


class CollapsedBound(NamedTuple):
    """``sum_n log B_n(theta) = theta' A theta + g' theta + k`` for ``eta = offset + X theta``."""

    A: np.ndarray
    g: np.ndarray
    k: float

    def __call__(self, theta):
        return float(theta @ self.A @ theta + self.g @ theta + self.k)


def collapse(bound: QuadraticBound, offset, design, chunk_rows=2**16):
    """Sufficient statistics of the summed log-bound (one O(N d^2) pass)."""
    ndim = design.shape[1]
    A, g, k = np.zeros((ndim, ndim)), np.zeros(ndim), 0.0
    for start in range(0, offset.size, chunk_rows):
        rows = slice(start, start + chunk_rows)
        X, e, a, b = design[rows], offset[rows], bound.a[rows], bound.b[rows]
        A += (X.T * a) @ X
        g += X.T @ (2 * a * e + b)
        k += float(np.sum(a * e**2 + b * e + bound.c[rows]))
    return CollapsedBound(A, g, k)


def log_bright_weight(loglik, logbound):
    """``log(L/B - 1)`` from ``log L`` and ``log B``; NaN where the bound fails."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log(np.expm1(loglik - logbound))


def geometric_subset(rng: np.random.Generator, n: int, q: float):
    """Each of ``range(n)`` independently with probability ``q`` (geometric skips, O(qn))."""
    if q >= 1.0:
        return np.arange(n)
    chunks, position = [], -1
    while True:
        gaps = rng.geometric(q, size=int(q * n * 1.1) + 16)
        picks = position + np.cumsum(gaps)
        chunks.append(picks[picks < n])
        if picks[-1] >= n:
            return np.concatenate(chunks)
        position = picks[-1]


def flip_decisions(rng, log_weight_dark, log_weight_bright, q):
    """Metropolis flips of ``z`` given ``log(L/B - 1)`` of dark candidates and bright rows.

    Returns boolean masks: which candidates turn bright, which bright rows turn dark.
    """
    log_q = np.log(q)
    to_bright = np.log(rng.random(log_weight_dark.size)) < log_weight_dark - log_q
    to_dark = np.log(rng.random(log_weight_bright.size)) < log_q - log_weight_bright
    return to_bright, to_dark


class FlyMCTarget(NamedTuple):
    """What a FlyMC transition evaluates, at parameters ``theta`` and row indices ``idx``."""

    loglik: Callable[[np.ndarray, np.ndarray], np.ndarray]
    """``log L_n(theta)`` for ``n`` in ``idx``."""
    loglik_pair: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
    """``(loglik(theta, idx), loglik(theta2, idx))`` from one evaluation."""
    log_bound: Callable[[np.ndarray, np.ndarray], np.ndarray]
    """``log B_n(theta)`` for ``n`` in ``idx``."""
    collapsed_log_bound: Callable[[np.ndarray], float]
    """``sum_n log B_n(theta)`` over all rows (a :class:`CollapsedBound`)."""
    logprior: Callable[[np.ndarray], float]
    """Log prior density, with transform Jacobians."""


class State(NamedTuple):
    position: np.ndarray
    """``theta``."""
    bright: np.ndarray
    """Boolean ``z``, one per row."""


class Info(NamedTuple):
    accept: float
    """Acceptance probability ``min(1, r)`` of the ``theta`` proposal (0 when non-finite)."""
    accepted: bool
    nonfinite: bool
    """The proposal's log prior, or a bright row's log-likelihood there, was NaN or infinite;
    the proposal was rejected."""
    batch_size: int
    """Rows read by the ``z``-update (dark candidates and bright rows) plus the bright rows of
    the ``theta``-move (evaluated at both points)."""
    n_bright: int
    """Bright rows during the ``theta``-move (before the ``z``-update if that stopped)."""
    bound_violated: bool
    """A row's bound exceeded its likelihood (``L/B - 1 < 0``): the transition stopped there
    and the chain would not be exact."""


def draw_brightness(rng: np.random.Generator, target: FlyMCTarget, position, n_data: int):
    """Every ``z_n`` from its conditional: bright with probability ``1 - B_n / L_n``."""
    idx = np.arange(n_data)
    loglik = target.loglik(position, idx)
    bright_prob = -np.expm1(target.log_bound(position, idx) - loglik)
    return rng.random(idx.size) < bright_prob


def init(rng: np.random.Generator, target: FlyMCTarget, position, n_data: int) -> State:
    """The chain's state at ``position``, every ``z_n`` drawn from its conditional."""
    return State(position, draw_brightness(rng, target, position, n_data))


def update_brightness(
    rng: np.random.Generator, target: FlyMCTarget, state: State, resample_fraction: float
):
    """The Metropolis update of ``z`` given ``theta``: ``(bright, rows_read)``.

    ``bright`` is a new mask, or ``None`` if a row's bound exceeded its likelihood.
    """
    bright_rows = np.flatnonzero(state.bright)
    candidates = geometric_subset(rng, state.bright.size, resample_fraction)
    candidates = candidates[~state.bright[candidates]]
    idx = np.concatenate([candidates, bright_rows])
    loglik = target.loglik(state.position, idx)
    weights = log_bright_weight(loglik, target.log_bound(state.position, idx))
    if np.any(np.isnan(weights)):
        return None, idx.size
    to_bright, to_dark = flip_decisions(
        rng, weights[: candidates.size], weights[candidates.size :], resample_fraction
    )
    bright = state.bright.copy()
    bright[candidates[to_bright]] = True
    bright[bright_rows[to_dark]] = False
    return bright, idx.size


def theta_log_ratio(target: FlyMCTarget, position, proposal, bright_rows):
    """Log acceptance ratio of ``proposal`` given ``z``: ``(log_ratio, nonfinite, violated)``.

    A proposal with a non-finite log prior is rejected before any row is read, one with a
    non-finite bright-row log-likelihood before any bound is.
    """
    logprior_diff = target.logprior(proposal) - target.logprior(position)
    if not np.isfinite(logprior_diff):
        return -np.inf, True, False
    loglik, loglik_proposal = target.loglik_pair(position, proposal, bright_rows)
    if not np.all(np.isfinite(loglik_proposal)):
        return -np.inf, True, False
    weight_proposal = log_bright_weight(loglik_proposal, target.log_bound(proposal, bright_rows))
    weight = log_bright_weight(loglik, target.log_bound(position, bright_rows))
    if np.any(np.isnan(weight_proposal)) or np.any(np.isnan(weight)):
        return np.nan, False, True
    collapsed_diff = target.collapsed_log_bound(proposal) - target.collapsed_log_bound(position)
    return logprior_diff + collapsed_diff + float(np.sum(weight_proposal - weight)), False, False


def step(
    rng: np.random.Generator,
    state: State,
    target: FlyMCTarget,
    resample_fraction: float,
    proposal_scale: float,
    chol=None,
) -> tuple[State, Info]:
    """One FlyMC transition: update ``z`` given ``theta``, then ``theta`` given ``z``.

    Each dark row is proposed bright with probability ``resample_fraction``; the ``theta``
    proposal is ``theta + proposal_scale * chol @ N(0, I)``
    (:func:`~pymc_minibatch.kernels.random_walk.propose`). On a bound violation
    (``info.bound_violated``) the returned state keeps ``theta`` and carries whatever update
    of ``z`` was completed.
    """
    position = state.position
    bright, rows_read = update_brightness(rng, target, state, resample_fraction)
    if bright is None:
        n_bright = int(np.count_nonzero(state.bright))
        return state, Info(0.0, False, False, rows_read, n_bright, True)
    bright_rows = np.flatnonzero(bright)
    batch_size = rows_read + bright_rows.size
    proposal = propose(rng, position, proposal_scale, chol)
    log_ratio, nonfinite, violated = theta_log_ratio(target, position, proposal, bright_rows)
    if violated:
        info = Info(0.0, False, False, batch_size, bright_rows.size, True)
        return State(position, bright), info
    accepted = (not nonfinite) and bool(np.log(rng.uniform()) < log_ratio)
    info = Info(
        0.0 if nonfinite else log_accept_to_prob(log_ratio),
        accepted,
        nonfinite,
        batch_size,
        bright_rows.size,
        False,
    )
    return State(proposal if accepted else position, bright), info
