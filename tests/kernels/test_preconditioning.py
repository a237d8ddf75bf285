"""The diagonal preconditioner bounds the estimated curvature by 1; a dense one maps
consistently between theta and z (the dense curvature itself: tests/model/test_laplace.py)."""

import numpy as np
import pytest

from pymc_minibatch.kernels.preconditioning import (
    DensePreconditioner,
    DiagonalPreconditioner,
    diagonal_preconditioner,
)

N_DATA = 10_000
PRIOR = np.full(6, 0.5)


def _correlated_gradients(rows=400, dims=6, correlation=0.9, seed=0):
    rng = np.random.default_rng(seed)
    covariance = correlation * np.ones((dims, dims)) + (1 - correlation) * np.eye(dims)
    covariance *= np.outer(np.arange(1, dims + 1), np.arange(1, dims + 1))  # unequal scales
    return rng.multivariate_normal(np.zeros(dims), covariance, size=rows)


def _curvature(grads, prior):
    centred = grads - grads.mean(axis=0)
    return N_DATA / grads.shape[0] * centred.T @ centred + np.diag(prior)


def _matrix(preconditioner, ndim):
    return np.column_stack([preconditioner.to_theta(e) for e in np.eye(ndim)])


def test_dense_preconditioner_maps_between_theta_and_z():
    factor = np.linalg.cholesky(_curvature(_correlated_gradients(), PRIOR))
    preconditioner = DensePreconditioner(np.linalg.inv(factor).T, factor.T.copy())
    transform = _matrix(preconditioner, 6)
    z = np.random.default_rng(2).normal(size=6)
    np.testing.assert_allclose(preconditioner.to_z(preconditioner.to_theta(z)), z, rtol=1e-10)
    gradient = np.random.default_rng(3).normal(size=6)  # chain rule: d/dz f(L z) = L^T g
    np.testing.assert_allclose(preconditioner.gradient_to_z(gradient), transform.T @ gradient)


def test_diagonal_preconditioner_bounds_every_direction_by_one():
    grads = _correlated_gradients()
    preconditioner = diagonal_preconditioner(grads, N_DATA, PRIOR, np.random.default_rng(1))
    assert isinstance(preconditioner, DiagonalPreconditioner)
    scale = preconditioner.scale
    scaled = scale[:, None] * _curvature(grads, PRIOR) * scale[None, :]
    assert abs(np.linalg.eigvalsh(scaled)[-1] - 1) < 1e-6
    # equal diagonal: the diagonal scaling, shrunk by the largest eigenvalue (about 5.4 here)
    np.testing.assert_allclose(np.diag(scaled), np.diag(scaled)[0], rtol=1e-12)
    assert 1 / np.diag(scaled)[0] > 5


def test_independent_coordinates_keep_the_diagonal_scale():
    grads = np.random.default_rng(2).normal(size=(20_000, 3)) * np.array([1.0, 10.0, 0.1])
    preconditioner = diagonal_preconditioner(grads, 20_000, np.zeros(3), np.random.default_rng(3))
    expected = 1 / (np.sqrt(20_000) * np.array([1.0, 10.0, 0.1]))
    np.testing.assert_allclose(preconditioner.scale, expected, rtol=0.05)


@pytest.mark.parametrize("defect", ["flat", "nan", "few rows"])
def test_degenerate_estimates_fall_back_to_a_finite_diagonal(defect):
    grads = np.random.default_rng(4).normal(size=(50, 3))
    if defect == "flat":
        grads[:, 1] = 0.0  # no curvature in the data and none in the (flat) prior
    elif defect == "nan":
        grads[0, 2] = np.nan
    else:
        grads = grads[:3]
    preconditioner = diagonal_preconditioner(grads, 1000, np.zeros(3), np.random.default_rng(5))
    assert isinstance(preconditioner, DiagonalPreconditioner)
    assert np.all(np.isfinite(preconditioner.scale)) and np.all(preconditioner.scale <= 1.0)
    if defect == "nan":
        np.testing.assert_array_equal(preconditioner.scale[2], 1.0)
