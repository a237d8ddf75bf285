"""The worked example of the docs page "Architecture" (``docs/architecture_example.py``): its
kernel follows the protocol, its transition is the formula, and its step method samples an
analytic posterior."""

import copy
import importlib.util
import pathlib

import numpy as np
import pymc as pm
import pytest

from pymc_minibatch._compat import posterior
from tests.support.mcse import mcse_mean, mcse_sd

PATH = pathlib.Path(__file__).resolve().parents[1] / "docs" / "architecture_example.py"
SPEC = importlib.util.spec_from_file_location("architecture_example", PATH)
example = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(example)


def _gaussian(precision):
    def logdensity_and_grad(theta):
        return -0.5 * precision * float(theta @ theta), -precision * theta

    return logdensity_and_grad


def test_the_kernel_step_is_the_mala_formula_and_a_function_of_the_generator():
    target, h = _gaussian(2.0), 0.3
    state = example.init(np.array([0.5, -1.0]), target)
    rng = np.random.default_rng(4)
    twin = copy.deepcopy(rng)
    new, info = example.step(rng, state, target, h)
    # by hand: the noise, the proposal's mean step, then the uniform
    noise = twin.standard_normal(2)
    proposal = state.position + 0.5 * h**2 * state.gradient + h * noise
    back = state.position - (proposal + 0.5 * h**2 * -2.0 * proposal)
    forth = proposal - (state.position + 0.5 * h**2 * state.gradient)
    log_ratio = (-(proposal @ proposal) + state.position @ state.position
                 - 0.5 * (back @ back - forth @ forth) / h**2)  # fmt: skip
    assert info.accept == pytest.approx(min(1.0, np.exp(log_ratio)), rel=1e-12)
    accepted = np.log(twin.uniform()) < log_ratio
    assert info.accepted == accepted
    np.testing.assert_array_equal(new.position, proposal if accepted else state.position)
    again, again_info = example.step(np.random.default_rng(4), state, target, h)
    np.testing.assert_array_equal(again.position, new.position)
    assert again_info == info


def test_a_nonfinite_proposal_is_rejected_and_counted():
    start = np.array([0.2])

    def target(theta):  # finite only at the start
        value = 0.0 if np.array_equal(theta, start) else -np.inf
        return value, np.zeros_like(theta)

    state = example.init(start, target)
    new, info = example.step(np.random.default_rng(0), state, target, 0.5)
    assert new is state and info == example.Info(0.0, False, True)


def test_the_step_method_samples_a_normal_mean_posterior():
    rng = np.random.default_rng(0)
    y = rng.normal(1.5, 1.0, size=200)
    prior_sd = 10.0
    post_var = 1.0 / (1.0 / prior_sd**2 + y.size)
    post_mean = post_var * y.sum()
    with pm.Model():
        mu = pm.Normal("mu", 0.0, prior_sd)
        pm.Normal("y", mu, 1.0, observed=y)
        step = example.MALA()
        idata = pm.sample(step=step, draws=2000, tune=500, chains=2, random_seed=3,
                          progressbar=False, compute_convergence_checks=False)  # fmt: skip
    draws = posterior(idata)["mu"].values
    assert abs(draws.mean() - post_mean) < 4 * mcse_mean(draws)
    assert abs(draws.std() - np.sqrt(post_var)) < 4 * mcse_sd(draws)
    accept = float(idata["sample_stats"]["accept"].mean())
    assert 0.4 < accept < 0.8  # tuned toward 0.57
