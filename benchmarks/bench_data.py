"""Data sets and NUTS helpers shared by the benchmark scripts."""

import numpy as np
import pymc as pm
from pymc.step_methods.hmc.quadpotential import QuadPotentialDiagAdapt
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

import pymc_minibatch as pmm

#: coefficients of the tall logistic regression: an intercept far from 0, then 9 slopes
TALL_LOGISTIC_BETA = np.array([-2.0, 0.8, -0.6, 0.4, -0.3, 0.2, -0.1, 0.5, 0.0, -0.4])
TALL_LOGISTIC_CORRELATION = 0.3


def breast_cancer_data(seed=0):
    """scikit-learn's breast-cancer data: a stratified 70/30 split, features standardised
    with the training statistics, and an intercept column. Returns
    ``((x_train, y_train), (x_test, y_test))``."""
    x, y = load_breast_cancer(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.3, random_state=seed, stratify=y
    )
    mean, sd = x_train.mean(axis=0), x_train.std(axis=0)

    def design(x):
        return np.column_stack([np.ones(len(x)), (x - mean) / sd])

    return (design(x_train), y_train), (design(x_test), y_test)


def tall_logistic_data(n_rows, seed=0):
    """Logistic regression with d = 10: ``X = [1, x_1..x_9]`` and ``y``, for ``beta`` in
    ``TALL_LOGISTIC_BETA`` (intercept -2, about 15 % ones).

    The covariates are standard normal with correlation 0.3 between any two (one shared
    factor: ``x_j = sqrt(0.7) z_j + sqrt(0.3) f``). Fixed seed; returns ``(X, y)``.
    """
    rng = np.random.default_rng([seed, n_rows])
    rho = TALL_LOGISTIC_CORRELATION
    factor = rng.standard_normal((n_rows, 1))
    covariates = np.sqrt(1.0 - rho) * rng.standard_normal((n_rows, 9)) + np.sqrt(rho) * factor
    X = np.column_stack([np.ones(n_rows), covariates])
    y = (rng.random(n_rows) < 1.0 / (1.0 + np.exp(-(X @ TALL_LOGISTIC_BETA)))).astype("int64")
    return X, y


def tall_logistic_model(X, y, prior_sd=5.0):
    """``beta ~ N(0, prior_sd^2)``, ``y ~ Bernoulli(logit_p = X beta)``."""
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, prior_sd, shape=X.shape[1])
        pm.Bernoulli("y", logit_p=pm.math.dot(X, beta), observed=y)
    return model


def laplace_variances(model, theta, step=1e-4):
    """Diagonal of the inverse Hessian of the negative log posterior at ``theta``.

    ``model`` is a ``pymc.Model`` or a ``pmm.MinibatchModel`` (reused, not recompiled).
    """
    mm = model if isinstance(model, pmm.MinibatchModel) else pmm.MinibatchModel(model)
    variances = np.empty(mm.ndim)
    for j in range(mm.ndim):
        shift = np.zeros(mm.ndim)
        shift[j] = step
        curvature = mm.logp_and_grad(theta + shift)[1][j] - mm.logp_and_grad(theta - shift)[1][j]
        variances[j] = -2.0 * step / curvature
    return variances


def nuts_step(theta, variances):
    """NUTS starting from the MAP with a Laplace-approximation mass matrix.

    Every sampler starts at the MAP. NUTS's default ``jitter+adapt_diag`` would move the start
    by U(-1, 1), thousands of posterior sds at N = 1e6, and adapting a unit mass matrix to
    posterior sds of 1e-3 within a short tuning phase left trees of 31-255 leapfrog steps.
    Call it inside the model's context.
    """
    potential = QuadPotentialDiagAdapt(theta.size, theta, variances, 10)
    return pm.NUTS(potential=potential)
