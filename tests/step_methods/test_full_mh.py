"""FullMH: the step-method contract under pm.sample in the installed PyMC (5.x or 6.x)."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_minibatch as pmm
from pymc_minibatch._compat import IS_PYMC6, posterior, sample_stats


@pytest.fixture(scope="module")
def regression_model():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    y = X @ np.array([0.5, -1.0]) + rng.normal(size=300)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 5, shape=2)
        sigma = pm.HalfNormal("sigma", 2)
        pm.Normal("y", X @ beta, sigma, observed=y)
    return model


def _sample(model, cores, **kwargs):
    with model:
        return pm.sample(
            step=pmm.FullMH(),
            draws=300,
            tune=300,
            chains=2,
            cores=cores,
            random_seed=11,
            progressbar=False,
            compute_convergence_checks=False,
            **kwargs,
        )


def test_result_type_stats_and_seed_reproducibility_across_cores(regression_model):
    sequential = _sample(regression_model, cores=1)
    parallel = _sample(regression_model, cores=2)
    assert type(sequential).__name__ == ("DataTree" if IS_PYMC6 else "InferenceData")
    for name in ("beta", "sigma"):
        np.testing.assert_array_equal(
            posterior(sequential)[name].values, posterior(parallel)[name].values
        )
    stats = sample_stats(sequential)
    assert {"accept", "accepted", "proposal_scale", "nonfinite", "batch_size"} <= set(
        stats.data_vars
    )
    assert stats["accept"].shape == (2, 300)
    assert np.all(stats["batch_size"].values == 300)
    # two chains from the same start with different seeds must not coincide
    beta = posterior(sequential)["beta"].values
    assert not np.array_equal(beta[0], beta[1])


def test_step_emits_tune_and_pymc_splits_warmup_by_it(regression_model):
    with regression_model:
        step = pmm.FullMH()
        point = regression_model.initial_point()
        _, [stats] = step.step(point)
        assert stats["tune"] is True
        step.stop_tuning()
        _, [stats] = step.step(point)
        assert stats["tune"] is False
    idata = _sample(regression_model, cores=1, discard_tuned_samples=False)
    assert idata["warmup_sample_stats"]["accept"].shape == (2, 300)


def test_proposal_scale_is_tuned_toward_target_and_reset_for_each_chain(regression_model):
    idata = _sample(regression_model, cores=1, discard_tuned_samples=False)
    warmup = idata["warmup_sample_stats"]
    with regression_model:
        initial = pmm.FullMH().initial_proposal_scale
    # every chain starts tuning from the untuned value: nothing leaks from chain 0 to 1
    np.testing.assert_allclose(warmup["proposal_scale"].values[:, 0], initial)
    stats = sample_stats(idata)
    frozen = stats["proposal_scale"].values
    assert np.all(frozen == frozen[:, :1])  # frozen after tuning
    assert np.all(np.abs(np.log(frozen[:, 0] / initial)) > 0.1)  # it did move
    # acceptance after tuning near the 0.25 target (600 draws, sd of the mean ~0.03)
    assert abs(float(stats["accept"].mean()) - 0.25) < 0.1


def test_nonfinite_proposals_are_rejected_and_counted():
    with pm.Model():
        mu = pm.Normal("mu", 0, 1)
        pm.Potential("wall", pt.switch(mu > 0, -np.inf, 0.0))  # log-density -inf for mu > 0
        pm.Normal("y", mu, 1, observed=np.array([-0.5, -0.2, -0.1]))
        step = pmm.FullMH(proposal_scale=1.0, rng=1)
        step.tune = False
        point = {"mu": np.array(-0.1)}
        nonfinite = []
        for _ in range(200):
            point, [stats] = step.step(point)
            nonfinite.append(stats["nonfinite"])
            assert point["mu"] <= 0
            assert not (stats["nonfinite"] and stats["accepted"])
    assert 20 < sum(nonfinite) < 180


def test_compound_step_with_a_pymc_step(regression_model):
    with regression_model:
        beta, sigma = regression_model["beta"], regression_model["sigma"]
        full_mh = pmm.FullMH([beta])
        assert set(full_mh.shared) == {"sigma_log__"}
        idata = pm.sample(
            step=[full_mh, pm.Slice([sigma])],
            draws=300,
            tune=300,
            chains=1,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
        )
    draws = posterior(idata)
    # rough recovery of the generating values (n = 300; posterior sd ~0.06)
    np.testing.assert_allclose(draws["beta"].mean(("chain", "draw")), [0.5, -1.0], atol=0.3)
    assert 0.7 < float(draws["sigma"].mean()) < 1.3


def test_bad_hyperparameters_raise(regression_model):
    with regression_model:
        with pytest.raises(ValueError, match="target_accept"):
            pmm.FullMH(target_accept=1.5)
        with pytest.raises(ValueError, match="proposal_cov"):
            pmm.FullMH(proposal_cov=np.eye(2))
        with pytest.raises(ValueError, match="proposal_scale"):
            pmm.FullMH(proposal_scale=-1.0)
