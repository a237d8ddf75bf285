"""A zoo of everyday PyMC models on tall synthetic data, with reference posteriors.

Every sampler of the package is checked on each model against its reference. A model's
builder returns a fresh ``pm.Model`` on data drawn from ``np.random.default_rng(seed)`` with
a seed of its own, so the data (and the reference) never change. Posterior modes sit away
from zero and covariates are correlated or not centred where a sampler's preconditioning
matters.

A reference gives, for every scalar of every free variable in the constrained space, the
posterior ``mean``, ``sd``, and the Monte Carlo standard errors ``mcse_mean`` and
``mcse_sd`` of those estimates. Scalars are labelled as in ``pmm.compare``: ``"sigma"`` for
a scalar variable, ``"beta[0]"`` for element 0 of a vector (flat index, whatever its dims).
``normal_mean`` has a closed-form reference (both mcse are 0); the other references are
NUTS runs on the full data stored in ``tests/support/zoo_reference.json``, written by
``benchmarks/zoo_reference.py``.

Comparing a sampler's draws with a reference::

    entry = ZOO["logistic_regression"]
    with entry.build():
        idata = pm.sample(step=pmm.TunaMH())
    draws = scalar_draws(idata)
    for label, ref in reference(entry.name).items():
        z = (draws[label].mean() - ref["mean"]) / ref["sd"]
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pymc as pm

from pymc_minibatch._compat import posterior

#: Rows of every zoo model.
N_ROWS = 100_000
#: NUTS reference summaries of every model but ``normal_mean``.
REFERENCE_PATH = Path(__file__).with_name("zoo_reference.json")


@dataclass(frozen=True)
class ZooModel:
    """One zoo entry.

    Parameters
    ----------
    name : str
        Key in ``ZOO`` and in the reference file.
    build : callable
        ``build()`` returns a fresh ``pm.Model`` on the entry's seeded data.
    n_rows : int
        Rows of the likelihood (the leading length of every observed variable).
    description : str
        One line: the model (the first line of the builder's docstring).
    """

    name: str
    build: Callable[[], pm.Model]
    n_rows: int
    description: str


def _equicorrelated_normals(rng, means, rho):
    """``N_ROWS`` draws of unit-variance normals with the given means and correlation ``rho``.

    Built from one shared factor, ``x_j = mean_j + sqrt(1 - rho) z_j + sqrt(rho) f``, rather
    than ``rng.multivariate_normal``, whose factorisation of a covariance with a repeated
    eigenvalue depends on the LAPACK build: a NumPy upgrade changed the data under the stored
    references.
    """
    shared = rng.standard_normal((N_ROWS, 1))
    own = rng.standard_normal((N_ROWS, len(means)))
    return np.asarray(means) + np.sqrt(1.0 - rho) * own + np.sqrt(rho) * shared


def _normal_mean_data():
    """The ``y`` of ``normal_mean`` (also used by its closed-form reference)."""
    return np.random.default_rng(11).normal(5.0, 1.0, size=N_ROWS)


def normal_mean():
    """Normal mean with known unit variance: ``y ~ Normal(mu, 1)``, ``mu ~ Normal(0, 10)``.

    True ``mu = 5``. Conjugate: the posterior is ``Normal(sum(y) / (N + 1/100),
    (N + 1/100) ** -0.5)``.
    """
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Normal("y", mu, 1.0, observed=_normal_mean_data())
    return model


def linear_regression():
    """Linear regression on 3 correlated, non-centred covariates, Normal noise.

    ``y ~ Normal(alpha + X @ beta, sigma)``; ``X`` has means (1, 1.5, 2), unit sds and
    correlation 0.5. True ``alpha = 3``, ``beta = (1, -2, 0.5)``, ``sigma = 2``.
    """
    rng = np.random.default_rng(12)
    X = _equicorrelated_normals(rng, [1.0, 1.5, 2.0], 0.5)
    y = 3.0 + X @ [1.0, -2.0, 0.5] + rng.normal(0.0, 2.0, size=N_ROWS)
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 5.0, shape=3)
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.Normal("y", alpha + X @ beta, sigma, observed=y)
    return model


def varying_intercepts():
    """Varying intercepts over 25 groups of unequal sizes (1909 to 5480 rows each).

    ``y ~ Normal(a[g] + b * x, sigma)``, centred ``a ~ Normal(mu_a, sigma_a)``. True
    ``mu_a = 2``, ``sigma_a = 1.5`` (the 25 true ``a`` are drawn from Normal(2, 1.5)),
    ``b = -0.8``, ``sigma = 1``.
    """
    rng = np.random.default_rng(13)
    n_groups = 25
    sizes = rng.uniform(0.5, 1.5, size=n_groups)
    g = rng.choice(n_groups, size=N_ROWS, p=sizes / sizes.sum())
    x = rng.normal(size=N_ROWS)
    a_true = rng.normal(2.0, 1.5, size=n_groups)
    y = a_true[g] - 0.8 * x + rng.normal(size=N_ROWS)
    with pm.Model() as model:
        mu_a = pm.Normal("mu_a", 0.0, 10.0)
        sigma_a = pm.HalfNormal("sigma_a", 5.0)
        a = pm.Normal("a", mu_a, sigma_a, shape=n_groups)
        b = pm.Normal("b", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.Normal("y", a[g] + b * x, sigma, observed=y)
    return model


def mixture():
    """Two-component Normal mixture with ordered means.

    ``y ~ w Normal(mu[0], sigma[0]) + (1 - w) Normal(mu[1], sigma[1])``, ``mu`` ordered.
    True ``w = 0.3``, ``mu = (-1, 3)``, ``sigma = (1, 0.7)``.
    """
    rng = np.random.default_rng(14)
    first = rng.random(N_ROWS) < 0.3
    y = np.where(first, rng.normal(-1.0, 1.0, N_ROWS), rng.normal(3.0, 0.7, N_ROWS))
    with pm.Model() as model:
        w = pm.Beta("w", 2.0, 2.0)
        mu = pm.Normal(
            "mu", 0.0, 10.0, shape=2, transform=pm.distributions.transforms.ordered,
            initval=[-1.0, 1.0],
        )  # fmt: skip
        sigma = pm.HalfNormal("sigma", 2.0, shape=2)
        pm.NormalMixture("y", w=pm.math.stack([w, 1.0 - w]), mu=mu, sigma=sigma, observed=y)
    return model


def poisson_regression():
    """Poisson log-linear regression on 2 non-centred covariates (counts mostly below 15).

    ``counts ~ Poisson(exp(alpha + X @ beta))``; ``X`` has means (0.5, 1) and unit sds.
    True ``alpha = 1``, ``beta = (0.3, -0.2)``.
    """
    rng = np.random.default_rng(15)
    X = rng.normal([0.5, 1.0], 1.0, size=(N_ROWS, 2))
    counts = rng.poisson(np.exp(1.0 + X @ [0.3, -0.2]))
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 5.0)
        beta = pm.Normal("beta", 0.0, 2.0, shape=2)
        pm.Poisson("counts", pm.math.exp(alpha + X @ beta), observed=counts)
    return model


def logistic_regression():
    """Logistic regression with rare events (5.8%) and 3 covariates correlated at 0.8.

    ``y ~ Bernoulli(logit_p = alpha + X @ beta)``; ``X`` centred with unit sds. True
    ``alpha = -3``, ``beta = (0.8, -0.5, 0.3)``.
    """
    rng = np.random.default_rng(16)
    X = _equicorrelated_normals(rng, [0.0, 0.0, 0.0], 0.8)
    y = (rng.random(N_ROWS) < 1.0 / (1.0 + np.exp(3.0 - X @ [0.8, -0.5, 0.3]))).astype("int64")
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 5.0, shape=3)
        pm.Bernoulli("y", logit_p=alpha + X @ beta, observed=y)
    return model


def robust_regression():
    """Robust regression: Student-t (nu = 4) noise and likelihood with a free scale.

    ``y ~ StudentT(4, alpha + beta * x, sigma)``. True ``alpha = -2``, ``beta = 1.5``,
    ``sigma = 0.5``.
    """
    rng = np.random.default_rng(17)
    x = rng.normal(1.0, 1.0, size=N_ROWS)
    y = -2.0 + 1.5 * x + 0.5 * rng.standard_t(4.0, size=N_ROWS)
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.StudentT("y", nu=4.0, mu=alpha + beta * x, sigma=sigma, observed=y)
    return model


def data_dims_two_observed():
    """Two observed variables on the same rows, with ``pm.Data`` and named dims.

    ``y_cont ~ Normal(X @ beta, sigma)`` and ``y_bin ~ Bernoulli(logit_p = 0.5 + X @ gamma)``
    share ``X`` (dims ``("obs", "coef")``, independent standard normals). True
    ``beta = (1, -2)``, ``gamma = (0.7, -0.4)``, ``sigma = 1.5``.
    """
    rng = np.random.default_rng(18)
    X = rng.normal(size=(N_ROWS, 2))
    y_cont = X @ [1.0, -2.0] + rng.normal(0.0, 1.5, size=N_ROWS)
    y_bin = (rng.random(N_ROWS) < 1.0 / (1.0 + np.exp(-0.5 - X @ [0.7, -0.4]))).astype("int64")
    with pm.Model(coords={"obs": np.arange(N_ROWS), "coef": ["a", "b"]}) as model:
        X_data = pm.Data("X", X, dims=("obs", "coef"))
        beta = pm.Normal("beta", 0.0, 5.0, dims="coef")
        gamma = pm.Normal("gamma", 0.0, 5.0, dims="coef")
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y_cont", X_data @ beta, sigma, observed=y_cont, dims="obs")
        pm.Bernoulli("y_bin", logit_p=0.5 + X_data @ gamma, observed=y_bin, dims="obs")
    return model


def gamma_regression():
    """Gamma regression with a log link: a positive-support likelihood.

    ``y ~ Gamma(alpha=shape, beta=shape / exp(a + b * x))`` (mean ``exp(a + b * x)``). True
    ``shape = 3``, ``a = 1.5``, ``b = 0.5``.
    """
    rng = np.random.default_rng(19)
    x = rng.normal(size=N_ROWS)
    y = rng.gamma(3.0, np.exp(1.5 + 0.5 * x) / 3.0)
    with pm.Model() as model:
        shape = pm.HalfNormal("shape", 10.0)
        a = pm.Normal("a", 0.0, 5.0)
        b = pm.Normal("b", 0.0, 2.0)
        pm.Gamma("y", alpha=shape, beta=shape / pm.math.exp(a + b * x), observed=y)
    return model


def _entry(build):
    """Zoo entry of a builder, named and described by it."""
    return ZooModel(build.__name__, build, N_ROWS, build.__doc__.splitlines()[0])


#: Every zoo model by name.
ZOO = {
    entry.name: entry
    for entry in map(
        _entry,
        [
            normal_mean, linear_regression, varying_intercepts, mixture, poisson_regression,
            logistic_regression, robust_regression, data_dims_two_observed, gamma_regression,
        ],
    )
}  # fmt: skip


def normal_mean_reference():
    """Closed-form posterior of ``normal_mean``: ``{"mu": {"mean", "sd", ...}}``."""
    precision = N_ROWS + 1.0 / 10.0**2
    mean = float(_normal_mean_data().sum() / precision)
    return {"mu": {"mean": mean, "sd": precision**-0.5, "mcse_mean": 0.0, "mcse_sd": 0.0}}


def reference(name):
    """Reference summaries of zoo model ``name``.

    Returns
    -------
    dict of {str : dict of {str : float}}
        Scalar label (``"beta[0]"``) -> ``{"mean", "sd", "mcse_mean", "mcse_sd"}``.
    """
    if name not in ZOO:
        raise KeyError(f"no zoo model {name!r}; the models are {sorted(ZOO)}")
    if name == "normal_mean":
        return normal_mean_reference()
    return json.loads(REFERENCE_PATH.read_text())["models"][name]["parameters"]


def scalar_draws(idata, var_names=None):
    """Draws of every scalar of the posterior's variables, labelled as in ``reference``.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        A result of ``pm.sample`` (PyMC 5 or 6).
    var_names : list of str, optional
        Variables to take (default: all of the posterior's).

    Returns
    -------
    dict of {str : numpy.ndarray}
        Scalar label -> ``(chain, draw)`` array.
    """
    draws = posterior(idata)
    columns = {}
    for name in var_names or list(draws.data_vars):
        values = np.asarray(draws[name].transpose("chain", "draw", ...).values, dtype=float)
        flat = values.reshape(*values.shape[:2], -1)
        for k, index in enumerate(np.ndindex(values.shape[2:])):
            columns[name + (str(list(index)) if index else "")] = flat[:, :, k]
    return columns
