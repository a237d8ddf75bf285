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
# # Particle methods on two-dimensional posteriors
#
# {download}`Download this tutorial as a Jupyter notebook <particles_2d.ipynb>`
#
# `pmm.sample_particles` moves a set of interacting particles together, with minibatch
# gradients, until they approximate the posterior; the final particles are returned as
# the draws of one chain. Four methods are available (Chen et al. 2018, "A unified
# particle-optimization framework for scalable Bayesian sampling"):
#
# - `"svgd"`: Stein variational gradient descent, a kernel-smoothed gradient plus a kernel
#   repulsion between particles;
# - `"wsgld"`: each particle's gradient plus an entropy-regularised Wasserstein term;
# - `"wsgld_blob"`: the gradient plus the "blob" approximation of the entropy gradient;
# - `"pisgld"`: the average of the SVGD and blob velocities.
#
# These are deterministic approximations and they are **biased for a finite number of
# particles**. The library documents what it measured: all four recover means; SVGD's
# variances come out somewhat low, w-SGLD-B's and π-SGLD's more so, and w-SGLD gathers its
# particles onto the mode; on multimodal targets w-SGLD-B and π-SGLD can shrink each mode
# to a point or a curve when the modes are far apart. Two-dimensional posteriors let us
# *see* all of this by drawing the particles over the exact density.

# %%
import os

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm

import pymc_minibatch as pmm

# PMM_TUTORIAL_QUICK=1 (set by the docs build) uses fewer particles and steps.
QUICK = os.environ.get("PMM_TUTORIAL_QUICK") == "1"
N_PARTICLES = 100 if QUICK else 300
N_STEPS = 300 if QUICK else 1000
METHODS = {"svgd": "SVGD", "wsgld": "w-SGLD", "wsgld_blob": "w-SGLD-B", "pisgld": "π-SGLD"}
SEED = 20240504

# %% [markdown]
# ## Two posteriors with data likelihoods
#
# The samplers need a likelihood that factorises over rows of data (that is what they take
# minibatches of), so both targets are ordinary PyMC models with observed data:
#
# 1. **Logistic regression with two correlated covariates and few rows**: a correlated,
#    slightly skewed, unimodal posterior.
# 2. **Two-component mixture with unknown locations**: half of the rows come from
#    `N(-1.5, 1)` and half from `N(1.5, 1)`; swapping the labels of the components gives two
#    mirror-image modes, near `(-1.5, 1.5)` and `(1.5, -1.5)`.

# %%
rng = np.random.default_rng(SEED)

n_logistic = 100
X = rng.normal(size=(n_logistic, 2))
X[:, 1] = 0.8 * X[:, 0] + 0.6 * X[:, 1]
y_logistic = (rng.random(n_logistic) < 1 / (1 + np.exp(-(X @ [1.5, -1.0])))).astype("int64")
with pm.Model() as logistic:
    pm.Normal("beta", 0.0, 2.0, shape=2)
    pm.Bernoulli("y", logit_p=X @ logistic["beta"], observed=y_logistic)

n_mixture = 100
x_mixture = np.where(rng.random(n_mixture) < 0.5, -1.5, 1.5) + rng.normal(size=n_mixture)
with pm.Model() as mixture:
    pm.Normal("mu", 0.0, 2.0, shape=2)
    pm.NormalMixture("y", w=[0.5, 0.5], mu=mixture["mu"], sigma=1.0, observed=x_mixture)

# %% [markdown]
# Both posteriors are two-dimensional, so the exact (unnormalised) density can be computed
# on a grid from the model itself with `compile_logp`; its contours are the yardstick for
# every picture below.


# %%
def grid_density(model, name, x_range, y_range, points=81):
    """The posterior density on a grid, up to a constant: (x grid, y grid, density[y, x])."""
    logp = model.compile_logp()
    xs, ys = np.linspace(*x_range, points), np.linspace(*y_range, points)
    values = np.array([[logp({name: np.array([a, b])}) for a in xs] for b in ys])
    return xs, ys, np.exp(values - values.max())


def draw_particles(ax, xs, ys, density, draws, title):
    ax.contour(xs, ys, density, levels=6, cmap="Blues")
    ax.scatter(draws[:, 0], draws[:, 1], s=4, color="C1")
    ax.set(title=title, xlim=(xs[0], xs[-1]), ylim=(ys[0], ys[-1]))


def particles(result, name):
    return result["posterior"][name].values.reshape(-1, 2)


# %% [markdown]
# ## The unimodal posterior
#
# With all defaults, `sample_particles` finds the mode, whitens the posterior's curvature
# there (preconditioning), starts the particles from the Laplace approximation and moves
# them for `n_steps` steps with a constant step size (with control-variate gradients, the
# default; without them it decays in the second half of the steps). The data set
# has only 100 rows, so every step here uses all of them (the default batch is
# `min(N, 1000)` rows); with more rows, pass a smaller `batch_size`.

# %%
logistic_results = {}
with logistic:
    for method in METHODS:
        logistic_results[method] = pmm.sample_particles(
            method, n_particles=N_PARTICLES, n_steps=N_STEPS, random_seed=SEED,
            progressbar=False,
        )  # fmt: skip

xs, ys, density = grid_density(logistic, "beta", (0.0, 3.0), (-2.5, 0.5))
fig, axes = plt.subplots(1, 4, figsize=(14, 3.6), sharex=True, sharey=True)
for ax, (method, label) in zip(axes, METHODS.items(), strict=True):
    draw_particles(ax, xs, ys, density, particles(logistic_results[method], "beta"), label)
axes[0].set(xlabel="beta[0]", ylabel="beta[1]")
plt.show()

# %% [markdown]
# What to look for: SVGD's, w-SGLD-B's and π-SGLD's particles spread over the contours much
# as independent draws would. On this two-dimensional posterior their spread comes out close
# to the exact one; the variance deficits the library reports grow with the dimension (they
# were measured on a 5-D Gaussian). w-SGLD's particles all gather onto the mode: with the
# default weight of its Wasserstein term nothing spreads them out, so its sds are zero. The
# summaries below put numbers on it (ESS and `r_hat` do not apply: the particles are not a
# Markov chain, so we ask for the statistics only).

# %%
summaries = {
    label: az.summary(logistic_results[method], kind="stats") for method, label in METHODS.items()
}
for label, summary in summaries.items():
    print(label)
    print(summary, end="\n\n")

# %% [markdown]
# ## The bimodal posterior
#
# The Laplace start would put every particle in one mode, so here they start from the
# prior (`init="prior"`); each particle then falls toward a mode.

# %%
mixture_results = {}
with mixture:
    for method in METHODS:
        mixture_results[method] = pmm.sample_particles(
            method, n_particles=N_PARTICLES, n_steps=N_STEPS, init="prior",
            random_seed=SEED, progressbar=False,
        )  # fmt: skip

xs, ys, density = grid_density(mixture, "mu", (-3.0, 3.0), (-3.0, 3.0))
fig, axes = plt.subplots(1, 4, figsize=(14, 3.6), sharex=True, sharey=True)
for ax, (method, label) in zip(axes, METHODS.items(), strict=True):
    draw_particles(ax, xs, ys, density, particles(mixture_results[method], "mu"), label)
axes[0].set(xlabel="mu[0]", ylabel="mu[1]")
plt.show()

# %% [markdown]
# What to look for, method by method:
#
# - **w-SGLD** puts particles in both modes, but all the particles of a mode sit on one
#   point (its mode), as on the unimodal posterior.
# - **w-SGLD-B** and **π-SGLD** put particles in both modes with a spread within each mode
#   close to, or a little below, the exact one. (On other 2-D densities, such as rings of
#   separated modes, the library's benchmark `benchmarks/particles.py` found them shrinking
#   each mode to a point or a curve, because their kernel bandwidth, set from the median
#   distance between particles, is then dominated by the distances between modes.)
# - **SVGD** also reaches both modes, but many of its particles are still spread around and
#   between them after `N_STEPS` steps: its default bandwidth is four times the median
#   heuristic, and with two far-apart modes the median distance is the distance between the
#   modes, so the repulsion between particles is strong compared with the width of a mode.
#   More steps help only slowly. For well-separated modes its spread is too wide.
#
# None of the methods moves particles from one mode to the other: each particle stays in
# the basin it falls into from its prior draw, so the share of particles in each mode is set
# by the starting draws, not by the modes' masses (equal here, by symmetry). The table gives
# the share of particles in the mode `mu[0] < mu[1]` and the sd of `mu[0]` within each mode.

# %%
for method, label in METHODS.items():
    draws = particles(mixture_results[method], "mu")
    first = draws[:, 0] < draws[:, 1]
    print(f"{label:9s} {first.mean():4.0%} in mu[0] < mu[1];  sd of mu[0] within modes: "
          f"{draws[first, 0].std():.3f} and {draws[~first, 0].std():.3f}")  # fmt: skip

# %% [markdown]
# For the exact within-mode spread, NUTS started in each mode (NUTS itself never crosses
# between these modes): the sd of `mu[0]` is the same in both by symmetry.

# %%
with mixture:
    idata_mode = pm.sample(
        draws=500, tune=500, chains=1, cores=1, initvals={"mu": np.array([-1.5, 1.5])},
        random_seed=SEED, progressbar=False,
    )  # fmt: skip
print(f"NUTS, one mode: sd of mu[0] = {float(idata_mode['posterior']['mu'][..., 0].std()):.3f}")

# %% [markdown]
# ## Comparison with NUTS on the logistic regression
#
# `pmm.compare` accepts results computed earlier, so the particle runs above are compared
# as they are (their wall time is the `sampling_time` that `sample_particles` records,
# mode search included) against a fresh NUTS run on the same model. Each particle is one
# "draw"; ESS is computed as if the particles were a chain, which for particles that
# interact is only indicative. `loglik_rows_per_draw` is `n_steps * batch_size` per particle.
#
# What to look for: small mean errors for SVGD, w-SGLD-B and π-SGLD, and sd errors of
# about 10% or less (the reference's own Monte Carlo error included), in line with the
# pictures above; w-SGLD's sd error is 100% (its particles
# sit on the mode, so their sd is zero). ESS per second is not a fair measure of particle
# methods: their cost buys a fixed set of `n_particles` draws, and NUTS on a 2-D posterior
# with 100 rows is very fast.

# %%
with logistic:
    table, results = pmm.compare(
        {label: logistic_results[method] for method, label in METHODS.items()},
        draws=1000,
        tune=1000,
        chains=2,
        random_seed=SEED,
        return_results=True,
    )
table.round(3)

# %% [markdown]
# The NUTS reference's trace:

# %%
pmm.plot_trace(results["NUTS"])
plt.show()

# %% [markdown]
# `plot_compare` leaves w-SGLD out of the density plot, with a warning: its particles all
# sit at one point, and a kernel density estimate of a point mass is undefined. The forest
# plot shows it.

# %%
pmm.plot_compare(results)
plt.show()
