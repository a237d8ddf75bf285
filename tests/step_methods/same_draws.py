"""Draws of every registered step method at fixed seeds, recorded once to hold a refactor to.

Three small models: a logistic regression, a regression with a free scale (Normal
likelihood, ``sigma ~ HalfNormal``) and a centred varying-intercept model with a free scale
(8 groups of unequal sizes; with a known scale its rows' likelihood would be exactly
quadratic, and TunaMH would read no rows); PoissonMH, which needs bounded supports, runs
on the logistic regression with a box prior instead. Each step method is built at its
defaults (plus the registry's required arguments) with ``rng=SEED`` and stepped ``TUNE``
times while tuning, then ``DRAWS`` times after ``stop_tuning``, from the model's initial
point; the recorded draws are the raveled points after every step. A step method that
refuses a model records the error's class instead.

Record (before a change that must not alter the draws), from the repository root, in each
supported environment (the C and numba backends of PyMC 5 and 6 round differently)::

    python -m tests.step_methods.same_draws

It writes :data:`FIXTURE` for the running PyMC major version.
"""

import pathlib
import warnings

import numpy as np
import pymc as pm

from pymc_minibatch import registry
from pymc_minibatch.exceptions import (
    BoundsUnavailableError,
    DataValidationError,
    NonFactorizableError,
)

SEED = 20261206
# Few tuning steps: TunaMH's tuning on the varying-intercept model amplifies a rounding
# difference about 1.3 times a step (1e-16 to 1e-4 over 100 steps between PyMC 5's C and
# PyMC 6's numba backends, which then also differ with the order of compilation); after 40
# it stays near 1e-11.
TUNE, DRAWS = 40, 160
#: The errors by which a step method refuses a model up front (any other error fails).
REFUSALS = (BoundsUnavailableError, DataValidationError, NonFactorizableError)
#: The recorded draws of the running PyMC major version.
FIXTURE = pathlib.Path(__file__).with_name("same_draws") / f"pymc{pm.__version__.split('.')[0]}.npz"


def _data():
    rng = np.random.default_rng(3)
    n = 300
    X = rng.normal(size=(n, 2))
    groups = rng.choice(8, size=n, p=np.array([30, 20, 15, 12, 10, 6, 4, 3]) / 100)
    logit = X @ np.array([0.7, -0.3])
    y_binary = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype("int64")
    effects = rng.normal(0.0, 0.8, size=8)
    y_real = effects[groups] + X @ np.array([0.5, -1.0]) + rng.normal(0.0, 0.7, size=n)
    return X, groups, y_binary, y_real


def build_models():
    """``{name: pm.Model}`` of the module docstring."""
    X, groups, y_binary, y_real = _data()
    with pm.Model() as logistic:
        beta = pm.Normal("beta", 0.0, 2.0, shape=2)
        pm.Bernoulli("y", logit_p=X @ beta, observed=y_binary)
    with pm.Model() as box:
        beta = pm.Uniform("beta", [0.3, -0.7], [1.1, 0.1], default_transform=None)
        pm.Bernoulli("y", logit_p=X @ beta, observed=y_binary)
    with pm.Model() as free_scale:
        beta = pm.Normal("beta", 0.0, 2.0, shape=2)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", X @ beta, sigma, observed=y_real)
    with pm.Model() as varying_intercept:
        mu = pm.Normal("mu", 0.0, 1.0)
        tau = pm.HalfNormal("tau", 1.0)
        a = pm.Normal("a", mu, tau, shape=8)
        beta = pm.Normal("beta", 0.0, 2.0, shape=2)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("y", a[groups] + X @ beta, sigma, observed=y_real)
    return {"logistic": logistic, "box": box, "free_scale": free_scale,
            "varying_intercept": varying_intercept}  # fmt: skip


def cases():
    """``(step method name, model name)`` pairs, each recorded under ``"name/model"``."""
    pairs = []
    for entry in registry.SAMPLERS:
        if entry.needs_bounded_support:
            pairs.append((entry.name, "box"))
        else:
            pairs.extend((entry.name, model) for model in
                         ("logistic", "free_scale", "varying_intercept"))  # fmt: skip
    return pairs


def draws(name, model):
    """The raveled points after every step, shape ``(TUNE + DRAWS, d)``, or the name of the
    error class when the step method refuses ``model``."""
    entry = registry.BY_NAME[name]
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            step = entry.step_class(**entry.required, rng=SEED, progressbar=False)
        except REFUSALS as error:  # a refusal is recorded, and must stay the same
            return type(error).__name__
        point = model.initial_point()
        names = [var.name for var in model.value_vars]
        points = []
        for index in range(TUNE + DRAWS):
            if index == TUNE:
                step.stop_tuning()
            point, _ = step.step(point)
            points.append(np.concatenate([np.ravel(point[var]) for var in names]))
    return np.array(points)


def record(path=FIXTURE):
    """Run every case and write ``path`` (an ``.npz`` keyed ``"name/model"``; a refusal is
    stored as a string)."""
    models = build_models()
    results = {f"{name}/{model}": draws(name, models[model]) for name, model in cases()}
    path.parent.mkdir(exist_ok=True)
    np.savez_compressed(path, **{key: np.asarray(value) for key, value in results.items()})
    return results


if __name__ == "__main__":
    for key, value in record().items():
        print(key, value if isinstance(value, str) else value.shape)
    print(f"wrote {FIXTURE}")
