"""The centred form of non-centred group effects (:mod:`pymc_minibatch.model.recentring`)."""

import warnings

import cloudpickle
import numpy as np
import pymc as pm
import pytest

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
    ],
    ids=["mu+tau*z", "z*tau+mu", "expressions"],
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
        lambda: _non_centred(lambda mu, tau, z: mu * tau * z),
        lambda: _non_centred(lambda mu, tau, z: mu + tau * (z - 1.0)),
    ],
    ids=["square", "product", "shifted"],
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
