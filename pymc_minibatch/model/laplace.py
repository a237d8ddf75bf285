"""The Laplace approximation of a model's posterior: its mode and the curvature there.

Several samplers start from it and whiten the posterior with it: the stochastic-gradient
samplers (start and preconditioner) and the particle methods (Laplace start and
preconditioner). It is computed on the full data, once per :class:`MinibatchModel`:

1. the mode ``theta_hat``, by L-BFGS on the full-data log posterior (one pass per
   iteration) from the model's initial point;
2. minus the Hessian of the log posterior at the mode, ``P``, by central differences of
   full-data gradients (``2 d`` passes; up to ``DENSE_MAX_DIM`` parameters). Beyond that
   a diagonal curvature is estimated from per-row gradients on a subsample (see
   :mod:`pymc_minibatch.kernels.preconditioning`);
3. a positive definite ``P``: the eigenvalues of the symmetrised estimate are replaced by
   their absolute values, floored at ``EIGENVALUE_FLOOR`` times the largest. Where the
   estimate is already positive definite nothing changes; where L-BFGS stopped short of
   the mode (a negative curvature) or a direction is nearly flat, the preconditioner stays
   usable (the "SoftAbs" idea of Betancourt 2013, "A general metric for Riemannian
   manifold Hamiltonian Monte Carlo", GSI).

Curvature from all rows matters: a curvature estimated on a few hundred rows misses the
rows of rare categories (one-hot indicators), which leaves their coefficients with the
prior's scale and throws samplers thousands of posterior sds out.
"""

import time
from typing import NamedTuple

import numpy as np
import scipy.optimize

from pymc_minibatch.kernels.preconditioning import (
    DENSE_MAX_DIM,
    DensePreconditioner,
    DiagonalPreconditioner,
    diagonal_preconditioner,
)

EIGENVALUE_FLOOR = 1e-10
"""Smallest eigenvalue of the curvature, relative to the largest."""

RELATIVE_STEP = 1e-4
"""Finite-difference step per coordinate, relative to ``max(1, |theta_d|)``."""

DIAGONAL_ROWS = 4096
"""Rows whose per-row gradients estimate the diagonal curvature beyond ``DENSE_MAX_DIM``."""


class LaplaceFit(NamedTuple):
    """The mode of the posterior and a positive definite curvature there."""

    mode: np.ndarray
    """``theta_hat``, flat transformed values."""
    preconditioner: DensePreconditioner | DiagonalPreconditioner
    """``theta = L z`` with ``L^T P L = I``: for ``z ~ N(0, I)``, ``L z`` has the Laplace
    covariance."""
    repaired: bool
    """Whether the curvature estimate had to be made positive definite."""
    passes: int
    """Full-data passes spent (L-BFGS evaluations plus finite differences)."""
    seconds: float

    def draw(self, rng, size=None):
        """Draws from the Laplace approximation ``N(theta_hat, (L L^T))``, shape ``size + (d,)``."""
        shape = (self.mode.size,) if size is None else (size, self.mode.size)
        whitened = rng.standard_normal(shape)
        if isinstance(self.preconditioner, DensePreconditioner):
            return self.mode + whitened @ self.preconditioner.transform.T
        return self.mode + whitened * self.preconditioner.scale


class ModeNotFoundError(ValueError):
    """L-BFGS found no finite mode of the posterior."""


def fit_laplace(minibatch_model, start=None, rng=None):
    """The Laplace approximation of ``minibatch_model``'s full-data posterior.

    Parameters
    ----------
    minibatch_model : MinibatchModel
    start : ndarray, optional
        Where L-BFGS starts (default: the model's initial point).
    rng : numpy.random.Generator, optional
        Draws the rows of the diagonal curvature beyond ``DENSE_MAX_DIM`` parameters.

    Returns
    -------
    LaplaceFit

    Raises
    ------
    ModeNotFoundError
        If the log posterior or its gradient is not finite at the point L-BFGS ends at
        (an improper posterior, or a start where the density is zero).
    """
    mm = minibatch_model
    started = time.perf_counter()
    counter = _PassCounter(mm)
    start = mm.initial_theta() if start is None else np.asarray(start, dtype=np.float64)
    result = scipy.optimize.minimize(
        counter.negative_logp_and_grad, start, jac=True, method="L-BFGS-B"
    )
    mode = result.x
    value, gradient = counter.logp_and_grad(mode)
    if not (np.isfinite(value) and np.all(np.isfinite(gradient))):
        raise ModeNotFoundError(
            "the search for the posterior mode (L-BFGS on the full data) ended where the log "
            f"posterior is {value} (gradient finite: {bool(np.all(np.isfinite(gradient)))}): "
            "the posterior may be improper or the initial point outside the support; give "
            "proper priors or initial values (initval=...) inside the support"
        )
    if mm.ndim <= DENSE_MAX_DIM:
        curvature = _full_data_curvature(counter, mode)
        preconditioner, repaired = _positive_definite(curvature)
    else:
        rng = np.random.default_rng() if rng is None else rng
        rows = rng.choice(mm.n_data, size=min(mm.n_data, DIAGONAL_ROWS), replace=False)
        per_row = mm.grad_loglik(mode, rows, per_row=True)
        prior = _prior_curvature(mm, mode)
        preconditioner = diagonal_preconditioner(per_row, mm.n_data, prior, rng)
        repaired = False
    return LaplaceFit(mode, preconditioner, repaired, counter.passes,
                      time.perf_counter() - started)  # fmt: skip


class _PassCounter:
    """Full-data log posterior and gradient, counting the passes over the data."""

    def __init__(self, minibatch_model):
        self.minibatch_model = minibatch_model
        self.passes = 0

    def logp_and_grad(self, theta):
        self.passes += 1
        return self.minibatch_model.logp_and_grad(theta)

    def negative_logp_and_grad(self, theta):
        value, gradient = self.logp_and_grad(theta)
        if not np.isfinite(value):  # L-BFGS's line search backs off from infinite values
            return np.inf, np.zeros_like(gradient)
        return -value, -gradient


def _full_data_curvature(counter, theta):
    """``-d^2 log p / d theta^2`` by central differences of full-data gradients."""
    columns = []
    for d in range(theta.size):
        shift = np.zeros(theta.size)
        shift[d] = RELATIVE_STEP * max(1.0, abs(theta[d]))
        upper = counter.logp_and_grad(theta + shift)[1]
        lower = counter.logp_and_grad(theta - shift)[1]
        columns.append(-(upper - lower) / (2.0 * shift[d]))
    curvature = np.column_stack(columns)
    return 0.5 * (curvature + curvature.T)


def _positive_definite(curvature):
    """A dense preconditioner from ``curvature`` with eigenvalues made positive."""
    if not np.all(np.isfinite(curvature)):
        raise ModeNotFoundError(
            "the curvature of the log posterior at its mode is not finite; the mode may lie "
            "on the boundary of the support"
        )
    eigenvalues, vectors = np.linalg.eigh(curvature)
    largest = np.max(np.abs(eigenvalues))
    floor = EIGENVALUE_FLOOR * largest if largest > 0 else 1.0
    repaired_values = np.maximum(np.abs(eigenvalues), floor)
    repaired = bool(np.any(repaired_values != eigenvalues))
    precision = (vectors * repaired_values) @ vectors.T
    factor = np.linalg.cholesky(0.5 * (precision + precision.T))
    return DensePreconditioner(np.linalg.inv(factor).T, factor.T.copy()), repaired


def _prior_curvature(minibatch_model, theta):
    """``-d^2 log prior / d theta_d^2`` by central differences of the prior's gradient."""
    curvature = np.empty(theta.size)
    for d in range(theta.size):
        shift = np.zeros(theta.size)
        shift[d] = RELATIVE_STEP * max(1.0, abs(theta[d]))
        upper = minibatch_model.logprior_and_grad(theta + shift)[1][d]
        lower = minibatch_model.logprior_and_grad(theta - shift)[1][d]
        curvature[d] = -(upper - lower) / (2.0 * shift[d])
    return curvature
