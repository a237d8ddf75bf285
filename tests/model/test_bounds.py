"""TunaMH bounds: auto-derived constants against closed forms, refusals, violations."""

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch.bounds import Bounds, metric
from pymc_minibatch.model import expansions
from pymc_minibatch.model.lipschitz import derive_bounds

RNG = np.random.default_rng(5)
X = RNG.normal(size=(400, 3))
Y_BINARY = (RNG.random(400) < 0.5).astype("int64")
Y_REAL = X @ np.array([1.0, -1.0, 0.5]) + RNG.standard_t(4, size=400)
Y_INT = np.arange(400) % 5


def _bounds(model):
    return derive_bounds(pmm.MinibatchModel(model))


def test_logistic_with_intercept_gives_norm_of_augmented_rows():
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0, 2)
        beta = pm.Normal("beta", 0, 1, shape=3)
        pm.Bernoulli("y", logit_p=alpha + X @ beta, observed=Y_BINARY)
    bounds = _bounds(model)
    expected = np.linalg.norm(np.column_stack([np.ones(400), X]), axis=1)
    np.testing.assert_allclose(bounds.c, expected, rtol=1e-10)
    np.testing.assert_array_equal(bounds.metric_indices(None), np.arange(4))


@pytest.mark.parametrize("nu, sigma", [(4.0, 1.5), (1.0, 0.7)])
def test_student_t_location_gives_closed_form(nu, sigma):
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=3)
        pm.StudentT("y", nu=nu, mu=X @ beta, sigma=sigma, observed=Y_REAL)
    expected = (nu + 1) / (2 * np.sqrt(nu) * sigma) * np.linalg.norm(X, axis=1)
    np.testing.assert_allclose(_bounds(model).c, expected, rtol=1e-10)


def test_laplace_and_cauchy_and_metric_excludes_unused_coordinates():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=3)
        pm.HalfNormal("unused_scale", 1.0)  # in theta, but not in the likelihood
        pm.Laplace("y", mu=X @ beta, b=2.0, observed=Y_REAL)
        pm.Cauchy("z", alpha=X[:, 0] * beta[0], beta=0.5, observed=Y_REAL)
    bounds = _bounds(model)
    expected = np.linalg.norm(X, axis=1) / 2.0 + np.abs(X[:, 0]) / 0.5
    np.testing.assert_allclose(bounds.c, expected, rtol=1e-10)
    mm = pmm.MinibatchModel(model)
    np.testing.assert_array_equal(bounds.metric_indices(mm), mm.theta_indices(["beta"]))


@pytest.mark.slow
def test_negative_binomial_bounds_of_every_order_hold_at_random_points():
    """Plain (``max(y, alpha) ||x||``) and first-order (``(y + alpha) ||x||^2 / 4``) bounds
    on rows far from the mode; the second order is checked with the other families in
    ``tests/step_methods/test_second_order.py``."""
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=3)
        pm.NegativeBinomial("y", mu=pm.math.exp(X @ beta), alpha=2.0, observed=Y_INT)
    mm = pmm.MinibatchModel(model)
    np.testing.assert_allclose(derive_bounds(mm).c,
                               np.maximum(Y_INT, 2.0) * np.linalg.norm(X, axis=1))  # fmt: skip
    center = mm.laplace().mode
    first = derive_bounds(mm, 1, center=center)
    rows, largest = np.arange(mm.n_data), 0.0
    for _ in range(20):
        theta, theta2 = center + RNG.normal(scale=2.0, size=(2, mm.ndim))
        ll, ll2 = mm.loglik_pair(theta, theta2, rows)
        linear = mm.directional_grad_loglik(center, theta2 - theta, rows)
        ratio = np.abs(ll2 - ll - linear) / (first.c * metric(first, theta, theta2))
        largest = max(largest, float(ratio.max()))
    assert 1e-3 < largest <= 1.0 + 1e-9


def test_derived_bounds_hold_at_random_points():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=3)
        pm.StudentT("y", nu=3.0, mu=X @ beta, sigma=0.8, observed=Y_REAL)
    mm = pmm.MinibatchModel(model)
    bounds = derive_bounds(mm)
    rows = np.arange(mm.n_data)
    for _ in range(20):
        theta, theta2 = RNG.normal(scale=2.0, size=(2, mm.ndim))
        ll, ll2 = mm.loglik_pair(theta, theta2, rows)
        assert np.all(np.abs(ll2 - ll) <= bounds.c * np.linalg.norm(theta2 - theta) * (1 + 1e-9))


@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda: pm.Exponential(
                "y", lam=pm.math.exp(X @ pm.Normal("b", 0, 1, shape=3)), observed=Y_INT + 1.0
            ),
            "ExponentialRV",
        ),
        (
            lambda: pm.StudentT(
                "y",
                nu=pm.Gamma("nu", 2, 0.1),
                mu=X @ pm.Normal("b", 0, 1, shape=3),
                sigma=pm.HalfNormal("s"),
                observed=Y_REAL,
            ),
            "scale/shape",
        ),
        (
            lambda: pm.Bernoulli("y", p=pm.Beta("p", 1, 1), observed=Y_BINARY),
            "logit",
        ),
        (
            lambda: pm.Laplace(
                "y", mu=pm.math.exp(X @ pm.Normal("b", 0, 1, shape=3)), b=1.0, observed=Y_REAL
            ),
            "not linear",
        ),
    ],
)
def test_unsupported_likelihood_raises(build, message):
    with pm.Model() as model:
        build()
    with pytest.raises(pmm.BoundsUnavailableError, match=message):
        with model:
            pmm.TunaMH()


def test_poisson_rows_have_bounds_only_on_a_trust_region():
    """No global bound on exp(eta): plain bounds refuse, naming the way out."""
    with pm.Model():
        pm.Poisson("y", pm.math.exp(X @ pm.Normal("b", 0, 1, shape=3)), observed=Y_INT)
        with pytest.raises(pmm.BoundsUnavailableError, match="PoissonRV.*trust region"):
            pmm.TunaMH(expansion_order=0)
        assert pmm.TunaMH(expansion_order=1).bounds.region_radius is not None
        step = pmm.TunaMH()
    assert step.bounds.region_radius == pytest.approx(np.sqrt(3) + 10)
    assert "trust_region=11.7" in repr(step)


def test_missing_bounds_raise_a_clear_error():
    with pm.Model():
        beta = pm.Normal("beta", 0, 1, shape=3)
        pm.Bernoulli("y", logit_p=X @ beta, observed=Y_BINARY)
        with pytest.raises(pmm.BoundsUnavailableError, match="needs per-row bounds"):
            pmm.TunaMH(bounds=None)
        with pytest.raises(ValueError, match="400 rows"):
            pmm.TunaMH(bounds=pmm.bounds.Bounds(np.ones(10)))
        with pytest.raises(ValueError, match="non-negative"):
            pmm.bounds.Bounds(-np.ones(400))


def test_too_small_user_bound_raises_violation():
    with pm.Model():
        beta = pm.Normal("beta", 0, 1, shape=3)
        pm.Bernoulli("y", logit_p=X @ beta, observed=Y_BINARY)
        too_small = pmm.bounds.Bounds(0.1 * np.linalg.norm(X, axis=1), metric_vars=["beta"])
        step = pmm.TunaMH(bounds=too_small, proposal_scale=0.5, rng=1)
        point = {"beta": np.zeros(3)}
        with pytest.raises(pmm.BoundViolationError, match="bounds are too small"):
            for _ in range(50):
                point, _ = step.step(point)


def test_normal_likelihood_needs_control_variates():
    """A Normal log-likelihood is quadratic in its mean: no plain (Lipschitz) bound exists."""
    with pm.Model():
        pm.Normal("y", X @ pm.Normal("b", 0, 1, shape=3), 1.0, observed=Y_REAL)
        with pytest.raises(pmm.BoundsUnavailableError, match="'y' .NormalRV. has no bounded first"):
            pmm.TunaMH(expansion_order=0)
    with pm.Model():
        b = pm.Uniform("b", -1, 1, shape=3, default_transform=None)
        pm.Normal("y", X @ b, 1.0, observed=Y_REAL)
        with pytest.raises(pmm.BoundsUnavailableError, match="'y' .NormalRV. has no bounded first"):
            pmm.PoissonMH()


def test_bounds_rounded_up_to_float32_stay_upper_bounds():
    """The one array TunaMH keeps per row with second-order control variates, in half the
    memory: every value at least the float64 bound, and at most one float32 spacing above."""
    c = np.random.default_rng(3).lognormal(-8.0, 3.0, size=10_000)
    c[:3] = [0.0, 1.0, 0.1]  # exactly representable, not: 0.1 rounds down in float32
    single = expansions._rounded_up_to_float32(c)
    assert single.dtype == np.float32
    assert np.all(single >= c)
    assert np.all(single <= np.nextafter(c.astype(np.float32), np.float32(np.inf)))
    assert single[:2].tolist() == [0.0, 1.0] and float(single[2]) > 0.1
    bounds = Bounds(single, center=np.zeros(2), whiten=np.eye(2))
    assert bounds.c is single  # kept as given, not copied into float64
    assert bounds.total == pytest.approx(np.sum(single, dtype=np.float64), rel=1e-15)


def _centred_intercepts(n_groups=20, n_rows=2000):
    """A centred varying-intercept logistic regression with groups of 1 to 400 rows."""
    rng = np.random.default_rng(11)
    sizes = np.maximum(1, (rng.lognormal(0.0, 1.5, size=n_groups) * 20).astype(int))
    groups = rng.choice(n_groups, size=n_rows, p=sizes / sizes.sum())
    x = rng.normal(size=n_rows)
    y = rng.random(n_rows) < 1 / (1 + np.exp(-(rng.normal(0, 0.8, n_groups)[groups] + x)))
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        tau = pm.HalfNormal("tau", 1.0)
        a = pm.Normal("a", mu, tau, shape=n_groups)
        beta = pm.Normal("beta", 0.0, 1.0)
        pm.Bernoulli("y", logit_p=a[groups] + x * beta, observed=y.astype("int64"))
    return model


def test_the_population_parameters_stay_out_of_the_rows_metrics():
    mm = pmm.MinibatchModel(_centred_intercepts())
    population = mm.theta_indices(["mu", "tau"])
    np.testing.assert_array_equal(mm.row_free_indices(), population)
    bounds, expansion = expansions.second_order_bounds(mm, mm.laplace())
    assert not np.isin(population, bounds.whiten.shared).any()
    theta = mm.laplace().draw(np.random.default_rng(0))
    far = theta.copy()
    far[population] += 3.0  # no row depends on them: no row needs drawing
    np.testing.assert_array_equal(bounds.metrics(theta, far), 0.0)
    # the rows' second-order residuals stay within their bounds, with the scale far from
    # its joint mode as a thousand groups put it
    rows = np.arange(mm.n_data)
    rng = np.random.default_rng(1)
    for _ in range(20):
        theta, theta2 = mm.laplace().mode + mm.laplace().preconditioner.to_theta(
            rng.normal(scale=2.0, size=(2, mm.ndim))
        )
        theta[population] += rng.normal(scale=3.0, size=population.size)
        ll, residual2 = expansion.residual_pair(theta, theta2, mm.gather_rows(rows))
        residual = residual2 - ll
        metrics = bounds.metrics(theta, theta2)[bounds.groups]
        assert np.all(np.abs(residual) <= bounds.c * metrics * (1 + 1e-6) + 1e-12)


def test_one_compiled_call_gives_the_residuals_of_the_expansions():
    """A step's row terms (``residual_pair``: one compiled call) equal the log-likelihoods
    minus the expansions computed term by term in NumPy (``row_difference``), on a model
    with a location and a free scale (three predictors, a cross curvature)."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2000, 2))
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=2)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Bernoulli("y", logit_p=x @ beta, observed=(x[:, 0] > 0).astype("int64"))
        pm.StudentT("z", nu=5, mu=x[:, 1] * beta[1], sigma=sigma,
                    observed=x[:, 1] + rng.standard_t(5, size=2000))  # fmt: skip
    mm = pmm.MinibatchModel(model)
    _, expansion = expansions.second_order_bounds(mm, mm.laplace(), radius=5.0)
    assert expansion.n_predictors == 3 and (1, 2) in expansion.curvature_pairs
    theta, theta2 = mm.laplace().draw(rng, size=2)
    rows = mm.gather_rows(rng.integers(0, 2000, size=40))
    current, proposed = expansion.residual_pair(theta, theta2, rows)
    ll, ll2 = mm.loglik_pair(theta, theta2, rows=rows)
    np.testing.assert_allclose(current, ll, rtol=1e-12)
    np.testing.assert_allclose(proposed, ll2 - expansion.row_difference(theta, theta2, rows),
                               rtol=1e-12, atol=1e-12)  # fmt: skip
