"""Linear preconditioners for gradient-based samplers: ``theta = L z``.

The target is unchanged by the change of variables; ``L`` plays the part of a mass matrix and
is chosen so that the curvature of the log posterior in ``z`` is close to the identity:

- :class:`DensePreconditioner`: ``L = R^-T`` for a curvature ``C = R R^T`` (Cholesky), so that
  ``L^T C L = I``; built by :mod:`pymc_minibatch.model.laplace` from the full-data curvature
  at the mode.
- :class:`DiagonalPreconditioner` (many parameters): ``L = diag(s)`` from per-row gradients,
  see :func:`diagonal_preconditioner`.
"""

from typing import NamedTuple

import numpy as np

POWER_ITERATIONS = 50
DENSE_MAX_DIM = 100
"""Up to this many parameters the preconditioner is dense."""


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


def diagonal_preconditioner(per_row_grads, n_data, prior_curvature, rng: np.random.Generator):
    """A diagonal preconditioner from per-row gradients (rows x dims) at one point.

    The curvature is estimated by the empirical Fisher information
    ``F = N Cov_i(grad l_i)`` of the rows plus the prior's curvature ``P`` (diagonal):
    ``s_d = C_dd^(-1/2) / sqrt(lambda)``, with ``lambda`` the largest eigenvalue of the
    diagonally scaled curvature (power iteration), so that every direction of ``z`` has
    curvature at most 1 also when parameters are strongly correlated (a diagonal scaling
    alone leaves eigenvalues up to the dimension); the flattest directions then mix slowly.
    Coordinates with no estimated curvature (or a non-finite one) get scale 1.
    """
    rows = per_row_grads.shape[0]
    centred = per_row_grads - per_row_grads.mean(axis=0)
    weight = n_data / rows
    prior = np.maximum(prior_curvature, 0.0)
    finite = np.all(np.isfinite(centred)) and np.all(np.isfinite(prior))
    return _diagonal(centred, weight, prior, rng, finite)


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
