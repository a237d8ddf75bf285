"""The approximate samplers' check by Stein's identities: it reports a deliberately broken
sampler's draws, naming the coordinate when one is off, and is quiet otherwise."""

import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch import particles
from pymc_minibatch.kernels import sg_chain
from tests.support.zoo_samplers import logged_checks

RNG = np.random.default_rng(31)
X = RNG.normal(size=(5000, 2))
Y = 1.0 + X @ np.array([0.5, -1.0]) + RNG.normal(size=5000)
SAMPLE = {"chains": 1, "cores": 1, "tune": 100, "draws": 400, "progressbar": False,
          "compute_convergence_checks": False, "random_seed": 3}  # fmt: skip


def regression():
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 5.0)
        beta = pm.Normal("beta", 0.0, 2.0, shape=2)
        pm.Normal("y", alpha + X @ beta, pm.HalfNormal("sigma", 2.0), observed=Y)
    return model


def _logged_checks(model, step):
    """Messages of the answer check that ``pm.sample`` logged for ``step``'s chain."""
    with logged_checks() as messages, model:
        pm.sample(step=step, **SAMPLE)
    return messages


def _loud_langevin_step(rng, state, gradient_fn, h, config):
    """A broken SGLD update: the right drift, but twice the noise of Langevin dynamics
    (its draws spread about twice as wide as the posterior; the gradients stay exact)."""
    gradient = gradient_fn(state.position)
    noise = 2.0 * np.sqrt(2.0 * h) * rng.standard_normal(state.position.shape)
    return state._replace(position=state.position + h * gradient + noise), None


def test_a_chain_with_too_much_noise_is_reported(monkeypatch):
    model = regression()
    with model:
        step = pmm.SGLD(batch_size=100)
    assert _logged_checks(model, step) == []  # the working sampler is quiet
    monkeypatch.setattr(sg_chain, "euler_step", _loud_langevin_step)
    (message,) = _logged_checks(model, step)
    assert message.startswith("SGLD's draws are far from the posterior: over 200 draws")
    assert "their sds are together about 2" in message and "smaller step_size" in message


def test_particles_spread_too_wide_are_reported(monkeypatch):
    model = regression()
    settings = {"n_particles": 100, "n_steps": 100, "progressbar": False, "random_seed": 4}
    with warnings.catch_warnings():
        warnings.simplefilter("error", pmm.AnswerCheckWarning)
        pmm.sample_particles("svgd", model=model, **settings)

    run = particles._run

    def widened(*args):
        state, *reports = run(*args)
        z = state.position
        return state._replace(position=z.mean(axis=0) + 5.0 * (z - z.mean(axis=0))), *reports

    monkeypatch.setattr(particles, "_run", widened)
    with pytest.warns(pmm.AnswerCheckWarning, match=r"sample_particles\('svgd'\)'s draws are "
                      r"far from the posterior: over 100 draws \(the particles\), the sd of"):
        pmm.sample_particles("svgd", model=model, **settings)
