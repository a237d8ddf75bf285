"""PoissonMH: derived global bounds, refusals, violations, statistics, fallback."""

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior, sample_stats
from pymc_minibatch.model.lipschitz import derive_global_bounds

RNG = np.random.default_rng(11)
X = RNG.normal(size=(3000, 2))
Y = (RNG.random(3000) < 1 / (1 + np.exp(-X @ np.array([1.0, -0.5])))).astype("int64")
Y_REAL = X @ np.array([1.0, -0.5]) + RNG.standard_t(4, size=3000)
LOW, HIGH = np.array([0.9, -0.6]), np.array([1.1, -0.4])
STATS = {
    "accept", "accepted", "batch_size", "kept", "expected_batch_size", "fallback",
    "proposal_scale", "nonfinite",
}  # fmt: skip


@pytest.fixture(scope="module")
def boxed_logistic():
    with pm.Model() as model:
        alpha = pm.Uniform("alpha", -0.1, 0.1, default_transform=None)
        beta = pm.Uniform("beta", LOW, HIGH, shape=2, default_transform=None)
        pm.Bernoulli("y", logit_p=alpha + X @ beta, observed=Y)
    return model


def test_derived_global_bounds_are_the_closed_form_and_hold_in_the_box(boxed_logistic):
    mm = pmm.MinibatchModel(boxed_logistic)
    bounds = derive_global_bounds(mm)
    # log-sigmoid is 1-Lipschitz; over the box eta_i spans 0.2 + |x_i| . (HIGH - LOW)
    half_width = 0.5 * (0.2 + np.abs(X) @ (HIGH - LOW))
    eta_center = X @ (0.5 * (LOW + HIGH))
    loglik_center = Y * eta_center - np.logaddexp(0.0, eta_center)
    np.testing.assert_allclose(bounds.lower, loglik_center - half_width, rtol=1e-10)
    np.testing.assert_allclose(bounds.upper, loglik_center + half_width, rtol=1e-10)
    rows = np.arange(mm.n_data)
    for _ in range(20):
        theta = np.empty(mm.ndim)
        theta[mm.theta_indices(["alpha"])] = RNG.uniform(-0.1, 0.1)
        theta[mm.theta_indices(["beta"])] = RNG.uniform(LOW, HIGH)
        loglik = mm.loglik(theta, rows)
        assert np.all(loglik >= bounds.lower - 1e-12) and np.all(loglik <= bounds.upper + 1e-12)


def test_student_t_bounds_scale_with_the_lipschitz_constant():
    with pm.Model() as model:
        beta = pm.Uniform("beta", LOW, HIGH, shape=2, default_transform=None)
        pm.StudentT("y", nu=4.0, mu=X @ beta, sigma=0.5, observed=Y_REAL)
    bounds = derive_global_bounds(pmm.MinibatchModel(model))
    lipschitz = 5.0 / (2.0 * 2.0 * 0.5)
    np.testing.assert_allclose(bounds.spread, lipschitz * np.abs(X) @ (HIGH - LOW), rtol=1e-10)


@pytest.mark.parametrize(
    "prior",
    [
        lambda: pm.Normal("beta", 0, 1, shape=2),
        lambda: pm.Uniform("beta", LOW, HIGH, shape=2),  # interval transform: eta not linear
        lambda: pm.Uniform("beta", -pm.HalfNormal("w"), 1.0, shape=2, default_transform=None),
    ],
)
def test_unbounded_or_transformed_support_raises(prior):
    with pm.Model():
        beta = prior()
        pm.Bernoulli("y", logit_p=X @ beta, observed=Y)
        with pytest.raises(pmm.BoundsUnavailableError, match="bounded support|not linear"):
            pmm.PoissonMH()
        with pytest.raises(pmm.BoundsUnavailableError, match="needs global bounds"):
            pmm.PoissonMH(bounds=None)


def test_bad_hyperparameters_and_user_bounds_raise(boxed_logistic):
    with boxed_logistic:
        for rate in (0.0, -1.0, np.inf):
            with pytest.raises(ValueError, match="poisson_rate"):
                pmm.PoissonMH(poisson_rate=rate)
        with pytest.raises(ValueError, match="3000 rows"):
            pmm.PoissonMH(bounds=pmm.bounds.GlobalBounds(np.zeros(10), np.ones(10)))
        with pytest.raises(TypeError, match="GlobalBounds"):
            pmm.PoissonMH(bounds=pmm.bounds.Bounds(np.ones(3000)))
    with pytest.raises(ValueError, match="lower <= upper"):
        pmm.bounds.GlobalBounds(0.0, -1.0)
    with pytest.raises(ValueError, match="finite"):
        pmm.bounds.GlobalBounds(-np.inf, 0.0)


def test_the_former_name_lam_still_works(boxed_logistic):
    with boxed_logistic:
        with pytest.warns(FutureWarning, match="'lam' was renamed 'poisson_rate'"):
            step = pmm.PoissonMH(lam=50.0)
        assert step.poisson_rate == 50.0
        with pytest.raises(TypeError, match="pass 'poisson_rate' only"):
            pmm.PoissonMH(lam=50.0, poisson_rate=50.0)


def test_too_narrow_user_bounds_raise_violation(boxed_logistic):
    with boxed_logistic:
        # log p(y_i) <= 0 always, but is far below -0.5 for some rows
        step = pmm.PoissonMH(bounds=pmm.bounds.GlobalBounds(-0.5, 0.0), poisson_rate=50.0, rng=1)
        point = boxed_logistic.initial_point()
        with pytest.raises(pmm.BoundViolationError, match="left its global bounds"):
            for _ in range(20):
                point, _ = step.step(point)


def test_stats_batch_sizes_and_support(boxed_logistic):
    with boxed_logistic:
        step = pmm.PoissonMH(poisson_rate=300.0)
        idata = pm.sample(
            step=step, draws=300, tune=300, chains=2, random_seed=3, cores=1,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    stats = sample_stats(idata)
    assert STATS <= set(stats.data_vars)
    batch, kept = stats["batch_size"].values, stats["kept"].values
    expected = 300.0 + step.bounds.total
    np.testing.assert_allclose(stats["expected_batch_size"].values, expected)
    assert expected < 3000 and not stats["fallback"].values.any()
    drawn = batch[batch > 0]  # proposals outside the box are rejected before drawing rows
    assert abs(drawn.mean() - expected) < 5 * np.sqrt(expected / drawn.size)
    assert np.all(kept <= batch)
    # out-of-box proposals count as non-finite and are never accepted
    assert not np.any(stats["nonfinite"].values & stats["accepted"].values)
    beta = posterior(idata)["beta"].values
    assert np.all((beta >= LOW) & (beta <= HIGH))


def test_loose_bounds_warn_and_fall_back_to_full_data():
    with pm.Model() as model:
        beta = pm.Uniform("beta", -5.0, 5.0, shape=2, default_transform=None)
        pm.Bernoulli("y", logit_p=X @ beta, observed=Y)
        with pytest.warns(UserWarning, match="every step uses the full data"):
            step = pmm.PoissonMH(proposal_scale=0.01, rng=1)
        point = model.initial_point()
        point, [stats] = step.step(point)
    assert stats["fallback"] and stats["batch_size"] == 3000
    with model, warnings.catch_warnings():
        warnings.simplefilter("error")
        pmm.PoissonMH(fallback=False)


def test_log_prior_of_the_current_point_is_reused(boxed_logistic):
    with boxed_logistic:
        step = pmm.PoissonMH(poisson_rate=300.0, rng=4)
    step.tune = False
    evaluated, original = [], step.minibatch_model.logprior
    step.minibatch_model.logprior = lambda theta: evaluated.append(theta) or original(theta)
    step.exact_model = step.make_exact_model()  # the kernel's callables are built once
    point, _ = step.step(boxed_logistic.initial_point())  # evaluates the current point too
    outcomes = set()
    for _ in range(60):
        evaluated.clear()
        point, [stats] = step.step(point)
        assert len(evaluated) == 1  # only the proposal
        outcomes.add(bool(stats["accepted"]))
    assert outcomes == {True, False}
