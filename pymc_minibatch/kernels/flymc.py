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
"""

from typing import NamedTuple

import numpy as np

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


def log_bound(bound: QuadraticBound, eta, rows):
    """``log B_n`` at rows ``rows`` with linear predictor values ``eta``."""
    return bound.a[rows] * eta**2 + bound.b[rows] * eta + bound.c[rows]


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
