# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A Bayesian neural network: SGHMC and a CMINT ensemble against ADVI
#
# {download}`Download this tutorial as a Jupyter notebook <bayesian_neural_network.ipynb>`
#
# Neural networks are the models the stochastic-gradient samplers were written for: far
# too many weights for an exact sampler, and a posterior with many modes. This tutorial fits
# a one-hidden-layer network written in PyMC to scikit-learn's bundled handwritten digits
# (1,797 images of 8 x 8 pixels) with
#
# - `pmm.SGHMC`, stochastic gradient Hamiltonian Monte Carlo (Chen, Fox & Guestrin 2014);
# - `pmm.CMINT`, cyclic minibatch tempered MCMC, which builds an ensemble of snapshots
#   (Li & Wong 2017);
# - PyMC's own route for networks on tall data, mean-field ADVI on `pm.Minibatch` batches,
#   as in PyMC's Bayesian neural network example;
#
# and compares their predictions: accuracy, the log-likelihood of the test labels, the
# calibration of the predicted probabilities, and how uncertain each is where it is wrong.
# The digits stand in for MNIST, which cannot be downloaded here; the docs page
# "Stochastic-gradient MCMC" measures every sampler on this network and on MNIST's shape.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import pymc_minibatch as pmm

# PMM_TUTORIAL_QUICK=1 (set by the docs build) shortens the runs.
QUICK = os.environ.get("PMM_TUTORIAL_QUICK") == "1"
EPOCHS = 20 if QUICK else 100
HIDDEN = 100
BATCH_SIZE = 100
SEED = 20261207

# %% [markdown]
# ## Data and model
#
# Pixels scaled to [0, 1], a stratified 80/20 split. The network has 100 ReLU units and
# `Normal(0, 1)` priors on every weight and bias: 7,510 parameters. The data go in
# `pm.Data`, and the labels' likelihood is a `pm.Categorical` on the logits, one term per
# image: what the samplers need to draw minibatches of rows.

# %%
x, y = load_digits(return_X_y=True)
x_train, x_test, y_train, y_test = train_test_split(
    x / 16.0, y, test_size=0.2, random_state=0, stratify=y
)

with pm.Model() as model:
    images = pm.Data("images", x_train)
    labels = pm.Data("labels", y_train)
    w1 = pm.Normal("w1", 0.0, 1.0, shape=(64, HIDDEN))
    b1 = pm.Normal("b1", 0.0, 1.0, shape=HIDDEN)
    w2 = pm.Normal("w2", 0.0, 1.0, shape=(HIDDEN, 10))
    b2 = pm.Normal("b2", 0.0, 1.0, shape=10)
    hidden = pt.maximum(images @ w1 + b1, 0.0)
    pm.Categorical("digit", logit_p=hidden @ w2 + b2, observed=labels)


def class_probabilities(draws, images):
    """The predictive probabilities: the network's softmax averaged over the draws, given
    as a list of dicts of weights."""
    total = 0.0
    for w in draws:
        logits = np.maximum(images @ w["w1"] + w["b1"], 0.0) @ w["w2"] + w["b2"]
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        total = total + p / p.sum(axis=1, keepdims=True)
    return total / len(draws)


def draws_of(posterior, every=1, first=0):
    """The draws of every chain of a posterior group as dicts of weights."""
    names = ("w1", "b1", "w2", "b2")
    n_chains, n_draws = posterior["w1"].shape[:2]
    return [
        {name: posterior[name].values[c, d] for name in names}
        for c in range(n_chains)
        for d in range(first, n_draws, every)
    ]


# %% [markdown]
# ## SGHMC at its defaults
#
# With more than a few thousand parameters the exact Laplace fit the samplers use on
# regressions is out of reach, and they take a diagonal fit instead: a few epochs of Adam
# find a center, the empirical Fisher information gives a diagonal preconditioner, and the
# chains start at the center. On a model this big a draw is kept per epoch (its 15 updates);
# `repr(step)` shows the choices. We keep the second half of each chain.

# %%
with model:
    sghmc = pmm.SGHMC(batch_size=BATCH_SIZE)
    print(sghmc)
    idata_sghmc = pm.sample(
        step=sghmc, draws=EPOCHS, tune=0, chains=2, cores=1, random_seed=SEED,
        progressbar=False, compute_convergence_checks=False,
    )  # fmt: skip
sghmc_draws = draws_of(idata_sghmc["posterior"], first=EPOCHS // 2)

# %% [markdown]
# ## A CMINT ensemble
#
# CMINT runs MINT's tempered minibatch Metropolis–Hastings with a cyclic step size: within
# each round it shrinks every epoch, and a snapshot of the network is kept at the end of the
# round, before the step grows again. On a network its proposal is the paper's: a small
# Langevin step preconditioned by the diagonal fit, from its center. Rounds of ten epochs,
# the step shrinking every epoch (the paper's shape: ten decays per round); the ensemble is
# the snapshots, one per round and chain.

# %%
with model:
    # the paper's round in shape: ten decays of the step, then a snapshot and a raise
    cmint = pmm.CMINT(batch_size=BATCH_SIZE, n_rounds=EPOCHS // 10, round_epochs=10,
                      decay_every=1)  # fmt: skip
    print(cmint)
    idata_cmint = pm.sample(
        step=cmint, draws=cmint.schedule_draws, tune=0, chains=2, cores=1,
        random_seed=SEED, progressbar=False, compute_convergence_checks=False,
    )  # fmt: skip
snapshots = pmm.cmint_ensemble(idata_cmint)
cmint_draws = draws_of(snapshots)
print(f"{len(cmint_draws)} snapshots")

# %% [markdown]
# ## ADVI on minibatches
#
# PyMC's own route: the same network on `pm.Minibatch` batches of 100 images with
# `total_size`, fitted by mean-field ADVI for its usual 30,000 updates (10,000 in the quick
# build), then 500 draws of the fit. As in PyMC's example, the weights start at standard
# normal draws: the all-zero start of a ReLU network is a saddle.

# %%
rng = np.random.default_rng(SEED)
with pm.Model():
    image_batch, label_batch = pm.Minibatch(x_train, y_train.astype(np.int32),
                                            batch_size=BATCH_SIZE)  # fmt: skip
    w1 = pm.Normal("w1", 0.0, 1.0, shape=(64, HIDDEN), initval=rng.standard_normal((64, HIDDEN)))
    b1 = pm.Normal("b1", 0.0, 1.0, shape=HIDDEN)
    w2 = pm.Normal("w2", 0.0, 1.0, shape=(HIDDEN, 10), initval=rng.standard_normal((HIDDEN, 10)))
    b2 = pm.Normal("b2", 0.0, 1.0, shape=10)
    hidden = pt.maximum(image_batch @ w1 + b1, 0.0)
    pm.Categorical("digit", logit_p=hidden @ w2 + b2, observed=label_batch,
                   total_size=len(y_train))  # fmt: skip
    approx = pm.fit(n=10_000 if QUICK else 30_000, method="advi", random_seed=SEED,
                    progressbar=False)  # fmt: skip
    idata_advi = approx.sample(500, random_seed=SEED)
advi_draws = draws_of(idata_advi["posterior"])

# %% [markdown]
# ## Predictions
#
# For each method, the class probabilities averaged over its draws; its accuracy, the mean
# log-probability of the true label, and the expected calibration error (how far the top
# probability is from the accuracy at that confidence, over 15 bins).

# %%
def scores(probs, labels, n_bins=15):
    confidence, predicted = probs.max(axis=1), probs.argmax(axis=1)
    correct = predicted == labels
    which = np.clip(np.digitize(confidence, np.linspace(0, 1, n_bins + 1)[1:-1]), 0, n_bins - 1)
    ece = sum(
        abs(correct[which == b].mean() - confidence[which == b].mean()) * np.mean(which == b)
        for b in range(n_bins)
        if np.any(which == b)
    )
    log_likelihood = np.log(probs[np.arange(len(labels)), labels]).mean()
    return correct.mean(), log_likelihood, ece


probabilities = {
    "SGHMC": class_probabilities(sghmc_draws, x_test),
    "CMINT": class_probabilities(cmint_draws, x_test),
    "ADVI": class_probabilities(advi_draws, x_test),
}
print(f"{'':6} {'accuracy':>9} {'log-lik':>8} {'ECE':>6}")
for name, probs in probabilities.items():
    accuracy, log_likelihood, ece = scores(probs, y_test)
    print(f"{name:6} {accuracy:9.3f} {log_likelihood:8.3f} {ece:6.3f}")

# %% [markdown]
# ## Where the predictions are wrong
#
# A useful predictive distribution is uncertain where it is wrong. The entropy of the
# predicted probabilities (0 for a certain prediction, log 10 for a uniform one) of the
# test images each method gets right, against those it gets wrong:

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 3.2), sharey=True)
bins = np.linspace(0.0, np.log(10), 25)
for ax, (name, probs) in zip(axes, probabilities.items(), strict=True):
    entropy = -np.sum(probs * np.log(np.maximum(probs, 1e-300)), axis=1)
    right = probs.argmax(axis=1) == y_test
    ax.hist(entropy[right], bins=bins, density=True, alpha=0.6, label="right")
    ax.hist(entropy[~right], bins=bins, density=True, alpha=0.6, label="wrong")
    ax.set_title(f"{name}: {np.sum(~right)} wrong")
    ax.set_xlabel("predictive entropy")
axes[0].set_ylabel("density")
axes[0].legend()
fig.tight_layout()

# %% [markdown]
# ## What to take away
#
# - The samplers run on a network at their defaults: the diagonal fit replaces the exact
#   one, the step sizes are set from the gradient noise measured near its center, and a
#   draw per epoch keeps the memory bounded (`pymc_minibatch` logs the size of a draw).
# - Their predictions are averages over many networks: they are usually better calibrated
#   than ADVI's mean-field fit, whose independent Gaussians over 7,510 weights are a rough
#   description of a network's posterior.
# - CMINT's draws follow a tempered posterior, far wider than the posterior on a network;
#   its small Langevin steps explore the modes around the center rather than that target,
#   and its snapshots make an ensemble.
# - The docs page "Stochastic-gradient MCMC" has the same comparison for every sampler and
#   several seeds, and the cost of an update on a network of MNIST's size.
