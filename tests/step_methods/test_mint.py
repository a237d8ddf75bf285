"""MINT and CMINT step methods: the stored estimate, statistics, attrs, schedule, errors."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior, sample_stats
from pymc_minibatch.kernels.mint import cyclic_step_sizes

Y = np.random.default_rng(3).normal(1.0, 1.0, size=2000)


def _normal_model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 10)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", mu, sigma, observed=Y)
    return model


@pytest.fixture(scope="module")
def normal_model():
    return _normal_model()


def _record_loglik(step):
    """Record ``(theta, batch mean)`` of every minibatch evaluation of ``step``."""
    calls, original = [], step.minibatch_model.loglik

    def recording(theta, idx):
        values = original(theta, idx)
        calls.append((np.array(theta), float(np.mean(values))))
        return values

    step.minibatch_model.loglik = recording
    return calls


def test_stored_estimate_is_reused_after_rejection_and_replaced_on_acceptance(normal_model):
    with normal_model:
        step = pmm.MINT(batch_size=100, proposal_scale=0.3, rng=0)
    step.tune = False
    calls = _record_loglik(step)
    point, _ = step.step(normal_model.initial_point())
    assert len(calls) == 2  # the first step evaluates the current point too
    outcomes = set()
    for _ in range(100):
        before = step.last_evaluation[-1]
        calls.clear()
        point, [stats] = step.step(point)
        ((proposal, estimate),) = calls  # only the proposal is evaluated
        if stats["accepted"]:
            np.testing.assert_array_equal(step.last_evaluation[-1].position, proposal)
            assert step.last_evaluation[-1].estimate == estimate
        else:
            assert step.last_evaluation[-1] is before
        outcomes.add(bool(stats["accepted"]))
    assert outcomes == {True, False}


def test_estimate_is_recomputed_when_another_step_moved_other_variables(normal_model):
    with normal_model:
        step = pmm.MINT([normal_model["mu"]], batch_size=100, proposal_scale=0.01, rng=1)
    step.tune = False
    calls = _record_loglik(step)
    point = normal_model.initial_point()
    point, _ = step.step(point)
    calls.clear()
    point, _ = step.step(point)
    assert len(calls) == 1
    point["sigma_log__"] = point["sigma_log__"] + 0.1  # as a CompoundStep sibling would
    calls.clear()
    point, _ = step.step(point)
    assert len(calls) == 2


def test_stats_temperature_and_attrs(normal_model):
    with normal_model:
        step = pmm.MINT(batch_size=200, alpha=0.9)
        idata = pm.sample(
            step=step, draws=200, tune=200, chains=2, cores=1, random_seed=2,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    tau = np.log(200) / (2 * np.log(2000))
    assert step.tau == pytest.approx(tau)
    assert step.tempering_exponent == pytest.approx(0.9 * tau)
    assert step.temperature == pytest.approx(2000 ** (1 - 0.9 * tau))
    stats = sample_stats(idata)
    assert {
        "accept",
        "accepted",
        "proposal_scale",
        "nonfinite",
        "batch_size",
        "temperature",
    } <= set(stats.data_vars)
    np.testing.assert_allclose(stats["temperature"].values, step.temperature)
    assert np.all(stats["batch_size"].values == 200)
    step.annotate(idata)
    attrs = posterior(idata).attrs
    assert attrs["temperature"] == pytest.approx(step.temperature)
    assert attrs["batch_size"] == 200 and attrs["minibatch_sampler"] == "MINT"


@pytest.mark.parametrize("proposal", ["rw", "sgld"])
def test_nonfinite_proposals_are_rejected_and_counted(proposal):
    with pm.Model():
        mu = pm.Normal("mu", 0, 10)
        pm.Potential("wall", pt.switch(mu < 1.0, -np.inf, 0.0))
        pm.Normal("y", mu, 1.0, observed=Y)
        # the initial point is behind the wall: no mode search
        scale = 0.05 if proposal == "rw" else np.sqrt(0.05)  # Langevin time step h = 0.05
        step = pmm.MINT(batch_size=100, proposal=proposal, proposal_scale=scale,
                        proposal_cov=None, rng=4)  # fmt: skip
    step.tune = False
    point, flags = {"mu": np.array(1.02)}, []
    for _ in range(100):
        point, [stats] = step.step(point)
        assert point["mu"] >= 1.0 and not (stats["nonfinite"] and stats["accepted"])
        flags.append(stats["nonfinite"])
    assert 5 < sum(flags) < 95


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"batch_size": 5000}, ValueError, "batch_size"),
        ({"batch_size": 10.5}, TypeError, "integer"),
        ({"batch_size": 100, "alpha": 1.2}, ValueError, "alpha"),
        ({"batch_size": 100, "proposal": "hmc"}, ValueError, "proposal"),
        ({"batch_size": 100, "proposal_scale": -1.0}, ValueError, "proposal_scale"),
        ({"batch_size": 100, "proposal": "sgld", "proposal_cov": [1.0]}, ValueError, "random-walk"),
        ({"batch_size": 100, "proposal": "sgld", "proposal_cov": "dense"}, ValueError, "laplace"),
    ],
)
def test_bad_hyperparameters_raise(normal_model, kwargs, error, message):
    with normal_model, pytest.raises(error, match=message):
        pmm.MINT(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"n_rounds": 0}, "n_rounds"), ({"decay": 1.5}, "decay"), ({"raise_factor": 0.5}, "raise"),
     ({"round_epochs": 2.5}, "round_epochs")],
)  # fmt: skip
def test_bad_cmint_schedules_raise(normal_model, kwargs, message):
    with normal_model, pytest.raises(ValueError, match=message):
        pmm.CMINT(batch_size=100, **kwargs)


def test_cmint_schedule_snapshots_and_ensemble():
    # a model of its own: PyMC 5's sample_posterior_predictive corrupts the model it runs on
    normal_model = _normal_model()
    with normal_model:
        step = pmm.CMINT(
            batch_size=200, n_rounds=3, round_epochs=4, decay_every=2, decay=0.5,
            raise_factor=3.0,
        )  # fmt: skip
        assert step.steps_per_epoch == 10 and step.schedule_draws == 120
        idata = pm.sample(
            step=step, draws=step.schedule_draws + 15, tune=100, chains=2, cores=1,
            random_seed=5, progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    stats = sample_stats(idata)
    for chain in range(2):
        sizes = stats["proposal_scale"].values[chain]
        per_epoch, snapshot_epochs = cyclic_step_sizes(
            sizes[0], 14, decay=0.5, decay_every=2, raise_factor=3.0, round_epochs=4, n_rounds=3
        )
        np.testing.assert_allclose(sizes, np.repeat(per_epoch, 10)[: sizes.size], rtol=1e-12)
        assert snapshot_epochs == [4, 8, 12]
        np.testing.assert_array_equal(
            np.flatnonzero(stats["snapshot"].values[chain]), [39, 79, 119]
        )
        np.testing.assert_array_equal(stats["epoch"].values[chain], np.arange(135) // 10 + 1)
    ensemble = pmm.cmint_ensemble(idata)
    assert ensemble["mu"].shape == (2, 3)
    np.testing.assert_array_equal(
        ensemble["mu"].values, posterior(idata)["mu"].values[:, [39, 79, 119]]
    )
    with normal_model:
        predictive = pm.sample_posterior_predictive(idata, random_seed=1, progressbar=False)
    idata_with_predictions = idata
    idata_with_predictions["posterior_predictive"] = predictive["posterior_predictive"]
    average = pmm.cmint_average(idata_with_predictions)
    expected = predictive["posterior_predictive"]["y"].values[:, [39, 79, 119]].mean((0, 1))
    np.testing.assert_allclose(average["y"].values, expected)


def test_cmint_ensemble_refuses_results_without_snapshots(normal_model):
    with normal_model:
        idata = pm.sample(
            step=pmm.MINT(batch_size=200), draws=20, tune=20, chains=1,
            progressbar=False, compute_convergence_checks=False, random_seed=1,
        )  # fmt: skip
    with pytest.raises(ValueError, match="CMINT"):
        pmm.cmint_ensemble(idata)


_QUIET = {"chains": 1, "progressbar": False, "compute_convergence_checks": False}


def test_thinned_mint_is_the_same_chain_thinned():
    """``steps_per_draw=3``: each draw is the state after three steps of the chain a step
    per draw gives (the same seed), its ``accept`` their mean acceptance probability."""
    with _normal_model():
        every = pm.sample(step=pmm.MINT(batch_size=200), draws=30, tune=30, random_seed=3,
                          **_QUIET)  # fmt: skip
        thinned = pm.sample(step=pmm.MINT(batch_size=200, steps_per_draw=3), draws=10, tune=10,
                            random_seed=3, **_QUIET)  # fmt: skip
    for name in ("mu", "sigma"):
        np.testing.assert_array_equal(posterior(thinned)[name].values[0],
                                      posterior(every)[name].values[0, 2::3])  # fmt: skip
    accept = sample_stats(every)["accept"].values[0].reshape(10, 3).mean(axis=1)
    np.testing.assert_allclose(sample_stats(thinned)["accept"].values[0], accept, rtol=1e-12)
    accepted = sample_stats(every)["accepted"].values[0].reshape(10, 3).any(axis=1)
    np.testing.assert_array_equal(sample_stats(thinned)["accepted"].values[0], accepted)


def test_thinned_cmint_keeps_the_schedule_and_its_snapshots():
    """Five steps a draw (an epoch is ten): half of an epoch per draw, the same step sizes
    step by step, and the snapshots are the same states, now draws 7, 15 and 23."""
    options = {"batch_size": 200, "n_rounds": 3, "round_epochs": 4, "decay_every": 2}
    with _normal_model():
        every = pmm.CMINT(**options)
        thinned = pmm.CMINT(steps_per_draw=5, **options)
        assert thinned.schedule_draws == 24 and every.schedule_draws == 120
        idata_every = pm.sample(step=every, draws=120, tune=100, random_seed=5, **_QUIET)
        idata_thinned = pm.sample(step=thinned, draws=24, tune=20, random_seed=5, **_QUIET)
        with pytest.raises(ValueError, match="must divide the 10 steps"):
            pmm.CMINT(steps_per_draw=3, **options)
    stats = sample_stats(idata_thinned)
    np.testing.assert_array_equal(np.flatnonzero(stats["snapshot"].values[0]), [7, 15, 23])
    np.testing.assert_array_equal(stats["epoch"].values[0], np.arange(24) // 2 + 1)
    np.testing.assert_array_equal(stats["proposal_scale"].values[0],
                                  sample_stats(idata_every)["proposal_scale"].values[0, 4::5])
    np.testing.assert_array_equal(pmm.cmint_ensemble(idata_thinned)["mu"].values,
                                  pmm.cmint_ensemble(idata_every)["mu"].values)  # fmt: skip
