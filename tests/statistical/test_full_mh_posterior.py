"""FullMH against an analytic posterior: Normal mean with known variance."""

import numpy as np
import pymc as pm

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior
from tests.support.mcse import mcse_mean, mcse_sd


def test_conjugate_normal_mean_within_4_mcse():
    rng = np.random.default_rng(2026)
    sigma, prior_sd = 2.0, 3.0
    y = rng.normal(1.5, sigma, size=200)
    precision = 1 / prior_sd**2 + y.size / sigma**2
    post_mean, post_sd = (y.sum() / sigma**2) / precision, precision**-0.5
    with pm.Model():
        mu = pm.Normal("mu", 0.0, prior_sd)
        pm.Normal("y", mu, sigma, observed=y)
        idata = pm.sample(
            step=pmm.FullMH(),
            draws=4000,
            tune=1000,
            chains=2,
            cores=1,
            random_seed=7,
            progressbar=False,
            compute_convergence_checks=False,
        )
    draws = posterior(idata)["mu"].values
    assert abs(draws.mean() - post_mean) < 4 * mcse_mean(draws)
    assert abs(draws.std() - post_sd) < 4 * mcse_sd(draws)
