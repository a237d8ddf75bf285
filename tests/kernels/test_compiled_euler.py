"""The compiled Euler step is the NumPy step: every preset's coefficients, the same state and
the same generator give the same position, momentum and thermostats (bit for bit with
Gaussian kinetics; to rounding where the softened kinetics' ``tanh`` is evaluated from
``exp``), and leave the generator in the same state."""

import numpy as np
import pytest

from pymc_minibatch.kernels import compiled_euler
from pymc_minibatch.kernels.noise import COMPILED_MIN_SIZE
from pymc_minibatch.kernels.sgmgt import SGMGTConfig, SGState, euler_step, resample_momentum

SIZE = COMPILED_MIN_SIZE + 3

CONFIGS = {
    "sgld": SGMGTConfig.sgld(),
    "sghmc": SGMGTConfig.sghmc(0.7),
    "sgnht": SGMGTConfig.sgnht(0.7),
    "sgmgt a=1": SGMGTConfig.sgmgt(1, 3.0, sigma_p=0.5, gamma=1.0),
    "sgmgt a=2": SGMGTConfig.sgmgt(2, 3.0, sigma_p=0.5, gamma=1.0),
    "sgmgtd a=1": SGMGTConfig.sgmgt(1, 3.0, sigma_p=0.5, gamma=1.0, sigma_theta=0.2,
                                    sigma_xi=0.3),  # fmt: skip
    "sgmgtd a=2": SGMGTConfig.sgmgt(2, 3.0, sigma_p=0.5, gamma=1.0, sigma_theta=0.2,
                                    sigma_xi=0.3),  # fmt: skip
    # each loop is compiled per kinetics and per set of non-zero terms: the other sets
    "gaussian, every term": SGMGTConfig.sgmgt(0.5, 3.0, sigma_p=0.5, gamma=1.0, sigma_theta=0.2,
                                              sigma_xi=0.3),  # fmt: skip
    "uncoupled moving thermostats a=2": SGMGTConfig.sgmgt(2, 3.0, sigma_p=0.5, gamma=0.0,
                                                          sigma_xi=0.3),  # fmt: skip
    "no momentum noise a=1": SGMGTConfig.sgmgt(1, 3.0, sigma_p=0.0, gamma=1.0, sigma_theta=0.2),
}


def _state(config, rng):
    position = rng.normal(size=SIZE)
    if config.kinetics is None:
        return SGState(position)
    momentum = rng.normal(size=SIZE)
    momentum[:3] = 0.0  # a = 2: K_c' is 0 and K_c'' infinite at p = 0
    return SGState(position, momentum, rng.normal(size=SIZE))


@pytest.mark.parametrize("name", CONFIGS)
def test_compiled_step_is_the_numpy_step(name, monkeypatch):
    config = CONFIGS[name]
    state = _state(config, np.random.default_rng(0))
    gradient = np.random.default_rng(1).normal(scale=5.0, size=SIZE)
    compiled_rng = np.random.default_rng(2)
    assert compiled_euler.applies(config, SIZE, compiled_rng)
    compiled, _ = euler_step(compiled_rng, state, lambda theta: gradient, 0.01, config)
    monkeypatch.setattr(compiled_euler, "applies", lambda *args: False)
    numpy_rng = np.random.default_rng(2)
    expected, _ = euler_step(numpy_rng, state, lambda theta: gradient, 0.01, config)
    exact = config.kinetics is None or config.kinetics.a == 0.5
    for field in ("position", "momentum", "thermostat"):
        got, want = getattr(compiled, field), getattr(expected, field)
        if want is None:
            assert got is None
        elif exact:
            np.testing.assert_array_equal(got, want, err_msg=field)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14, err_msg=field)
    np.testing.assert_array_equal(compiled_rng.random(4), numpy_rng.random(4))


def test_compiled_step_leaves_its_input_unchanged():
    config = CONFIGS["sgmgtd a=1"]
    state = _state(config, np.random.default_rng(0))
    copies = [state.position.copy(), state.momentum.copy(), state.thermostat.copy()]
    euler_step(np.random.default_rng(2), state, lambda theta: np.ones(SIZE), 0.01, config)
    for before, after in zip(copies, state[:3], strict=True):
        np.testing.assert_array_equal(before, after)


def test_compiled_step_applies_to_big_models_only():
    rng = np.random.default_rng(0)
    config = CONFIGS["sghmc"]
    assert not compiled_euler.applies(config, COMPILED_MIN_SIZE - 1, rng)
    assert not compiled_euler.applies(config, SIZE, np.random.RandomState(0))
    stiff = SGMGTConfig.sgmgt(1, np.inf, sigma_p=0.5, gamma=1.0)
    assert not compiled_euler.applies(stiff, SIZE, rng)


@pytest.mark.parametrize("name", ["sgmgt a=1", "sgmgtd a=2", "sghmc"])
def test_successive_steps_and_a_resampled_momentum_are_the_numpy_steps(name, monkeypatch):
    """The compiled step reuses the kinetics' decay of the momentum it made on the step
    before, and recomputes it once the momentum was redrawn."""
    config = CONFIGS[name]
    start = _state(config, np.random.default_rng(0))
    gradients = np.random.default_rng(1).normal(scale=5.0, size=(3, SIZE))

    def run(rng):
        state = start
        for k, gradient in enumerate(gradients):
            if k == 2:
                state = resample_momentum(rng, state, config)[0]
            state, _ = euler_step(rng, state, lambda theta, g=gradient: g, 0.01, config)
        return state

    compiled = run(np.random.default_rng(2))
    softened = config.kinetics.a != 0.5
    assert (compiled.kinetics_cache is not None) == softened
    monkeypatch.setattr(compiled_euler, "applies", lambda *args: False)
    expected = run(np.random.default_rng(2))
    for field in ("position", "momentum", "thermostat"):
        np.testing.assert_allclose(getattr(compiled, field), getattr(expected, field),
                                   rtol=1e-12, atol=1e-14, err_msg=field)  # fmt: skip
