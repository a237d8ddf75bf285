"""Bayesian neural networks for the big-model benchmarks: data, the PyMC model, and the same
log posterior's minibatch gradient written by hand in NumPy (the floor a sampler's update
is measured against).

MNIST cannot be downloaded here. Two stand-ins:

* :func:`mnist_shaped_data`: rows of MNIST's shape (784 standard normal inputs, 10
  classes) labelled by a fixed random network, for cost and scale;
* :func:`digits_data`: scikit-learn's bundled digits (1,797 images of 8 x 8 pixels, 10
  classes), real images, for accuracy.
"""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

#: The labelling network of :func:`mnist_shaped_data`: inputs, hidden units, classes.
LABELLER_SHAPE = (784, 20, 10)
LABELLER_SEED = 20261207


def mnist_shaped_data(n_rows, seed=0):
    """``(X, y)``: ``n_rows`` rows of 784 standard normal inputs, each labelled by a fixed
    784-20-10 tanh network whose logits (scaled by 3) are perturbed by Gumbel noise (so the
    labels are draws of its softmax). The network is the same for every ``seed``, which
    draws the rows (a test set: another seed)."""
    n_inputs, n_hidden, n_classes = LABELLER_SHAPE
    weights = np.random.default_rng(LABELLER_SEED)
    w1 = weights.normal(size=(n_inputs, n_hidden)) / np.sqrt(n_inputs)
    w2 = 3.0 * weights.normal(size=(n_hidden, n_classes))
    rng = np.random.default_rng([seed, n_rows])
    x = rng.normal(size=(n_rows, n_inputs))
    logits = np.tanh(x @ w1) @ w2
    y = np.argmax(logits + rng.gumbel(size=logits.shape), axis=1)
    return x, y.astype(np.int64)


def digits_data(seed=0):
    """scikit-learn's digits: a stratified 80/20 split, pixels scaled to [0, 1]. Returns
    ``((x_train, y_train), (x_test, y_test))``."""
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        x / 16.0, y, test_size=0.2, random_state=seed, stratify=y
    )
    return (x_train, y_train.astype(np.int64)), (x_test, y_test.astype(np.int64))


def network_model(x, y, hidden=(200,), activation="relu", prior_sd=1.0):
    """A Bayesian network ``inputs - hidden... - classes`` with ``Normal(0, prior_sd)``
    priors on every weight and bias and ``pm.Categorical(logit_p=...)`` rows, the data in
    ``pm.Data`` (``"x"``, ``"y"``)."""
    act = {"relu": lambda a: pt.maximum(a, 0.0), "tanh": pt.tanh}[activation]
    widths = (x.shape[1], *hidden, int(y.max()) + 1)
    with pm.Model() as model:
        layer = pm.Data("x", x)
        labels = pm.Data("y", y)
        for k, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
            w = pm.Normal(f"w{k + 1}", 0.0, prior_sd, shape=(n_in, n_out))
            b = pm.Normal(f"b{k + 1}", 0.0, prior_sd, shape=n_out)
            layer = layer @ w + b
            if k < len(widths) - 2:
                layer = act(layer)
        pm.Categorical("obs", logit_p=layer, observed=labels)
    return model


def n_parameters(n_inputs, hidden, n_classes):
    widths = (n_inputs, *hidden, n_classes)
    return sum(a * b + b for a, b in zip(widths[:-1], widths[1:], strict=True))


class HandGradient:
    """The minibatch gradient of a one-hidden-layer ReLU network's log posterior
    (``Normal(0, prior_sd)`` priors, softmax likelihood scaled by ``N / B``), written in
    NumPy: the floor of a stochastic-gradient update."""

    def __init__(self, x, y, n_hidden, prior_sd=1.0, seed=0):
        rng = np.random.default_rng(seed)
        self.x, self.y = x, y
        n_classes = int(y.max()) + 1
        self.w1 = rng.normal(scale=0.05, size=(x.shape[1], n_hidden))
        self.b1 = np.zeros(n_hidden)
        self.w2 = rng.normal(scale=0.05, size=(n_hidden, n_classes))
        self.b2 = np.zeros(n_classes)
        self.precision = 1.0 / prior_sd**2

    def __call__(self, idx):
        x, y = self.x[idx], self.y[idx]
        scale = len(self.x) / len(idx)
        hidden = np.maximum(x @ self.w1 + self.b1, 0.0)
        logits = hidden @ self.w2 + self.b2
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=1, keepdims=True)
        d_logits = -probs
        d_logits[np.arange(len(idx)), y] += 1.0
        d_logits *= scale
        d_hidden = (d_logits @ self.w2.T) * (hidden > 0)
        return (
            x.T @ d_hidden - self.precision * self.w1,
            d_hidden.sum(axis=0) - self.precision * self.b1,
            hidden.T @ d_logits - self.precision * self.w2,
            d_logits.sum(axis=0) - self.precision * self.b2,
        )
