"""Invalid parameter values give -inf log-densities (as in model.compile_logp), not errors."""

import numpy as np
import pymc as pm

import pymc_minibatch as pmm


def test_invalid_scale_gives_minus_inf_like_pymc():
    y = np.random.default_rng(0).normal(size=50)
    with pm.Model() as model:
        mu = pm.Normal("mu")
        scale = pm.Normal("scale", 1, 0.1)  # untransformed: proposals can make it negative
        pm.Normal("y", mu, scale, observed=y)
    mm = pmm.MinibatchModel(model)
    theta = np.array([0.0, -1.0])
    assert np.all(mm.loglik(theta, [0, 1, 1]) == -np.inf)
    assert mm.logp(theta) == -np.inf == model.compile_logp()(mm.point_from_theta(theta))
