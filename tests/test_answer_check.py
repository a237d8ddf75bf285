"""The approximate samplers' check against the Laplace approximation: it names the
coordinate when a deliberately broken sampler's draws are off, and is quiet otherwise."""

import logging
import warnings

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch import particles
from tests.zoo_samplers import CheckMessages

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
    handler = CheckMessages()
    logger = logging.getLogger("pymc")
    logger.addHandler(handler)
    try:
        with model:
            pm.sample(step=step, **SAMPLE)
    finally:
        logger.removeHandler(handler)
    return handler.messages


def _shifted_gradients(estimate, shift):
    """A broken gradient estimate: the true one plus a constant ``shift``."""
    def broken(theta, rows):
        log_density, gradient = estimate(theta, rows)
        return log_density, gradient + shift

    return broken


def test_a_chain_with_a_biased_gradient_is_reported_by_name():
    model = regression()
    with model:
        step = pmm.SGLD(batch_size=100)
    assert _logged_checks(model, step) == []  # the working sampler is quiet
    sd = np.sqrt(step.laplace.covariance_diagonal())
    shift = np.zeros(step.minibatch_model.ndim)
    beta_1 = step.minibatch_model.coordinate_names().index("beta[1]")
    # a drift of 20 sds' worth of curvature: the chain settles about 20 sds away
    shift[beta_1] = 20.0 / sd[beta_1]
    step.estimate = _shifted_gradients(step.estimate, shift)
    (message,) = _logged_checks(model, step)
    assert message.startswith("SGLD's draws are far from the posterior: over 200 draws")
    assert "the mean of 'beta[1]' is" in message and "smaller step_size" in message


def test_particles_spread_too_wide_are_reported(monkeypatch):
    model = regression()
    settings = {"n_particles": 100, "n_steps": 100, "progressbar": False, "random_seed": 4}
    with warnings.catch_warnings():
        warnings.simplefilter("error", pmm.AnswerCheckWarning)
        pmm.sample_particles("svgd", model=model, **settings)

    run = particles._ParticleRun.run

    def widened(self, thetas, n_steps, progressbar):
        thetas, logp, history = run(self, thetas, n_steps, progressbar)
        return thetas.mean(axis=0) + 5.0 * (thetas - thetas.mean(axis=0)), logp, history

    monkeypatch.setattr(particles._ParticleRun, "run", widened)
    with pytest.warns(pmm.AnswerCheckWarning, match=r"sample_particles\('svgd'\)'s draws are "
                      r"far from the posterior: over 100 draws \(the particles\), the sd of"):
        pmm.sample_particles("svgd", model=model, **settings)
