"""Second-order bounds on a trust region: they hold for every row at any pair of points in
the region, a pair with a point outside takes the full-data step, and what is not
supported is refused by name."""

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch.bounds import Bounds
from pymc_minibatch.kernels.exact_mh import ExactModel, Move, Params
from pymc_minibatch.kernels.tfmh import tfmh_rule
from pymc_minibatch.kernels.tuna import single_group, tuna_rule
from pymc_minibatch.model.expansions import default_group_radius
from pymc_minibatch.model.region import default_radius

RNG = np.random.default_rng(31)
N = 600
X = RNG.normal(0.5, 1.0, size=(N, 2))
GROUP = RNG.integers(0, 4, size=N)


def normal_scale():
    y = 1.0 + X @ [0.6, -0.4] + 0.5 * RNG.normal(size=N)
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0, 5)
        beta = pm.Normal("beta", 0, 2, shape=2)
        sigma = pm.HalfNormal("sigma", 2)
        pm.Normal("y", alpha + X @ beta, sigma, observed=y)
    return model


def heteroscedastic():
    """The log-scale is itself a linear predictor."""
    y = X[:, 0] + np.exp(-0.5 + 0.3 * X[:, 1]) * RNG.normal(size=N)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2)
        gamma = pm.Normal("gamma", 0, 2, shape=2)
        pm.Normal("y", beta * X[:, 0], pm.math.exp(gamma[0] + gamma[1] * X[:, 1]), observed=y)
    return model


def poisson():
    counts = RNG.poisson(np.exp(0.8 + X @ [0.3, -0.2]))
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0, 5)
        beta = pm.Normal("beta", 0, 2, shape=2)
        pm.Poisson("counts", pm.math.exp(alpha + X @ beta), observed=counts)
    return model


def lognormal():
    y = np.exp(0.3 + 0.5 * X[:, 0] + 0.4 * RNG.normal(size=N))
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0, 5)
        beta = pm.Normal("beta", 0, 2)
        sigma = pm.Exponential("sigma", 1.0)
        pm.LogNormal("y", alpha + beta * X[:, 0], sigma, observed=y)
    return model


def robust():
    y = 0.5 + X[:, 0] + 0.6 * RNG.standard_t(4, size=N)
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0, 5)
        beta = pm.Normal("beta", 0, 2)
        sigma = pm.HalfNormal("sigma", 2)
        pm.StudentT("y", nu=4, mu=alpha + beta * X[:, 0], sigma=sigma, observed=y)
    return model


def cauchy():
    y = X[:, 1] + 0.3 * RNG.standard_cauchy(size=N)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2)
        scale = pm.HalfNormal("scale", 2)
        pm.Cauchy("y", alpha=beta * X[:, 1], beta=scale, observed=y)
    return model


def varying_intercepts_two_observed():
    """Group intercepts (centred) in a Normal with a free scale, next to Bernoulli rows."""
    y = np.array([0.0, 1.0, 2.0, 3.0])[GROUP] + 0.8 * RNG.normal(size=N)
    flags = (RNG.random(N) < 0.3).astype("int64")
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfNormal("tau", 2)
        a = pm.Normal("a", mu, tau, shape=4)
        sigma = pm.HalfNormal("sigma", 2)
        gamma = pm.Normal("gamma", 0, 2)
        pm.Normal("y", a[GROUP], sigma, observed=y)
        pm.Bernoulli("flag", logit_p=gamma + 0.5 * X[:, 0], observed=flags)
    return model


def lognormal_fixed_scale():
    """Exactly quadratic in its location: no region, and no row is ever evaluated."""
    y = np.exp(0.3 + 0.5 * X[:, 0] + 0.4 * RNG.normal(size=N))
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2)
        pm.LogNormal("y", beta * X[:, 0], 0.4, observed=y)
    return model


def test_lognormal_with_a_fixed_scale_needs_no_region():
    with lognormal_fixed_scale():
        step = pmm.TunaMH()
    assert step.bounds.region_radius is None and step.bounds.total == 0.0
    assert repr(step) == "TunaMH(expansion_order=2, proposal='pcn', rho=tuned)"


BUILDERS = [normal_scale, heteroscedastic, poisson, lognormal, robust, cauchy,
            varying_intercepts_two_observed]  # fmt: skip


def _ball_point(step, radius, rng):
    """A point ``theta`` with ``||z|| = radius`` in a random direction."""
    direction = rng.normal(size=step.minibatch_model.ndim)
    z = radius * direction / np.linalg.norm(direction)
    return step.bounds.center + step.proposal_chol @ z


@pytest.mark.slow
@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("build", BUILDERS)
def test_bounds_hold_for_every_row_inside_the_region(build, order):
    """Pairs inside the ball, up to its boundary (where the residuals are largest), on every
    row: ``|r_i(theta') - r_i(theta)| <= c_i M(theta, theta')`` for the residuals of order 1
    (Taylor metric) and 2 (cubic metric)."""
    with build():
        step = pmm.TunaMH(expansion_order=order)
    bounds, residuals = step.bounds, step.residuals
    assert bounds.order == order
    structure = step.minibatch_model.structure()
    # with groups, the region bounds each group's coordinates with the shared ones
    expected = (default_group_radius(structure) if structure.local.size
                else default_radius(step.minibatch_model.ndim))  # fmt: skip
    assert bounds.region_radius == pytest.approx(expected)
    rows = np.arange(N)
    # each row's metric: its group's (the last entry: rows in no group)
    row_metric = 0 if bounds.groups is None else np.where(bounds.groups >= 0, bounds.groups, -1)
    rng = np.random.default_rng(0)
    largest = 0.0
    for fraction in (0.1, 0.5, 1.0):
        for _ in range(15):
            theta, theta2 = (_ball_point(step, fraction * bounds.region_radius * rng.uniform(),
                                         rng) for _ in range(2))  # fmt: skip
            assert bounds.inside_region(theta) and bounds.inside_region(theta2)
            current, proposed = residuals.row_pair(theta, theta2, rows)
            m = bounds.metrics(theta, theta2)[row_metric]
            ratio = np.abs(proposed - current) / (bounds.c * m)
            largest = max(largest, float(np.nanmax(ratio)))
    assert largest <= 1.0 + 1e-9
    assert largest > 1e-3  # the residuals are not trivially zero


@pytest.mark.parametrize("sampler", [pmm.TunaMH, pmm.TFMH])
def test_a_pair_with_a_point_outside_takes_the_full_data_step(sampler):
    with poisson():
        step = sampler(rng=1)
    step.started = True  # step from the given points, not from a Laplace draw
    radius = step.bounds.region_radius
    rng = np.random.default_rng(2)
    mm = step.minibatch_model
    for theta_radius in (1.5 * radius, 0.5 * radius):
        point = mm.point_from_theta(_ball_point(step, theta_radius, rng))
        _, (stats,) = step.step(point)
        outside = theta_radius > radius
        assert stats["outside_region"] == outside
        assert (stats["batch_size"] == N) == outside


def test_kernels_take_the_full_data_step_without_drawing_rows():
    def no_rows(theta, theta2, idx):
        raise AssertionError("a full-data step drew rows")

    def full_loglik(theta):
        return -0.3 * theta[0]

    bounds = single_group(np.ones(10), 10.0, lambda rng, size: np.zeros(size, dtype=int))
    rng = np.random.default_rng(0)
    model = ExactModel(lambda theta: 0.0, row_pair=no_rows, full_loglik=full_loglik)
    move = Move(np.zeros(1), np.ones(1), np.array([0.5]), True, 0.0, model)
    params = Params(rows=bounds, n_data=10, chi=1.0)
    tuna = tuna_rule(rng, 0.1, move, params)
    assert tuna.fallback and tuna.batch_size == 10 and tuna.accept == pytest.approx(np.exp(-0.2))
    tfmh = tfmh_rule(rng, 0.1, move, params)
    assert tfmh.batch_size == 10 and tfmh.accept == pytest.approx(np.exp(-0.2))


def test_region_arguments_are_checked():
    with poisson(), pytest.raises(ValueError, match="trust_region must be a positive"):
        pmm.TunaMH(trust_region=-1.0)
    with pytest.raises(ValueError, match="region_radius must be positive and needs center="):
        Bounds(np.ones(3), center=np.zeros(2), region_radius=5.0)
    with pytest.raises(ValueError, match="region_radius must be positive"):
        Bounds(np.ones(3), center=np.zeros(2), region_whiten=np.eye(2), region_radius=0.0)


def _student_t_free_nu():
    pm.StudentT("y", nu=pm.Gamma("nu", 2, 0.1), mu=X @ pm.Normal("b", 0, 1, shape=2),
                sigma=pm.HalfNormal("s"), observed=RNG.normal(size=N))  # fmt: skip


def _poisson_identity_link():
    pm.Poisson("y", mu=pm.math.log1pexp(X @ pm.Normal("b", 0, 1, shape=2)),
               observed=RNG.poisson(2.0, size=N))  # fmt: skip


def _scale_with_interval_transform():
    pm.Normal("y", X @ pm.Normal("b", 0, 1, shape=2), pm.Uniform("s", 0.0, 10.0),
              observed=RNG.normal(size=N))  # fmt: skip


def _row_scaled_group_effect():
    """A group scale that varies by row is not recentred (``mu + tau * z[g]`` is)."""
    groups = np.arange(N) % 5
    mu, tau = pm.Normal("mu", 0, 1), pm.HalfNormal("tau", 1)
    z = pm.Normal("z", 0, 1, shape=5)
    x = RNG.uniform(0.5, 1.5, size=N)
    pm.Bernoulli("y", logit_p=mu + tau * x * z[groups], observed=RNG.integers(0, 2, size=N))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (_row_scaled_group_effect, "'y' is not linear.*varies by row.*write it centred"),
        (_student_t_free_nu, "'y' .StudentTRV.: its scale/shape.*trust-region bounds exist"),
        (_poisson_identity_link, "'y' is not linear.*Poisson.mu=exp.eta.."),
        (_scale_with_interval_transform, "'y' is not linear.*log transform"),
    ],
)
def test_what_the_region_does_not_cover_is_refused_by_name(build, message):
    with pm.Model():
        build()
        with pytest.raises(pmm.BoundsUnavailableError, match=message):
            pmm.TunaMH()
