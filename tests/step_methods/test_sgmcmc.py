"""SGLD / SGHMC / SGNHT / SGMGT / SGMGT-D step methods: batches, rules, stats, errors."""

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch import registry
from pymc_minibatch._compat import posterior, sample_stats

RNG = np.random.default_rng(21)
N_ROWS = 800
X = RNG.normal(size=(N_ROWS, 2))
Y = (RNG.random(N_ROWS) < 1 / (1 + np.exp(-X @ np.array([0.7, -0.3])))).astype("int64")
PRESETS = [e.step_class for e in registry.SAMPLERS if e.family == "sgmcmc"]


@pytest.fixture(scope="module")
def logistic():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=2)
        pm.Bernoulli("y", logit_p=X @ beta, observed=Y)
    return model


@pytest.fixture(scope="module")
def normal_mean():
    y = np.random.default_rng(1).normal(2.0, 1.5, size=4000)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 10)
        pm.Normal("y", mu, 1.5, observed=y)
    return model, y


@pytest.fixture(scope="module")
def varying_intercepts():
    """Centred varying intercepts and a slope, Bernoulli-logit rows in 30 groups of 0 to 600
    rows (some of 1 to 4)."""
    rng = np.random.default_rng(5)
    sizes = np.concatenate([[0, 0, 1, 2, 3, 4], rng.integers(20, 600, size=24)])
    groups = np.repeat(np.arange(sizes.size), sizes)
    x = rng.normal(size=groups.size)
    eta = rng.normal(0.0, 1.0, size=sizes.size)[groups] + 0.5 * x
    y = (rng.random(groups.size) < 1 / (1 + np.exp(-eta))).astype("int64")
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        b = pm.Normal("b", 0.0, 1.0)
        a = pm.Normal("a", mu, 0.5, shape=sizes.size)
        pm.Bernoulli("y", logit_p=a[groups] + b * x, observed=y)
    return model, sizes


def _steps(step, point, n):
    stats = []
    for _ in range(n):
        point, [stat] = step.step(point)
        stats.append(stat)
    return point, stats


@pytest.mark.parametrize(
    ("sampler", "expected"),
    [
        (pmm.SGLD, 0.2 / 16),
        (pmm.SGHMC, 0.2 / 16),
        (pmm.SGNHT, 0.5 / 16),
        (pmm.SGMGT, 0.5 / 16),
        (pmm.SGMGTD, 0.5 / 16),
    ],
)
def test_default_step_sizes_follow_the_documented_rules(logistic, sampler, expected):
    with logistic:  # plain gradients: r = N / B - 1 = 15, or 0 with all rows
        step = sampler(batch_size=50, control_variates=False)
        full = sampler(batch_size=N_ROWS)
        with_cv = sampler(batch_size=50)
    assert step.schedule(0) == pytest.approx(expected)
    assert step.precondition and step.laplace is not None
    if sampler in (pmm.SGMGT, pmm.SGMGTD):  # "auto": 10 time units
        assert step.momentum_resample_every == step.thermostat_resample_every == 320
    largest = {pmm.SGLD: 0.2, pmm.SGHMC: 0.2}.get(sampler, 0.1)
    assert not full.control_variates and full.noise_ratio == 0
    assert full.schedule(0) == pytest.approx(largest)
    # control variates: the measured noise is far below N / B - 1 on this posterior
    assert with_cv.control_variates and 0 < with_cv.noise_ratio < 1
    assert with_cv.schedule(0) == pytest.approx(with_cv.default_step_size(with_cv.noise_ratio))
    assert with_cv.schedule(0) > step.schedule(0)


def test_each_epoch_uses_every_row_once(logistic):
    with logistic:
        step = pmm.SGNHT(batch_size=150, step_size=1e-3, rng=3)
    seen = []
    estimate = step.estimate

    def spy(theta, idx):
        seen.append(np.array(idx))
        return estimate(theta, idx)

    step.estimate = spy
    _steps(step, logistic.initial_point(), 10)
    assert all(rows.size == 150 for rows in seen)
    first, second = np.concatenate(seen[:5]), np.concatenate(seen[5:10])
    assert np.unique(first).size == 750 and np.unique(second).size == 750  # 50 left over
    assert not np.array_equal(first, second)


def test_statistics_describe_the_dynamics(logistic):
    with logistic:
        sgld = pmm.SGLD(batch_size=100, rng=0)
        sghmc = pmm.SGHMC(batch_size=100, rng=0)
        sgmgt = pmm.SGMGT(batch_size=100, a=2, momentum_resample_every=5, rng=0)
    point = logistic.initial_point()
    _, [stats] = _steps(sgld, point, 1)
    assert np.isnan(stats["kinetic_energy"]) and np.isnan(stats["thermostat_mean"])
    _, [stats] = _steps(sghmc, point, 1)
    assert np.isfinite(stats["kinetic_energy"]) and np.isnan(stats["thermostat_mean"])
    _, stats = _steps(sgmgt, point, 20)
    resampled = [s["resampled"] for s in stats]
    assert resampled == [(t + 1) % 5 == 0 for t in range(20)]
    rates = np.array([s["resample_accept_rate"] for s in stats])
    assert np.all(np.isnan(rates[~np.array(resampled)]))
    assert np.all((rates[resampled] > 0) & (rates[resampled] <= 1))
    energy = sgmgt.config.kinetics.energy(sgmgt.chain.momentum).sum()
    assert stats[-1]["kinetic_energy"] == pytest.approx(energy)
    assert stats[-1]["thermostat_mean"] == pytest.approx(np.mean(sgmgt.chain.thermostat))
    assert all(s["grad_norm"] > 0 for s in stats)


def test_schedules_and_updates_per_draw_count_updates(logistic):
    schedule = pmm.schedules.polynomial_decay(0.01, b=2.0, power=0.6)
    with logistic:
        step = pmm.SGHMC(batch_size=100, step_size=schedule, updates_per_draw=4, rng=1)
    assert not step.precondition  # a given step size is in the model's units
    _, stats = _steps(step, logistic.initial_point(), 5)
    # the stat is the step of each draw's last update: t = 3, 7, 11, ...
    np.testing.assert_allclose([s["step_size"] for s in stats], schedule(np.arange(3, 20, 4)))
    assert step.chain.updates == 20


@pytest.mark.parametrize("sampler", [pmm.SGLD, pmm.SGMGT])
def test_updates_per_draw_is_the_same_chain_thinned(logistic, sampler):
    def draws(k, n_draws, tune):
        with logistic:
            idata = pm.sample(
                step=sampler(batch_size=100, updates_per_draw=k, momentum_resample_every=7)
                if sampler is pmm.SGMGT
                else sampler(batch_size=100, updates_per_draw=k),
                draws=n_draws, tune=tune, chains=1, random_seed=9, progressbar=False,
                compute_convergence_checks=False,
            )  # fmt: skip
        return posterior(idata)["beta"].values[0], sample_stats(idata)

    thinned, stats = draws(3, 20, 10)
    every, stats_every = draws(1, 60, 30)
    np.testing.assert_array_equal(thinned, every[2::3])
    np.testing.assert_array_equal(
        stats["step_size"].values[0], stats_every["step_size"].values[0, 2::3]
    )
    if sampler is pmm.SGMGT:  # resampled: any of the draw's three updates
        flags = stats_every["resampled"].values[0].reshape(-1, 3).any(axis=1)
        np.testing.assert_array_equal(stats["resampled"].values[0], flags)


def test_a_big_models_updates_take_the_gradient_alone_but_a_draws_last():
    """4100 coefficients (a big model): the thinned chain is the chain of single updates, to
    rounding (its intermediate updates evaluate the gradient without the log density)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 4100)) / 60
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=4100)
        pm.Bernoulli("y", logit_p=x @ beta, observed=rng.integers(0, 2, size=300))

    def draws(k, n_draws):
        with model:
            step = pmm.SGLD(batch_size=100, updates_per_draw=k)
            idata = pm.sample(step=step, draws=n_draws, tune=0, chains=1, random_seed=4,
                              progressbar=False, compute_convergence_checks=False)  # fmt: skip
        assert step.gradient_estimate is not None
        return posterior(idata)["beta"].values[0], sample_stats(idata)["log_density"].values[0]

    thinned, log_density = draws(3, 4)
    every, log_density_every = draws(1, 12)
    np.testing.assert_allclose(thinned, every[2::3], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(log_density, log_density_every[2::3], rtol=1e-9)


def test_small_models_compile_no_gradient_alone(logistic):
    with logistic:
        assert pmm.SGHMC(batch_size=100).gradient_estimate is None


@pytest.mark.parametrize(("sampler", "a"), [(pmm.SGMGT, 1), (pmm.SGMGTD, 2), (pmm.SGMGT, 0.5)])
def test_repr_shows_the_monomial_gamma_kinetics(logistic, sampler, a):
    with logistic:
        step = sampler(batch_size=50, a=a)
    assert repr(step).startswith(f"{sampler.__name__}(batch_size=50, a={a}, control_variates=")
    with logistic:
        assert ", a=" not in repr(pmm.SGHMC(batch_size=50))


def test_preconditioner_is_the_posterior_scale(normal_mean):
    model, y = normal_mean
    with model:
        step = pmm.SGLD(batch_size=200, rng=2)
    posterior_sd = 1 / np.sqrt(y.size / 1.5**2 + 1 / 10**2)
    assert step.preconditioner.to_theta(np.ones(1))[0] == pytest.approx(posterior_sd, rel=1e-3)


@pytest.mark.parametrize("sampler", PRESETS)
def test_chains_start_from_a_laplace_draw_far_from_pymcs_initial_point(normal_mean, sampler):
    model, y = normal_mean
    with model:
        step = sampler(batch_size=200, rng=2)
    point, _ = _steps(step, {"mu": np.array(-50.0)}, 1)
    posterior_sd = 1 / np.sqrt(y.size / 1.5**2)
    assert abs(point["mu"] - y.mean()) < 5 * posterior_sd


@pytest.mark.parametrize("sampler", PRESETS)
@pytest.mark.parametrize(("n_rows", "true_mean"), [(10_000, 2.0), (100_000, 0.5)])
def test_tall_normal_mean_does_not_run_away(sampler, n_rows, true_mean):
    """Issue 14: SGLD(batch_size=100) stopped at update 201 with "moved 1.98e+04
    preconditioned posterior sds": the warm-up stored its anchor in z and the runaway check
    converted it to z a second time. Now the anchor is the mode, in theta."""
    y = np.random.default_rng(3).normal(true_mean, 1.0, size=n_rows)
    with pm.Model():
        mu = pm.Normal("mu", 0, 10)
        pm.Normal("y", mu, 1.0, observed=y)
        idata = pm.sample(
            step=sampler(batch_size=100), draws=300, tune=300, chains=1, random_seed=0,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    draws = posterior(idata)["mu"].values
    assert np.max(np.abs(draws - y.mean())) < 6 / np.sqrt(n_rows)


@pytest.mark.parametrize("sampler", PRESETS)
def test_defaults_are_stable_with_strongly_correlated_predictors(sampler):
    """Ten predictors sharing one factor: a diagonal scaling alone left curvature ~10 in
    z, and the warm-up's step 1/2 and SGLD's step diverged (caught by the benchmark)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1000, 1)) + 0.3 * rng.normal(size=(1000, 10))
    y = (rng.random(1000) < 1 / (1 + np.exp(-x.sum(axis=1) / 4))).astype("int64")
    with pm.Model():
        beta = pm.Normal("beta", 0, 1, shape=10)
        pm.Bernoulli("y", logit_p=pm.math.dot(x, beta), observed=y)
        idata = pm.sample(
            step=sampler(batch_size=40), draws=100, tune=500, chains=1, random_seed=0,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    assert np.all(np.abs(posterior(idata)["beta"].values) < 5)


def test_a_runaway_chain_stops_before_it_overflows(normal_mean):
    model, _ = normal_mean
    with model:  # SGLD is unstable beyond eps = 4 at unit curvature: |z| grows 1.5x per update
        step = pmm.SGLD(batch_size=200, step_size=5.0, precondition=True, rng=0)
        message = "'mu' moved .* preconditioned posterior sds"
        with pytest.raises(pmm.SamplerDivergenceError, match=message):
            pm.sample(step=step, draws=0, tune=400, chains=1, progressbar=False, random_seed=1)


@pytest.mark.parametrize("sampler", PRESETS)
def test_divergence_stops_with_a_clear_error(sampler):
    y = np.random.default_rng(1).poisson(3.0, size=1000)
    with pm.Model():
        log_rate = pm.Normal("log_rate", 0, 10)
        pm.Poisson("y", pm.math.exp(log_rate), observed=y)
        step = sampler(batch_size=100, step_size=1e3, rng=0)
        with pytest.raises(pmm.SamplerDivergenceError, match=r"diverged at update \d+ .*smaller"):
            pm.sample(step=step, draws=200, tune=0, chains=1, progressbar=False, random_seed=1)


def test_a_point_outside_the_support_stops_the_chain():
    with pm.Model():
        sigma = pm.Normal("sigma", 1.0, 0.1)  # unconstrained: negative values give NaN
        pm.Normal("y", 0.0, sigma, observed=np.ones(50))
        step = pmm.SGLD(batch_size=10, step_size=1e-3, rng=0)
    with pytest.raises(pmm.SamplerDivergenceError, match="non-finite log density"):
        step.step({"sigma": np.array(-1.0)})


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: pmm.SGLD(batch_size=0), ValueError, "batch_size must lie"),
        (lambda: pmm.SGLD(batch_size=N_ROWS + 1), ValueError, "batch_size must lie"),
        (lambda: pmm.SGLD(batch_size=10.0), TypeError, "batch_size must be an integer"),
        (lambda: pmm.SGLD(batch_size=10, updates_per_draw=0), ValueError, "updates_per_draw"),
        (lambda: pmm.SGLD(batch_size=10, control_variates="yes"), ValueError, "control_var"),
        (lambda: pmm.SGLD(batch_size=10, stratify="groups"), ValueError, "stratify must be"),
        (lambda: pmm.SGLD(batch_size=10, stratify=True), ValueError, "hierarchical model"),
        (lambda: pmm.SGLD(batch_size=10, step_size=-0.1), ValueError, "positive"),
        (lambda: pmm.SGLD(batch_size=10, step_size="auto"), TypeError, "step_size"),
        (lambda: pmm.SGHMC(batch_size=10, sigma_p=0.0), ValueError, "sigma_p"),
        (lambda: pmm.SGNHT(batch_size=10, sigma_p=-1.0), ValueError, "sigma_p"),
        (lambda: pmm.SGHMC(batch_size=10, sigma_p=1.0, friction=1.0), TypeError, "former"),
        (lambda: pmm.SGMGT(batch_size=10, a=3), ValueError, "monomial parameter a"),
        (lambda: pmm.SGMGT(batch_size=10, c=0.0), ValueError, "softening c"),
        (lambda: pmm.SGMGT(batch_size=10, gamma=-1.0), ValueError, "gamma"),
        (lambda: pmm.SGMGT(batch_size=10, momentum_resample_every=0), ValueError, "resample"),
        (lambda: pmm.SGMGTD(batch_size=10, sigma_xi=0.0), ValueError, "sigma_theta > 0"),
    ],
)
def test_bad_arguments_raise(logistic, make, error, match):
    with logistic, pytest.raises(error, match=match):
        make()


def test_stratified_batches_take_small_groups_whole_and_cut_the_noise(varying_intercepts):
    """A uniform batch of 300 of 7000 rows misses the small groups, whose coordinates'
    noise (about N / (B n_g)) then sets the default step; stratified, it is about 1/m."""
    model, sizes = varying_intercepts
    with model:
        stratified = pmm.SGLD(batch_size=300)
        uniform = pmm.SGLD(batch_size=300, stratify=False)
    strata = stratified.strata
    assert uniform.strata is None and strata.batch_size <= 300
    small = (sizes > 0) & (sizes <= strata.per_group)
    assert strata.per_group >= 4  # the groups of 1 to 4 rows are in every batch
    assert strata.whole.size == sizes[small].sum()
    np.testing.assert_array_equal(np.sort(strata.sizes), np.sort(sizes[sizes > strata.per_group]))
    assert stratified.noise_ratio < 2.0 / strata.per_group
    assert uniform.noise_ratio > 2 * stratified.noise_ratio
    assert stratified.schedule(0) > uniform.schedule(0)
    # without a Laplace fit, "auto" does not pay a pass over the data to find the groups
    with model:
        unfitted = pmm.SGLD(batch_size=300, step_size=1e-4, control_variates=False)
    assert unfitted.laplace is None and unfitted.strata is None


def test_discrete_variables_are_refused():
    with pm.Model():
        k = pm.Poisson("k", 3.0)
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("y", mu + k, 1, observed=np.zeros(20))
        with pytest.raises(ValueError, match="discrete"):
            pmm.SGNHT([k, mu], batch_size=5)


def test_sample_returns_pymc_result_with_our_statistics(logistic):
    with logistic:
        idata = pm.sample(
            step=pmm.SGMGTD(batch_size=100), draws=50, tune=300, chains=2, random_seed=3,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    stats = sample_stats(idata)
    for name in ("step_size", "kinetic_energy", "thermostat_mean", "resampled", "grad_norm"):
        assert stats[name].shape == (2, 50)
    # every draw lies in the posterior's bulk: within 6 sds of the Laplace approximation
    fit = pmm.MinibatchModel(logistic).laplace()
    whitened = fit.preconditioner.to_z(posterior(idata)["beta"].values.reshape(-1, 2) - fit.mode)
    assert np.max(np.abs(whitened)) < 6


def test_thin_is_a_deprecated_name_for_updates_per_draw(logistic):
    with logistic, pytest.warns(FutureWarning, match="updates_per_draw"):
        step = pmm.SGLD(batch_size=50, thin=3)
    assert step.updates_per_draw == 3


@pytest.mark.parametrize(("sampler", "old"), [(pmm.SGHMC, "friction"), (pmm.SGNHT, "diffusion")])
def test_former_names_of_sigma_p_still_work(logistic, sampler, old):
    with logistic, pytest.warns(FutureWarning, match="renamed 'sigma_p'"):
        step = sampler(batch_size=50, **{old: 0.7})
    assert step.config.sigma_p == 0.7
