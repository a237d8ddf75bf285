"""The centred form of non-centred group effects (:mod:`pymc_minibatch.model.recentring`)."""

import warnings

import cloudpickle
import numpy as np
import pymc as pm
import pytest
from pytensor.graph.traversal import explicit_graph_inputs

import pymc_minibatch as pmm
from pymc_minibatch.model.recentring import recentring

GROUPS = np.arange(40) % 5


def _non_centred(effect=lambda mu, tau, z: mu + tau * z, z_sigma=1.0, dims=False):
    rng = np.random.default_rng(0)
    coords = {"group": np.arange(5)} if dims else None
    with pm.Model(coords=coords) as model:
        groups = pm.Data("groups", GROUPS)
        mu = pm.Normal("mu", 0.0, 2.0)
        tau = pm.HalfNormal("tau", 1.0)
        shape = {"dims": "group"} if dims else {"shape": 5}
        z = pm.Normal("z", 0.0, z_sigma, **shape)
        a = pm.Deterministic("a", effect(mu, tau, z), **({"dims": "group"} if dims else {}))
        pm.Normal("y", a[groups], 1.0, observed=rng.normal(size=GROUPS.size))
    return model


@pytest.mark.parametrize(
    "effect",
    [
        lambda mu, tau, z: mu + tau * z,
        lambda mu, tau, z: z * tau + mu,
        lambda mu, tau, z: (mu + 1.0) + (2.0 * tau) * z,
        lambda mu, tau, z: mu * tau * z,  # (mu * tau) * z: a scale, no location
    ],
    ids=["mu+tau*z", "z*tau+mu", "expressions", "product"],
)
def test_an_affine_map_of_a_standard_normal_is_centred(effect):
    centring = recentring(_non_centred(effect))
    assert [(e.name, e.standard) for e in centring.effects] == [("a", "z")]
    names = {v.name for v in centring.model.value_vars}
    assert names == {"mu", "tau_log__", "a"}
    assert {d.name for d in centring.model.deterministics} == {"z"}


@pytest.mark.parametrize("dims", [False, True], ids=["shape", "dims"])
@pytest.mark.parametrize("z_sigma", [1.0, 2.5])
def test_the_two_forms_have_the_same_density_up_to_the_jacobian(z_sigma, dims):
    """``log p_c(mu, tau, a) = log p_nc(mu, tau, z) - G log(tau)`` at ``a = mu + tau z``
    (``a ~ Normal(mu, tau sigma_z)``): the two forms are one distribution."""
    model = _non_centred(z_sigma=z_sigma, dims=dims)
    centring = recentring(model)
    user_logp, centred_logp = model.compile_logp(), centring.model.compile_logp()
    rng = np.random.default_rng(1)
    for _ in range(3):
        point = {"mu": rng.normal(), "tau_log__": rng.normal(), "z": rng.normal(size=5)}
        centred = centring.to_centred(point)
        tau = np.exp(point["tau_log__"])
        np.testing.assert_allclose(centred["a"], point["mu"] + tau * point["z"])
        jacobian = 5 * np.log(tau)
        np.testing.assert_allclose(centred_logp(centred), user_logp(point) - jacobian, rtol=1e-8)
        back = centring.to_user(centred)
        assert set(back) == set(point)
        np.testing.assert_allclose(back["z"], point["z"], rtol=1e-12)


@pytest.mark.parametrize(
    "build",
    [
        lambda: _non_centred(lambda mu, tau, z: mu + tau * z**2),
        lambda: _non_centred(lambda mu, tau, z: mu + tau * (z - 1.0)),
    ],
    ids=["square", "shifted"],
)
def test_other_deterministics_are_left_alone(build):
    assert recentring(build()) is None


def test_a_standard_variable_broadcast_to_more_groups_is_left_alone():
    with pm.Model() as model:
        mu, tau = pm.Normal("mu", shape=5), pm.HalfNormal("tau")
        z = pm.Normal("z", 0.0, 1.0, shape=1)
        a = pm.Deterministic("a", mu + tau * z)
        pm.Normal("y", a[GROUPS], 1.0, observed=np.zeros(GROUPS.size))
    assert recentring(model) is None


def test_a_standard_variable_used_elsewhere_is_left_alone():
    with _non_centred() as model:
        pm.Normal("w", model["z"].sum(), 1.0, observed=0.5)
    assert recentring(model) is None


def test_a_non_standard_normal_is_left_alone():
    with pm.Model() as model:
        mu, tau = pm.Normal("mu"), pm.HalfNormal("tau")
        z = pm.Normal("z", 1.0, 1.0, shape=5)
        a = pm.Deterministic("a", mu + tau * z)
        pm.Normal("y", a[GROUPS], 1.0, observed=np.zeros(GROUPS.size))
    assert recentring(model) is None


def test_new_data_reach_the_centred_model_without_a_copy():
    model = _non_centred()
    centring = recentring(model)
    assert centring.model["groups"].get_value(borrow=True) is model["groups"].get_value(borrow=True)
    new_groups = (GROUPS + 1) % 5
    with model:
        pm.set_data({"groups": new_groups})
    centring.sync_data()
    assert centring.model["groups"].get_value(borrow=True) is model["groups"].get_value(borrow=True)


def test_tunamh_samples_a_non_centred_model_centred_and_reports_its_variables():
    """Refused before (the predictor ``mu + tau * z[g]`` is a product of sampled values);
    the draws are the model's own variables, ``a`` computed by PyMC from ``z``."""
    model = _non_centred()
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step = pmm.TunaMH()
        idata = pm.sample(step=step, draws=200, tune=100, chains=1, random_seed=3,
                          progressbar=False, compute_convergence_checks=False)  # fmt: skip
    assert step.recentring is not None
    posterior = idata["posterior"]
    assert set(posterior.data_vars) == {"mu", "tau", "z", "a"}
    expected = posterior["mu"] + posterior["tau"] * posterior["z"]
    np.testing.assert_allclose(posterior["a"], expected, rtol=1e-10)
    assert float(posterior["z"].std()) > 0.0  # the chain moved


def test_a_step_given_some_variables_samples_the_model_as_written():
    model = _non_centred()
    with model:
        step = pmm.SGLD(vars=[model["mu"], model["tau"], model["z"]], batch_size=10)
    assert step.recentring is None


@pytest.mark.filterwarnings("ignore::pymc_minibatch.LaplaceFitWarning")  # 40 rows: tau -> 0
def test_particles_move_a_non_centred_model_centred():
    """``sample_particles`` runs in the centred form; an ``init`` array is in the layout of
    the model as written (``z``, not ``a``)."""
    model = _non_centred()
    init = np.zeros((10, 7))  # mu, tau_log__, z[5]
    init[:, 2:] = np.linspace(-1.0, 1.0, 10)[:, None]
    idata = pmm.sample_particles("svgd", n_particles=10, n_steps=1, init=init, model=model,
                                 random_seed=1, progressbar=False)  # fmt: skip
    posterior = idata["posterior"]
    assert set(posterior.data_vars) == {"mu", "tau", "z", "a"}
    np.testing.assert_allclose(posterior["a"], posterior["mu"] + posterior["tau"] * posterior["z"],
                               rtol=1e-10)  # fmt: skip
    # one small step from the given start: z stays near it
    np.testing.assert_allclose(posterior["z"].values[0, :, 0], init[:, 2], atol=0.2)


def test_a_recentred_step_survives_pickling():
    """``pm.sample(cores=2)`` pickles the step for its worker processes."""
    model = _non_centred()
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore", pmm.LaplaceFitWarning)
        step = pmm.TunaMH()
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    point = {"mu": np.array(0.3), "tau_log__": np.array(-0.2), "z": np.linspace(-1.0, 1.0, 5)}
    np.testing.assert_allclose(clone.recentring.to_centred(point)["a"],
                               step.recentring.to_centred(point)["a"])  # fmt: skip
    moved, _ = clone.step(point)
    assert set(moved) == set(point)
    assert all(np.all(np.isfinite(value)) for value in moved.values())


X_ROWS = np.random.default_rng(2).normal(size=(GROUPS.size, 2))


def _inline(predictor, extra=None):
    """A model whose group effects are written inline in the predictor ``predictor(mu, tau,
    z, b)`` (no deterministic)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        tau = pm.HalfNormal("tau", 1.0)
        z = pm.Normal("z", 0.0, 1.0, shape=5)
        b = pm.Normal("b", 0.0, 1.0, shape=2)
        if extra is not None:
            extra(model)
        pm.Normal("y", predictor(mu, tau, z, b), 1.0,
                  observed=np.random.default_rng(0).normal(size=GROUPS.size))  # fmt: skip
    return model


def _likelihood_reads(centring):
    """The centred model's value variables its likelihood reads."""
    model = centring.model
    inputs = set(explicit_graph_inputs([model.logp(vars=model.observed_RVs)]))
    return {v.name for v in model.value_vars if v in inputs}


def _random_point(rng):
    return {"mu": rng.normal(), "tau_log__": rng.normal(), "z": rng.normal(size=5),
            "b": rng.normal(size=2)}  # fmt: skip


@pytest.mark.parametrize(
    "predictor",
    [
        lambda mu, tau, z, b: mu + tau * z[GROUPS],
        lambda mu, tau, z, b: z[GROUPS] * tau + mu,
        lambda mu, tau, z, b: X_ROWS @ b + mu + tau * z[GROUPS],
        lambda mu, tau, z, b: tau * z[GROUPS] + X_ROWS @ b + mu,
        lambda mu, tau, z, b: (mu + tau * z)[GROUPS] + X_ROWS @ b,
        lambda mu, tau, z, b: pm.Deterministic("eta", mu + tau * z[GROUPS]),
    ],
    ids=["mu+tau*z[g]", "z[g]*tau+mu", "X@b+mu+tau*z[g]", "tau*z[g]+X@b+mu", "(mu+tau*z)[g]",
         "named-predictor"],  # fmt: skip
)
def test_inline_effects_are_named_and_centred(predictor):
    """``z_effect = mu + tau * z`` becomes a free ``Normal(mu, tau)`` and the likelihood
    reads it (and ``b``) only: linear in the sampled values. The density is the model's up
    to the Jacobian ``G log(tau)``."""
    model = _inline(predictor)
    centring = recentring(model)
    assert [(e.name, e.standard) for e in centring.effects] == [("z_effect", "z")]
    assert {v.name for v in centring.model.value_vars} == {"mu", "tau_log__", "z_effect", "b"}
    assert _likelihood_reads(centring) <= {"z_effect", "b"}
    user_logp, centred_logp = model.compile_logp(), centring.model.compile_logp()
    rng = np.random.default_rng(3)
    for _ in range(3):
        point = _random_point(rng)
        centred = centring.to_centred(point)
        tau = np.exp(point["tau_log__"])
        np.testing.assert_allclose(centred["z_effect"], point["mu"] + tau * point["z"])
        np.testing.assert_allclose(centred_logp(centred), user_logp(point) - 5 * np.log(tau),
                                   rtol=1e-8)  # fmt: skip
        np.testing.assert_allclose(centring.to_user(centred)["z"], point["z"], rtol=1e-12)


def test_an_inline_sum_with_no_scalar_term_is_centred_in_its_scale():
    """``X @ b + tau * z[g]``: ``z_effect = tau * z ~ Normal(0, tau)``, ``mu`` unused."""
    centring = recentring(_inline(lambda mu, tau, z, b: X_ROWS @ b + tau * z[GROUPS]))
    assert _likelihood_reads(centring) == {"z_effect", "b"}
    point = _random_point(np.random.default_rng(4))
    np.testing.assert_allclose(centring.to_centred(point)["z_effect"],
                               np.exp(point["tau_log__"]) * point["z"])  # fmt: skip


@pytest.mark.parametrize(
    "predictor",
    [
        lambda mu, tau, z, b: mu + (tau * z)[GROUPS] * X_ROWS[:, 0],  # a slope times a row value
        lambda mu, tau, z, b: mu + (tau + X_ROWS[:, 0]) * z[GROUPS],  # a scale per row
        lambda mu, tau, z, b: mu + tau * z[GROUPS] + z[GROUPS],  # z used twice
        lambda mu, tau, z, b: X_ROWS @ (tau * b) + mu,  # a scaled coefficient vector
    ],
    ids=["product-of-rows", "row-scale", "twice", "scaled-coefficients"],
)
def test_other_inline_products_are_left_alone(predictor):
    assert recentring(_inline(predictor)) is None


def test_an_inline_effect_takes_a_free_name():
    """The model has a ``z_effect`` already: the effect is ``z_effect_``."""
    model = _inline(lambda mu, tau, z, b: mu + tau * z[GROUPS],
                    extra=lambda m: pm.Deterministic("z_effect", m["mu"] * 2.0))  # fmt: skip
    assert [e.name for e in recentring(model).effects] == ["z_effect_"]


def test_an_inline_location_read_from_data_follows_set_data():
    """The effect's values are computed from the user's point with the user's current data."""
    with pm.Model() as model:
        shift = pm.Data("shift", 0.5)
        tau = pm.HalfNormal("tau", 1.0)
        z = pm.Normal("z", 0.0, 1.0, shape=5)
        pm.Normal("y", shift + tau * z[GROUPS], 1.0, observed=np.zeros(GROUPS.size))
    centring = recentring(model)
    point = {"tau_log__": 0.0, "z": np.arange(5.0)}
    np.testing.assert_allclose(centring.to_centred(point)["z_effect"], 0.5 + np.arange(5.0))
    with model:
        pm.set_data({"shift": 2.0})
    centring.sync_data()
    np.testing.assert_allclose(centring.to_centred(point)["z_effect"], 2.0 + np.arange(5.0))


def test_tunamh_samples_an_inline_non_centred_model_and_reports_its_variables():
    """Refused before (``mu + tau * z[g]`` is a product of sampled values); the draws are the
    model's variables only, and the step pickles (``pm.sample(cores=2)``)."""
    model = _inline(lambda mu, tau, z, b: X_ROWS @ b + mu + tau * z[GROUPS])
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step = pmm.TunaMH()
        idata = pm.sample(step=step, draws=200, tune=100, chains=1, random_seed=3,
                          progressbar=False, compute_convergence_checks=False)  # fmt: skip
    assert [e.name for e in step.recentring.effects] == ["z_effect"]
    assert set(idata["posterior"].data_vars) == {"mu", "tau", "z", "b"}
    assert float(idata["posterior"]["z"].std()) > 0.0
    clone = cloudpickle.loads(cloudpickle.dumps(step))
    point = _random_point(np.random.default_rng(5))
    np.testing.assert_allclose(clone.recentring.to_centred(point)["z_effect"],
                               step.recentring.to_centred(point)["z_effect"])  # fmt: skip


@pytest.mark.filterwarnings("ignore::pymc_minibatch.LaplaceFitWarning")  # 40 rows: tau -> 0
def test_particles_report_an_inline_effect():
    model = _inline(lambda mu, tau, z, b: mu + tau * z[GROUPS])
    idata = pmm.sample_particles("svgd", n_particles=10, n_steps=5, model=model, random_seed=1,
                                 progressbar=False)  # fmt: skip
    posterior = idata["posterior"]
    assert set(posterior.data_vars) == {"mu", "tau", "z", "b", "z_effect"}
    expected = posterior["mu"] + posterior["tau"] * posterior["z"]
    np.testing.assert_allclose(posterior["z_effect"], expected, rtol=1e-10)
