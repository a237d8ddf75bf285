"""More factorising models that ``MinibatchModel`` must accept and reproduce exactly.

Variants beyond the core families of ``test_parity.py``: observed terms off the row
axis and data-free Potentials (both belong in ``logprior``), a matrix-valued observed
(rows of width 2), a censored likelihood, mixtures whose components or weights depend on
the rows, and an observed variable that is a covariate of another observed variable.
"""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_minibatch as pmm

N_ROWS = 300
N_FEATURES = 3

_rng = np.random.default_rng(17)
X = _rng.normal(size=(N_ROWS, N_FEATURES))
ETA = X @ np.array([0.7, -0.4, 0.2])
Y = ETA + _rng.normal(size=N_ROWS)
Y2 = 0.5 * Y + _rng.normal(size=N_ROWS)
Y_MIX = np.where(_rng.random(N_ROWS) < 0.4, ETA, -ETA) + 0.3 * _rng.normal(size=N_ROWS)


def off_rows_terms():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", X @ beta, sigma, observed=Y)
        pm.Normal("sigma_measured", sigma, 0.2, observed=0.9)  # one value, not on the rows
        pm.Potential("shrink", -0.5 * pt.sum(beta**2))  # touches no data
    return model


def matrix_observed():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1, shape=2)
        pm.Normal("Y", (X @ beta)[:, None], sigma, observed=np.c_[Y, Y2])
    return model


def censored_regression():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Censored(
            "y", pm.Normal.dist(X @ beta, sigma), lower=-1.0, upper=1.5, observed=Y.clip(-1, 1.5)
        )
    return model


def mixture_of_regressions():
    with pm.Model() as model:
        w = pm.Dirichlet("w", np.ones(2))
        b1 = pm.Normal("b1", 0, 1, shape=N_FEATURES)
        b2 = pm.Normal("b2", 0, 1, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1)
        components = [pm.Normal.dist(X @ b1, sigma), pm.Normal.dist(X @ b2, sigma)]
        pm.Mixture("y", w=w, comp_dists=components, observed=Y_MIX)
    return model


def mixture_with_row_weights():
    """Mixture of experts: the weights are a logistic regression on each row."""
    with pm.Model() as model:
        gamma = pm.Normal("gamma", 0, 1, shape=N_FEATURES)
        mu = pm.Normal("mu", 0, 5, shape=2)
        sd = pm.HalfNormal("sd", 2, shape=2)
        p = pm.math.sigmoid(X @ gamma)
        pm.NormalMixture("y", w=pt.stack([p, 1 - p], axis=-1), mu=mu, sigma=sd, observed=Y_MIX)
    return model


def observed_as_covariate():
    """Mediation: y2_i depends on the observed y1_i (p(y1_i | x_i) p(y2_i | y1_i) per row)."""
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1)
        c = pm.Normal("c", 0, 1)
        y1 = pm.Normal("y1", X @ beta, sigma, observed=Y)
        pm.Normal("y2", c * y1, 1.0, observed=Y2)
    return model


VARIANTS = {
    "off_rows_terms": off_rows_terms,
    "matrix_observed": matrix_observed,
    "censored_regression": censored_regression,
    "mixture_of_regressions": mixture_of_regressions,
    "mixture_with_row_weights": mixture_with_row_weights,
    "observed_as_covariate": observed_as_covariate,
}


@pytest.mark.slow  # minutes of compilation on a cold cache: run once in CI (see .ci/run)
@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_matches_pymc(name):
    model = VARIANTS[name]()
    mm = pmm.MinibatchModel(model)
    assert mm.n_data == N_ROWS
    pymc_logp = model.compile_logp()
    rng = np.random.default_rng(2)
    all_rows = np.arange(N_ROWS)
    idx = np.r_[rng.integers(0, N_ROWS, size=30), 0, 0, N_ROWS - 1]
    for _ in range(3):
        theta = mm.initial_theta() + rng.normal(scale=0.3, size=mm.ndim)
        full = mm.loglik(theta, all_rows)
        logp = mm.logp(theta)
        reference = float(pymc_logp(mm.point_from_theta(theta)))
        assert logp == pytest.approx(reference, rel=1e-8)
        assert mm.logprior(theta) + full.sum() == pytest.approx(logp, rel=1e-8)
        np.testing.assert_allclose(mm.loglik(theta, idx), full[idx], rtol=1e-10, atol=1e-12)
        _, grad = mm.grad_estimate(theta, all_rows)
        _, logp_grad = mm.logp_and_grad(theta)
        np.testing.assert_allclose(grad, logp_grad, rtol=1e-9, atol=1e-9)


def test_off_rows_terms_are_in_the_logprior():
    model = off_rows_terms()
    mm = pmm.MinibatchModel(model)
    assert mm.row_term_names == ["y"]
    theta = mm.initial_theta() + 0.2
    point = mm.point_from_theta(theta)
    expected = float(
        model.compile_logp(vars=[*model.free_RVs, model["sigma_measured"]])(point)
    ) - 0.5 * float(np.sum(point["beta"] ** 2))
    assert mm.logprior(theta) == pytest.approx(expected, rel=1e-10)
