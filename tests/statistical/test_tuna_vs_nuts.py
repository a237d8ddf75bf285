"""TunaMH with auto-derived bounds matches NUTS on a Bernoulli-logit posterior (N=20000, d=5)."""

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior, sample_stats
from tests.support.mcse import mcse_mean, mcse_sd

TUNA_STATS = {
    "accept", "accepted", "batch_size", "kept", "expected_batch_size", "fallback",
    "proposal_scale", "chi",
}  # fmt: skip


@pytest.mark.slow
def test_tuna_means_and_sds_match_nuts_within_4_mcse():
    rng = np.random.default_rng(20000)
    X = rng.normal(size=(20000, 5))
    y = (rng.random(20000) < 1 / (1 + np.exp(-X @ rng.normal(scale=0.5, size=5)))).astype("int64")
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=5)
        pm.Bernoulli("y", logit_p=X @ beta, observed=y)
    common = dict(chains=2, cores=1, progressbar=False, compute_convergence_checks=False)
    with model:
        step = pmm.TunaMH(bounds="auto", rng=4)
        tuna = pm.sample(step=step, draws=10000, tune=2000, random_seed=4, **common)
        nuts = pm.sample(draws=2000, tune=1000, random_seed=5, **common)
    assert TUNA_STATS <= set(sample_stats(tuna).data_vars)
    assert float(sample_stats(tuna)["batch_size"].mean()) < 0.1 * 20000  # a minibatch sampler
    for k in range(5):
        a = posterior(tuna)["beta"].values[..., k]
        b = posterior(nuts)["beta"].values[..., k]
        assert abs(a.mean() - b.mean()) < 4 * np.hypot(mcse_mean(a), mcse_mean(b))
        assert abs(a.std() - b.std()) < 4 * np.hypot(mcse_sd(a), mcse_sd(b))
