"""Block-arrowhead matrices and their Cholesky factors against dense linear algebra."""

import numpy as np
import pytest

from pymc_minibatch.kernels.arrowhead import (
    ArrowheadMatrix,
    NotPositiveDefiniteError,
    cholesky,
    damped_cholesky,
    schur_complement,
)
from pymc_minibatch.kernels.preconditioning import identity_preconditioner, scaled

N_GROUPS, N_SLOTS, N_SHARED = 5, 2, 3
NDIM = N_GROUPS * N_SLOTS + N_SHARED


def _pattern(rng):
    """Coordinates in a shuffled order, as a model's theta lays them out."""
    order = rng.permutation(NDIM)
    return order[N_GROUPS * N_SLOTS :], order[: N_GROUPS * N_SLOTS].reshape(N_GROUPS, N_SLOTS)


def _dense_arrowhead(rng, shared, local):
    """A positive definite matrix with zeros between different groups' coordinates."""
    a = rng.normal(size=(NDIM, NDIM))
    dense = a @ a.T
    for g in range(N_GROUPS):
        for h in range(N_GROUPS):
            if g != h:
                dense[np.ix_(local[g], local[h])] = 0.0
    return dense + NDIM * np.eye(NDIM)


@pytest.fixture
def arrowhead():
    rng = np.random.default_rng(0)
    shared, local = _pattern(rng)
    dense = _dense_arrowhead(rng, shared, local)
    return dense, ArrowheadMatrix.from_dense(dense, shared, local)


def test_matrix_round_trips_and_multiplies_as_its_dense_form(arrowhead):
    dense, matrix = arrowhead
    np.testing.assert_array_equal(matrix.to_dense(), dense)
    x = np.random.default_rng(1).normal(size=(4, NDIM))
    np.testing.assert_allclose(matrix.matvec(x), x @ dense, rtol=1e-12)
    np.testing.assert_allclose(matrix.diagonal(), np.diag(dense))
    np.testing.assert_allclose(matrix.plus_diagonal(2.0).to_dense(), dense + 2 * np.eye(NDIM))


def test_factor_whitens_the_matrix(arrowhead):
    dense, matrix = arrowhead
    factor = cholesky(matrix)
    transform = factor.dense()  # L = R^-T
    np.testing.assert_allclose(transform.T @ dense @ transform, np.eye(NDIM), atol=1e-12)
    z = np.random.default_rng(2).normal(size=(3, NDIM))
    np.testing.assert_allclose(factor.to_theta(z), z @ transform.T, rtol=1e-10)
    np.testing.assert_allclose(factor @ z[0], transform @ z[0], rtol=1e-10)
    np.testing.assert_allclose(factor.to_z(factor.to_theta(z)), z, rtol=1e-10)
    gradient = np.random.default_rng(3).normal(size=NDIM)  # chain rule: d/dz f(L z) = L^T g
    np.testing.assert_allclose(factor.gradient_to_z(gradient), transform.T @ gradient,
                               rtol=1e-10)  # fmt: skip
    np.testing.assert_allclose(factor.solve(gradient), np.linalg.solve(dense, gradient),
                               rtol=1e-10)  # fmt: skip
    np.testing.assert_allclose(factor.covariance_diagonal(), np.diag(np.linalg.inv(dense)),
                               rtol=1e-10)  # fmt: skip


def test_without_shared_coordinates_the_factor_whitens_the_principal_submatrix(arrowhead):
    dense, matrix = arrowhead
    dropped = matrix.shared[:2]
    kept = np.setdiff1d(np.arange(NDIM), dropped)
    factor = cholesky(matrix.without_shared(dropped))
    x = np.random.default_rng(4).normal(size=NDIM)
    z = factor.to_z(x)
    # R^T x on the kept coordinates, with R R^T their block of the matrix; zero elsewhere
    np.testing.assert_array_equal(z[dropped], 0.0)
    np.testing.assert_allclose(z[kept] @ z[kept], x[kept] @ dense[np.ix_(kept, kept)] @ x[kept],
                               rtol=1e-10)  # fmt: skip
    moved = x.copy()
    moved[dropped] += 1.0  # the dropped coordinates do not enter z
    np.testing.assert_array_equal(factor.to_z(moved), z)


def test_a_row_of_one_group_whitens_on_its_group_and_the_shared_coordinates(arrowhead):
    dense, matrix = arrowhead
    factor = cholesky(matrix)
    rng = np.random.default_rng(4)
    group = 3
    row = np.zeros(NDIM)
    row[matrix.shared] = rng.normal(size=N_SHARED)
    row[matrix.local[group]] = rng.normal(size=N_SLOTS)
    shared_part, local_part = factor.whitened_rows(
        (row[matrix.shared][None], row[matrix.local[group]][None]), np.array([group])
    )
    whitened = factor.dense().T @ row  # R^-1 a = L^T a
    np.testing.assert_allclose(shared_part[0], whitened[matrix.shared], rtol=1e-10)
    np.testing.assert_allclose(local_part[0], whitened[matrix.local[group]], rtol=1e-10)
    others = np.delete(np.arange(NDIM), np.r_[matrix.shared, matrix.local[group]])
    np.testing.assert_allclose(whitened[others], 0.0, atol=1e-12)


def test_schur_complement_is_the_shared_block_of_the_inverse_inverted(arrowhead):
    dense, matrix = arrowhead
    covariance = np.linalg.inv(dense)
    expected = np.linalg.inv(covariance[np.ix_(matrix.shared, matrix.shared)])
    np.testing.assert_allclose(schur_complement(matrix), expected, rtol=1e-10)


def test_a_matrix_with_a_negative_direction_is_refused(arrowhead):
    dense, matrix = arrowhead
    with pytest.raises(NotPositiveDefiniteError, match="group"):
        cholesky(matrix.plus_diagonal(np.where(np.isin(np.arange(NDIM), matrix.local[1]),
                                               -1e6, 0.0)))  # fmt: skip
    with pytest.raises(NotPositiveDefiniteError, match="Schur"):
        cholesky(matrix.plus_diagonal(np.where(np.isin(np.arange(NDIM), matrix.shared),
                                               -1e6, 0.0)))  # fmt: skip


def test_a_negative_direction_is_damped_in_its_own_block_only():
    """A group's block and the shared block with a negative eigenvalue each: the damping
    shifts those two blocks, and leaves the positive definite group's block as it is."""
    precision = ArrowheadMatrix.from_dense(
        np.diag([4.0, -1.0, 2.0, -3.0]), shared=np.array([3]), local=np.array([[0], [1], [2]])
    )
    factor, damped = damped_cholesky(precision)
    assert damped
    repaired = np.linalg.inv(factor.dense() @ factor.dense().T)
    np.testing.assert_allclose(np.diag(repaired)[[0, 2]], [4.0, 2.0], rtol=1e-12)
    assert repaired[1, 1] > 0 and repaired[3, 3] > 0
    np.testing.assert_allclose(repaired - np.diag(np.diag(repaired)), 0.0, atol=1e-12)


def test_without_groups_the_factor_is_a_dense_cholesky_factor():
    rng = np.random.default_rng(5)
    a = rng.normal(size=(4, 4))
    dense = a @ a.T + np.eye(4)
    factor = cholesky(ArrowheadMatrix.from_dense(dense))
    np.testing.assert_allclose(factor.dense() @ factor.dense().T, np.linalg.inv(dense),
                               rtol=1e-10)  # fmt: skip


def test_scaled_and_identity_preconditioners():
    z = np.arange(3.0)
    np.testing.assert_array_equal(identity_preconditioner(3) @ z, z)
    np.testing.assert_array_equal(scaled(identity_preconditioner(3), 2.0) @ z, 2.0 * z)
    np.testing.assert_array_equal(scaled(np.eye(3), 2.0) @ z, 2.0 * z)
