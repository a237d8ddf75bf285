"""cloudpickle round trips of ``MinibatchModel`` (as PyMC does for spawned workers).

The unpickled adapter must give the same values as the original, and one pickled
together with a holder of its shared variables (as a step method holds them) must be
driven by the holder's copies of those shared variables.
"""

import cloudpickle
import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm

N_ROWS = 300
N_FEATURES = 3

_rng = np.random.default_rng(5)
X = _rng.normal(size=(N_ROWS, N_FEATURES))
Y_BIN = (_rng.random(N_ROWS) < 1 / (1 + np.exp(-X @ np.array([1.0, -1.0, 0.5])))).astype("int64")
Y = X @ np.array([0.5, -1.0, 2.0]) + _rng.normal(size=N_ROWS)


@pytest.fixture(scope="module")
def logistic_model():
    coords = {"obs": np.arange(N_ROWS), "feature": ["a", "b", "c"]}
    with pm.Model(coords=coords) as model:
        X_data = pm.Data("X", X, dims=("obs", "feature"))
        y_data = pm.Data("y_obs", Y_BIN, dims="obs")
        alpha = pm.Normal("alpha", 0, 1)
        beta = pm.Normal("beta", 0, 2, dims="feature")
        pm.Bernoulli("y", logit_p=alpha + X_data @ beta, observed=y_data, dims="obs")
    return model


@pytest.fixture(scope="module")
def regression_model():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", X @ beta, sigma, observed=Y)
    return model


@pytest.mark.parametrize("used_before_pickling", [False, True])
def test_round_trip_gives_the_same_values(logistic_model, used_before_pickling):
    mm = pmm.MinibatchModel(logistic_model)
    rng = np.random.default_rng(1)
    theta = mm.initial_theta() + rng.normal(scale=0.5, size=mm.ndim)
    idx = rng.integers(0, N_ROWS, size=50)
    if used_before_pickling:
        mm.loglik(theta, idx)
    restored = cloudpickle.loads(cloudpickle.dumps(mm))
    assert restored is not mm
    assert restored.n_data == mm.n_data
    assert restored.ndim == mm.ndim
    assert restored.var_names == mm.var_names
    np.testing.assert_array_equal(restored.initial_theta(), mm.initial_theta())
    np.testing.assert_allclose(restored.loglik(theta, idx), mm.loglik(theta, idx), rtol=1e-14)
    assert restored.logp(theta) == pytest.approx(mm.logp(theta), rel=1e-14)
    value, grad = restored.grad_estimate(theta, idx)
    value_orig, grad_orig = mm.grad_estimate(theta, idx)
    assert value == pytest.approx(value_orig, rel=1e-14)
    np.testing.assert_allclose(grad, grad_orig, rtol=1e-12)


def test_round_trip_keeps_shared_variables_with_their_holder(regression_model):
    mm_beta = pmm.MinibatchModel(regression_model, vars=[regression_model["beta"]])
    mm_all = pmm.MinibatchModel(regression_model)
    holder = {"mm": mm_beta, "shared": dict(mm_beta.shared)}
    restored = cloudpickle.loads(cloudpickle.dumps(holder))
    (shared,) = restored["shared"].values()
    (original_shared,) = mm_beta.shared.values()
    assert shared is not original_shared
    assert list(restored["mm"].shared.values()) == [shared]

    beta = np.array([0.4, -0.9, 1.8])
    idx = np.arange(0, N_ROWS, 5)
    for sigma_log in (-0.5, 0.6):
        shared.set_value(np.asarray(sigma_log))
        theta_all = mm_all.theta_from_point({"beta": beta, "sigma_log__": np.asarray(sigma_log)})
        np.testing.assert_allclose(
            restored["mm"].loglik(beta, idx), mm_all.loglik(theta_all, idx), rtol=1e-12
        )
    # the original adapter is untouched by the restored copy's shared variable
    original_value = original_shared.get_value()
    assert original_value == pytest.approx(regression_model.initial_point()["sigma_log__"])


def test_round_trip_of_a_model_with_transformed_variables(regression_model):
    """``sigma_log__`` is a value variable, not one of the model's named variables."""
    mm = pmm.MinibatchModel(regression_model)
    restored = cloudpickle.loads(cloudpickle.dumps(mm))
    assert restored.var_names == mm.var_names
    theta = mm.initial_theta() + 0.3
    assert restored.logp(theta) == pytest.approx(mm.logp(theta), rel=1e-14)
