"""Contract tests over every step method: declared stats, tune, sampling state, pickling."""

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from pymc.step_methods.state import equal_dataclass_values

import pymc_minibatch as pmm

RNG = np.random.default_rng(12)
X = RNG.normal(size=(800, 2))
Y = (RNG.random(800) < 1 / (1 + np.exp(-X @ np.array([0.7, -0.3])))).astype("int64")
SAMPLERS = [pmm.FullMH, pmm.TunaMH, pmm.TFMH, pmm.FlyMC, pmm.PoissonMH]


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


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: s.__name__)
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


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: s.__name__)
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


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: s.__name__)
def test_pickled_step_gives_the_same_draws(model, sampler):
    with model:
        step = sampler(rng=0)
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    point_a = point_b = model.initial_point()
    for _ in range(10):
        point_a, _ = step.step(point_a)
        point_b, _ = clone.step(point_b)
    np.testing.assert_array_equal(point_a["beta"], point_b["beta"])
