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
# # Stochastic-gradient MCMC on a Bayesian logistic regression
#
# {download}`Download this tutorial as a Jupyter notebook <sgmgt_logistic.ipynb>`
#
# Stochastic-gradient MCMC replaces the full-data gradient of a Hamiltonian or Langevin
# sampler by an unbiased estimate from a minibatch of rows, and drops the accept/reject
# step. Each update then costs `batch_size` rows instead of `N`, at the price of a bias
# (Euler discretisation plus the gradient noise) that the default step sizes keep at about
# 10% of the posterior variance on a Gaussian posterior (5% for SGLD).
#
# `pmm.SGLD`, `pmm.SGHMC`, `pmm.SGNHT`, `pmm.SGMGT` and `pmm.SGMGTD` are one kernel (the
# stochastic-gradient monomial-gamma thermostat of Zhang et al. 2017) with different
# settings:
#
# - `SGLD`: Langevin dynamics, no momentum;
# - `SGHMC`: momentum with constant friction;
# - `SGNHT`: momentum with a Nosé–Hoover thermostat, which absorbs the unknown gradient
#   noise by adapting the friction;
# - `SGMGT`: SGNHT with monomial-gamma kinetics and momentum/thermostat resampling;
# - `SGMGTD`: SGMGT plus a little Langevin diffusion on the parameters and thermostats.
#
# With only `batch_size` given, each preconditions by the curvature of the posterior, moves
# toward the mode during the first tuning updates and picks its step size by a documented
# rule. This tutorial runs them on a synthetic logistic regression and compares them with
# NUTS.

# %%
import os

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm

import pymc_minibatch as pmm

# PMM_TUTORIAL_QUICK=1 (set by the docs build) shortens the runs and compares three of
# the five samplers.
QUICK = os.environ.get("PMM_TUTORIAL_QUICK") == "1"
N_ROWS = 10_000
BATCH_SIZE = 500
THIN = 10  # updates per kept draw
DRAWS = 500 if QUICK else 2000
#: the run shown in detail: long enough that r_hat stays below PyMC's 1.01 warning level
DETAIL_DRAWS = 1500 if QUICK else 2000
TUNE = 500 if QUICK else 1000
SEED = 20240503

# %% [markdown]
# ## Data and model
#
# Five covariates, two of them strongly correlated (which makes the posterior of their
# coefficients correlated too, the case where preconditioning matters), and an intercept.

# %%
rng = np.random.default_rng(SEED)
n_features = 5
X = rng.normal(size=(N_ROWS, n_features))
X[:, 1] = 0.9 * X[:, 0] + np.sqrt(1 - 0.9**2) * X[:, 1]
true_beta = np.array([1.0, -1.0, 0.5, 0.0, -0.25])
p = 1.0 / (1.0 + np.exp(-(0.3 + X @ true_beta)))
y = (rng.random(N_ROWS) < p).astype("int64")

with pm.Model(coords={"feature": [f"x{k}" for k in range(n_features)]}) as model:
    intercept = pm.Normal("intercept", 0.0, 2.0)
    beta = pm.Normal("beta", 0.0, 1.0, dims="feature")
    pm.Bernoulli("y", logit_p=intercept + X @ beta, observed=y)

# %% [markdown]
# ## One sampler in detail: SGMGT-D
#
# `updates_per_draw=THIN` makes every kept draw the result of `THIN` updates (each on a
# fresh batch of `BATCH_SIZE` rows, in epochs without replacement). At construction the
# sampler fits the Laplace approximation on the full data; it whitens the posterior with it,
# starts each chain from a draw of it and centres its control-variate gradients at its mode.
# The `tune` draws are discarded as usual.

# %%
with model:
    idata_sg = pm.sample(
        step=pmm.SGMGTD(batch_size=BATCH_SIZE, updates_per_draw=THIN),
        draws=DETAIL_DRAWS,
        tune=TUNE,
        chains=2,
        cores=1,
        random_seed=SEED,
        progressbar=False,
    )

# %% [markdown]
# The traces should look stationary from the first kept draw (the chains started in the
# posterior's bulk) and the two chains should overlap.

# %%
pmm.plot_trace(idata_sg)
plt.show()

# %%
az.summary(idata_sg)

# %% [markdown]
# `sample_stats` records, per kept draw, the step size (in preconditioned units, where the
# posterior sd is about 1), the mean thermostat value and the norm of the minibatch
# gradient. The thermostat settles where it balances the heat injected by the gradient
# noise; a thermostat that drifts without settling is a sign of a step size too large.

# %%
stats = idata_sg["sample_stats"]
print(f"step size: {float(stats['step_size'].mean()):.4g}")
print(f"thermostat mean, by chain: {stats['thermostat_mean'].mean('draw').values.round(3)}")

# %% [markdown]
# ## Comparison with NUTS
#
# `pmm.compare` runs each sampler and NUTS (the reference) with the same draws, tuning and
# seed. A dict value may be a callable returning a step; here each sampler gets the same
# batch size and thinning. The columns: wall time (compilation and tuning included), the
# smallest bulk and tail ESS over parameters, ESS per second and its ratio to NUTS, the
# largest standardised error of a mean `|mean - mean_ref| / sd_ref`, the largest relative
# error of an sd, the mean standardised 1-D Wasserstein distance between marginals, and the
# rows of data read per kept draw (`THIN * BATCH_SIZE` for these samplers).
#
# What to look for: all samplers agree with NUTS on the means and sds up to errors of a
# tenth or two of a posterior sd. Part of that is Monte Carlo noise on both sides, of order
# `sqrt(1/ESS + 1/ESS_ref)` for a standardised mean error, which is not small for these
# short runs; the SG-MCMC samplers are also approximate (their default step sizes aim at
# about 10% error in variance), and a short run cannot separate the two: longer runs
# (`draws`) shrink the noise but not the bias. On a data set this
# small NUTS is hard to beat in ESS per second; SG-MCMC pays off when `N` is so large that a
# full-data gradient is expensive (compare `loglik_rows_per_draw`).

# %%
samplers = {
    "SGLD": pmm.SGLD,
    "SGHMC": pmm.SGHMC,
    "SGNHT": pmm.SGNHT,
    "SGMGT": pmm.SGMGT,
    "SGMGTD": pmm.SGMGTD,
}
if QUICK:
    samplers = {name: samplers[name] for name in ("SGLD", "SGNHT", "SGMGTD")}

with model:
    table, results = pmm.compare(
        {
            name: lambda cls=cls: cls(batch_size=BATCH_SIZE, updates_per_draw=THIN)
            for name, cls in samplers.items()
        },
        draws=DRAWS,
        tune=TUNE,
        chains=2,
        random_seed=SEED,
        return_results=True,
    )
table.round(3)

# %% [markdown]
# The marginals overlay closely; look at the forest plot for intervals that are shifted or
# narrower than NUTS's.

# %%
pmm.plot_compare(results, var_names=["beta"])
plt.show()

# %% [markdown]
# ## Without a reference: the kernel Stein discrepancy
#
# On data too tall for a NUTS reference, `pmm.ksd` still gives a check: the kernel Stein
# discrepancy (Gorham & Mackey 2017) measures how far a set of draws is from the full-data
# posterior using only the model's score (the gradient of its log posterior) at the draws.
# Lower is better. For `n` independent exact draws of a `d`-dimensional Gaussian posterior it
# is about `sqrt(2 d / n)`, so compare results at the same `n` (`max_draws`, thinned evenly);
# each draw used costs one full-data gradient. NUTS's value is the yardstick for exact draws
# here. Autocorrelated draws score higher than independent ones even from an exact sampler,
# so part of the SG-MCMC samplers' excess reflects their lower ESS, not only their bias.

# %%
KSD_DRAWS = 300 if QUICK else 1000
minibatch_model = pmm.MinibatchModel(model)  # compiled once, reused for every result
n_params = minibatch_model.ndim
print(f"exact i.i.d. draws would give about {np.sqrt(2 * n_params / KSD_DRAWS):.3f}")
for label, result in results.items():
    print(f"{label:>8}: KSD {pmm.ksd(result, minibatch_model, max_draws=KSD_DRAWS):.3f}")
