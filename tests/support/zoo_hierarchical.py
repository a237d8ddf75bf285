"""Hierarchical models of the zoo: a parameter per group, groups of very unequal sizes.

Two families, each in the centred and the non-centred parametrisation:

- ``intercepts_logistic``: varying intercepts of a logistic regression on 4 covariates,
  ``y ~ Bernoulli(logit_p = a[g] + X @ beta)``, ``a ~ Normal(mu, tau)``;
- ``slopes_normal``: varying intercepts and slopes of a Normal regression with a sampled
  noise scale, ``y ~ Normal(a[g] + b[g] * x + X @ beta, sigma)``, ``a ~ Normal(mu_a,
  tau_a)``, ``b ~ Normal(mu_b, tau_b)``.

Non-centred, ``a = mu + tau * z_a`` with ``z_a ~ Normal(0, 1)`` (and the same for ``b``); the
group effects ``a`` (and ``b``) are then ``pm.Deterministic``. Every model exists for
``G = 100`` and ``G = 1000`` groups and any number of rows; the zoo's entries have
``N_ROWS`` rows (the sizes CI runs), the benchmarks build the same models on more rows.

Group sizes (:func:`group_index`): 5% of the groups are empty, 10% have 1 to 9 rows and
the others share the remaining rows with log-normal weights (a factor of about 50 between
the 5th and 95th percentiles), so that some group effects are set by their data and others
by the prior alone.

References (``tests/support/zoo_hierarchical_reference.json``, written by
``benchmarks/zoo_hierarchical_reference.py``) come from NUTS on the centred
parametrisation (every free variable in the constrained space, as ``tests.support.zoo.reference``
gives them, including the deterministic ``a`` and ``b``); the non-centred models'
``z_a = (a - mu) / tau`` are summarised from the same draws.
"""

import json
from pathlib import Path

import numpy as np
import pymc as pm

from tests.support.zoo import ZooModel

#: Rows of the zoo's hierarchical models (the sizes CI runs; benchmarks take more).
N_ROWS = 100_000
#: Group counts of the zoo's hierarchical models.
GROUP_COUNTS = (100, 1000)
#: NUTS reference summaries of every hierarchical zoo model.
REFERENCE_PATH = Path(__file__).with_name("zoo_hierarchical_reference.json")


def group_index(rng, n_rows, n_groups):
    """The group of each of ``n_rows`` rows, shuffled: 5% of the groups empty, 10% with 1-9
    rows, the rest with log-normal weights (sd 1 on the log scale)."""
    order = rng.permutation(n_groups)
    n_empty, n_tiny = max(1, n_groups // 20), max(2, n_groups // 10)
    sizes = np.zeros(n_groups, dtype=np.int64)
    tiny = order[n_empty : n_empty + n_tiny]
    sizes[tiny] = rng.integers(1, 10, size=n_tiny)
    rest = order[n_empty + n_tiny :]
    weights = np.exp(rng.normal(0.0, 1.0, size=rest.size))
    sizes[rest] = rng.multinomial(n_rows - sizes.sum(), weights / weights.sum())
    groups = np.repeat(np.arange(n_groups), sizes)
    rng.shuffle(groups)
    return groups


def _group_effect(name, mu, tau, n_groups, centred):
    """``name ~ Normal(mu, tau)`` per group, centred or as ``mu + tau * z_name``."""
    if centred:
        return pm.Normal(name, mu, tau, shape=n_groups)
    z = pm.Normal(f"z_{name}", 0.0, 1.0, shape=n_groups)
    return pm.Deterministic(name, mu + tau * z)


def intercepts_logistic(n_groups, n_rows=N_ROWS, centred=True, inline=False):
    """Varying-intercept logistic regression on 4 covariates.

    ``y ~ Bernoulli(logit_p = a[g] + X @ beta)``, ``a ~ Normal(mu, tau)`` per group, ``X``
    independent standard normals. True ``mu = -1``, ``tau = 0.8`` (the true ``a`` drawn
    from it), ``beta = (0.5, -0.3, 0.2, 0.1)``. ``inline=True`` (non-centred only) writes
    the predictor ``mu + tau * z_a[g] + X @ beta``, with no deterministic ``a``.
    """
    rng = np.random.default_rng(31_000 + n_groups)
    groups = group_index(rng, n_rows, n_groups)
    X = rng.normal(size=(n_rows, 4))
    a_true = rng.normal(-1.0, 0.8, size=n_groups)
    eta = a_true[groups] + X @ [0.5, -0.3, 0.2, 0.1]
    y = (rng.random(n_rows) < 1.0 / (1.0 + np.exp(-eta))).astype("int64")
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        tau = pm.HalfNormal("tau", 1.0)
        if inline and not centred:
            z = pm.Normal("z_a", 0.0, 1.0, shape=n_groups)
            effects = mu + tau * z[groups]
        else:
            effects = _group_effect("a", mu, tau, n_groups, centred)[groups]
        beta = pm.Normal("beta", 0.0, 1.0, shape=4)
        pm.Bernoulli("y", logit_p=effects + X @ beta, observed=y)
    return model


def slopes_normal(n_groups, n_rows=N_ROWS, centred=True):
    """Varying intercepts and slopes of a Normal regression with a sampled noise scale.

    ``y ~ Normal(a[g] + b[g] * x + X @ beta, sigma)``, ``a ~ Normal(mu_a, tau_a)``, ``b ~
    Normal(mu_b, tau_b)`` per group; ``x`` has mean 1, ``X`` two standard normals. True
    ``mu_a = 1``, ``tau_a = 1``, ``mu_b = -0.5``, ``tau_b = 0.5``, ``beta = (0.3, -0.2)``,
    ``sigma = 2``.
    """
    rng = np.random.default_rng(32_000 + n_groups)
    groups = group_index(rng, n_rows, n_groups)
    x = rng.normal(1.0, 1.0, size=n_rows)
    X = rng.normal(size=(n_rows, 2))
    a_true = rng.normal(1.0, 1.0, size=n_groups)
    b_true = rng.normal(-0.5, 0.5, size=n_groups)
    y = a_true[groups] + b_true[groups] * x + X @ [0.3, -0.2] + rng.normal(0.0, 2.0, n_rows)
    with pm.Model() as model:
        mu_a = pm.Normal("mu_a", 0.0, 5.0)
        tau_a = pm.HalfNormal("tau_a", 2.0)
        mu_b = pm.Normal("mu_b", 0.0, 5.0)
        tau_b = pm.HalfNormal("tau_b", 2.0)
        a = _group_effect("a", mu_a, tau_a, n_groups, centred)
        b = _group_effect("b", mu_b, tau_b, n_groups, centred)
        beta = pm.Normal("beta", 0.0, 2.0, shape=2)
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.Normal("y", a[groups] + b[groups] * x + X @ beta, sigma, observed=y)
    return model


#: The families: builder and the group effects' names with their hyperparameters.
FAMILIES = {
    "intercepts_logistic": (intercepts_logistic, {"a": ("mu", "tau")}),
    "slopes_normal": (slopes_normal, {"a": ("mu_a", "tau_a"), "b": ("mu_b", "tau_b")}),
}


def model_name(family, n_groups, centred):
    """``"intercepts_logistic_G100_centred"`` and the like."""
    return f"{family}_G{n_groups}_{'centred' if centred else 'noncentred'}"


def _entry(family, n_groups, centred):
    build, _ = FAMILIES[family]
    name = model_name(family, n_groups, centred)
    description = build.__doc__.splitlines()[0].rstrip(".")
    form = "centred" if centred else "non-centred"
    return ZooModel(
        name, lambda: build(n_groups, N_ROWS, centred), N_ROWS,
        f"{description}, {n_groups} groups, {form}",
    )  # fmt: skip


#: Every hierarchical zoo model by name.
HIERARCHICAL_ZOO = {
    entry.name: entry
    for entry in (
        _entry(family, n_groups, centred)
        for family in FAMILIES
        for n_groups in GROUP_COUNTS
        for centred in (True, False)
    )
}


def hierarchical_reference(name):
    """Reference summaries of hierarchical zoo model ``name``, as ``tests.support.zoo.reference``.

    Returns
    -------
    dict of {str : dict of {str : float}}
        Scalar label (``"a[3]"``) -> ``{"mean", "sd", "mcse_mean", "mcse_sd"}`` for every
        free variable and the group effects ``a`` (and ``b``).
    """
    if name not in HIERARCHICAL_ZOO:
        raise KeyError(f"no hierarchical zoo model {name!r}; they are {sorted(HIERARCHICAL_ZOO)}")
    family = next(f for f in FAMILIES if name.startswith(f))
    n_groups = int(name.split("_G")[1].split("_")[0])
    entry = json.loads(REFERENCE_PATH.read_text())["models"][model_name(family, n_groups, True)]
    return entry["parameters"] if name.endswith("_centred") else entry["noncentred_parameters"]
