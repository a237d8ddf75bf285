"""The SGMGT kernel: hand-computed steps, its special cases, resampling, stationary law."""

import numpy as np
import pytest

from pymc_minibatch.kernels import sgmgt
from pymc_minibatch.kernels.kinetics import make_kinetics
from pymc_minibatch.kernels.sgmgt import SGMGTConfig, SGState


class ZeroNoise:
    """A generator whose normal draws are all zero: the Euler step becomes deterministic."""

    def standard_normal(self, shape):
        return np.zeros(shape)


def _gradient(theta):
    # a non-linear, non-separable log-density gradient
    return -np.array([theta[0] + 0.5 * theta[1] ** 3, np.sin(theta[0]) + theta[1]])


STATE = SGState(np.array([0.3, -1.2]), np.array([0.7, -0.4]), np.array([0.2, -0.5]))


@pytest.mark.parametrize("a", [0.5, 1, 2])
def test_zero_noise_step_equals_the_hand_computed_euler_step(a):
    kinetics = make_kinetics(a, 2.0)
    config = SGMGTConfig(kinetics, sigma_theta=0.3, sigma_p=0.8, sigma_xi=0.6, gamma=1.7)
    h = 0.05
    new, info = sgmgt.euler_step(ZeroNoise(), STATE, _gradient, h, config)

    theta, p, xi = STATE.position, STATE.momentum, STATE.thermostat
    g = _gradient(theta)
    p1 = p + h * g - h * (0.8 + 1.7 * xi) * kinetics.grad(p)
    v1 = kinetics.grad(p1)
    theta1 = theta + h * v1 + h * 0.3 * g
    xi1 = xi + h * 1.7 * (v1**2 - kinetics.hess_diag(p1)) - h * 0.6 * xi
    np.testing.assert_allclose(new.momentum, p1, rtol=1e-14)
    np.testing.assert_allclose(new.position, theta1, rtol=1e-14)
    np.testing.assert_allclose(new.thermostat, xi1, rtol=1e-14)
    assert info.grad_norm == pytest.approx(np.linalg.norm(g))


def test_frozen_thermostat_is_constant_friction():
    kinetics = make_kinetics(1, 5.0)
    config = SGMGTConfig(kinetics, sigma_theta=0.0, sigma_p=0.4, sigma_xi=0.0, gamma=0.0)
    new, _ = sgmgt.euler_step(ZeroNoise(), STATE, _gradient, 0.1, config)
    np.testing.assert_array_equal(new.thermostat, STATE.thermostat)
    p1 = (
        STATE.momentum + 0.1 * _gradient(STATE.position) - 0.1 * 0.4 * kinetics.grad(STATE.momentum)
    )
    np.testing.assert_allclose(new.momentum, p1, rtol=1e-14)


def test_a_half_without_first_order_terms_is_sgnht():
    """Ding et al. (2014), Algorithm 1 with one thermostat per coordinate, diffusion A."""
    diffusion, h = 1.3, 0.02
    config = SGMGTConfig.sgnht(diffusion)
    rng_kernel, rng_reference = np.random.default_rng(7), np.random.default_rng(7)
    state = SGState(STATE.position, STATE.momentum, STATE.thermostat - diffusion)
    # the reference thermostat is A + xi
    theta, p, xi = STATE.position, STATE.momentum, STATE.thermostat
    for _ in range(200):
        state, _ = sgmgt.euler_step(rng_kernel, state, _gradient, h, config)
        noise = np.sqrt(2 * diffusion * h) * rng_reference.standard_normal(2)
        p = p - xi * p * h + _gradient(theta) * h + noise
        theta = theta + p * h
        xi = xi + (p * p - 1.0) * h
    np.testing.assert_allclose(state.position, theta, rtol=1e-12)
    np.testing.assert_allclose(state.momentum, p, rtol=1e-12)
    np.testing.assert_allclose(state.thermostat + diffusion, xi, rtol=1e-12)


def test_gaussian_kinetics_without_thermostat_is_sghmc():
    """Chen et al. (2014), eq. (15): v = h p, eta = h^2, alpha = h C, beta_hat = 0."""
    friction, h = 0.7, 0.05
    config = SGMGTConfig.sghmc(friction)
    rng_kernel, rng_reference = np.random.default_rng(2), np.random.default_rng(2)
    state = STATE
    theta, v = STATE.position, h * STATE.momentum
    eta, alpha = h**2, h * friction
    for _ in range(200):
        state, _ = sgmgt.euler_step(rng_kernel, state, _gradient, h, config)
        v = (
            v
            + eta * _gradient(theta)
            - alpha * v
            + np.sqrt(2 * alpha * eta) * rng_reference.standard_normal(2)
        )
        theta = theta + v
    np.testing.assert_allclose(state.position, theta, rtol=1e-12)
    np.testing.assert_allclose(h * state.momentum, v, rtol=1e-12)


def test_first_order_dynamics_is_sgld():
    """Welling & Teh (2011): theta += (eps / 2) g + N(0, eps), i.e. sigma_theta = 1/2, h = eps."""
    eps = 0.01
    config = SGMGTConfig.sgld()
    rng_kernel, rng_reference = np.random.default_rng(5), np.random.default_rng(5)
    state = sgmgt.init_state(rng_kernel, STATE.position, config)
    theta = STATE.position
    for _ in range(100):
        state, _ = sgmgt.euler_step(rng_kernel, state, _gradient, eps, config)
        theta = theta + eps / 2 * _gradient(theta) + np.sqrt(eps) * rng_reference.standard_normal(2)
    np.testing.assert_allclose(state.position, theta, rtol=1e-12)
    assert state.momentum is None


def test_resampling_draws_from_the_marginals():
    config = SGMGTConfig.sgmgt(2, 3.0, sigma_p=1.0, gamma=1.0)
    state, rate = sgmgt.resample_momentum(np.random.default_rng(4), STATE, config)
    expected = config.kinetics.sample(np.random.default_rng(4), (2,))
    np.testing.assert_array_equal(state.momentum, expected.momentum)
    assert rate == expected.accept_rate
    np.testing.assert_array_equal(state.position, STATE.position)
    state = sgmgt.resample_thermostat(np.random.default_rng(4), STATE)
    np.testing.assert_array_equal(state.thermostat, np.random.default_rng(4).standard_normal(2))


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        (SGMGTConfig.sgld(), (None, 0.5, 0.0, 0.0, 0.0)),
        (SGMGTConfig.sghmc(0.7), (0.5, 0.0, 0.7, 0.0, 0.0)),
        (SGMGTConfig.sgnht(1.3), (0.5, 0.0, 1.3, 0.0, 1.0)),
        (SGMGTConfig.sgmgt(2, 10.0, sigma_p=0.4, gamma=1.5), (2, 0.0, 0.4, 0.0, 1.5)),
        (SGMGTConfig.sgmgt(1, 10.0, sigma_p=1.0, gamma=1.0, sigma_theta=0.01, sigma_xi=0.1),
         (1, 0.01, 1.0, 0.1, 1.0)),
    ],
)  # fmt: skip
def test_presets_set_the_coefficients_of_their_papers(preset, expected):
    """Monomial parameter ``a`` (or no momentum), sigma_theta, sigma_p, sigma_xi, gamma."""
    a = None if preset.kinetics is None else preset.kinetics.a
    assert (a, *preset[1:]) == expected
    sgmgt.validate_config(preset)


@pytest.mark.parametrize(
    "config",
    [
        SGMGTConfig(None, 0.0, 0.0, 0.0, 0.0),
        SGMGTConfig(None, 0.5, -1.0, 0.0, 0.0),
        SGMGTConfig(None, 0.5, 0.0, np.nan, 0.0),
        SGMGTConfig(None, 0.5, 0.0, 0.0, -2.0),
    ],
)
def test_invalid_configurations_raise(config):
    with pytest.raises(ValueError, match="sigma_theta|sigma_p|sigma_xi|gamma"):
        sgmgt.validate_config(config)


THERMOSTATS = {
    "SGNHT": (SGMGTConfig.sgnht(1.0), None),
    "SGMGT a=1": (SGMGTConfig.sgmgt(1, 10.0, sigma_p=1.0, gamma=1.0), 100),
    "SGMGT a=2": (SGMGTConfig.sgmgt(2, 10.0, sigma_p=1.0, gamma=1.0), 100),
    "SGMGT-D a=1": (
        SGMGTConfig.sgmgt(1, 10.0, sigma_p=1.0, gamma=1.0, sigma_theta=0.01, sigma_xi=0.1),
        100,
    ),
}


def _stationary_variance(config, period, h, noise_ratio, steps=8000, chains=64, seed=0):
    """E[theta^2] for N(0, 1) with gradient noise of variance ``noise_ratio`` (chains as coords)."""
    rng = np.random.default_rng(seed)
    state = sgmgt.init_state(rng, rng.standard_normal(chains), config)

    def gradient(theta):
        return -theta + np.sqrt(noise_ratio) * rng.standard_normal(theta.shape)

    second_moments = []
    for t in range(steps):
        state, _ = sgmgt.euler_step(rng, state, gradient, h, config)
        if period and (t + 1) % period == 0:
            state, _ = sgmgt.resample_momentum(rng, state, config)
            state = sgmgt.resample_thermostat(rng, state)
        if t >= steps // 4:
            second_moments.append(np.mean(state.position**2))
    return float(np.mean(second_moments))


@pytest.mark.parametrize("name", list(THERMOSTATS))
def test_thermostats_absorb_gradient_noise_at_the_default_step(name):
    """At h = 0.5 / (1 + r), r = 49 (the presets' rule), variance within 10% of 1; at
    h = 0.1 the same samplers are off by more than 20% (so the check can fail)."""
    config, period = THERMOSTATS[name]
    r = 49.0
    assert abs(_stationary_variance(config, period, 0.5 / (1.0 + r), r) - 1.0) < 0.1
    assert abs(_stationary_variance(config, period, 0.1, r, steps=3000) - 1.0) > 0.2


CENTRES = np.arange(-16.0, 16.1, 4.0)


def _multiwell_gradient(theta, rng):
    """A mixture of 9 N(c, 0.5^2) wells 4 apart (barriers of 8 nats), gradient noise N(0, 2)."""
    z = (theta[:, None] - CENTRES) / 0.5
    log_w = -0.5 * z**2
    w = np.exp(log_w - log_w.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    return -(w * z / 0.5).sum(axis=1) + np.sqrt(2.0) * rng.standard_normal(theta.shape)


def wells_visited(config, period, seed, steps=40_000, h=0.15):
    rng = np.random.default_rng(seed)
    state = sgmgt.init_state(rng, np.zeros(1), config)
    visited = set()
    for t in range(steps):
        state, _ = sgmgt.euler_step(rng, state, lambda x: _multiwell_gradient(x, rng), h, config)
        if period and (t + 1) % period == 0:
            state, _ = sgmgt.resample_momentum(rng, state, config)
            state = sgmgt.resample_thermostat(rng, state)
        visited.add(int(np.argmin(np.abs(state.position[0] - CENTRES))))
    return len(visited)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sgmgtd_a2_visits_more_wells_than_sgnht(seed):
    sgnht = SGMGTConfig.sgnht(0.1)
    sgmgtd = SGMGTConfig.sgmgt(2, 10.0, sigma_p=0.1, gamma=1.0, sigma_theta=0.01, sigma_xi=0.1)
    assert wells_visited(sgmgtd, 100, seed) > wells_visited(sgnht, None, seed)
