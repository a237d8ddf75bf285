"""Contract tests over every step method: declared stats, tune, sampling state, pickling."""

import functools

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from pymc.step_methods.state import equal_dataclass_values

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior

RNG = np.random.default_rng(12)
X = RNG.normal(size=(800, 2))
Y = (RNG.random(800) < 1 / (1 + np.exp(-X @ np.array([0.7, -0.3])))).astype("int64")
SAMPLERS = [
    pmm.FullMH,
    pmm.TunaMH,
    pmm.TFMH,
    pmm.FlyMC,
    pmm.PoissonMH,
    functools.partial(pmm.MINT, batch_size=100),
    functools.partial(pmm.MINT, batch_size=100, proposal="sgld"),
    functools.partial(pmm.CMINT, batch_size=100, n_rounds=2, round_epochs=1, decay_every=1),
    functools.partial(pmm.SGLD, batch_size=100),
    functools.partial(pmm.SGHMC, batch_size=100),
    functools.partial(pmm.SGNHT, batch_size=100),
    functools.partial(pmm.SGMGT, batch_size=100, a=2, momentum_resample_every=7),
    functools.partial(pmm.SGMGTD, batch_size=100, updates_per_draw=3),
]


def _name(sampler):
    if isinstance(sampler, functools.partial):
        options = ",".join(f"{k}={v}" for k, v in sampler.keywords.items())
        return f"{sampler.func.__name__}({options})"
    return sampler.__name__


@pytest.fixture(scope="module")
def models():
    with pm.Model() as normal_prior:
        beta = pm.Normal("beta", 0, 2, shape=2)
        pm.Bernoulli("y", logit_p=X @ beta, observed=Y)
    with pm.Model() as box_prior:  # PoissonMH needs a bounded support
        beta = pm.Uniform("beta", [0.6, -0.4], [0.8, -0.2], default_transform=None)
        pm.Bernoulli("y", logit_p=X @ beta, observed=Y)
    return {"normal": normal_prior, "box": box_prior}


@pytest.fixture
def model(models, sampler):
    return models["box" if sampler is pmm.PoissonMH else "normal"]


@pytest.mark.parametrize("sampler", SAMPLERS, ids=_name)
def test_stats_match_declarations_and_emit_tune(model, sampler):
    with model:
        step = sampler(rng=0)
    point = model.initial_point()
    for _ in range(5):
        point, [stats] = step.step(point)
        assert set(stats) == set(step.stats_dtypes_shapes)
        assert stats["tune"] is True
        for name, (dtype, _) in step.stats_dtypes_shapes.items():
            assert np.asarray(stats[name]).dtype.kind == np.dtype(dtype).kind, name
    assert "model_logp" not in step.stats_dtypes_shapes  # PyMC would take it as the exact lp


@pytest.mark.parametrize("sampler", SAMPLERS, ids=_name)
def test_sampling_state_round_trip_restores_the_chain(model, sampler):
    with model:
        step = sampler(rng=0)
    point = model.initial_point()
    for _ in range(20):
        point, _ = step.step(point)
    saved = step.sampling_state
    continued = [step.step(point)[0]["beta"] for _ in range(10)]
    step.sampling_state = saved
    assert equal_dataclass_values(step.sampling_state, saved)
    replayed = [step.step(point)[0]["beta"] for _ in range(10)]
    np.testing.assert_array_equal(continued, replayed)


@pytest.mark.parametrize("sampler", SAMPLERS, ids=_name)
def test_pickled_step_gives_the_same_draws(model, sampler):
    with model:
        step = sampler(rng=0)
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    point_a = point_b = model.initial_point()
    for _ in range(10):
        point_a, _ = step.step(point_a)
        point_b, _ = clone.step(point_b)
    np.testing.assert_array_equal(point_a["beta"], point_b["beta"])


@pytest.mark.parametrize("sampler", SAMPLERS, ids=_name)
def test_same_seed_gives_the_same_draws_with_one_or_two_cores(model, sampler):
    def run(cores):
        with model:
            idata = pm.sample(
                step=sampler(), draws=40, tune=40, chains=2, cores=cores, random_seed=4,
                progressbar=False, compute_convergence_checks=False,
            )  # fmt: skip
        return posterior(idata)["beta"].values

    sequential, parallel = run(1), run(2)
    np.testing.assert_array_equal(sequential, parallel)
    assert not np.array_equal(sequential[0], sequential[1])
