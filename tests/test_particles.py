"""``pmm.sample_particles``: result type, settings, reproducibility and refusals."""

import warnings

import arviz as az
import matplotlib
import matplotlib.pyplot
import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch._compat import IS_PYMC6, posterior, sample_stats
from pymc_minibatch.model.batch_layout import chosen_strata
from tests.support.networks import N_PARAMETERS, network

matplotlib.use("Agg")

RNG = np.random.default_rng(5)
X = RNG.normal(size=(300, 2))
Y = X @ np.array([0.5, -1.0]) + RNG.normal(size=300)
QUICK = {"n_particles": 12, "n_steps": 20, "progressbar": False}


@pytest.fixture(scope="module")
def model():
    with pm.Model(coords={"coef": ["a", "b"]}) as model:
        beta = pm.Normal("beta", 0.0, 2.0, dims="coef")
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Deterministic("scaled", beta / sigma, dims="coef")
        pm.Normal("y", X @ beta, sigma, observed=Y)
    return model


@pytest.mark.parametrize("method", pmm.particles.METHODS)
def test_result_is_pm_sample_type_with_constrained_values_and_deterministics(model, method):
    idata = pmm.sample_particles(method, model=model, batch_size=50, random_seed=1, **QUICK)
    if IS_PYMC6:
        import xarray as xr

        assert isinstance(idata, xr.DataTree)
    else:
        assert isinstance(idata, az.InferenceData)
    post = posterior(idata)
    assert post["beta"].dims == ("chain", "draw", "coef")
    assert post["beta"].shape == (1, 12, 2)
    assert list(post["coef"].values) == ["a", "b"]
    assert np.all(post["sigma"].values > 0)
    np.testing.assert_allclose(post["scaled"], post["beta"] / post["sigma"], rtol=1e-12)
    stats = sample_stats(idata)
    assert stats["minibatch_logp"].shape == (1, 12)
    for name in ("step_size", "bandwidth", "mean_grad_norm", "mean_velocity_norm", "spread"):
        assert stats[name].dims == ("step",) and stats[name].size == 20
        assert np.all(np.isfinite(stats[name]))
    assert post.attrs["n_particles"] == 12 and post.attrs["batch_size"] == 50


def test_back_transform_equals_the_model_transform(model):
    thetas = np.random.default_rng(2).normal(size=(12, 3))
    idata = pmm.sample_particles(
        "svgd", model=model, init=thetas, precondition=False, step_size=1e-12, **QUICK
    )
    mm = pmm.MinibatchModel(model)
    log_sigma = thetas[:, mm.theta_indices(["sigma"])].ravel()
    np.testing.assert_allclose(posterior(idata)["sigma"].values.ravel(), np.exp(log_sigma))
    beta = thetas[:, mm.theta_indices(["beta"])]
    np.testing.assert_allclose(posterior(idata)["beta"].values[0], beta, atol=1e-9)


def test_summary_and_plot_posterior_work(model):
    """ArviZ 1.x has no plot_posterior: its successor plot_dist is used there."""
    idata = pmm.sample_particles("svgd", model=model, random_seed=3, **QUICK)
    summary = az.summary(idata)
    labels = ["beta[a]", "beta[b]", "sigma", "scaled[a]", "scaled[b]"]
    assert sorted(map(str, summary.index)) == sorted(labels)
    particle_mean = posterior(idata)["sigma"].values.mean()
    assert float(summary.loc["sigma", "mean"]) == pytest.approx(particle_mean, abs=0.01)
    if IS_PYMC6:  # ArviZ 1.x renamed plot_posterior to plot_dist
        az.plot_dist(idata, backend="matplotlib")
    else:
        az.plot_posterior(idata)
    matplotlib.pyplot.close("all")


def test_same_seed_same_particles_and_other_seed_differs(model):
    first, again, other = (
        posterior(
            pmm.sample_particles("pisgld", model=model, batch_size=30, random_seed=s, **QUICK)
        )["beta"].values  # fmt: skip
        for s in (7, 7, 8)
    )
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, other)


@pytest.mark.parametrize(("init", "spread"), [("prior", (5, 100)), ("jitter", (2, 50)),
                                              ("laplace", (0.5, 1.5))])  # fmt: skip
def test_initialisations(model, init, spread):
    """The spread at the first step, in preconditioned units (Laplace sds): about 1 from
    the Laplace approximation, wider from the prior (sds 2) and the jitter (width 2)."""
    idata = pmm.sample_particles("svgd", model=model, init=init, random_seed=4, **QUICK)
    first_spread = float(sample_stats(idata)["spread"].values[0])
    assert spread[0] < first_spread < spread[1]


def test_adagrad_and_schedule_are_accepted(model):
    idata = pmm.sample_particles(
        "wsgld_blob", model=model, adagrad=True, step_size=pmm.schedules.polynomial_decay(0.01),
        random_seed=5, **QUICK,
    )  # fmt: skip
    steps = sample_stats(idata)["step_size"].values
    np.testing.assert_allclose(steps, 0.01 * (1.0 + np.arange(20)) ** -0.55)


def test_default_schedule_decays_to_the_noise_budget(model):
    """With r = N / B - 1 = 9 the final step is 0.005 / 9; constant over the first half."""
    idata = pmm.sample_particles("svgd", model=model, batch_size=30, random_seed=6,
                                 control_variates=False, **QUICK)  # fmt: skip
    steps = sample_stats(idata)["step_size"].values
    np.testing.assert_allclose(steps[:10], 0.05)
    assert steps[-1] == pytest.approx(0.005 / 9)
    assert np.all(np.diff(steps[10:]) < 0)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"method": "sgld"}, ValueError, "method must be one of"),
        ({"n_particles": 1}, ValueError, "n_particles"),
        ({"n_particles": "many"}, ValueError, "n_particles"),
        ({"n_particles": True}, ValueError, "n_particles"),
        ({"n_particles": 10.0}, ValueError, "n_particles"),
        ({"n_particles": "many"}, ValueError, "at least 2 or 'auto'"),
        ({"n_steps": 0}, ValueError, "n_steps"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"batch_size": 301}, ValueError, "batch_size"),
        ({"batch_size": 2.5}, TypeError, "batch_size"),
        ({"step_size": -1.0}, ValueError, "step size"),
        ({"step_size": "big"}, TypeError, "step_size"),
        ({"bandwidth_scale": 0.0}, ValueError, "bandwidth_scale"),
        ({"kernel": "matern"}, ValueError, "kernel must be one of"),
        ({"kernel": "coordinates", "method": "wsgld"}, ValueError, "is SVGD's"),
        ({"wasserstein_weight": -1.0}, ValueError, "wasserstein_weight"),
        ({"entropic_reg": np.inf}, ValueError, "entropic_reg"),
        ({"gamma": 0.1, "wasserstein_weight": 0.1}, TypeError, "former name"),
        ({"momentum": 1.0}, ValueError, "momentum must be"),
        ({"momentum": -0.1}, ValueError, "momentum must be"),
        ({"momentum": True}, ValueError, "momentum must be"),
        ({"momentum": "fast"}, ValueError, "momentum must be"),
        ({"init": "map"}, ValueError, "init must be"),
        ({"stratify": "groups"}, ValueError, "stratify must be"),
        ({"stratify": True}, ValueError, "hierarchical model"),
        ({"init": np.zeros((3, 3))}, ValueError, "shape"),
        ({"init": np.full((12, 3), np.nan)}, ValueError, "non-finite"),
    ],
)
def test_bad_arguments_are_refused(model, kwargs, error, match):
    kwargs = {"method": "svgd", **QUICK, **kwargs}
    with pytest.raises(error, match=match):
        pmm.sample_particles(model=model, **kwargs)


def test_hierarchical_models_get_momentum_and_a_longer_check(model):
    """``momentum="auto"``: the heavy ball for SVGD when rows touch one group's parameters
    each (``GROUP_MOMENTUM``) and a batch holds at least one row in
    ``MOMENTUM_NOISE_LIMIT + 1``, plain steps otherwise; a given value is used as is. The
    answer check there averages enough batches for ``CHECK_ROWS_PER_GROUP`` rows per group,
    ``CHECK_BATCHES`` elsewhere, one when a batch holds every row."""
    groups = np.arange(300) % 6
    with pm.Model() as hierarchical:
        tau = pm.HalfNormal("tau", 1.0)
        a = pm.Normal("a", 0.0, tau, shape=6)
        pm.Normal("y", a[groups] + X[:, 0], 1.0, observed=Y + 0.5 * groups)

    def momentum(method, on, **settings):
        idata = pmm.sample_particles(method, model=on, random_seed=0, **QUICK, **settings)
        return posterior(idata).attrs["momentum"]

    assert momentum("svgd", hierarchical) == pmm.particles.GROUP_MOMENTUM
    limit = pmm.particles.MOMENTUM_NOISE_LIMIT
    assert 300 / 3 - 1 <= limit < 300 / 2 - 1  # batches of 3 rows keep it, of 2 not
    assert momentum("svgd", hierarchical, batch_size=3) == pmm.particles.GROUP_MOMENTUM
    assert momentum("svgd", hierarchical, batch_size=2) == 0.0
    assert momentum("wsgld_blob", hierarchical) == 0.0
    assert momentum("svgd", model) == 0.0
    assert momentum("svgd", model, momentum=0.5) == 0.5

    def check_batches(on, batch_size):
        minibatch_model = pmm.MinibatchModel(on)
        minibatch_model.laplace()  # the structure, as sample_particles has it then
        return pmm.particles._check_batch_count(minibatch_model, batch_size)

    assert check_batches(hierarchical, 10) == 12  # 20 rows for each of 6 groups
    assert check_batches(hierarchical, 100) == pmm.particles.CHECK_BATCHES
    assert check_batches(hierarchical, 300) == 1
    assert check_batches(model, 10) == pmm.particles.CHECK_BATCHES


def test_hierarchical_models_get_stratified_batches(model):
    """``stratify="auto"``: batches stratified by group where the Laplace fit finds groups
    and a batch is smaller than the data; uniform with ``stratify=False``, elsewhere, or
    when a batch holds every row. The small group's rows are in every stratified batch."""
    groups = np.concatenate([np.arange(294) % 6, [6, 6, 6, 6, 6, 6]])  # group 6: 6 rows
    with pm.Model() as hierarchical:
        tau = pm.HalfNormal("tau", 1.0)
        a = pm.Normal("a", 0.0, tau, shape=7)
        pm.Normal("y", a[groups] + X[:, 0], 1.0, observed=Y + 0.5 * groups)

    def run(on, **settings):
        idata = pmm.sample_particles("svgd", model=on, random_seed=0, **QUICK, **settings)
        return posterior(idata)

    stratified = run(hierarchical, batch_size=60)
    assert stratified.attrs["stratified"] == 1
    uniform = run(hierarchical, batch_size=60, stratify=False)
    assert uniform.attrs["stratified"] == 0
    assert not np.allclose(stratified["a"].values, uniform["a"].values)
    assert run(hierarchical, batch_size=300).attrs["stratified"] == 0
    assert run(model, batch_size=60).attrs["stratified"] == 0
    strata = chosen_strata("auto", pmm.MinibatchModel(hierarchical), 60, fitted=True)
    assert set(np.flatnonzero(groups == 6)) <= set(strata.whole)


def test_svgd_takes_more_particles_by_default_on_many_groups(model):
    """``n_particles="auto"``: ``GROUP_PARTICLES`` for SVGD from ``MANY_GROUPS`` groups on,
    ``DEFAULT_PARTICLES`` otherwise (and for the other methods); a count is used as is."""
    many = pmm.particles.MANY_GROUPS
    groups = np.arange(2 * many) % many
    with pm.Model() as many_groups:
        a = pm.Normal("a", 0.0, 1.0, shape=many)
        pm.Normal("y", a[groups], 1.0, observed=np.zeros(2 * many))
    with pm.Model() as fewer_groups:
        a = pm.Normal("a", 0.0, 1.0, shape=many - 1)
        pm.Normal("y", a[groups % (many - 1)], 1.0, observed=np.zeros(2 * many))
    count = pmm.particle_settings.particle_count
    with_many = pmm.MinibatchModel(many_groups)
    assert count("auto", "svgd", with_many) == pmm.particles.GROUP_PARTICLES == 200
    assert count("auto", "wsgld_blob", with_many) == pmm.particles.DEFAULT_PARTICLES == 100
    assert count("auto", "svgd", pmm.MinibatchModel(fewer_groups)) == 100
    assert count(30, "svgd", with_many) == 30
    idata = pmm.sample_particles("svgd", model=model, random_seed=0,
                                 **{**QUICK, "n_particles": "auto"})  # fmt: skip
    assert posterior(idata).attrs["n_particles"] == 100
    assert posterior(idata).sizes["draw"] == 100


@pytest.mark.filterwarnings("ignore::pymc_minibatch.ParticlesNotSettledWarning")  # 3 steps
def test_svgd_keeps_the_joint_kernel_on_a_model_too_big_for_the_exact_fit(model):
    """``kernel="auto"``: the kernel per coordinate from more coordinates than particles on,
    but the joint kernel (``BIG_MODEL_KERNEL``) on a network preconditioned by the diagonal
    fit, however many its coordinates, with SVGD's bandwidth scale; the result's attrs say
    which. The kernel per coordinate is still there on request."""
    kernel = pmm.particle_settings.chosen_kernel
    assert kernel("auto", "svgd", 2, pmm.MinibatchModel(model)) == "coordinates"  # 3 > 2
    assert kernel("auto", "svgd", 12, pmm.MinibatchModel(model)) == "joint"
    big = network(n_rows=300)
    assert N_PARAMETERS > 20 and not pmm.MinibatchModel(big).laplace_is_exact()
    assert kernel("auto", "svgd", 20, pmm.MinibatchModel(big)) == "joint"
    attrs = {}
    for choice in ("auto", "coordinates"):
        idata = pmm.sample_particles("svgd", kernel=choice, n_steps=3, model=big, random_seed=1,
                                     progressbar=False)  # fmt: skip
        attrs[choice] = posterior(idata).attrs
    assert pmm.particle_settings.BIG_MODEL_KERNEL == "joint"
    assert (attrs["auto"]["kernel"], attrs["auto"]["n_particles"]) == ("joint", 20)
    assert attrs["auto"]["bandwidth_scale"] == pmm.particles.DEFAULT_BANDWIDTH_SCALE["svgd"]
    assert (attrs["coordinates"]["kernel"], attrs["coordinates"]["bandwidth_scale"]) == (
        "coordinates", 1.0)


def test_momentum_moves_the_particles_and_is_reproducible(model):
    runs = [
        posterior(pmm.sample_particles("svgd", model=model, random_seed=4, momentum=beta,
                                       **QUICK))["beta"].values  # fmt: skip
        for beta in (0.0, 0.9, 0.9)
    ]
    assert not np.allclose(runs[0], runs[1])
    np.testing.assert_array_equal(runs[1], runs[2])


@pytest.mark.parametrize(("old", "new"), [("gamma", "wasserstein_weight"), ("lam", "entropic_reg")])
def test_former_names_still_work(model, old, new):
    kwargs = {"method": "wsgld", **QUICK, "random_seed": 3}
    with pytest.warns(FutureWarning, match=f"renamed '{new}'"):
        former = pmm.sample_particles(model=model, **kwargs, **{old: 0.3})
    current = pmm.sample_particles(model=model, **kwargs, **{new: 0.3})
    np.testing.assert_array_equal(posterior(former)["beta"], posterior(current)["beta"])


def test_discrete_variables_are_refused():
    with pm.Model() as model:
        k = pm.Poisson("k", 3.0)
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu + k, 1.0, observed=Y)
    with pytest.raises(ValueError, match="discrete free variables"):
        pmm.sample_particles(model=model, **QUICK)


def test_non_factorising_likelihood_is_refused():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.MvNormal("y", mu * np.ones(300), np.eye(300), observed=Y)
    with pytest.raises(pmm.NonFactorizableError):
        pmm.sample_particles(model=model, **QUICK)


def test_divergence_names_the_step_and_the_remedy():
    counts = np.random.default_rng(0).poisson(20.0, size=200)
    with pm.Model() as model:
        log_rate = pm.Normal("log_rate", 0.0, 1.0)
        pm.Poisson("y", pm.math.exp(log_rate), observed=counts)
    with pytest.raises(
        pmm.SamplerDivergenceError, match=r"diverged at step \d+.*smaller step_size"
    ):
        pmm.sample_particles(
            "svgd", model=model, precondition=False, step_size=1.0, init="jitter", **QUICK
        )


@pytest.fixture(scope="module")
def flat_priors():
    """``y ~ N(mu, s)`` with ``Flat`` and ``HalfFlat`` priors, which PyMC cannot draw from."""
    y = np.random.default_rng(0).normal(3.0, 2.0, size=20_000)
    with pm.Model() as model:
        pm.Flat("mu")
        s = pm.HalfFlat("s")
        pm.Normal("y", model["mu"], s, observed=y)
    return model, y


@pytest.mark.parametrize("method", ["svgd", "pisgld"])
def test_laplace_start_needs_no_prior_draws(flat_priors, method):
    """Issue 14: "Cannot sample from half_flat variable" although the default start is the
    Laplace approximation; the mode search now starts at the model's initial point."""
    model, y = flat_priors
    with warnings.catch_warnings():
        warnings.simplefilter("error", pmm.particles.ParticlesNotSettledWarning)
        idata = pmm.sample_particles(method, n_particles=50, n_steps=300, random_seed=1,
                                     model=model, progressbar=False)  # fmt: skip
    post = posterior(idata)
    posterior_sd = y.std() / np.sqrt(y.size)
    assert abs(float(post["mu"].mean()) - y.mean()) < 0.25 * posterior_sd
    assert abs(float(post["mu"].std()) / posterior_sd - 1) < 0.25
    assert abs(float(post["s"].mean()) - y.std()) < 0.25 * posterior_sd / np.sqrt(2)


@pytest.mark.parametrize("method", pmm.particles.METHODS)
def test_a_run_stopped_far_from_the_posterior_warns(flat_priors, method):
    """30 steps from pm.sample's jitter start (hundreds of sds from the mode), with the
    default schedule shrinking the last moves: the particles are still being pushed."""
    model, _ = flat_priors
    with pytest.warns(pmm.particles.ParticlesNotSettledWarning, match="had not settled") as caught:
        pmm.sample_particles(method, n_particles=50, n_steps=30, init="jitter",
                             random_seed=1, model=model, progressbar=False)  # fmt: skip
    assert caught[0].filename == __file__  # the warning points at the caller's line


def test_the_kernel_per_coordinate_moves_with_its_linear_part(monkeypatch):
    """``kernel="coordinates"`` adds ``linear_svgd_velocity``: on a conjugate regression of
    20 coefficients with 30 particles (all rows, so exact gradients and the exact
    posterior), the particles' variances average 1.00 of the posterior's with it and 0.93
    without (seed 2; the same narrowing as in ``LINEAR_WEIGHT``'s figures, larger with
    fewer particles)."""
    rng = np.random.default_rng(3)
    design = rng.normal(size=(200, 20))
    observed = design @ rng.normal(size=20) + rng.normal(size=200)
    with pm.Model() as regression:
        beta = pm.Normal("beta", 0.0, 1.0, shape=20)
        pm.Normal("y", design @ beta, 1.0, observed=observed)
    exact_variances = np.diag(np.linalg.inv(design.T @ design + np.eye(20)))

    def variance_ratio():
        idata = pmm.sample_particles("svgd", model=regression, n_particles=30, kernel="coordinates",
                                     batch_size=200, random_seed=2, progressbar=False)  # fmt: skip
        draws = posterior(idata)["beta"].values[0]
        return np.mean(draws.var(axis=0) / exact_variances)

    with_linear = variance_ratio()
    monkeypatch.setattr(pmm.kernels.particle_velocities, "LINEAR_WEIGHT", 0.0)
    without = variance_ratio()
    assert abs(with_linear - 1.0) < 0.02 and 0.91 < without < 0.95, (with_linear, without)
