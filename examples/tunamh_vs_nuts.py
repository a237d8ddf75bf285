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
# # Exact minibatch MH on a tall logistic regression: TunaMH against NUTS
#
# {download}`Download this tutorial as a Jupyter notebook <tunamh_vs_nuts.ipynb>`
#
# NUTS evaluates the gradient of the log-likelihood over **every row** at every leapfrog
# step. On tall data (many rows, few parameters) that is most of the cost of a draw.
# `pmm.TunaMH` (Zhang, Cooper & De Sa 2020) is a Metropolis–Hastings step method that looks
# at only a small, randomly sized batch of rows per step, yet its chain targets **the same
# posterior** as NUTS: it is exact, not an approximation. You keep the PyMC model and the
# ArviZ output; only `step=` changes.
#
# This tutorial fits a synthetic Bayesian logistic regression with both samplers and checks
# that they agree, and how much data each one reads per draw.

# %%
import os

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm

import pymc_minibatch as pmm

# PMM_TUTORIAL_QUICK=1 (set by the docs build) shrinks the data and the runs.
QUICK = os.environ.get("PMM_TUTORIAL_QUICK") == "1"
N_ROWS = 5_000 if QUICK else 50_000
DRAWS = 1000 if QUICK else 5000  # TunaMH draws per chain
COMPARE_DRAWS = 500 if QUICK else 2000  # per chain, for every sampler in pmm.compare
COMPARE_TUNE = 500 if QUICK else 1000
SEED = 20240501

# %% [markdown]
# ## Data and model
#
# `N_ROWS` rows, four standardised covariates and an intercept; the outcome is drawn from
# a logistic model with known coefficients, so we also know roughly where the posterior
# should sit.

# %%
rng = np.random.default_rng(SEED)
n_features = 4
X = rng.normal(size=(N_ROWS, n_features))
true_intercept = -0.5
true_beta = np.array([1.0, -0.5, 0.25, 0.0])
p = 1.0 / (1.0 + np.exp(-(true_intercept + X @ true_beta)))
y = (rng.random(N_ROWS) < p).astype("int64")

with pm.Model(coords={"feature": [f"x{k}" for k in range(n_features)]}) as model:
    intercept = pm.Normal("intercept", 0.0, 2.0)
    beta = pm.Normal("beta", 0.0, 1.0, dims="feature")
    pm.Bernoulli("y", logit_p=intercept + X @ beta, observed=y)

print(f"{N_ROWS:,} rows, {n_features} covariates + intercept, {y.mean():.1%} ones")

# %% [markdown]
# ## Sampling with TunaMH
#
# `pmm.TunaMH()` with no arguments derives everything from the model when the step is built:
# the posterior mode and the Laplace approximation around it (Newton steps with the exact
# Hessian on the full data), and second-order Taylor *control variates*: each row's log-likelihood
# minus its quadratic expansion at the mode. The expansions add up to a quadratic computed
# once; a step only reads rows to account for the small residuals, with a per-row bound on
# how much a residual can change between two parameter values (in closed form for a
# Bernoulli-logit likelihood). The proposal is a preconditioned Crank–Nicolson move that
# leaves the Laplace approximation invariant, so when the posterior is close to Gaussian (as
# tall data make it) nearly every proposal is accepted and consecutive draws are nearly
# independent. Its correlation `rho` and TunaMH's `chi` are tuned during `tune`; the step's
# repr says which path it took (a Laplace likelihood, say, has no bounded third derivative
# and would get a random walk). Judge it, like any sampler, by effective sample size (ESS)
# per second.

# %%
with model:
    step = pmm.TunaMH()
print(step)
with model:
    idata_tuna = pm.sample(
        step=step,
        draws=DRAWS,
        tune=1000,
        chains=2,
        cores=1,
        random_seed=SEED,
        progressbar=False,
    )

# %% [markdown]
# The trace should look like noise around a constant, with both chains overlapping; the
# densities of the two chains should agree.

# %%
pmm.plot_trace(idata_tuna)
plt.show()

# %% [markdown]
# The summary: the means should lie close to the coefficients that generated the data
# (`-0.5` for the intercept, `1, -0.5, 0.25, 0` for `beta`; the posterior describes this
# particular data set, so misses of one to a few posterior sds are normal),
# `r_hat` near 1 and an ESS close to the number of draws.

# %%
az.summary(idata_tuna)

# %% [markdown]
# ## How many rows did each step read?
#
# Every TunaMH step reports its statistics in `sample_stats`: `batch_size` is the number of
# rows drawn for that step (Poisson-distributed), `accept` the acceptance probability, and
# `fallback` whether the step fell back to a full-data MH step (that happens only when the
# expected batch would exceed `N`). A NUTS draw, by comparison, reads all `N` rows once per
# leapfrog step, and takes several leapfrog steps per draw.

# %%
stats = idata_tuna["sample_stats"]
rows_per_step = float(stats["batch_size"].mean())
print(f"mean rows read per TunaMH step: {rows_per_step:,.0f} of N = {N_ROWS:,} "
      f"({rows_per_step / N_ROWS:.2%})")  # fmt: skip
print(f"mean acceptance probability:    {float(stats['accept'].mean()):.2f}")
print(f"pCN correlation rho after tuning: {float(stats['rho'].values.ravel()[-1]):.2f}")
print(f"full-data fallback steps:       {int(stats['fallback'].sum())}")

# %% [markdown]
# ## Comparison with NUTS
#
# `pmm.compare` runs each sampler and PyMC's NUTS (the reference) on the same model with
# the same number of draws and chains, and tabulates wall time, the smallest bulk and tail
# ESS over all parameters, ESS per second and its ratio to NUTS, how far each posterior is
# from the reference (the largest standardised error of a mean, the largest relative error
# of an sd, and the mean standardised 1-D Wasserstein distance between marginals) and the
# rows of data evaluated per draw.
#
# What to look for: TunaMH's means and sds agree with NUTS's (the errors are of the size
# Monte Carlo noise alone would give: it samples the same posterior), and it reads a small
# fraction of the `N` rows per draw that NUTS reads. The `loglik_rows_per_draw` column includes the
# full-data passes spent building the step (`setup_passes`), spread over the draws. The
# balance moves further toward TunaMH as `N` grows: NUTS's cost per draw grows with `N`,
# while TunaMH's residuals shrink (run `python benchmarks/tunamh.py` to see it).

# %%
with model:
    table, results = pmm.compare(
        {"TunaMH": pmm.TunaMH},
        draws=COMPARE_DRAWS,
        tune=COMPARE_TUNE,
        chains=2,
        random_seed=SEED,
        return_results=True,
    )
table.round(3)

# %% [markdown]
# The marginal densities of the two samplers overlay, and the forest plot puts their
# intervals side by side:

# %%
pmm.plot_compare(results)
plt.show()
