"""TunaMH and TFMH with second-order bounds on a trust region, against grid quadrature.

Normal rows with a sampled scale, Poisson rows with a log link and a varying-intercept model
have third derivatives bounded only on bounded sets; the bounds then hold on a ball around
the mode and a step with a point outside it is a full-data step. Each problem is also run
with the exact part's quadratic halved (a negative control that must fail the same checks),
and the Normal one with a trust region so small that most steps are full-data steps (the
switch between the two kernels keeps the chain exact), with its own negative control.
"""

import numpy as np
import pymc as pm
import pytest
from scipy import stats

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior, sample_stats
from pymc_minibatch.kernels import tuna as tuna_kernel
from pymc_minibatch.kernels.exact_mh import full_data_mh
from pymc_minibatch.model.taylor import SecondOrderExpansion
from tests.statistical.test_exactness import CHAINS, TUNE, _worst
from tests.support.mcse import ess, mcse_mean, mcse_sd
from tests.support.quadrature import GridMarginal, grid_marginals_2d

# minutes of sampling: run once in CI, in the slow tier (see .ci/run)
pytestmark = pytest.mark.slow

DRAWS = 6000


def _normal_scale_problem():
    """``y ~ Normal(b x, sigma)``, ``b ~ N(0, 2)``, ``sigma ~ HalfNormal(2)``; 2000 rows."""
    rng = np.random.default_rng(21)
    x = rng.normal(1.0, 1.0, size=2000)
    y = 0.8 * x + 0.7 * rng.normal(size=2000)
    with pm.Model() as model:
        b = pm.Normal("b", 0.0, 2.0)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", b * x, sigma, observed=y)
    sxx, sxy, syy = x @ x, x @ y, y @ y
    grid_b, grid_s = np.linspace(0.74, 0.86, 301), np.linspace(0.64, 0.76, 301)
    bb, ss = np.meshgrid(grid_b, grid_s, indexing="ij")
    squares = syy - 2.0 * bb * sxy + bb**2 * sxx
    log_post = (stats.norm.logpdf(bb, 0, 2) + stats.halfnorm.logpdf(ss, scale=2)
                - y.size * np.log(ss) - 0.5 * squares / ss**2)  # fmt: skip
    marginal_b, marginal_s = grid_marginals_2d(grid_b, grid_s, log_post)
    return model, {"b": [marginal_b], "sigma": [marginal_s]}, {"b": 0.8, "sigma": 0.7}


def _poisson_problem():
    """``counts ~ Poisson(exp(a + b x))``, ``a, b ~ N(0, 3)``; 2000 rows, mean count 5."""
    rng = np.random.default_rng(22)
    x = rng.normal(0.5, 1.0, size=2000)
    counts = rng.poisson(np.exp(1.4 + 0.3 * x))
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 3.0)
        b = pm.Normal("b", 0.0, 3.0)
        pm.Poisson("counts", pm.math.exp(a + b * x), observed=counts)
    grid_a, grid_b = np.linspace(1.3, 1.5, 281), np.linspace(0.22, 0.38, 281)
    aa, bb = np.meshgrid(grid_a, grid_b, indexing="ij")
    log_post = stats.norm.logpdf(aa, 0, 3) + stats.norm.logpdf(bb, 0, 3)
    for rows in np.array_split(np.arange(x.size), 20):
        eta = aa[..., None] + bb[..., None] * x[rows]
        log_post += np.sum(counts[rows] * eta - np.exp(eta), axis=-1)
    marginal_a, marginal_b = grid_marginals_2d(grid_a, grid_b, log_post)
    return model, {"a": [marginal_a], "b": [marginal_b]}, {"a": 1.4, "b": 0.3}


def _varying_intercepts_problem():
    """Two groups: ``y ~ Normal(a[g], sigma)``, ``a ~ Normal(mu, 1)``, ``mu ~ N(0, 3)``,
    ``sigma ~ HalfNormal(2)``; 1200 rows (400 and 800). With ``mu`` integrated out, ``a``
    has the prior ``N(0, I + 9 11')``, so the marginals of ``a`` and ``sigma`` come from a
    3-D grid over the groups' sufficient statistics."""
    rng = np.random.default_rng(23)
    g = np.repeat([0, 1], [400, 800])
    y = np.array([1.5, 2.5])[g] + 0.9 * rng.normal(size=g.size)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 3.0)
        a = pm.Normal("a", mu, 1.0, shape=2)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", a[g], sigma, observed=y)
    counts = np.bincount(g)
    sums, squares = np.bincount(g, y), np.bincount(g, y * y)
    means, spread = sums / counts, 0.9 / np.sqrt(counts)
    grids = [np.linspace(m - 7 * s, m + 7 * s, 121) for m, s in zip(means, spread, strict=True)]
    grid_s = np.linspace(0.82, 0.98, 121)
    a0, a1, ss = np.meshgrid(*grids, grid_s, indexing="ij")
    prior_a = stats.multivariate_normal(np.zeros(2), np.eye(2) + 9.0).logpdf(
        np.stack([a0, a1], axis=-1)
    )
    residual = sum(squares[k] - 2 * ak * sums[k] + counts[k] * ak**2
                   for k, ak in enumerate((a0, a1)))  # fmt: skip
    log_post = (prior_a + stats.halfnorm.logpdf(ss, scale=2) - g.size * np.log(ss)
                - 0.5 * residual / ss**2)  # fmt: skip
    weights = np.exp(log_post - log_post.max())
    marginals = []
    for axis, grid in enumerate([*grids, grid_s]):
        others = tuple(k for k in range(3) if k != axis)
        marginals.append(GridMarginal(grid, np.log(weights.sum(axis=others))))
    initvals = {"mu": 2.0, "a": means, "sigma": 0.9}
    return model, {"a": marginals[:2], "sigma": [marginals[2]]}, initvals


PROBLEMS = {
    "normal_scale": _normal_scale_problem,
    "poisson": _poisson_problem,
    "varying_intercepts": _varying_intercepts_problem,
}


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_tuna_on_a_trust_region_matches_quadrature(name):
    pvalue, mean_error = _worst(PROBLEMS[name](), lambda: pmm.TunaMH(), DRAWS)
    assert pvalue > 0.01
    assert mean_error < 4.0


@pytest.mark.parametrize("name", ["normal_scale", "poisson"])
def test_first_order_on_a_trust_region_matches_quadrature(name):
    """SMH-1's residuals, bounded by the second derivative over the region, with the
    random walk."""
    # poisson, seed 3: with rows drawn ahead in two levels (issue 19) the smallest KS p-value
    # over seeds 1-8 was 0.0066, 0.76, 0.28, 0.32, 0.19, 0.29, 0.14, 0.064 (PyMC 5; mean errors
    # below 2.6 MCSE throughout). A seed near the study's median.
    seed = {"poisson": 3}.get(name, 1)
    factory = lambda: pmm.TunaMH(expansion_order=1)  # noqa: E731
    pvalue, mean_error = _worst(PROBLEMS[name](), factory, DRAWS, seed=seed)
    assert pvalue > 0.01
    assert mean_error < 4.0


def _halved_quadratic(self, theta):
    delta = theta - self.center
    return float(self.gradient @ delta + 0.25 * delta @ self.hessian.matvec(delta))


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_a_wrong_exact_part_fails(name, monkeypatch):
    """Negative control: the expansions' sum, computed exactly, loses half its quadratic
    term while the rows keep their correct residuals (so every bound still holds): the
    chain then samples a posterior about 1.4 times wider, which the checks must see."""
    monkeypatch.setattr(SecondOrderExpansion, "quadratic", _halved_quadratic)
    pvalue, mean_error = _worst(PROBLEMS[name](), lambda: pmm.TunaMH(), DRAWS)
    assert pvalue < 0.01 or mean_error > 4.0


SWITCH_DRAWS = 20000


def _switch_run(sampler, seed=2):
    """The Normal problem with a radius of 2.5 Laplace sds (``||z||^2`` is chi-square with 2
    degrees of freedom: 4 % of the posterior lies outside, and more of the random walk's
    proposals), so that most steps (about 60 %) are full-data steps."""
    model, marginals, initvals = _normal_scale_problem()
    with model:
        idata = pm.sample(
            step=sampler(trust_region=2.5, proposal="rw"), initvals=initvals,
            draws=SWITCH_DRAWS, tune=TUNE, chains=CHAINS, random_seed=seed, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    outside = float(sample_stats(idata)["outside_region"].values.mean())
    draws = posterior(idata)
    return outside, {name: _switch_checks(draws[name].values, marginal)
                     for name, (marginal,) in marginals.items()}  # fmt: skip


def _switch_checks(draws, marginal):
    """``(ks_pvalue, |mean error| / MCSE, |sd error| / MCSE of the sd)``.

    The KS test takes every third of the draws :func:`~tests.support.quadrature.agreement` keeps:
    thinned only to the effective sample size, random-walk draws keep enough
    autocorrelation to push KS p-values below chance. On this problem FullMH (no trust
    region, every step on all rows), 20,000 draws, seeds 10-17, gave 2 of 16 marginal
    p-values below 0.01 at that thinning and 1 of 16 at three times it.
    """
    thin = 3 * max(1, int(np.ceil(draws.size / ess(draws))))
    pvalue = stats.kstest(draws[:, ::thin].ravel(), marginal.cdf).pvalue
    mean_error = abs(draws.mean() - marginal.mean) / mcse_mean(draws)
    sd_error = abs(draws.std() - marginal.sd) / mcse_sd(draws)
    return pvalue, mean_error, sd_error


@pytest.mark.parametrize("sampler", [pmm.TunaMH, pmm.TFMH], ids=["TunaMH", "TFMH"])
def test_many_full_data_steps_keep_the_chain_exact(sampler):
    """The switch between minibatch and full-data steps depends on the pair of points
    symmetrically, so detailed balance holds pair by pair and the chain stays exact."""
    outside, checks = _switch_run(sampler)
    assert 0.3 < outside < 0.9
    for name, (pvalue, mean_error, sd_error) in checks.items():
        assert pvalue > 0.01 and mean_error < 4.0 and sd_error < 4.0, name


def test_a_wrong_full_data_step_fails_the_switch_checks(monkeypatch):
    """Negative control: full-data steps that count the exact part of the log-ratio (priors
    and the control variates' remainder) twice, as the fallback step once did with the
    remainder, while the minibatch steps stay correct. Seeds 2 and 3 gave sds 7-9 MCSE
    too narrow; the KS test alone did not see it (p-values 0.05-0.30)."""

    def doubled_exact_part(rng, exact_log_ratio, full_loglik_diff):
        return full_data_mh(rng, 2.0 * exact_log_ratio, full_loglik_diff)

    monkeypatch.setattr(tuna_kernel, "full_data_mh", doubled_exact_part)
    _, checks = _switch_run(pmm.TunaMH)
    assert any(
        pvalue < 0.01 or mean_error > 4.0 or sd_error > 4.0
        for pvalue, mean_error, sd_error in checks.values()
    )
