"""``MinibatchModel`` on a subset of the free variables, as inside a ``CompoundStep``.

With ``vars=[beta]`` the other free variable (``sigma``) enters through ``mm.shared``, a
dict from its value variable to a shared variable. Setting that shared value must move
every quantity exactly as the all-variable adapter moves at the same point.
"""

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm

N_ROWS = 400
N_FEATURES = 3
SIGMA_LOG_VALUES = [-0.7, 0.0, 0.9]

_rng = np.random.default_rng(11)
X = _rng.normal(size=(N_ROWS, N_FEATURES))
Y = X @ np.array([0.5, -1.0, 2.0]) + _rng.standard_t(5, size=N_ROWS)


@pytest.fixture(scope="module")
def model():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1)
        pm.StudentT("y", nu=5, mu=X @ beta, sigma=sigma, observed=Y)
    return model


@pytest.fixture(scope="module")
def mm_all(model):
    return pmm.MinibatchModel(model)


@pytest.fixture(scope="module")
def mm_beta(model):
    return pmm.MinibatchModel(model, vars=[model["beta"]])


def _set_sigma_log(mm, value):
    (shared,) = mm.shared.values()
    shared.set_value(np.asarray(value, dtype=np.float64))


def _theta_all(mm_all, beta, sigma_log):
    return mm_all.theta_from_point({"beta": beta, "sigma_log__": np.asarray(sigma_log)})


def test_other_variable_is_a_shared_input(model, mm_beta):
    assert mm_beta.var_names == ["beta"]
    assert mm_beta.ndim == N_FEATURES
    assert list(mm_beta.shared) == [model.rvs_to_values[model["sigma"]]]
    (shared,) = mm_beta.shared.values()
    assert shared.get_value() == pytest.approx(model.initial_point()["sigma_log__"])


def test_shared_value_drives_loglik_like_the_all_vars_model(mm_all, mm_beta):
    rng = np.random.default_rng(3)
    beta = np.array([0.4, -0.8, 1.7])
    idx = rng.integers(0, N_ROWS, size=40)
    all_rows = np.arange(N_ROWS)
    previous = None
    (shared,) = mm_beta.shared.values()
    original = shared.get_value().copy()
    try:
        for sigma_log in SIGMA_LOG_VALUES:
            _set_sigma_log(mm_beta, sigma_log)
            theta_all = _theta_all(mm_all, beta, sigma_log)
            loglik = mm_beta.loglik(beta, idx)
            np.testing.assert_allclose(loglik, mm_all.loglik(theta_all, idx), rtol=1e-12)
            if previous is not None:
                assert np.all(np.abs(loglik - previous) > 1e-6)
            previous = loglik

            pair = mm_beta.loglik_pair(beta, beta + 0.1, idx)
            pair_all = mm_all.loglik_pair(theta_all, _theta_all(mm_all, beta + 0.1, sigma_log), idx)
            np.testing.assert_allclose(pair, pair_all, rtol=1e-12)

            np.testing.assert_allclose(
                mm_beta.grad_loglik(beta, idx),
                mm_all.grad_loglik(theta_all, idx)[:N_FEATURES],
                rtol=1e-10,
            )
            np.testing.assert_allclose(
                mm_beta.grad_loglik(beta, idx, per_row=True),
                mm_all.grad_loglik(theta_all, idx, per_row=True)[:, :N_FEATURES],
                rtol=1e-10,
                atol=1e-12,
            )
            value, grad = mm_beta.grad_estimate(beta, idx)
            value_all, grad_all = mm_all.grad_estimate(theta_all, idx)
            assert value == pytest.approx(value_all, rel=1e-12)
            np.testing.assert_allclose(grad, grad_all[:N_FEATURES], rtol=1e-10)

            assert mm_beta.logprior(beta) == pytest.approx(mm_all.logprior(theta_all), rel=1e-12)
            logp, logp_grad = mm_beta.logp_and_grad(beta)
            logp_all, logp_grad_all = mm_all.logp_and_grad(theta_all)
            assert logp == pytest.approx(logp_all, rel=1e-12)
            assert mm_beta.logp(beta) == pytest.approx(logp_all, rel=1e-12)
            np.testing.assert_allclose(logp_grad, logp_grad_all[:N_FEATURES], rtol=1e-10)
            np.testing.assert_allclose(
                mm_beta.loglik(beta, all_rows), mm_all.loglik(theta_all, all_rows), rtol=1e-12
            )
    finally:
        shared.set_value(original)


def test_vars_given_as_value_variable(model, mm_beta):
    mm_value = pmm.MinibatchModel(model, vars=[model.rvs_to_values[model["beta"]]])
    assert mm_value.var_names == ["beta"]
    assert list(mm_value.shared) == list(mm_beta.shared)
    beta, idx = np.array([0.3, 0.2, 0.1]), np.arange(0, N_ROWS, 3)
    np.testing.assert_allclose(mm_value.loglik(beta, idx), mm_beta.loglik(beta, idx))


def test_vars_order_sets_theta_order(model, mm_all):
    mm_rev = pmm.MinibatchModel(model, vars=[model["sigma"], model["beta"]])
    assert mm_rev.var_names == ["sigma_log__", "beta"]
    assert mm_rev.shared == {}
    beta, sigma_log = np.array([0.1, 0.2, -0.3]), 0.4
    theta_rev = np.r_[sigma_log, beta]
    np.testing.assert_array_equal(
        mm_rev.theta_from_point({"beta": beta, "sigma_log__": np.asarray(sigma_log)}), theta_rev
    )
    theta_all = _theta_all(mm_all, beta, sigma_log)
    idx = np.arange(0, N_ROWS, 7)
    np.testing.assert_allclose(mm_rev.loglik(theta_rev, idx), mm_all.loglik(theta_all, idx))
    _, grad_rev = mm_rev.logp_and_grad(theta_rev)
    _, grad_all = mm_all.logp_and_grad(theta_all)
    np.testing.assert_allclose(grad_rev, np.r_[grad_all[N_FEATURES:], grad_all[:N_FEATURES]])
