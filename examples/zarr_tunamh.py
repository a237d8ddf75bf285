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
# # Ten million rows on disk: TunaMH on a Zarr store
#
# {download}`Download this tutorial as a Jupyter notebook <zarr_tunamh.ipynb>`
#
# When the rows do not fit in memory, or should not be loaded, keep them where they are.
# This tutorial writes a logistic regression's rows, 10^7 of them with 10 covariates (their
# size in memory is printed below), to a [Zarr](https://zarr.readthedocs.io) store on disk,
# declares the PyMC model on a **placeholder** of 1000 rows, and hands `pmm.TunaMH` the
# stored arrays with `data=`. Nothing ever loads all rows:
#
# * a step reads only the few rows it draws (`pmm.ChunkedRows` reads them chunk by chunk);
# * the passes over all rows that TunaMH makes when it is built (the posterior mode, the
#   curvature there, the per-row bounds and the control variates' sums) run as Dask tasks,
#   one block of rows at a time, on Dask's threads (or on a cluster while a
#   `dask.distributed.Client` is active).
#
# It needs the `dask` extra: `pip install "pymc-minibatch[dask]"`. It prints the process's
# peak memory and the time of each pass over the data. `benchmarks/chunked_rows.py` in the
# repository compares the same run against the rows in memory (memory and µs per step).

# %%
import os
import resource
import tempfile
import time

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pymc as pm
import zarr

import pymc_minibatch as pmm


def peak_memory_mb():
    """The peak resident memory of this process so far (Linux: ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# PMM_TUTORIAL_QUICK=1 (set by the docs build) shrinks the data and the run.
QUICK = os.environ.get("PMM_TUTORIAL_QUICK") == "1"
N_ROWS = 200_000 if QUICK else 10_000_000
N_FEATURES = 10
CHUNK_ROWS = 16_384
DRAWS, TUNE = (500, 500) if QUICK else (2000, 500)
SEED = 20261202

# %% [markdown]
# ## The rows, written to Zarr block by block
#
# Synthetic rows with known coefficients, generated and written 131,072 rows (8 chunks) at
# a time, so that they are never all in memory here either. The store is
# chunked along the rows: a chunk is the unit Zarr reads and decompresses.

# %%
store = tempfile.mkdtemp(prefix="pmm-zarr-")
rng = np.random.default_rng(SEED)
true_alpha = 0.5
true_beta = rng.normal(0.0, 0.5, size=N_FEATURES)
X_store = zarr.create_array(f"{store}/X.zarr", shape=(N_ROWS, N_FEATURES), dtype="float64",
                            chunks=(CHUNK_ROWS, N_FEATURES))  # fmt: skip
y_store = zarr.create_array(f"{store}/y.zarr", shape=(N_ROWS,), dtype="int8",
                            chunks=(CHUNK_ROWS,))  # fmt: skip
block = 8 * CHUNK_ROWS
started = time.perf_counter()
for start in range(0, N_ROWS, block):
    rows = min(block, N_ROWS - start)
    X_block = rng.normal(0.3, 1.0, size=(rows, N_FEATURES))
    p = 1.0 / (1.0 + np.exp(-(true_alpha + X_block @ true_beta)))
    X_store[start : start + rows] = X_block
    y_store[start : start + rows] = (rng.random(rows) < p).astype("int8")
del X_block, p
data_mb = N_ROWS * (N_FEATURES * 8 + 1) / 2**20
print(f"wrote {N_ROWS:,} rows ({data_mb:,.0f} MB in memory) in "
      f"{time.perf_counter() - started:.0f} s")  # fmt: skip

# %% [markdown]
# ## The model, on a placeholder
#
# The model is the one you would write for rows in memory, with `pm.Data` holding the
# first 1000 rows. PyMC sees only those (deterministics and posterior predictive draws use
# them); the sampler reads the rows from the arrays it is given, by name, and takes N from
# them.

# %%
X_disk = zarr.open_array(f"{store}/X.zarr", mode="r")
y_disk = zarr.open_array(f"{store}/y.zarr", mode="r")
before_mb = peak_memory_mb()

with pm.Model() as model:
    X_data = pm.Data("X", X_disk[:1000])
    alpha = pm.Normal("alpha", 0.0, 5.0)
    beta = pm.Normal("beta", 0.0, 1.0, shape=N_FEATURES)
    pm.Bernoulli("y", logit_p=alpha + X_data @ beta, observed=y_disk[:1000])

# %% [markdown]
# ## TunaMH, built on the stored rows
#
# `pmm.ChunkedRows` sets the cache of decompressed chunks (the most recently used are
# kept). TunaMH needs little of it: it draws the indices of its rows ahead, about
# N / 64 at a time, and the arrays read those rows in one pass over their chunks, then serve
# the following steps from them; so 8 MiB per array here. Building the step makes its
# passes over all rows; the adapter `step.minibatch_model` counts them and times each.

# %%
with model:
    started = time.perf_counter()
    step = pmm.TunaMH(data={
        "X": pmm.ChunkedRows(X_disk, cache_bytes=2**23),
        "y": pmm.ChunkedRows(y_disk, cache_bytes=2**23),
    })  # fmt: skip
    built_s = time.perf_counter() - started
adapter = step.minibatch_model
print(step)
print(f"built in {built_s:.0f} s with {adapter.full_data_passes} passes over the "
      f"{adapter.n_data:,} rows")  # fmt: skip
for number, seconds in enumerate(adapter.pass_seconds, start=1):
    print(f"  pass {number:2d}: {seconds:5.2f} s")

# %% [markdown]
# The passes are: the mode search (Newton steps: one pass for each exact Hessian, with the
# gradient, and one per line-search trial), a check of the curvature by a secant (two
# passes), and one pass that computes every row's bound and the sums of the rows' quadratic
# expansions (the control variates) together. Only the bounds stay in memory: one float32
# per row (each rounded up, so still a bound).
#
# ## Sampling
#
# Each step draws a few rows (with probability proportional to their bounds) and reads
# them; the chain is exact: it targets the same posterior as NUTS on all rows.

# %%
step_times = []
with model:
    started = time.perf_counter()
    idata = pm.sample(
        step=step, draws=DRAWS, tune=TUNE, chains=1, cores=1, random_seed=SEED,
        progressbar=False, compute_convergence_checks=False,
        callback=lambda trace, draw: step_times.append(time.perf_counter()),
    )  # fmt: skip
stats = idata["sample_stats"]
us_per_step = 1e6 * (step_times[-1] - step_times[0]) / (len(step_times) - 1)
print(f"{us_per_step:,.0f} µs per step, {float(stats['batch_size'].mean()):.1f} rows read per "
      f"step, chunk-cache hit rate {float(np.nanmean(stats['chunk_cache_hit_rate'])):.2f}")
print(f"peak memory of this process: {peak_memory_mb():,.0f} MB, "
      f"{peak_memory_mb() - before_mb:,.0f} MB more than before the model was built; "
      f"the rows take {data_mb:,.0f} MB in memory")  # fmt: skip

# %% [markdown]
# The peak includes what any PyMC sampler needs whatever the data (compiled functions,
# the trace); `benchmarks/chunked_rows.py` separates it by sampling the placeholder alone.
#
# ## The answer
#
# The coefficients were drawn at random above; the posterior should cover them.

# %%
summary = az.summary(idata, var_names=["alpha", "beta"], kind="stats")
summary["true"] = np.concatenate([[true_alpha], true_beta])
summary.round(3)

# %%
fig, (ax_passes, ax_forest) = plt.subplots(1, 2, figsize=(10, 4))
ax_passes.bar(np.arange(1, len(adapter.pass_seconds) + 1), adapter.pass_seconds)
ax_passes.set(xlabel="pass over all rows", ylabel="seconds",
              title=f"passes while building TunaMH (N = {N_ROWS:,})")  # fmt: skip
mean = summary["mean"].to_numpy()
low, high = summary["hdi_3%"].to_numpy(), summary["hdi_97%"].to_numpy()
positions = np.arange(len(mean))
ax_forest.errorbar(mean, positions, xerr=[mean - low, high - mean], fmt="o", label="TunaMH 94% HDI")
ax_forest.plot(summary["true"], positions, "x", color="C3", label="true value")
ax_forest.set(yticks=positions, yticklabels=summary.index, xlabel="value")
ax_forest.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# The store was a temporary directory; remove it.

# %%
import shutil  # noqa: E402

shutil.rmtree(store)
