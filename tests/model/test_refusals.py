"""Models that ``MinibatchModel`` must refuse, and invalid arguments it must reject.

A likelihood that does not split into independent per-row terms raises
``NonFactorizableError`` (a ``ValueError``) whose message names the offending variable;
discrete variables in ``vars`` and a ``theta`` of the wrong shape raise ``ValueError``.
"""

import re

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats

import pymc_minibatch as pmm

N_ROWS = 200
N_FEATURES = 3

_rng = np.random.default_rng(7)
X = _rng.normal(size=(N_ROWS, N_FEATURES))
Y = X @ np.array([1.0, -0.5, 0.25]) + _rng.normal(size=N_ROWS)
Y_BIN = (Y > 0).astype("int64")
X_GP = np.linspace(0.0, 10.0, N_ROWS)[:, None]


def mvnormal_over_rows():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        pm.MvNormal("y_mvn", mu=mu * np.ones(N_ROWS), cov=np.eye(N_ROWS) + 0.5, observed=Y)
    return model


def gaussian_random_walk():
    with pm.Model() as model:
        sigma = pm.HalfNormal("sigma", 1)
        pm.GaussianRandomWalk(
            "y_walk", sigma=sigma, init_dist=pm.Normal.dist(0, 1), observed=np.cumsum(Y)
        )
    return model


def gp_marginal():
    with pm.Model() as model:
        ell = pm.HalfNormal("ell", 2)
        eta = pm.HalfNormal("eta", 1)
        sigma = pm.HalfNormal("sigma", 1)
        gp = pm.gp.Marginal(cov_func=eta**2 * pm.gp.cov.ExpQuad(1, ls=ell))
        gp.marginal_likelihood("y_gp", X=X_GP, y=Y, sigma=sigma)
    return model


def gp_latent():
    with pm.Model() as model:
        ell = pm.HalfNormal("ell", 2)
        sigma = pm.HalfNormal("sigma", 1)
        gp = pm.gp.Latent(cov_func=pm.gp.cov.ExpQuad(1, ls=ell))
        f = gp.prior("f", X=X_GP)
        pm.Normal("y_latent_gp", f, sigma, observed=Y)
    return model


def potential_on_rows():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=N_FEATURES)
        pm.Normal("y", X @ beta, 1.0, observed=Y)
        pm.Potential("penalty", -0.5 * pt.sum((X @ beta) ** 2) / N_ROWS)
    return model


def in_graph_standardisation():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=N_FEATURES)
        Xt = pt.as_tensor(X)
        X_std = (Xt - Xt.mean(0)) / Xt.std(0)
        pm.Bernoulli("y_std", logit_p=X_std @ beta, observed=Y_BIN)
    return model


def lag_by_concatenation():
    """AR(1) with the lag built in the graph: mu_i = rho * y_{i-1}, same length as y."""
    with pm.Model() as model:
        rho = pm.Normal("rho", 0, 0.5)
        sigma = pm.HalfNormal("sigma", 1)
        y = pm.Data("y_data", Y)
        lagged = pt.concatenate([pt.zeros(1), y[:-1]])
        pm.Normal("y_ar", rho * lagged, sigma, observed=y)
    return model


def lag_by_slicing_data():
    """AR(1) as y[1:] ~ N(rho * y[:-1]) with both slices of one pm.Data array."""
    with pm.Model() as model:
        rho = pm.Normal("rho", 0, 0.5)
        sigma = pm.HalfNormal("sigma", 1)
        y = pm.Data("y_data", Y)
        pm.Normal("y_ar_sliced", rho * y[:-1], sigma, observed=y[1:])
    return model


def lag_by_slicing_constant():
    """AR(1) with the lag sliced from a constant in the graph, observed y[1:] in NumPy."""
    with pm.Model() as model:
        rho = pm.Normal("rho", 0, 0.5)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y_ar_const", rho * pt.as_tensor(Y)[:-1], sigma, observed=Y[1:])
    return model


def per_row_latent():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        z = pm.Normal("z", mu, 1, shape=N_ROWS)
        pm.Normal("y", z, 1, observed=Y)
    return model


REFUSED = {
    # builder: (pattern that must appear in the message, ...)
    "mvnormal_over_rows": (mvnormal_over_rows, ["'y_mvn'", "multivariate"]),
    "gaussian_random_walk": (gaussian_random_walk, ["'y_walk'", "multivariate"]),
    "gp_marginal": (gp_marginal, ["'y_gp'", "multivariate"]),
    "gp_latent": (gp_latent, [r"free variable 'f\w*'", "marginalise"]),
    "potential_on_rows": (potential_on_rows, ["'penalty'"]),
    "in_graph_standardisation": (in_graph_standardisation, ["'y_std'", "row axis"]),
    "lag_by_concatenation": (lag_by_concatenation, ["'y_ar'"]),
    "lag_by_slicing_data": (lag_by_slicing_data, ["'y_ar_sliced'"]),
    "lag_by_slicing_constant": (lag_by_slicing_constant, ["y_ar_const"]),
    "per_row_latent": (per_row_latent, ["'z'", "marginalise"]),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_non_factorising_model_is_refused_naming_the_variable(name):
    builder, patterns = REFUSED[name]
    model = builder()
    with pytest.raises(pmm.NonFactorizableError) as excinfo:
        pmm.MinibatchModel(model)
    message = str(excinfo.value)
    for pattern in patterns:
        assert re.search(pattern, message), f"{pattern!r} not in {message!r}"


def test_refusal_is_a_value_error():
    assert issubclass(pmm.NonFactorizableError, ValueError)
    with pytest.raises(ValueError, match="'z'"):
        pmm.MinibatchModel(per_row_latent())


def test_model_without_observed_data_is_refused():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("x", mu, 1, shape=3)
    with pytest.raises(pmm.NonFactorizableError, match="no observed"):
        pmm.MinibatchModel(model)


def test_model_from_context():
    """``model=None`` takes the model from the ``with`` context (and refuses it there)."""
    with per_row_latent(), pytest.raises(pmm.NonFactorizableError, match="'z'"):
        pmm.MinibatchModel()


# ---- vars and theta -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def mixed_model():
    """A model with a continuous vector ``beta`` and a discrete scalar ``k``."""
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=N_FEATURES)
        k = pm.Poisson("k", 3.0)
        pm.Normal("y", X @ beta + k, 1.0, observed=Y)
    return model


@pytest.mark.parametrize("which", [["k"], ["beta", "k"], ["k_value"]])
def test_discrete_vars_are_rejected_by_name(mixed_model, which):
    def lookup(name):
        if name == "k_value":
            return mixed_model.rvs_to_values[mixed_model["k"]]
        return mixed_model[name]

    with pytest.raises(ValueError, match=r"\['k'\]") as excinfo:
        pmm.MinibatchModel(mixed_model, vars=[lookup(n) for n in which])
    assert not isinstance(excinfo.value, pmm.NonFactorizableError)


def test_default_vars_leave_discrete_variables_shared(mixed_model):
    mm = pmm.MinibatchModel(mixed_model)
    assert mm.var_names == ["beta"]
    assert mm.ndim == N_FEATURES
    assert [v.name for v in mm.shared] == ["k"]


def test_model_with_only_discrete_free_variables_is_rejected():
    with pm.Model() as model:
        k = pm.Poisson("k", 3.0)
        pm.Normal("y", k, 1.0, observed=Y)
    with pytest.raises(ValueError, match="no continuous"):
        pmm.MinibatchModel(model)


@pytest.fixture(scope="module")
def small_mm(mixed_model):
    return pmm.MinibatchModel(mixed_model)


THETA_METHODS = {
    "loglik": lambda mm, th, good: mm.loglik(th, np.arange(4)),
    "loglik_pair_first": lambda mm, th, good: mm.loglik_pair(th, good, np.arange(4)),
    "loglik_pair_second": lambda mm, th, good: mm.loglik_pair(good, th, np.arange(4)),
    "grad_loglik": lambda mm, th, good: mm.grad_loglik(th, np.arange(4)),
    "grad_loglik_per_row": lambda mm, th, good: mm.grad_loglik(th, np.arange(4), per_row=True),
    "grad_estimate": lambda mm, th, good: mm.grad_estimate(th, np.arange(4)),
    "logprior": lambda mm, th, good: mm.logprior(th),
    "logprior_and_grad": lambda mm, th, good: mm.logprior_and_grad(th),
    "logp": lambda mm, th, good: mm.logp(th),
    "logp_and_grad": lambda mm, th, good: mm.logp_and_grad(th),
    "point_from_theta": lambda mm, th, good: mm.point_from_theta(th),
}


@pytest.mark.parametrize("method", list(THETA_METHODS))
@pytest.mark.parametrize(
    "shape", [(N_FEATURES - 1,), (N_FEATURES + 1,), (N_FEATURES, 1), (1, N_FEATURES), ()]
)
def test_wrong_theta_shape_is_rejected(small_mm, method, shape):
    good = np.zeros(N_FEATURES)
    with pytest.raises(ValueError, match=re.escape(f"({N_FEATURES},)")):
        THETA_METHODS[method](small_mm, np.zeros(shape), good)


def test_model_after_posterior_predictive_in_its_context_still_builds():
    # PyMC 5 lists the observed variable twice after sample_posterior_predictive there
    # (and then fails in its own model.compile_logp())
    y = np.random.default_rng(0).normal(size=100)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("y", mu, 1.0, observed=y)
        trace = pm.sample(
            step=pmm.FullMH(), draws=10, tune=10, chains=1, progressbar=False,
            compute_convergence_checks=False, random_seed=0,
        )  # fmt: skip
        pm.sample_posterior_predictive(trace, progressbar=False, random_seed=0)
    mm = pmm.MinibatchModel(model)
    expected = stats.norm.logpdf(0.0) + stats.norm.logpdf(y).sum()  # at mu = 0
    np.testing.assert_allclose(mm.logp(mm.initial_theta()), expected, rtol=1e-12)
