"""Contract tests over every step method: declared stats, tune, sampling state, pickling."""

import ast
import functools
import pathlib

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from pymc.step_methods.state import equal_dataclass_values

import pymc_minibatch as pmm
from pymc_minibatch import registry
from pymc_minibatch._compat import posterior

RNG = np.random.default_rng(12)
X = RNG.normal(size=(800, 2))
Y = (RNG.random(800) < 1 / (1 + np.exp(-X @ np.array([0.7, -0.3])))).astype("int64")
# Options a contract case adds to the registry's required arguments: shorter schedules, and
# settings that exercise more of the transition (momentum resampling, several updates)
CASE_OPTIONS = {
    "CMINT": {"n_rounds": 2, "round_epochs": 1, "decay_every": 1},
    "SGMGT": {"a": 2, "momentum_resample_every": 7},
    "SGMGTD": {"updates_per_draw": 3},
}
SAMPLERS = [
    functools.partial(entry.step_class, **entry.required, **CASE_OPTIONS.get(entry.name, {}))
    for entry in registry.SAMPLERS
] + [functools.partial(pmm.MINT, batch_size=100, proposal="sgld")]


def _name(sampler):
    options = ",".join(f"{k}={v}" for k, v in sampler.keywords.items())
    return f"{sampler.func.__name__}({options})"


def test_case_options_name_registered_samplers():
    assert set(CASE_OPTIONS) <= set(registry.SAMPLER_NAMES)


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
    entry = registry.BY_NAME[sampler.func.__name__]
    return models["box" if entry.needs_bounded_support else "normal"]


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
def test_tuning_is_reset_once_after_construction(model, sampler, monkeypatch):
    """``reset_tuning`` runs once, after every ``__init__`` of the class chain returned."""
    cls = sampler.func
    calls = []
    reset_tuning = cls.reset_tuning

    def recording(step):
        calls.append(step.__dict__.get("_under_construction", False))
        reset_tuning(step)

    monkeypatch.setattr(cls, "reset_tuning", recording)
    with model:
        step = sampler(rng=0)
    assert calls == [False]  # once, and not while any __init__ was still running
    assert "_under_construction" not in step.__dict__


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


def test_every_step_method_is_imported_by_name_in_the_package():
    """``from pymc_minibatch import TunaMH`` resolves for a static tool: each registered step
    method is bound by an import statement of ``__init__.py`` (not built at run time) and
    listed literally in ``__all__``, in the registry's order."""
    source = pathlib.Path(pmm.__file__).read_text()
    tree = ast.parse(source)
    imported = {alias.asname or alias.name for node in tree.body
                if isinstance(node, ast.ImportFrom) for alias in node.names}  # fmt: skip
    (listed,) = [ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and node.targets[0].id == "__all__"]  # fmt: skip
    assert set(registry.SAMPLER_NAMES) <= imported
    assert listed[: len(registry.SAMPLER_NAMES)] == list(registry.SAMPLER_NAMES)
    for entry in registry.SAMPLERS:
        assert getattr(pmm, entry.name) is entry.step_class
