"""The Laplace fit shared by the samplers: mode, full-data curvature, positive definiteness."""

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch.kernels.preconditioning import DensePreconditioner
from pymc_minibatch.model.laplace import ModeNotFoundError, _positive_definite


def test_conjugate_regression_gives_the_exact_posterior():
    """A Gaussian likelihood with known scale: the Laplace approximation is the posterior."""
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 1.0, size=(5000, 3))
    y = x @ [1.0, -2.0, 0.5] + rng.normal(size=5000)
    with pm.Model() as model:
        pm.Normal("beta", 0, 10, shape=3)
        pm.Normal("y", x @ model["beta"], 1.0, observed=y)
    fit = pmm.MinibatchModel(model).laplace()
    precision = x.T @ x + np.eye(3) / 100
    np.testing.assert_allclose(fit.mode, np.linalg.solve(precision, x.T @ y), rtol=1e-6)
    transform = fit.preconditioner.transform
    np.testing.assert_allclose(transform @ transform.T, np.linalg.inv(precision), rtol=1e-4)
    assert not fit.repaired and fit.passes > 2 * 3


def test_rare_rows_set_the_curvature_of_their_coefficient():
    """An indicator present in 20 of 100,000 rows: its coefficient's sd is set by those rows
    (about 1 / sqrt(20 p (1 - p))), not by the prior's sd of 10."""
    rng = np.random.default_rng(1)
    indicator = np.zeros(100_000)
    indicator[rng.choice(100_000, size=20, replace=False)] = 1.0
    y = (rng.random(100_000) < 0.5).astype("int64")
    with pm.Model() as model:
        pm.Normal("beta", 0, 10, shape=2)
        pm.Bernoulli("y", logit_p=model["beta"][0] + model["beta"][1] * indicator, observed=y)
    fit = pmm.MinibatchModel(model).laplace()
    sd = np.sqrt(np.diag(fit.preconditioner.transform @ fit.preconditioner.transform.T))
    assert 0.3 < sd[1] < 0.7


def test_negative_and_tiny_curvatures_are_made_positive_definite():
    curvature = np.diag([4.0, -1.0, 1e-20])
    preconditioner, repaired = _positive_definite(curvature)
    assert repaired and isinstance(preconditioner, DensePreconditioner)
    inverse = preconditioner.inverse  # R^T with R R^T the repaired precision
    eigenvalues = np.linalg.eigvalsh(inverse.T @ inverse)
    np.testing.assert_allclose(np.sort(eigenvalues), [4e-10, 1.0, 4.0], rtol=1e-8)


def test_a_start_outside_the_support_is_refused_with_a_reason():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        pm.Potential("wall", pm.math.switch(mu < 1.0, -np.inf, 0.0))
        pm.Normal("y", mu, 1.0, observed=np.ones(10))
    with pytest.raises(ModeNotFoundError, match="outside the support"):
        pmm.MinibatchModel(model).laplace()


def test_draws_have_the_laplace_covariance():
    rng = np.random.default_rng(2)
    y = rng.normal(3.0, 2.0, size=1000)
    with pm.Model() as model:
        pm.Normal("mu", 0, 10)
        pm.Normal("y", model["mu"], 2.0, observed=y)
    fit = pmm.MinibatchModel(model).laplace()
    draws = fit.draw(np.random.default_rng(3), size=20_000)
    assert draws.shape == (20_000, 1)
    posterior_sd = 1 / np.sqrt(1000 / 4 + 1 / 100)
    assert abs(draws.std() / posterior_sd - 1) < 0.03
    assert abs(draws.mean() - fit.mode[0]) < 4 * posterior_sd / np.sqrt(20_000)
