"""A logistic regression on 3000 rows and its 50-row placeholder model: the data and model
the tests of ``data=`` sources share."""

import numpy as np
import pymc as pm

N_ROWS = 3000
PLACEHOLDER_ROWS = 50
_RNG = np.random.default_rng(19)
X = _RNG.normal(1.0, 1.0, size=(N_ROWS, 2))
Y = (_RNG.random(N_ROWS) < 1.0 / (1.0 + np.exp(-(1.5 + X @ [0.8, -0.5])))).astype("int64")


def logistic(X, y):
    with pm.Model() as model:
        X_data = pm.Data("X", X)
        alpha = pm.Normal("alpha", 0.0, 5.0)
        beta = pm.Normal("beta", 0.0, 1.0, shape=2)
        pm.Bernoulli("y", logit_p=alpha + X_data @ beta, observed=y)
    return model


def placeholder():
    """The model on the first rows only (``data=`` supplies the rest)."""
    return logistic(X[:PLACEHOLDER_ROWS], Y[:PLACEHOLDER_ROWS])


def read_only_memmap(path, values):
    """``values`` written to ``path`` and opened again as a read-only ``np.memmap``."""
    writer = np.memmap(path, dtype=values.dtype, mode="w+", shape=values.shape)
    writer[:] = values
    writer.flush()
    return np.memmap(path, dtype=values.dtype, mode="r", shape=values.shape)
