"""The diagonal preconditioner bounds the curvature of every direction by about 1."""

import numpy as np

from pymc_minibatch.kernels.preconditioning import diagonal_preconditioner


def _correlated_gradients(rows=400, dims=6, correlation=0.9, seed=0):
    rng = np.random.default_rng(seed)
    covariance = correlation * np.ones((dims, dims)) + (1 - correlation) * np.eye(dims)
    covariance *= np.outer(np.arange(1, dims + 1), np.arange(1, dims + 1))  # unequal scales
    return rng.multivariate_normal(np.zeros(dims), covariance, size=rows)


def test_scaled_curvature_has_largest_eigenvalue_one():
    grads = _correlated_gradients()
    n_data, prior = 10_000, np.full(6, 0.5)
    scale = diagonal_preconditioner(grads, n_data, prior, np.random.default_rng(1))
    centred = grads - grads.mean(axis=0)
    curvature = n_data / grads.shape[0] * centred.T @ centred + np.diag(prior)
    scaled = scale[:, None] * curvature * scale[None, :]
    eigenvalues = np.linalg.eigvalsh(scaled)
    assert abs(eigenvalues[-1] - 1) < 1e-6
    # equal diagonal: the diagonal scaling, shrunk by the largest eigenvalue (about 5.4 here)
    np.testing.assert_allclose(np.diag(scaled), np.diag(scaled)[0], rtol=1e-12)
    assert 1 / np.diag(scaled)[0] > 5


def test_independent_coordinates_keep_the_diagonal_scale():
    grads = np.random.default_rng(2).normal(size=(20_000, 3)) * np.array([1.0, 10.0, 0.1])
    scale = diagonal_preconditioner(grads, 20_000, np.zeros(3), np.random.default_rng(3))
    np.testing.assert_allclose(scale, 1 / (np.sqrt(20_000) * np.array([1.0, 10.0, 0.1])), rtol=0.05)


def test_flat_or_non_finite_coordinates_fall_back_to_scale_one():
    grads = np.random.default_rng(4).normal(size=(50, 3))
    grads[:, 1] = 0.0
    scale = diagonal_preconditioner(grads, 1000, np.zeros(3), np.random.default_rng(5))
    assert scale[1] <= 1.0 and np.all(np.isfinite(scale))
    grads[0, 2] = np.nan
    scale = diagonal_preconditioner(grads, 1000, np.zeros(3), np.random.default_rng(5))
    assert scale[2] == 1.0 and np.all(np.isfinite(scale))
