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
# # A bimodal posterior with tempered minibatch MH: MINT and CMINT
#
# {download}`Download this tutorial as a Jupyter notebook <mint_bimodal.ipynb>`
#
# A two-component Gaussian mixture whose component locations are both unknown has a
# posterior with (at least) two modes: swapping the labels of the components gives the same
# likelihood. With many rows each mode is very narrow and the two are separated by a valley
# thousands of nats deep, so a gradient-based sampler such as NUTS stays in whichever mode
# it finds first.
#
# `pmm.MINT` (Li & Wong 2017, "Mini-batch Tempered MCMC") is a Metropolis–Hastings step
# that accepts on a minibatch estimate of the log-likelihood. It does **not** sample the
# posterior `p`: its draws follow (very nearly) the *tempered* posterior `p^(1/T)`, with a
# temperature `T` fixed by the number of rows `n` and the batch size `m`
# (`T = n / m^(alpha/2)`, `alpha = 0.99` by default). Tempering flattens the valley between
# the modes by the factor `T`, so MINT moves between them, at the price of draws that are
# spread about `sqrt(T)` times wider than the posterior. It is a tool for *finding and
# exploring* modes and for building ensembles, not for calibrated uncertainty.

# %%
import os

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm

import pymc_minibatch as pmm

# PMM_TUTORIAL_QUICK=1 (set by the docs build) shortens the runs.
QUICK = os.environ.get("PMM_TUTORIAL_QUICK") == "1"
N_ROWS = 10_000
BATCH_SIZE = 500
MINT_DRAWS = 5000 if QUICK else 20_000
SEED = 20240502

# %% [markdown]
# ## Data and model
#
# Half of the rows come from `N(-1, 1)` and half from `N(1, 1)`. The model gives the two
# locations `mu[0]`, `mu[1]` the same `N(0, 2)` prior and mixes them with equal weights, so
# the posterior has one mode near `(-1, 1)` and its mirror image near `(1, -1)`.

# %%
rng = np.random.default_rng(SEED)
x = np.where(rng.random(N_ROWS) < 0.5, -1.0, 1.0) + rng.normal(size=N_ROWS)

with pm.Model() as model:
    mu = pm.Normal("mu", 0.0, 2.0, shape=2)
    pm.NormalMixture("y", w=[0.5, 0.5], mu=mu, sigma=1.0, observed=x)

# %% [markdown]
# ## NUTS stays in one mode
#
# Each NUTS chain settles in one of the two mirror-image modes and never leaves it. The two
# chains may land in the same mode or in different ones, depending on their starting
# points; in the second case `r_hat` is far above 1, in the first the summary looks
# perfectly healthy while describing only half of the posterior.

# %%
with model:
    idata_nuts = pm.sample(
        draws=500 if QUICK else 1000,
        tune=500 if QUICK else 1000,
        chains=2,
        cores=1,
        random_seed=SEED,
        progressbar=False,
        compute_convergence_checks=False,  # the summary shows r_hat: read it there
    )
az.summary(idata_nuts)

# %% [markdown]
# ## MINT
#
# The temperature is known as soon as the step exists: read it before sampling. For
# `n = 10,000` rows and batches of `m = 500` it is a few hundred, so MINT samples the
# posterior raised to a power of about 1/460; the likelihood then weighs roughly as much as
# `n / T = m^(alpha / 2) ≈ 22` rows would (the prior is tempered too).

# %%
with model:
    mint = pmm.MINT(batch_size=BATCH_SIZE)
print(f"temperature T = {mint.temperature:.1f}, tau = {mint.tau:.3f}, "
      f"lambda = {mint.tempering_exponent:.3f}")  # fmt: skip

# %% [markdown]
# Each step reads `BATCH_SIZE` rows. We start both chains in the same mode, `(-1, 1)`, to
# see whether they find the other one. `step.annotate` writes the temperature and the other
# settings into the posterior's attributes, so that the result says what it samples.

# %%
with model:
    idata_mint = pm.sample(
        step=mint,
        draws=MINT_DRAWS,
        tune=1000,
        chains=2,
        cores=1,
        initvals={"mu": np.array([-1.0, 1.0])},
        random_seed=SEED,
        progressbar=False,
        # r_hat and ESS of mu count the jumps between the two labellings here, not the
        # convergence to the tempered target: the mode switches below are the check
        compute_convergence_checks=False,
    )
mint.annotate(idata_mint)
print({k: idata_mint["posterior"].attrs[k] for k in ("temperature", "batch_size", "alpha")})

# %% [markdown]
# The traces jump back and forth between the two labellings: `mu[0]` spends part of the
# time near `-1` and part near `+1`, and `mu[1]` mirrors it.

# %%
pmm.plot_trace(idata_mint)
plt.show()

# %% [markdown]
# How often does each chain switch mode, and what fraction of its draws lies in the starting
# mode (`mu[0] < mu[1]`)? Under the tempered target the two modes have equal mass, so the
# fraction should approach 1/2 as the chains get longer.

# %%
mu_mint = idata_mint["posterior"]["mu"].values  # (chain, draw, 2)
for chain, draws in enumerate(mu_mint):
    in_start_mode = draws[:, 0] < draws[:, 1]
    switches = np.count_nonzero(np.diff(in_start_mode.astype(int)))
    print(f"chain {chain}: {in_start_mode.mean():.0%} of draws in the starting mode, "
          f"{switches} mode switches")  # fmt: skip

# %% [markdown]
# ## What MINT samples: the tempered posterior
#
# Because the model is two-dimensional we can evaluate the exact log posterior on a grid
# (with the model's own `compile_logp`) and draw the tempered density `p^(1/T)` that MINT
# targets. MINT's draws should fill its contours, mode for mode. The NUTS draws, which
# sample `p` itself, are pinned to tiny spots at the centre of one or both modes: the
# untempered posterior is about `sqrt(T) ≈ 20` times narrower. (MINT's exact target is
# slightly wider than `p^(1/T)`, by a few per cent in variance: see the `MINT` docstring.)

# %%
logp = model.compile_logp()
grid = np.linspace(-3.0, 3.0, 61)
log_post = np.array([[logp({"mu": np.array([a, b])}) for b in grid] for a in grid])
tempered = np.exp((log_post - log_post.max()) / mint.temperature)

fig, ax = plt.subplots(figsize=(5.5, 5))
ax.contour(grid, grid, tempered.T, levels=8, cmap="Blues")
flat_mint = mu_mint.reshape(-1, 2)[:: max(1, mu_mint.shape[1] // 1000)]
ax.scatter(*flat_mint.T, s=3, alpha=0.3, color="C1", label="MINT draws")
ax.scatter(*idata_nuts["posterior"]["mu"].values.reshape(-1, 2).T, s=3, color="k",
           label="NUTS draws")  # fmt: skip
ax.set(xlabel="mu[0]", ylabel="mu[1]", title=f"contours of p^(1/T), T = {mint.temperature:.0f}")
ax.legend(loc="upper right")
plt.show()

# %% [markdown]
# The same check in one dimension: the marginal of `mu[0]` under `p^(1/T)` by quadrature on
# the grid, against the histogram of MINT's draws. The two should agree up to Monte Carlo
# noise; the chains' mode switches are the slowest part of the mixing, so the heights of the
# two bumps are the least precise.

# %%
marginal = tempered.sum(axis=1)
marginal /= marginal.sum() * (grid[1] - grid[0])
fig, ax = plt.subplots(figsize=(6, 3))
ax.hist(mu_mint[..., 0].ravel(), bins=60, density=True, alpha=0.5, color="C1", label="MINT")
ax.plot(grid, marginal, color="C0", label="p^(1/T), quadrature")
ax.set(xlabel="mu[0]", ylabel="density")
ax.legend()
plt.show()

# %% [markdown]
# ## CMINT: a cheap ensemble of modes
#
# `pmm.CMINT` runs MINT with a cyclical proposal scale: within each *round* the scale decays
# every `decay_every` epochs (an epoch is `n / m` steps), so the chain settles into a mode,
# and the last draw of the round is kept as a *snapshot*; then the scale is raised, which
# helps the chain leave. `pmm.cmint_ensemble` returns the snapshots (one per round and
# chain). Sample `draws=step.schedule_draws` to run the whole schedule.

# %%
with model:
    cmint = pmm.CMINT(batch_size=BATCH_SIZE, n_rounds=10, round_epochs=10, decay_every=1)
    idata_cmint = pm.sample(
        step=cmint,
        draws=cmint.schedule_draws,
        tune=1000,
        chains=2,
        cores=1,
        initvals={"mu": np.array([-1.0, 1.0])},
        random_seed=SEED,
        progressbar=False,
        compute_convergence_checks=False,  # the result is the snapshots, not this chain
    )
cmint.annotate(idata_cmint)
ensemble = pmm.cmint_ensemble(idata_cmint)
print(f"{cmint.schedule_draws} draws per chain; snapshots per chain: {ensemble.sizes['draw']}")
ensemble["mu"].to_dataframe().unstack("mu_dim_0")

# %% [markdown]
# Each snapshot is a draw of the tempered chain taken after the proposal scale has decayed, so
# the snapshots lie within the modes of `p^(1/T)`. Look at which labelling each snapshot is
# in: with a small proposal scale at the end of each round a chain often keeps the same mode from
# one round to the next, so an ensemble that must cover both modes needs several chains (or
# more rounds); the summary's `r_hat` flags chains that sit in different modes.

# %%
snapshots = ensemble["mu"].values.reshape(-1, 2)
print(f"{np.mean(snapshots[:, 0] < snapshots[:, 1]):.0%} of the snapshots in the mode "
      f"mu[0] < mu[1]")  # fmt: skip
az.summary(idata_cmint)

# %% [markdown]
# ## Comparison with NUTS
#
# `pmm.compare` runs each sampler and NUTS (the reference) on the model and tabulates wall
# time, ESS, ESS per second, the errors of each posterior against the reference's (the
# largest standardised error of a mean, the largest relative error of an sd, the mean
# standardised 1-D Wasserstein distance) and rows read per draw. A dict value may be a
# callable that returns a result; we use that to give MINT its own, longer run.
#
# Read this table differently from the others in this documentation: neither side samples
# `p` across both modes. NUTS samples `p` but only in the mode(s) its chains found, and MINT
# samples `p^(1/T)`. Two cases, depending on where the NUTS chains land:
#
# - both NUTS chains in the same mode: the reference is one narrow peak, and MINT's means
#   and sds differ from it by many reference sds (MINT is not wrong: it samples another
#   distribution);
# - NUTS chains in different modes (then its `ess_bulk_min` is tiny and `r_hat` far above
#   1): the reference's pooled marginals are two narrow spikes at `-1` and `+1`, whose mean
#   and sd can happen to match those of MINT's wide, two-humped tempered marginals. The
#   Wasserstein column, and the plot below, still tell them apart.
#
# What the table does show reliably is the cost: MINT reads `BATCH_SIZE` of the `N_ROWS`
# rows per step (`loglik_rows_per_draw`), NUTS all rows at every leapfrog step.


# %%
def run_mint(model, random_seed):
    with model:
        return pm.sample(
            step=pmm.MINT(batch_size=BATCH_SIZE),
            draws=MINT_DRAWS,
            tune=1000,
            chains=2,
            cores=1,
            random_seed=random_seed,
            progressbar=False,
            compute_convergence_checks=False,  # compare reports the ESS
        )


with model:
    table, results = pmm.compare(
        {"MINT": run_mint},
        draws=500 if QUICK else 1000,
        tune=500 if QUICK else 1000,
        chains=2,
        random_seed=SEED,
        return_results=True,
    )
table.round(3)

# %% [markdown]
# The overlaid marginals make the difference plain: NUTS's narrow peak(s) against MINT's
# wide, two-humped tempered marginals.

# %%
pmm.plot_compare(results)
plt.show()
