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
# # A hierarchical model on a million rows
#
# {download}`Download this tutorial as a Jupyter notebook <hierarchical_million_rows.ipynb>`
#
# A million purchases in a thousand stores: did a customer buy (`y`), given four scaled
# covariates and the store? Each store gets its own intercept, drawn from a population
# whose mean and scale are sampled too. Some stores have thousands of rows, some a
# handful, some none at all. This is the model PyMC users with tall data bring most, and the
# one where NUTS suffers most: every gradient sums over all million rows.
#
# `pmm.TunaMH()` samples it exactly while reading a few thousand rows per step. On a
# hierarchical model it moves the parameters in blocks (its `group_moves`): the population
# mean and scale on their prior alone, every store's intercept on a minibatch of that store's
# own rows, and the coefficients shared by all rows over all rows. The maths is in
# {doc}`../samplers/hierarchical`.
#
# The data arrive as they usually do, in a pandas DataFrame with store labels.

# %%
import os
import time

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pymc as pm

import pymc_minibatch as pmm

# PMM_TUTORIAL_QUICK=1 (set by the docs build) shrinks the data and the run.
QUICK = os.environ.get("PMM_TUTORIAL_QUICK") == "1"
N_ROWS, N_STORES = (50_000, 100) if QUICK else (1_000_000, 1000)
DRAWS, TUNE = (500, 500) if QUICK else (2000, 1000)

rng = np.random.default_rng(2026)
stores = [f"store_{s:04d}" for s in range(N_STORES)]
# unequal store sizes: 5% of the stores have no rows, 10% fewer than ten, the rest
# log-normally sized
sizes = np.zeros(N_STORES, dtype=int)
order = rng.permutation(N_STORES)
n_empty, n_tiny = N_STORES // 20, N_STORES // 10
sizes[order[n_empty : n_empty + n_tiny]] = rng.integers(1, 10, size=n_tiny)
rest = order[n_empty + n_tiny :]
weights = np.exp(rng.normal(size=rest.size))
sizes[rest] = rng.multinomial(N_ROWS - sizes.sum(), weights / weights.sum())

true_mu, true_tau, true_beta = -1.0, 0.8, np.array([0.5, -0.3, 0.2, 0.1])
true_intercept = rng.normal(true_mu, true_tau, size=N_STORES)
store_of_row = rng.permutation(np.repeat(np.arange(N_STORES), sizes))
covariates = rng.normal(size=(N_ROWS, 4))
logit = true_intercept[store_of_row] + covariates @ true_beta
df = pd.DataFrame(covariates, columns=["x1", "x2", "x3", "x4"])
df["store"] = pd.Categorical.from_codes(store_of_row, categories=stores)
df["y"] = (rng.random(N_ROWS) < 1 / (1 + np.exp(-logit))).astype(int)
print(f"{len(df):,} rows, {df['store'].cat.categories.size} stores")
print(df["store"].value_counts().describe(percentiles=[0.05, 0.5, 0.95]).round(0))

# %% [markdown]
# ## The model: centred group effects
#
# The store codes index the intercepts; empty stores are still categories, so they get an
# intercept that only the population informs. The design matrix comes straight out of the
# DataFrame (pandas stores it column by column; `TunaMH` lays it out by rows once, when it
# is built).
#
# The group effects are written **centred**, `a ~ Normal(mu, tau)` indexed by the store;
# with many rows per group this is also the form NUTS prefers. Written non-centred,
# `a = pm.Deterministic("a", mu + tau * z)` with `z ~ Normal(0, 1)`, the samplers would
# move the same model in its centred form and map their draws back to `z` (see
# {doc}`../samplers/hierarchical`); an inline `mu + tau * z[store]` in the predictor is a
# product of sampled values that TunaMH's bounds cannot take, and `pmm.TunaMH()` refuses it
# with a message saying so.

# %%
coords = {"store": stores, "covariate": ["x1", "x2", "x3", "x4"]}
store_code = df["store"].cat.codes.to_numpy()
X = df[coords["covariate"]].to_numpy()
print(f"design matrix from the DataFrame: row-major (C order) {X.flags.c_contiguous}")
with pm.Model(coords=coords) as model:
    mu = pm.Normal("mu", 0.0, 2.0)
    tau = pm.HalfNormal("tau", 1.0)
    intercept = pm.Normal("intercept", mu, tau, dims="store")
    beta = pm.Normal("beta", 0.0, 1.0, dims="covariate")
    logit_p = intercept[store_code] + X @ beta
    pm.Bernoulli("y", logit_p=logit_p, observed=df["y"].to_numpy())

# %% [markdown]
# ## Build the step, then sample
#
# Building the step makes a few passes over all rows: the posterior mode by Newton steps
# with the exact Hessian (its sparsity used: a row touches its store and the coefficients
# only), the bounds, and the control variates' sums. Its time counts: it is part of the
# wait for the answer.

# %%
started = time.perf_counter()
with model:
    step = pmm.TunaMH()
setup_seconds = time.perf_counter() - started
print(step)
print(f"setup: {setup_seconds:.1f} s, of which the Laplace fit {step.laplace.seconds:.1f} s "
      f"in {step.laplace.passes} passes over all rows")

started = time.perf_counter()
with model:
    idata = pm.sample(step=step, draws=DRAWS, tune=TUNE, chains=2, cores=1, random_seed=1,
                      progressbar=False)  # fmt: skip
sampling_seconds = time.perf_counter() - started
stats = idata["sample_stats"]
print(f"sampling: {sampling_seconds:.1f} s for 2 chains x {TUNE + DRAWS} steps")

# %% [markdown]
# Each step reads `batch_size` rows on average: the stores' minibatches and the shared move's
# rows. The three moves' acceptance rates show how each block mixes.

# %%
print(f"rows read per step: {float(stats['batch_size'].mean()):.0f} of {N_ROWS:,}")
for move in ("population", "group", "shared"):
    print(f"{move:>10s} move accepted: {float(stats[f'{move}_accept'].mean()):.2f}")
summary = az.summary(idata, var_names=["mu", "tau", "beta"], round_to=3)
print(summary)
ess_all = az.ess(idata)
min_ess = min(float(ess_all[name].min()) for name in ("mu", "tau", "intercept", "beta"))
print(f"smallest ESS over all {N_STORES + 6} parameters: {min_ess:.0f}; "
      f"{min_ess / (setup_seconds + sampling_seconds):.1f} effective draws per second, "
      "setup included")

# %% [markdown]
# ## Every store, large, tiny or empty
#
# A store's intercept is set by its own rows when it has many, and shrinks to the population
# when it has few; an empty store's is the population's. The plot shows each store's
# posterior mean and 94% interval against its number of rows, with the true intercept.
# The fraction of true intercepts inside their intervals should be near 0.94.

# %%
posterior = idata.posterior["intercept"]
mean = posterior.mean(("chain", "draw")).to_numpy()
low, high = np.quantile(posterior.to_numpy().reshape(-1, N_STORES), [0.03, 0.97], axis=0)
inside = (low <= true_intercept) & (true_intercept <= high)
print(f"true intercepts inside their 94% intervals: {inside.mean():.2f}")

fig, ax = plt.subplots(figsize=(7, 4))
jittered = sizes + 1  # empty stores at 1 on the log axis
ax.errorbar(jittered, mean, yerr=[mean - low, high - mean], fmt="o", ms=2, lw=0.5,
            alpha=0.6, label="posterior mean, 94% interval")  # fmt: skip
ax.scatter(jittered, true_intercept, s=4, color="black", label="true intercept", zorder=3)
ax.axhline(float(idata.posterior["mu"].mean()), color="gray", ls="--", label="posterior mean of mu")
ax.set(xscale="log", xlabel="rows of the store + 1", ylabel="intercept")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## Against NUTS
#
# This tutorial runs no NUTS: at a million rows each of its gradients reads every row, and
# 2 chains take the better part of an hour. The side-by-side comparison is
# `benchmarks/hierarchical.py` in the repository, which runs nutpie's NUTS, TunaMH, SGLD,
# SGHMC and SVGD on this model's twin and records the time to the answer, setup included, and the
# accuracy against NUTS; {doc}`../which-sampler` quotes its committed results.
#
# What to keep:
#
# * write group effects centred, or non-centred through a `pm.Deterministic`, indexed by
#   the group code;
# * `pmm.TunaMH()` at its defaults recognises the groups from the graph and moves them in
#   blocks; its `group_accept`, `shared_accept` and `population_accept` statistics say how
#   each block mixes;
# * with a Normal likelihood whose noise scale is sampled, the shared move often reads all
#   rows (the `fallback` statistic counts it): still exact, but slower.
