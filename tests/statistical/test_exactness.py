"""Exact samplers against grid-quadrature posteriors (KS on draws thinned to ESS, mean in MCSE).

A deliberately wrong TunaMH (keep probability halved) must fail the same checks. PoissonMH
needs a bounded support, so it runs on the same data with Uniform priors on a box of about
+-3 posterior sd around the mode; the quadrature is then over the truncated posterior.
"""

import numpy as np
import pymc as pm
import pytest
from scipy import special, stats

import pymc_minibatch as pmm
import pymc_minibatch.kernels.tuna as tuna_kernel
import pymc_minibatch.step_methods.bounded as bounded
from pymc_minibatch._compat import posterior
from pymc_minibatch.model.taylor import SecondOrderExpansion
from tests.support.quadrature import GridMarginal, agreement, grid_marginals_2d

# minutes of sampling: run once in CI, in the slow tier (see .ci/run)
pytestmark = pytest.mark.slow

# (step factory, draws per chain): TFMH's factorised acceptance forces far smaller steps
SAMPLERS = {
    "FullMH": (lambda: pmm.FullMH(), 6000),
    "TunaMH": (lambda: pmm.TunaMH(), 6000),
    "TFMH": (lambda: pmm.TFMH(expansion_order=0), 60000),
    "FlyMC": (lambda: pmm.FlyMC(), 6000),
}
TUNE, CHAINS = 1000, 2


LAPLACE_BOX = (0.6, 0.8)
LOGISTIC_BOX = ([0.52, -0.56], [0.84, -0.26])


def _laplace_problem(box=None):
    rng = np.random.default_rng(42)
    y = rng.laplace(0.7, 1.0, size=1000)
    with pm.Model() as model:
        if box is None:
            mu = pm.Normal("mu", 0.0, 5.0)
        else:
            mu = pm.Uniform("mu", *box, default_transform=None)
        pm.Laplace("y", mu, 1.0, observed=y)
    grid = np.linspace(*(box or (0.35, 1.05)), 4001)
    log_prior = 0.0 if box else stats.norm.logpdf(grid, 0, 5)
    log_post = log_prior + stats.laplace.logpdf(y[None, :], grid[:, None]).sum(1)
    return model, {"mu": [GridMarginal(grid, log_post)]}, {"mu": 0.7}


def _logistic_problem(box=None):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(2000, 2))
    y = (rng.random(2000) < special.expit(X @ np.array([0.8, -0.4]))).astype("int64")
    with pm.Model() as model:
        if box is None:
            beta = pm.Normal("beta", 0.0, 3.0, shape=2)
        else:
            beta = pm.Uniform("beta", *box, shape=2, default_transform=None)
        pm.Bernoulli("y", logit_p=X @ beta, observed=y)
    (low0, low1), (high0, high1) = box or ([0.45, -0.75], [1.15, -0.05])
    grid0, grid1 = np.linspace(low0, high0, 281), np.linspace(low1, high1, 281)
    b0, b1 = np.meshgrid(grid0, grid1, indexing="ij")
    log_post = 0.0 if box else stats.norm.logpdf(b0, 0, 3) + stats.norm.logpdf(b1, 0, 3)
    for rows in np.array_split(np.arange(y.size), 10):
        eta = b0[..., None] * X[rows, 0] + b1[..., None] * X[rows, 1]
        log_post += np.sum(y[rows] * eta - np.logaddexp(0.0, eta), axis=-1)
    return model, {"beta": list(grid_marginals_2d(grid0, grid1, log_post))}, {"beta": [0.7, -0.4]}


def _student_t_problem():
    """Robust regression, Student-t rows with fixed nu = 4 and scale 1 (order 2 applies)."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(2000, 2))
    y = X @ np.array([0.6, -0.3]) + rng.standard_t(4, size=2000)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 3.0, shape=2)
        pm.StudentT("y", nu=4.0, mu=X @ beta, sigma=1.0, observed=y)
    grid0, grid1 = np.linspace(0.45, 0.75, 281), np.linspace(-0.45, -0.15, 281)
    b0, b1 = np.meshgrid(grid0, grid1, indexing="ij")
    log_post = stats.norm.logpdf(b0, 0, 3) + stats.norm.logpdf(b1, 0, 3)
    for rows in np.array_split(np.arange(y.size), 10):
        residual = y[rows] - (b0[..., None] * X[rows, 0] + b1[..., None] * X[rows, 1])
        log_post += np.sum(stats.t.logpdf(residual, 4.0), axis=-1)
    return model, {"beta": list(grid_marginals_2d(grid0, grid1, log_post))}, {"beta": [0.6, -0.3]}


BOUNDED_PROBLEMS = {
    "laplace": lambda: _laplace_problem(LAPLACE_BOX),
    "logistic": lambda: _logistic_problem(LOGISTIC_BOX),
}


PROBLEMS = {"laplace": _laplace_problem, "logistic": _logistic_problem}


@pytest.fixture(scope="module", params=sorted(PROBLEMS))
def problem(request):
    return PROBLEMS[request.param]()


def _draws(model, initvals, step_factory, draws, seed=1):
    # chains start near the posterior: these tests are about exactness, not burn-in
    with model:
        idata = pm.sample(
            step=step_factory(),
            initvals=initvals,
            draws=draws,
            tune=TUNE,
            chains=CHAINS,
            cores=1,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return posterior(idata)


def _worst(problem, step_factory, draws, seed=1):
    """Smallest KS p-value and largest |mean error| / MCSE over all marginals."""
    model, marginals, initvals = problem
    result = _draws(model, initvals, step_factory, draws, seed)
    results = [
        agreement(result[name].values.reshape(CHAINS, draws, -1)[..., k], marginal)
        for name, per_coordinate in marginals.items()
        for k, marginal in enumerate(per_coordinate)
    ]
    return min(p for p, _ in results), max(z for _, z in results)


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_exact_sampler_matches_quadrature(problem, sampler):
    pvalue, mean_error = _worst(problem, *SAMPLERS[sampler])
    assert pvalue > 0.01
    assert mean_error < 4.0


@pytest.mark.parametrize("name", sorted(BOUNDED_PROBLEMS))
def test_poisson_mh_matches_quadrature_on_a_box(name):
    # poisson_rate well below the default L^2 keeps the batch (poisson_rate + L) a fraction of N
    factory = lambda: pmm.PoissonMH(poisson_rate=100.0)  # noqa: E731
    pvalue, mean_error = _worst(BOUNDED_PROBLEMS[name](), factory, 6000)
    assert pvalue > 0.01
    assert mean_error < 4.0


def test_smh_matches_quadrature_on_logistic():
    # SMH-1: TFMH on control-variate residuals (Laplace rows have no second derivative)
    # seed 5: with the Laplace fit's curvature from the rows' designs and the proposal's
    # whitening by BLAS (issue 32; the same fit to rounding) the smallest KS p-value over
    # seeds 1-8 was 0.43, 0.0098, 0.0028, 0.24, 0.18, 0.11, 0.38, 0.090 (mean errors below
    # 2.1 MCSE throughout; before, over seeds 1-7, from 0.003 to 0.39). A seed near the median.
    pvalue, mean_error = _worst(
        _logistic_problem(), lambda: pmm.TFMH(expansion_order=1), 6000, seed=5
    )
    assert pvalue > 0.01
    assert mean_error < 4.0


SECOND_ORDER_PROBLEMS = {"logistic": _logistic_problem, "student_t": _student_t_problem}
# logistic, rho = 0.5: seed 5. With rows drawn ahead in two levels (issue 19) the smallest KS
# p-value over seeds 1-8 was 0.0045, 0.020, 0.031, 0.59, 0.49, 0.86, 0.63, 0.24 (PyMC 5);
# Walker's alias table before gave 0.13, 0.18, 0.0066, 0.20, 0.46, 0.79, 0.12, 0.32 (seed 3
# failed). A seed near the study's median, so that the check is not marginal.
SECOND_ORDER_SEEDS = {("logistic", 0.5): 5}


@pytest.mark.parametrize("rho", [0.0, 0.5])
@pytest.mark.parametrize("name", sorted(SECOND_ORDER_PROBLEMS))
def test_second_order_pcn_matches_quadrature(name, rho):
    """TunaMH on second-order residuals with a pCN proposal (rho = 0: the independence
    sampler from the Laplace approximation)."""
    factory = lambda: pmm.TunaMH(expansion_order=2, proposal="pcn", rho=rho)  # noqa: E731
    seed = SECOND_ORDER_SEEDS.get((name, rho), 1)
    pvalue, mean_error = _worst(SECOND_ORDER_PROBLEMS[name](), factory, 6000, seed=seed)
    assert pvalue > 0.01
    assert mean_error < 4.0


def test_smh2_matches_quadrature_on_student_t():
    """TFMH on second-order residuals (SMH-2) with the random walk."""
    factory = lambda: pmm.TFMH(expansion_order=2, proposal="rw")  # noqa: E731
    # seed 5: with rows drawn ahead in two levels (issue 19) the smallest KS p-value over
    # seeds 1-8 was 0.0013, 0.30, 0.28, 0.025, 0.14, 0.24, 0.044, 0.17 (PyMC 5); Walker's alias
    # table before gave 0.31, 0.57, 0.21, 0.094, 0.27, 0.41, 0.041, 0.067 (Mann-Whitney p = 0.28
    # between the two; mean errors below 2.5 MCSE throughout). A seed near the median.
    pvalue, mean_error = _worst(_student_t_problem(), factory, 6000, seed=5)
    assert pvalue > 0.01
    assert mean_error < 4.0


def test_second_order_without_the_quadratic_row_term_fails(monkeypatch):
    """Negative control: the rows' expansions lose their quadratic term while the exact
    part keeps it (the bound check, which would stop such a run, is switched off)."""
    monkeypatch.setattr(bounded, "BOUND_TOLERANCE", np.inf)
    monkeypatch.setattr(SecondOrderExpansion, "residual_pair", _linear_residual_pair)
    factory = lambda: pmm.TunaMH(expansion_order=2, proposal="pcn", rho=0.0)  # noqa: E731
    # 20,000 draws: at 6,000 (rows drawn ahead in two levels, issue 19) the KS p-value over
    # seeds 1-8 was 0.0044, 0.0050, 9e-5, 2e-4, 0.0011, 0.020, 0.11, 0.0027 (two of eight
    # passed; PyMC 5), at 20,000 over seeds 1-5 from 1e-8 to 5e-5
    pvalue, mean_error = _worst(_logistic_problem(), factory, 20000)
    assert pvalue < 0.01 or mean_error > 4.0


def _linear_residual_pair(self, theta, theta2, rows):
    current, proposed = self.terms.minibatch_model.loglik_pair(theta, theta2, rows=rows)
    return current, proposed - self.row_parts(theta, theta2, rows)[0]


def _log_ratio_with_wrong_keep_probability(rng, metrics, chi, bounds, loglik_pair, counts,
                                           whole=()):
    """``tuna_log_ratio`` with every keep probability halved (targets a tempered posterior);
    the models here have one group of rows."""
    counts = np.asarray(counts)
    if counts.sum() == 0:
        return 0.0, 0, 0.0, True, 0
    idx, groups = bounds.sample(rng, counts)
    loglik_current, loglik_proposal = loglik_pair(idx)
    delta = loglik_current - loglik_proposal
    m = np.asarray(metrics, dtype=np.float64)[groups]
    c_m = bounds.c[idx] * m
    base = chi * bounds.c[idx] * bounds.total * m**2
    phi_forward = np.clip(0.5 * (delta + c_m), 0.0, c_m)
    keep = rng.random(idx.size) < 0.5 * (base + phi_forward) / (base + c_m)
    log_ratio = np.sum(np.log(base + c_m - phi_forward)[keep] - np.log(base + phi_forward)[keep])
    return (float(log_ratio), int(keep.sum()), float(np.max(np.abs(delta) / c_m)), True,
            idx.size)  # fmt: skip


def test_wrong_keep_probability_fails_the_same_checks(monkeypatch):
    # 20,000 draws: at 6,000 the KS p-value over seeds 1-5 ranged from 6e-5 to 0.094 (PyMC 5),
    # at 20,000 from 3e-12 to 4e-6
    monkeypatch.setattr(tuna_kernel, "tuna_log_ratio", _log_ratio_with_wrong_keep_probability)
    pvalue, mean_error = _worst(_laplace_problem(), SAMPLERS["TunaMH"][0], 20000)
    assert pvalue < 0.01 or mean_error > 4.0
