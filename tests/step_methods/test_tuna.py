"""TunaMH and TFMH step methods: statistics, hyperparameter checks, non-finite proposals."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_minibatch as pmm
from pymc_minibatch._compat import sample_stats
from pymc_minibatch.bounds import BOUND_TOLERANCE

RNG = np.random.default_rng(8)
X = RNG.normal(size=(3000, 2))
Y = (RNG.random(3000) < 1 / (1 + np.exp(-X @ np.array([1.0, -0.5])))).astype("int64")
TUNA_STATS = {
    "accept", "accepted", "batch_size", "kept", "expected_batch_size", "fallback",
    "proposal_scale", "chi", "bound_ratio", "nonfinite",
}  # fmt: skip


@pytest.fixture(scope="module")
def logistic():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=2)
        pm.Bernoulli("y", logit_p=X @ beta, observed=Y)
    return model


def test_tuna_sample_stats_and_tuned_chi(logistic):
    with logistic:
        idata = pm.sample(
            step=pmm.TunaMH(), draws=300, tune=300, chains=2, random_seed=3,
            progressbar=False, compute_convergence_checks=False, cores=1,
        )  # fmt: skip
    stats = sample_stats(idata)
    assert TUNA_STATS <= set(stats.data_vars)
    batch, kept = stats["batch_size"].values, stats["kept"].values
    assert np.all(kept <= batch)
    minibatch = (batch > 0) & ~stats["fallback"].values  # a fallback step reports NaN
    assert np.all(stats["bound_ratio"].values[minibatch] <= 1.0 + BOUND_TOLERANCE)
    chi = stats["chi"].values
    assert np.all(chi == chi[:, :1]) and np.all(chi > 0)  # frozen after tuning
    # off fallback steps the Poisson batch averages its expected size (sd ~ sqrt(lambda / n))
    lam = stats["expected_batch_size"].values[~stats["fallback"].values]
    batch = batch[~stats["fallback"].values]
    assert abs(batch.mean() - lam.mean()) < 5 * np.sqrt(lam.mean() / batch.size)


def test_fallback_to_full_mh_when_batch_would_exceed_n(logistic):
    with logistic:
        step = pmm.TunaMH(chi=1e6, proposal_scale=0.05, rng=1)  # lambda far above N
        step.tune = False
        point = logistic.initial_point()
        point, [stats] = step.step(point)
    assert stats["fallback"] and stats["batch_size"] == 3000


def test_tfmh_stats(logistic):
    with logistic:
        step = pmm.TFMH(proposal_scale=1e-3, rng=1)
        _, [stats] = step.step(logistic.initial_point())
    assert {"accept", "batch_size", "expected_batch_size", "bound_ratio"} <= set(stats)
    assert 0.0 <= stats["accept"] <= 1.0


@pytest.mark.parametrize("chi", [0.0, -1.0, np.inf, np.nan])
def test_invalid_chi_raises(logistic, chi):
    with logistic, pytest.raises(ValueError, match="chi"):
        pmm.TunaMH(chi=chi)


@pytest.mark.parametrize("sampler", [pmm.TunaMH, pmm.TFMH])
def test_nonfinite_proposals_are_rejected_and_counted(sampler):
    with pm.Model():
        beta = pm.Normal("beta", 0, 2, shape=2)
        # -inf for beta[0] < 1 (the posterior mean): such proposals are rejected and counted
        pm.Potential("wall", pt.switch(beta[0] < 1.0, -np.inf, 0.0))
        pm.Bernoulli("y", logit_p=X @ beta, observed=Y)
        # the initial point is behind the wall: no mode search, PyMC's start and scale
        step = sampler(proposal_scale=0.05, proposal_cov=None, expansion_order=0, rng=1)
        step.tune = False
        point = {"beta": np.array([1.02, -0.5])}
        flags = []
        for _ in range(100):
            point, [stats] = step.step(point)
            flags.append(stats["nonfinite"])
            assert point["beta"][0] >= 1.0
            assert not (stats["nonfinite"] and stats["accepted"])
    assert 10 < sum(flags) < 90


def test_flymc_refuses_what_it_cannot_bound():
    with pm.Model():
        beta = pm.Normal("beta", 0, 2, shape=2)
        pm.Normal("y", X @ beta, 1.0, observed=Y.astype(float))
        with pytest.raises(pmm.BoundsUnavailableError, match="observed variable 'y' is NormalRV"):
            pmm.FlyMC()
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=2)
        scale = pm.HalfNormal("scale")
        pm.Bernoulli("y", logit_p=scale * (X @ beta), observed=Y)
        with pytest.raises(ValueError, match="every continuous free variable"):
            pmm.FlyMC([beta])
    with model, pytest.raises(ValueError, match="xi"):
        pmm.FlyMC(xi=-1.0)


def test_flymc_stats_and_bright_rows_reset_per_chain(logistic):
    with logistic:
        step = pmm.FlyMC(rng=2)
        idata = pm.sample(
            step=step, draws=100, tune=100, chains=2, random_seed=3, cores=1,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    stats = sample_stats(idata)
    n_bright = stats["n_bright"].values
    # MAP-tuned bounds are tight: only a few rows are bright at a time
    assert np.all(n_bright < 3000) and n_bright.mean() < 0.05 * 3000
    assert np.all(stats["batch_size"].values >= n_bright)


GROUP_STATS = {"group_accept", "shared_accept", "population_accept", "group_rho", "group_chi"}


@pytest.fixture(scope="module")
def centred_intercepts():
    from tests.support.zoo_hierarchical import intercepts_logistic

    return intercepts_logistic(30, 5000, centred=True)


def _sample(model, step, seed=5):
    with model:
        return pm.sample(step=step, draws=100, tune=200, chains=1, random_seed=seed,
                         progressbar=False, compute_convergence_checks=False)  # fmt: skip


def test_a_hierarchical_model_is_stepped_by_blocks(centred_intercepts):
    with centred_intercepts:
        step = pmm.TunaMH()
    assert repr(step).endswith("group_moves=True)")
    stats = sample_stats(_sample(centred_intercepts, step))
    assert (TUNA_STATS | GROUP_STATS) <= set(stats.data_vars)
    for name in ("group_accept", "shared_accept", "population_accept"):
        values = stats[name].values
        assert np.all((values >= 0) & (values <= 1)) and 0 < values.mean() < 1, name
    assert np.all(stats["bound_ratio"].values <= 1.0 + BOUND_TOLERANCE)
    tuned = stats["group_rho"].values[0]
    assert np.all(tuned == tuned[0])  # frozen after tuning
    first, again = (_sample(centred_intercepts, pmm.TunaMH(model=centred_intercepts), seed=9)
                    for _ in range(2))  # fmt: skip
    np.testing.assert_array_equal(first.posterior["a"].values, again.posterior["a"].values)


def test_a_hierarchical_model_matched_exactly_by_its_expansion_draws_no_rows():
    """A Normal likelihood of known scale is quadratic in the parameters: its second-order
    expansion is exact, every row's bound is 0, and the groups' row sampler holds no weight
    (it raised before). The steps then read no row and still move."""
    rng = np.random.default_rng(11)
    groups = rng.integers(0, 6, size=400)
    y = rng.normal(size=6)[groups] + rng.normal(0.0, 0.5, size=400)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        tau = pm.HalfNormal("tau", 1.0)
        a = pm.Normal("a", mu, tau, shape=6)
        pm.Normal("y", a[groups], 0.5, observed=y)
        step = pmm.TunaMH()
    assert step.group_moves is not None and not np.any(step.bounds.c)
    stats = sample_stats(_sample(model, step))
    assert np.all(stats["batch_size"].values == 0)
    assert 0.2 < stats["group_accept"].values.mean() <= 1.0


def test_group_moves_can_be_turned_off(centred_intercepts):
    step = pmm.TunaMH(group_moves=False, model=centred_intercepts)
    assert "group_moves" not in repr(step)
    stats = sample_stats(_sample(centred_intercepts, step))
    assert np.all(np.isnan(stats["group_accept"].values))


def test_group_moves_are_refused_where_they_cannot_run(logistic):
    with pytest.raises(ValueError, match="no groups"):
        pmm.TunaMH(group_moves=True, model=logistic)
    with pytest.raises(ValueError, match="group_moves must be"):
        pmm.TunaMH(group_moves="yes", model=logistic)


def test_group_moves_pickle_with_their_step(centred_intercepts):
    import cloudpickle

    step = pmm.TunaMH(model=centred_intercepts)
    theta = step.laplace.draw(np.random.default_rng(0))
    moves = step.group_moves
    restored = cloudpickle.loads(cloudpickle.dumps(step)).group_moves  # as for chain processes
    np.testing.assert_allclose(restored.split_prior(theta), moves.split_prior(theta), rtol=1e-12)
    np.testing.assert_allclose(restored.group_precisions(theta), moves.group_precisions(theta),
                               rtol=1e-12)  # fmt: skip


def test_group_moves_sampling_state_round_trip_restores_the_sweep(centred_intercepts):
    """The sweep's tuning is per-chain state: restored, the chain repeats its steps (the
    contract tests' models have no groups)."""
    from pymc.step_methods.state import equal_dataclass_values

    step = pmm.TunaMH(model=centred_intercepts, rng=0)
    point = centred_intercepts.initial_point()
    for _ in range(20):
        point, _ = step.step(point)
    saved = step.sampling_state
    assert saved.sweep_tuning.population.adaptation.count > 0  # tuned, so the test has power
    continued = [step.step(point)[0]["a"] for _ in range(10)]
    step.sampling_state = saved
    assert equal_dataclass_values(step.sampling_state, saved)
    replayed = [step.step(point)[0]["a"] for _ in range(10)]
    np.testing.assert_array_equal(continued, replayed)
