"""A small Bayesian neural network beyond the exact curvature's reach: more than
:data:`~pymc_minibatch.model.curvature.MAX_SHARED` weights that every row touches, on rows
labelled by a fixed random network (the shape of the big-model benchmarks, scaled down)."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt

N_INPUTS, N_HIDDEN, N_CLASSES = 20, 150, 3
LABELLER_SEED = 20261207
#: Weights and biases of the network: above MAX_SHARED (3000).
N_PARAMETERS = N_INPUTS * N_HIDDEN + N_HIDDEN + N_HIDDEN * N_CLASSES + N_CLASSES


def labelled_rows(n_rows, seed=0):
    """``(x, y)``: standard normal inputs labelled by a draw of a fixed 20-8-3 tanh network's
    softmax (the same network for every ``seed``, which draws the rows)."""
    weights = np.random.default_rng(LABELLER_SEED)
    w1 = weights.normal(size=(N_INPUTS, 8)) / np.sqrt(N_INPUTS)
    w2 = 3.0 * weights.normal(size=(8, N_CLASSES))
    rng = np.random.default_rng([seed, n_rows])
    x = rng.normal(size=(n_rows, N_INPUTS))
    logits = np.tanh(x @ w1) @ w2
    return x, np.argmax(logits + rng.gumbel(size=logits.shape), axis=1)


def network(n_rows=2000, seed=0):
    """The 20-150-3 tanh network with ``Normal(0, 1)`` priors on ``n_rows`` labelled rows."""
    x, y = labelled_rows(n_rows, seed)
    with pm.Model() as model:
        rows = pm.Data("x", x)
        w1 = pm.Normal("w1", 0.0, 1.0, shape=(N_INPUTS, N_HIDDEN))
        b1 = pm.Normal("b1", 0.0, 1.0, shape=N_HIDDEN)
        w2 = pm.Normal("w2", 0.0, 1.0, shape=(N_HIDDEN, N_CLASSES))
        b2 = pm.Normal("b2", 0.0, 1.0, shape=N_CLASSES)
        hidden = pt.tanh(rows @ w1 + b1)
        pm.Categorical("y", logit_p=hidden @ w2 + b2, observed=y)
    return model


def accuracy(point, x, y):
    """The share of rows ``(x, y)`` that the network at ``point`` (a dict of the weights)
    classifies right."""
    hidden = np.tanh(x @ point["w1"] + point["b1"])
    return float(np.mean(np.argmax(hidden @ point["w2"] + point["b2"], axis=1) == y))
