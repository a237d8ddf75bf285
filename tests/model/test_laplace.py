"""The Laplace fit shared by the samplers: mode, exact full-data curvature, and a warning
when no mode is found."""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_minibatch as pmm
from pymc_minibatch.model.laplace import LaplaceFitWarning, ModeNotFoundError
from tests.support.zoo_hierarchical import intercepts_logistic


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
    transform = fit.preconditioner.dense()
    np.testing.assert_allclose(transform @ transform.T, np.linalg.inv(precision), rtol=1e-8)
    assert fit.is_mode and not fit.repaired and fit.starts == 1
    # Newton's method on a quadratic: the first step lands on the mode
    assert fit.passes <= 6


def test_tall_data_fit_starts_from_a_subsample_and_needs_few_passes(monkeypatch):
    """On 2^17 rows, the search starts from a subsample's mode, takes its last Newton step
    without a pass and checks the curvature's scale on the subsample: three passes, and
    the same mode (to one more exact Newton step) and curvature as the search from the
    initial point on all rows."""
    rng = np.random.default_rng(3)
    n_rows = 2**17
    x = np.column_stack([np.ones(n_rows), rng.normal(size=(n_rows, 4))])
    y = (rng.random(n_rows) < 1.0 / (1.0 + np.exp(-x @ [0.3, 0.8, -0.5, 0.2, 0.0]))).astype(int)
    with pm.Model() as model:
        pm.Normal("beta", 0, 1, shape=5)
        pm.Bernoulli("y", logit_p=x @ model["beta"], observed=y)
    fit = pmm.MinibatchModel(model).laplace()
    assert fit.is_mode and fit.passes <= 3
    monkeypatch.setattr("pymc_minibatch.model.mode_search.SUBSAMPLE_MIN_ROWS", 2 * n_rows)
    full_model = pmm.MinibatchModel(model)
    full = full_model.laplace()
    assert full.is_mode and full.passes > fit.passes + 2
    gradient = full_model.logp_and_grad(full.mode)[1]
    mode = full.mode + np.linalg.solve(full.precision.shared_block, gradient)
    np.testing.assert_allclose(fit.mode, mode, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(fit.precision.shared_block, full.precision.shared_block, rtol=1e-5)


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
    sd = np.sqrt(fit.covariance_diagonal())
    assert 0.3 < sd[1] < 0.7


def test_a_centred_hierarchical_model_ends_at_its_mode_not_at_a_zero_scale():
    """From PyMC's initial point (every group effect at the population mean) a joint Newton
    step shrinks ``tau`` towards zero, where the centred density is unbounded; the groups'
    own parameters move first, and the search ends at the mode with the exact curvature."""
    mm = pmm.MinibatchModel(intercepts_logistic(200, 20_000, centred=True))
    fit = mm.laplace(rng=np.random.default_rng(0))
    assert fit.is_mode and not fit.repaired and fit.starts == 1
    assert fit.structure.local.shape == (200, 1)
    tau = np.exp(fit.mode[mm.theta_indices(["tau"])][0])
    assert 0.5 < tau < 1.2  # drawn from tau = 0.8
    # the curvature is exact: against central differences of the full-data gradient
    rng = np.random.default_rng(1)
    direction = rng.normal(size=mm.ndim)
    step = 1e-5
    difference = (mm.logp_and_grad(fit.mode + step * direction)[1]
                  - mm.logp_and_grad(fit.mode - step * direction)[1]) / (2 * step)  # fmt: skip
    np.testing.assert_allclose(-fit.precision.matvec(direction), difference, rtol=1e-5,
                               atol=1e-6 * np.abs(difference).max())  # fmt: skip


def _model_without_mode():
    """A coefficient the likelihood never sees, with a flat prior."""
    rng = np.random.default_rng(2)
    with pm.Model() as model:
        pm.Flat("unseen")
        mu = pm.Normal("mu", 0, 10)
        pm.Normal("y", mu, 1.0, observed=rng.normal(size=100))
    return model


def test_a_posterior_without_mode_is_reported():
    """A coefficient the likelihood never sees, with a flat prior: no search can end at a
    mode, so the fit warns, and says what it used."""
    model = _model_without_mode()
    with pytest.warns(LaplaceFitWarning, match="no mode"):
        fit = pmm.MinibatchModel(model).laplace(rng=np.random.default_rng(3))
    assert not fit.is_mode and fit.repaired and fit.starts == 4


def test_the_retries_repeat_without_a_generator():
    """Steps fit the Laplace approximation when they are built, before ``pm.sample`` seeds
    them: the jittered retries must not depend on an unseeded stream, or the same
    ``random_seed`` gives other draws."""
    model = _model_without_mode()
    with pytest.warns(LaplaceFitWarning, match="no mode"):
        first, second = (pmm.MinibatchModel(model).laplace() for _ in range(2))
    assert first.starts == 4
    np.testing.assert_array_equal(first.mode, second.mode)


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


def test_a_kinked_likelihood_gets_its_curvature_from_secants():
    """Laplace rows have a zero second derivative almost everywhere: the exact Hessian at
    the mode is the prior's alone (sd 5). The secants at the posterior's scale give the
    posterior's sd, here within 20% of a grid integral's."""
    y = np.random.default_rng(42).laplace(0.7, 1.0, size=1000)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        pm.Laplace("y", mu, 1.0, observed=y)
    fit = pmm.MinibatchModel(model).laplace(rng=np.random.default_rng(0))
    grid = np.linspace(0.3, 1.1, 8001)
    log_post = (stats.norm.logpdf(grid, 0, 5)
                + stats.laplace.logpdf(y[None, :], grid[:, None]).sum(1))  # fmt: skip
    weights = np.exp(log_post - log_post.max())
    weights /= weights.sum()
    mean = weights @ grid
    sd = np.sqrt(weights @ (grid - mean) ** 2)
    laplace_sd = float(np.sqrt(fit.covariance_diagonal()[0]))
    assert 0.8 < laplace_sd / sd < 1.2, (laplace_sd, sd)
    assert abs(fit.mode[0] - mean) < 0.5 * sd
