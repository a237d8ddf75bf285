"""MINT against its exact invariant marginal on a conjugate Normal-mean model.

MINT is a pseudo-marginal chain: its theta-marginal is
``f*(theta) ∝ p(theta)^(1/T) E_S[exp(n^lambda mu_S(theta))]``. For a Normal mean the
CLT form ``p(theta)^(1/T) exp(n^lambda mu(theta) + n^(2 lambda) Var_S(mu_S(theta)) / 2)``
(``Var_S`` with the finite-population factor of sampling without replacement) is a
Gaussian, tabulated here on a grid; averaging ``exp(n^lambda mu_S)`` over 4000 random
batches gives the same variance within 0.2%. Its variance is 4.3% above the tempered
posterior's for these settings (n = 10^4, m = 500, alpha = 0.99, T = 461).
"""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior
from pymc_minibatch.kernels.mint import tempering_settings
from tests.support.mcse import mcse_mean, mcse_sd

N, BATCH, ALPHA, PRIOR_SD = 10_000, 500, 0.99, 10.0
Y = np.random.default_rng(0).normal(1.0, 1.0, size=N)


def mint_target_moments(y, batch_size, alpha, prior_sd):
    """Mean and variance of f* (CLT form) and of the tempered posterior, by quadrature."""
    n = y.size
    settings = tempering_settings(n, batch_size, alpha)
    grid = np.linspace(y.mean() - 2.0, y.mean() + 2.0, 2001)
    loglik = stats.norm.logpdf(y[None, :], grid[:, None], 1.0)
    mean_loglik, var_loglik = loglik.mean(1), loglik.var(1, ddof=1)
    batch_variance = var_loglik / batch_size * (n - batch_size) / n
    tempered = stats.norm.logpdf(grid, 0.0, prior_sd) / settings.temperature + (
        settings.scale * mean_loglik
    )
    target = tempered + 0.5 * settings.scale**2 * batch_variance
    return _moments(grid, target), _moments(grid, tempered)


def _moments(grid, log_density):
    weights = np.exp(log_density - log_density.max())
    weights /= np.trapezoid(weights, grid)
    mean = np.trapezoid(grid * weights, grid)
    return mean, np.trapezoid((grid - mean) ** 2 * weights, grid)


def test_target_is_wider_than_the_tempered_posterior_by_the_stated_amount():
    (_, target_var), (_, tempered_var) = mint_target_moments(Y, BATCH, ALPHA, PRIOR_SD)
    assert target_var / tempered_var - 1.0 == pytest.approx(0.043, abs=0.002)


@pytest.mark.slow
@pytest.mark.parametrize("proposal", ["rw", "sgld"])
def test_mint_draws_match_the_invariant_marginal(proposal):
    with pm.Model():
        mu = pm.Normal("mu", 0.0, PRIOR_SD)
        pm.Normal("y", mu, 1.0, observed=Y)
        step = pmm.MINT(batch_size=BATCH, alpha=ALPHA, proposal=proposal)
        idata = pm.sample(
            step=step, draws=20_000, tune=2000, chains=2, cores=1, random_seed=11,
            initvals={"mu": 1.0}, progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    draws = posterior(idata)["mu"].values
    (mean, var), _ = mint_target_moments(Y, BATCH, ALPHA, PRIOR_SD)
    assert abs(draws.mean() - mean) < 4.0 * mcse_mean(draws)
    assert abs(draws.std() - np.sqrt(var)) < 4.0 * mcse_sd(draws)


def _tied_means_mixture(n_rows, seed=0):
    """Li & Wong's tied-means mixture (after Welling & Teh 2011): data at theta = (0, 1)."""
    rng = np.random.default_rng(seed)
    first = rng.random(n_rows) < 0.5
    x = np.where(
        first, rng.normal(0.0, np.sqrt(2.0), n_rows), rng.normal(1.0, np.sqrt(2.0), n_rows)
    )
    with pm.Model() as model:
        theta1 = pm.Normal("theta1", 0.0, np.sqrt(10.0))
        theta2 = pm.Normal("theta2", 0.0, 1.0)
        pm.NormalMixture(
            "x", w=[0.5, 0.5], mu=pm.math.stack([theta1, theta1 + theta2]),
            sigma=np.sqrt(2.0), observed=x,
        )  # fmt: skip
    return model, x


def _tempered_mode_fraction(x, temperature):
    """Mass of theta2 > 0 (the mode at (0, 1)) under the posterior raised to 1/T, by grid."""
    grid1, grid2 = np.linspace(-2.5, 3.5, 61), np.linspace(-3.0, 3.0, 60)  # no node at 0
    t1, t2 = np.meshgrid(grid1, grid2, indexing="ij")
    log_post = stats.norm.logpdf(t1, 0, np.sqrt(10.0)) + stats.norm.logpdf(t2, 0, 1.0)
    for rows in np.array_split(np.arange(x.size), 40):
        xi = x[rows]
        log_post += np.sum(
            np.logaddexp(
                stats.norm.logpdf(xi, t1[..., None], np.sqrt(2.0)),
                stats.norm.logpdf(xi, (t1 + t2)[..., None], np.sqrt(2.0)),
            )
            + np.log(0.5),
            axis=-1,
        )
    weights = np.exp((log_post - log_post.max()) / temperature)
    return weights[t2 > 0].sum() / weights.sum()


@pytest.mark.slow
def test_mint_visits_both_modes_of_the_tied_means_mixture():
    model, x = _tied_means_mixture(20_000)
    with model:
        step = pmm.MINT(batch_size=2000)
        idata = pm.sample(
            step=step, draws=10_000, tune=1000, chains=2, cores=1, random_seed=3,
            initvals={"theta1": 0.0, "theta2": 1.0}, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    in_start_mode = posterior(idata)["theta2"].values > 0
    expected = _tempered_mode_fraction(x, step.temperature)
    for chain in in_start_mode:  # each chain, started in one mode, spends time in both
        assert 0.2 < chain.mean() < 0.8
    ratio, expected_ratio = (
        in_start_mode.mean() / (1 - in_start_mode.mean()),
        expected / (1 - expected),
    )
    assert abs(ratio / expected_ratio - 1.0) < 0.2
