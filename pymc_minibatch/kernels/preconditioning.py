"""Linear preconditioners for stochastic-gradient samplers, from per-row gradients.

The curvature of the log posterior at a point is estimated by the empirical Fisher
information ``F = N Cov_i(grad l_i)`` of a subsample of rows plus the prior's curvature ``P``
(diagonal): ``C = F + P``. A preconditioner is a linear change of variables ``theta = L z``
(the target is unchanged; ``L`` plays the part of a mass matrix) with ``L^T C L`` close to
the identity:

- :class:`DensePreconditioner` (few parameters): ``C = R R^T`` (Cholesky), ``L = R^-T``, so
  that ``L^T C L = I`` exactly for the estimate, correlations included. Here ``C`` is
  preferably minus the Hessian of the minibatch log posterior (finite differences).
- :class:`DiagonalPreconditioner` (many parameters): ``L = diag(s)``,
  ``s_d = C_dd^(-1/2) / sqrt(lambda)``, with ``lambda`` the largest eigenvalue of the
  diagonally scaled curvature (power iteration), so that every direction of ``z`` has
  curvature at most 1 also when parameters are strongly correlated (a diagonal scaling
  alone leaves eigenvalues up to the dimension); the flattest directions then mix slowly.
"""

from typing import NamedTuple

import numpy as np

POWER_ITERATIONS = 50
DENSE_MAX_DIM = 100
"""Up to this many parameters (and fewer than the rows used) the preconditioner is dense."""


class DiagonalPreconditioner(NamedTuple):
    scale: np.ndarray

    def to_theta(self, z):
        return z * self.scale

    def to_z(self, theta):
        return theta / self.scale

    def gradient_to_z(self, gradient):
        return gradient * self.scale


class DensePreconditioner(NamedTuple):
    transform: np.ndarray
    """``L = R^-T``: ``theta = L z``."""
    inverse: np.ndarray
    """``R^T = L^-1``: ``z = R^T theta``."""

    def to_theta(self, z):
        return self.transform @ z

    def to_z(self, theta):
        return self.inverse @ theta

    def gradient_to_z(self, gradient):
        return self.transform.T @ gradient


def identity_preconditioner(ndim):
    return DiagonalPreconditioner(np.ones(ndim))


def estimate_preconditioner(
    per_row_grads,
    n_data,
    prior_curvature,
    rng: np.random.Generator,
    hessian=None,
    dense_max_dim=DENSE_MAX_DIM,
):
    """A preconditioner from per-row gradients (rows x dims) at one point.

    Dense when the dimension is at most ``dense_max_dim``: from ``hessian`` (minus the
    Hessian of the log posterior, e.g. by finite differences of minibatch gradients) if it
    is given and positive definite, else from the empirical Fisher information if the rows
    outnumber the dimensions and it is positive definite. The empirical Fisher can be far
    below the curvature away from the mode (an overfitted logistic regression has small
    residuals), which is why the Hessian comes first. Otherwise diagonal, where
    coordinates with no estimated curvature (or a non-finite one) get scale 1.
    """
    rows, ndim = per_row_grads.shape
    centred = per_row_grads - per_row_grads.mean(axis=0)
    weight = n_data / rows
    prior = np.maximum(prior_curvature, 0.0)
    finite = np.all(np.isfinite(centred)) and np.all(np.isfinite(prior))
    if ndim <= dense_max_dim:
        candidates = [] if hessian is None else [0.5 * (hessian + hessian.T)]
        if finite and ndim < rows:
            candidates.append(weight * (centred.T @ centred) + np.diag(prior))
        for curvature in candidates:
            dense = _dense(curvature)
            if dense is not None:
                return dense
    return _diagonal(centred, weight, prior, rng, finite)


def _dense(curvature):
    if not np.all(np.isfinite(curvature)):
        return None
    try:
        factor = np.linalg.cholesky(curvature)
    except np.linalg.LinAlgError:
        return None
    return DensePreconditioner(np.linalg.inv(factor).T, factor.T.copy())


def _diagonal(centred, weight, prior, rng, finite):
    precision = weight * np.sum(centred**2, axis=0) + prior
    usable = np.isfinite(precision) & (precision > 0)
    diagonal = np.where(usable, 1.0 / np.sqrt(np.where(usable, precision, 1.0)), 1.0)
    if not finite:
        return DiagonalPreconditioner(diagonal)

    def scaled_curvature(v):
        u = diagonal * v
        return diagonal * (weight * (centred.T @ (centred @ u)) + prior * u)

    vector = rng.standard_normal(diagonal.size)
    largest = 1.0
    for _ in range(POWER_ITERATIONS):
        image = scaled_curvature(vector)
        norm = np.linalg.norm(image)
        if not norm > 0:
            break
        largest, vector = norm, image / norm
    return DiagonalPreconditioner(diagonal / np.sqrt(max(largest, 1.0)))
