"""TunaMH against NUTS: how its cost scales with N and d, and the exact baselines side by side.

TunaMH runs at its defaults: second-order control variates around the posterior mode with a
pCN proposal reversible for the Laplace approximation, ``rho`` tuned during warm-up (its repr
is printed). Every chain runs on one core; timings include ``pm.sample``'s fixed overhead
(about 0.4 s of compilation), and ``setup`` (building the step: the Laplace fit on the full
data, the expansion and the bounds, the row sampler of the bounds) is reported separately.

SCALING TABLE. Synthetic regressions whose data are nested in N (row chunks are seeded by
their index, so the first 1e5 rows of the 1e6 data set are the 1e5 data set) and whose
coefficients do not depend on N:

- logistic regression, d = 10, N in {1e4, 1e5, 1e6, 1e7} (beta ~ N(0, 0.5^2 * 10 / d), so that
  the linear predictor has the same spread for every d);
- Student-t robust regression (nu = 4, scale fixed at 1), d = 5, the same N;
- logistic regression, d = 50, N = 1e6: where order 2 stops paying, as the batch grows like
  d^3 / sqrt(N);
- likelihoods bounded only on a trust region around the mode (``pymc_minibatch.model.region``),
  at N <= 1e6: a linear regression with a free noise scale (``linear10``: an intercept of 1
  and 9 standard normal covariates, beta ~ N(0, 10^2), y = X beta + 0.8 noise, sigma ~
  HalfNormal(2); d = 10 coefficients plus log sigma) and a Poisson log-linear regression
  (``poisson10``: the same design, intercept 1, beta ~ N(0, 1); mean count about 3.4).
  The column ``outside`` is the fraction of steps with a point outside the trust region
  (full-data steps).

Per (problem, N): rows evaluated per step, mean acceptance, ESS per step (bulk ESS, min over
parameters, per draw), microseconds per step (tuning steps included), ESS/s and its ratio to
NUTS, and setup seconds. NUTS (one chain from the MAP, with the Laplace diagonal as its
initial mass matrix, see ``bench_data.nuts_step``) runs for N <= 1e6 only; at N = 1e7 the
ratio is extrapolated from N = 1e6 as NUTS's cost is linear in N (shown as ``~``). Where NUTS
ran, the table also shows ``dmean``: max over parameters of |mean - NUTS mean| / NUTS sd,
and ``dsd``: max of |sd / NUTS sd - 1|.

Acceptance check (logistic d = 10, N = 1e6): ESS/s >= 1000 x NUTS, means within 0.1 NUTS sd,
sds within 5 %. NUTS draws 1000 (``--nuts-draws`` changes it) and TunaMH 20000 (ESS about
19000). Measured MCSEs: the difference of means has an MCSE of about 0.03 NUTS sd, so the 0.1
tolerance is about 3.5 MCSE and a miss would be evidence of bias; the ratio of sds has an MCSE
of about 4 % (nearly all of it NUTS's: 1000 draws give an ESS of only ~300 for the variance),
so the 5 % tolerance is only ~1.2 MCSE and the max over 10 parameters exceeds it by chance
most of the time. The printout gives each error in MCSE units; for a meaningful sd check run
``--scaling-only --sizes 1e6 --scaling-problems logistic10 --nuts-draws 6000`` (about an hour
of NUTS; 5 % is then ~2.5 MCSE). At N = 1e6 the posterior should differ from its Laplace
approximation by O(1 / sqrt(N)) ~ 1e-3 sd, so neither check can see the (tiny) correction
TunaMH's acceptance step makes there: both check the Laplace fit and the bookkeeping.

SIDE BY SIDE. NUTS, full-data MH, TunaMH, TFMH (SMH-2 at its defaults) and FlyMC on the
logistic d = 10 data at N in {1e4, 1e5} (``--side-sizes 1e4 1e5 1e6`` adds 1e6, an estimated
5 more minutes) and the robust regression with d = 10, N = 1e5; NUTS and TunaMH results are
shared with the scaling table. Columns: ESS (min bulk ESS), ESS/s and ratio to NUTS, setup, rows per
draw (NUTS: leapfrog steps x N), TunaMH's floor C E[M] (the batch with chi = 0, derived from its
tuned chi), acceptance, and err/sd, err/mcse: max |mean - NUTS mean| over NUTS sd and over the
MCSE of the difference (up to ~3 is noise).

Memory: plain in-memory arrays (N = 1e7 x 10 float64 is 0.8 GB); the Laplace fit and the
bounds pass over the data in chunks. The peak resident memory per problem is printed (``peak
GB``: VmHWM, reset between problems through /proc/self/clear_refs). ``--memmap DIR`` writes X
to numpy.memmap files in DIR instead (left there; the package then reads the rows it uses
from the memmap).

Run ``python benchmarks/tunamh.py``: 1600 s on 2 cores for the scaling table and the default
side-by-side table (the committed ``benchmarks/results/tunamh.json``), of which NUTS at
N = 1e6 took 600 s for the logistic regression with d = 10, 222 s with d = 50 and 251 s for
``linear10``; TunaMH's setup took at most 8.1 s (N = 1e7) and its sampling 2.6-7.4 s per
problem. ``--scaling-only`` / ``--side-only`` run one part.
``--sizes`` sets the scaling table's N (e.g. ``--sizes 1e4 1e5``),
``--scaling-problems`` its problems, ``--quick`` (about 20 s) N = 1e4 only with small budgets.
Results, NUTS's included, go to ``--json`` (rewritten after every problem) and the side-by-side
bars to ``--plot`` (PNG).
"""

import argparse
import gc
import logging
import os
import time
import warnings

import arviz as az
import numpy as np
import pymc as pm
from bench_data import laplace_variances, nuts_step
from run_record import RESULTS, environment, write_results

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior, sample_stats
from pymc_minibatch.step_methods.tuna import MAX_BATCH_FRACTION, TARGET_KAPPA

#: (tune, draws) of the side-by-side baselines per N
BUDGETS = {
    "FullMH": {10**4: (1000, 4000), 10**5: (500, 1500), 10**6: (200, 400)},
    "TFMH": {10**4: (1000, 5000), 10**5: (1000, 5000), 10**6: (1000, 5000)},
    "FlyMC": {10**4: (500, 2000), 10**5: (300, 1000), 10**6: (200, 500)},
}
#: NUTS (tune, draws) per (problem, d, N): 1000 draws where the accuracy is checked, else
#: enough for an ESS/s (the ratio to TunaMH is in the thousands; 20 % noise does not matter)
NUTS_BUDGETS = {
    ("logistic", 10, 10**4): (300, 1000),
    ("logistic", 10, 10**5): (150, 600),
    ("logistic", 10, 10**6): (100, 1000),
    ("logistic", 50, 10**6): (75, 150),
    ("robust", 5, 10**4): (300, 1000),
    ("robust", 5, 10**5): (150, 500),
    ("robust", 5, 10**6): (100, 300),
    ("robust", 10, 10**5): (150, 600),
    ("linear", 10, 10**6): (300, 1000),
    ("poisson", 10, 10**6): (300, 1000),
}
#: TunaMH (tune, draws); the pCN search for rho takes 400 tuning steps
TUNA_BUDGET = (1000, 20000)
TUNA_BUDGET_LARGE_D = (1000, 10000)  # d = 50: thousands of rows per step
QUICK_BUDGET = {"NUTS": (200, 400), "TunaMH": (600, 4000), "FullMH": (300, 1000),
                "TFMH": (600, 2000), "FlyMC": (200, 600)}  # fmt: skip
NUTS_MAX_ROWS = 10**6
STEPS = {"FullMH": pmm.FullMH, "TunaMH": pmm.TunaMH, "TFMH": pmm.TFMH, "FlyMC": pmm.FlyMC}
SCALING_PROBLEMS = {"logistic10": ("logistic", 10), "robust5": ("robust", 5),
                    "logistic50": ("logistic", 50), "linear10": ("linear", 10),
                    "poisson10": ("poisson", 10)}  # fmt: skip
#: Problems whose bounds hold on a trust region: run at N <= 1e6 (the design matrices of the
#: expansion, one per linear predictor, would take 1.8 GB at 1e7)
REGION_KINDS = ("linear", "poisson")
CHUNK_ROWS = 10**5
CHECK = {"ratio": 1000.0, "mean_sd": 0.1, "sd_rel": 0.05}
#: NUTS results kept in the scaling rows of the JSON file
NUTS_KEYS = ("tune", "draws", "sample_s", "ess", "ess_per_s", "steps_per_draw", "accept",
             "mean", "sd", "mcse", "mcse_sd")  # fmt: skip


# ---- data ----------------------------------------------------------------------------------
def regression_data(kind, n_rows, n_features, seed=0, memmap_dir=None):
    """``X`` (N x d) standard normal, ``beta`` fixed by (seed, d), and ``y``.

    Chunk ``k`` of rows is drawn from its own seed, so data sets of different N are nested.
    """
    rng = np.random.default_rng([seed, n_features])
    if kind == "logistic":
        beta = rng.normal(scale=0.5 * np.sqrt(10.0 / n_features), size=n_features)
    elif kind == "poisson":
        beta = np.r_[1.0, rng.normal(scale=0.5 / np.sqrt(n_features - 1), size=n_features - 1)]
    else:
        beta = rng.normal(size=n_features)
        if kind == "linear":
            beta[0] = 1.0
    shape = (n_rows, n_features)
    if memmap_dir is None:
        X = np.empty(shape)
    else:
        path = os.path.join(memmap_dir, f"X_{kind}_{n_features}_{n_rows}.f8")
        X = np.memmap(path, dtype=np.float64, mode="w+", shape=shape)
    y = np.empty(n_rows, dtype="int64" if kind in ("logistic", "poisson") else np.float64)
    for k, start in enumerate(range(0, n_rows, CHUNK_ROWS)):
        stop = min(start + CHUNK_ROWS, n_rows)
        chunk_rng = np.random.default_rng([seed, n_features, k])
        block = chunk_rng.normal(size=(stop - start, n_features))
        if kind in REGION_KINDS:
            block[:, 0] = 1.0  # an intercept
        eta = block @ beta
        if kind == "logistic":
            y[start:stop] = chunk_rng.random(stop - start) < 1.0 / (1.0 + np.exp(-eta))
        elif kind == "poisson":
            y[start:stop] = chunk_rng.poisson(np.exp(eta))
        elif kind == "linear":
            y[start:stop] = eta + 0.8 * chunk_rng.standard_normal(stop - start)
        else:
            y[start:stop] = eta + chunk_rng.standard_t(4, size=stop - start)
        X[start:stop] = block
    if memmap_dir is not None:
        X.flush()
    return X, y


def regression_model(kind, n_rows, n_features, memmap_dir=None):
    X, y = regression_data(kind, n_rows, n_features, memmap_dir=memmap_dir)
    with pm.Model() as model:
        if kind == "logistic":
            coefs = pm.Normal("beta", 0.0, 1.0, shape=n_features)
            pm.Bernoulli("y", logit_p=pm.math.dot(X, coefs), observed=y)
        elif kind == "poisson":
            coefs = pm.Normal("beta", 0.0, 1.0, shape=n_features)
            pm.Poisson("y", mu=pm.math.exp(pm.math.dot(X, coefs)), observed=y)
        elif kind == "linear":
            coefs = pm.Normal("beta", 0.0, 10.0, shape=n_features)
            sigma = pm.HalfNormal("sigma", 2.0)
            pm.Normal("y", mu=pm.math.dot(X, coefs), sigma=sigma, observed=y)
        else:
            coefs = pm.Normal("beta", 0.0, 10.0, shape=n_features)
            pm.StudentT("y", nu=4.0, mu=pm.math.dot(X, coefs), sigma=1.0, observed=y)
    return model


# ---- samplers ------------------------------------------------------------------------------
def tuned_floor(chi, n_rows):
    """TunaMH's ``C E[M]`` from its tuned ``chi = kappa / (C E[M])`` (inverts
    :func:`~pymc_minibatch.kernels.exact_tuning.chi_update`)."""
    floor = TARGET_KAPPA / chi
    if (1.0 + TARGET_KAPPA) * floor <= MAX_BATCH_FRACTION * n_rows:
        return floor
    # kappa = 0.1 N / floor - 1: chi floor^2 + floor - 0.1 N = 0
    floor = (-1.0 + np.sqrt(1.0 + 4.0 * chi * MAX_BATCH_FRACTION * n_rows)) / (2.0 * chi)
    return floor if chi * floor >= 0.1 else 0.1 / chi


def run_sampler(model, name, tune, draws, initvals, seed, laplace=None):
    setup_start = time.perf_counter()
    with model:
        step = nuts_step(*laplace) if name == "NUTS" else STEPS[name](rng=seed)
    if hasattr(step, "bounds"):
        step.bounds.row_sampler  # noqa: B018 - built lazily at the first step otherwise
    setup = time.perf_counter() - setup_start
    start = time.perf_counter()
    with model:
        idata = pm.sample(
            step=step, tune=tune, draws=draws, chains=1, cores=1, initvals=initvals,
            random_seed=seed, progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    seconds = time.perf_counter() - start
    # (draw, scalar): every free variable (beta, and sigma where it is sampled)
    draws_ = np.concatenate(
        [values.values[0].reshape(draws, -1) for values in posterior(idata).data_vars.values()],
        axis=1,
    )
    ess = np.array([az.ess(draws_[None, :, k]) for k in range(draws_.shape[1])])
    # MCSE of the sd by the delta method: sd^2 is the mean of squared deviations
    squares = (draws_ - draws_.mean(0)) ** 2
    ess_sq = np.array([az.ess(squares[None, :, k], method="mean") for k in range(ess.size)])
    mcse_sd = squares.std(0) / np.sqrt(ess_sq) / (2.0 * draws_.std(0))
    stats = sample_stats(idata)
    result = {
        "sampler": name,
        "repr": name if name == "NUTS" or repr(step).startswith("<") else repr(step),
        "tune": tune,
        "draws": draws,
        "setup_s": setup,
        "sample_s": seconds,
        "us_per_step": 1e6 * seconds / (tune + draws),
        "ess": float(ess.min()),
        "ess_per_step": float(ess.min()) / draws,
        "mcse": (draws_.std(0) / np.sqrt(ess)).tolist(),
        "mcse_sd": mcse_sd.tolist(),
        "mean": draws_.mean(0).tolist(),
        "sd": draws_.std(0).tolist(),
    }
    if name == "NUTS":
        result["accept"] = float(stats["acceptance_rate"].mean())
        result["steps_per_draw"] = float(stats["n_steps"].mean())
    else:
        result["accept"] = float(stats["accept"].mean())
        result["rows_per_draw"] = float(stats["batch_size"].mean())
        if "expansion_order" in stats:
            result["expansion_order"] = int(stats["expansion_order"].values.max())
        if "rho" in stats:
            result["rho"] = float(stats["rho"].values[0, -1])
        if "outside_region" in stats:
            result["outside"] = float(stats["outside_region"].mean())
        if name == "TunaMH":
            result["chi"] = float(stats["chi"].values[0, -1])
            result["floor"] = tuned_floor(result["chi"], step.minibatch_model.n_data)
            result["max_bound_ratio"] = float(stats["bound_ratio"].max())
    result["ess_per_s"] = result["ess"] / seconds
    return result


def compare(result, reference):
    """Errors of ``result``'s means and sds against ``reference`` (NUTS), raw and in MCSE."""
    ref_mean, ref_sd = np.array(reference["mean"]), np.array(reference["sd"])
    mean_err = np.abs(np.array(result["mean"]) - ref_mean) / ref_sd
    mean_mcse = np.hypot(np.array(result["mcse"]), np.array(reference["mcse"])) / ref_sd
    ratio = np.array(result["sd"]) / ref_sd
    sd_err = np.abs(ratio - 1.0)
    sd_mcse = ratio * np.hypot(
        np.array(result["mcse_sd"]) / np.array(result["sd"]),
        np.array(reference["mcse_sd"]) / ref_sd,
    )
    return {
        "ratio_to_nuts": result["ess_per_s"] / reference["ess_per_s"],
        "max_err_sd": float(mean_err.max()),
        "max_err_mcse": float(np.max(mean_err / mean_mcse)) if result is not reference else 0.0,
        "mcse_mean_diff_sd": float(mean_mcse.max()),
        "max_sd_err": float(sd_err.max()),
        "max_sd_err_mcse": float(np.max(sd_err / sd_mcse)) if result is not reference else 0.0,
        "mcse_sd_ratio": float(sd_mcse.max()),
    }


# ---- problems ------------------------------------------------------------------------------
def reset_peak_memory():
    try:  # Linux: writing 5 resets the VmHWM high-water mark of this process
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass


def peak_memory_gb():
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1e6
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


class Problems:
    """Runs each (problem, d, N, sampler) once; the two tables share NUTS and TunaMH."""

    def __init__(self, quick=False, memmap_dir=None, seed=11, nuts_draws=None):
        self.quick, self.memmap_dir, self.seed = quick, memmap_dir, seed
        self.nuts_draws = nuts_draws
        self.results = {}
        self.meta = {}
        self._model_key, self._model, self._start = None, None, None

    def _prepare(self, kind, d, n_rows, need_map):
        key = (kind, d, n_rows)
        if key != self._model_key:
            self._model_key, self._model, self._start = None, None, None
            gc.collect()
            reset_peak_memory()
            print(f"\n=== {kind} d = {d}: N = {n_rows:,}", flush=True)
            start = time.perf_counter()
            self._model = regression_model(kind, n_rows, d, self.memmap_dir)
            self._model_key = key
            self.meta[key] = {"data_s": time.perf_counter() - start}
        if need_map and self._start is None:
            start = time.perf_counter()
            mm = pmm.MinibatchModel(self._model)
            theta_map = mm.find_map()
            self._start = (
                mm.point_from_theta(theta_map),
                (theta_map, laplace_variances(self._model, theta_map)),
            )
            self.meta[key]["map_s"] = time.perf_counter() - start
            print(f"  MAP (common start) in {self.meta[key]['map_s']:.1f} s", flush=True)
        return self._model

    def budget(self, name, kind, d, n_rows):
        if self.quick:
            return QUICK_BUDGET[name]
        if name == "NUTS":
            tune, draws = NUTS_BUDGETS.get((kind, d, n_rows), (100, 300))
            if self.nuts_draws and (kind, d, n_rows) == ("logistic", 10, 10**6):
                draws = self.nuts_draws
            return tune, draws
        if name == "TunaMH":
            return TUNA_BUDGET_LARGE_D if d > 20 else TUNA_BUDGET
        return BUDGETS[name][n_rows]

    def get(self, name, kind, d, n_rows):
        key = (name, kind, d, n_rows)
        if key in self.results:
            return self.results[key]
        # NUTS (and the baselines of the side-by-side table) start at the common MAP; TunaMH
        # starts from a draw of its own Laplace fit, whatever initvals say
        need_map = name != "TunaMH" or n_rows <= NUTS_MAX_ROWS
        model = self._prepare(kind, d, n_rows, need_map)
        initvals, laplace = self._start if self._start is not None else (None, None)
        tune, draws = self.budget(name, kind, d, n_rows)
        result = run_sampler(model, name, tune, draws, initvals, self.seed, laplace)
        result.update(problem=kind, d=d, n_rows=n_rows, peak_gb=peak_memory_gb())
        result.update(self.meta[(kind, d, n_rows)])
        if name == "NUTS":
            result["rows_per_draw"] = result["steps_per_draw"] * n_rows
        print(
            f"  {result['repr']:<55} setup {result['setup_s']:6.1f} s, sampling "
            f"{result['sample_s']:6.1f} s, peak {result['peak_gb']:.2f} GB",
            flush=True,
        )
        self.results[key] = result
        return result

    def release(self):
        self._model_key, self._model, self._start = None, None, None
        gc.collect()


# ---- tables --------------------------------------------------------------------------------
def scaling_table(problems, problem_names, sizes, save):
    rows = []
    for label in problem_names:
        kind, d = SCALING_PROBLEMS[label]
        if kind in REGION_KINDS:
            n_values = [n for n in sizes if n <= NUTS_MAX_ROWS]
        else:
            n_values = [10**6] if d > 20 and not problems.quick else sizes
        for n_rows in n_values:
            tuna = problems.get("TunaMH", kind, d, n_rows)
            row = {**tuna, "problem": label}
            if n_rows <= NUTS_MAX_ROWS:
                nuts = problems.get("NUTS", kind, d, n_rows)
                row.update(compare(tuna, nuts), nuts_ess_per_s=nuts["ess_per_s"])
                row["nuts"] = {k: nuts[k] for k in NUTS_KEYS}
            rows.append(row)
            problems.release()
            save()
    for row in rows:  # N > 1e6: NUTS's cost is linear in N, extrapolate from N = 1e6
        if "ratio_to_nuts" not in row:
            base = next((r for r in rows if r["problem"] == row["problem"]
                         and r["n_rows"] == NUTS_MAX_ROWS), None)  # fmt: skip
            if base is not None:
                nuts = base["nuts_ess_per_s"] * NUTS_MAX_ROWS / row["n_rows"]
                row["ratio_to_nuts_extrapolated"] = row["ess_per_s"] / nuts
    print_scaling(rows)
    return rows


def print_scaling(rows):
    print("\nSCALING TABLE: TunaMH at its defaults (second-order control variates, pCN)")
    print(
        f"  {'problem':<11} {'N':>10} {'rows/step':>9} {'accept':>6} {'ESS/step':>8} "
        f"{'us/step':>7} {'ESS/s':>8} {'xNUTS':>8} {'setup s':>7} {'rho':>4} "
        f"{'dmean':>6} {'dsd':>6} {'outside':>7} {'peak GB':>7}"
    )
    for r in rows:
        if "ratio_to_nuts" in r:
            ratio = f"{r['ratio_to_nuts']:8.0f}"
        elif "ratio_to_nuts_extrapolated" in r:
            ratio = f"{'~' + format(r['ratio_to_nuts_extrapolated'], '.0f'):>8}"
        else:
            ratio = f"{'':>8}"
        errors = (
            f"{r['max_err_sd']:6.3f} {r['max_sd_err']:6.3f}"
            if "max_err_sd" in r
            else f"{'':>6} {'':>6}"
        )
        print(
            f"  {r['problem']:<11} {r['n_rows']:>10,} {r['rows_per_draw']:9.1f} "
            f"{r['accept']:6.3f} {r['ess_per_step']:8.3f} {r['us_per_step']:7.0f} "
            f"{r['ess_per_s']:8.0f} {ratio} {r['setup_s']:7.1f} {r.get('rho', np.nan):4.2f} "
            f"{errors} {r.get('outside', np.nan):7.4f} {r['peak_gb']:7.2f}"
        )
    print(
        "  us/step and ESS/s: pm.sample wall time over tune + draws (tuning included); xNUTS: "
        "ESS/s over NUTS's (~: NUTS extrapolated from N = 1e6, cost linear in N); dmean: max "
        "|mean - NUTS mean| / NUTS sd; dsd: max |sd / NUTS sd - 1|; rho: the tuned pCN rho; "
        "outside: fraction of steps outside the trust region (full-data steps)."
    )


def acceptance_check(rows):
    row = next((r for r in rows if r["problem"] == "logistic10" and r["n_rows"] == 10**6), None)
    if row is None or "ratio_to_nuts" not in row:
        return None
    verdict = {
        "ess_per_s_ratio": row["ratio_to_nuts"],
        "ratio_ok": row["ratio_to_nuts"] >= CHECK["ratio"],
        "max_mean_err_sd": row["max_err_sd"],
        "mean_err_in_mcse": row["max_err_mcse"],
        "mcse_of_mean_difference_sd": row["mcse_mean_diff_sd"],
        "mean_ok": row["max_err_sd"] <= CHECK["mean_sd"],
        "max_sd_rel_err": row["max_sd_err"],
        "sd_err_in_mcse": row["max_sd_err_mcse"],
        "mcse_of_sd_ratio": row["mcse_sd_ratio"],
        "sd_ok": row["max_sd_err"] <= CHECK["sd_rel"],
    }
    print("\nACCEPTANCE CHECK (logistic d = 10, N = 1e6, TunaMH vs NUTS)")
    print(
        f"  ESS/s ratio   {verdict['ess_per_s_ratio']:10.0f}   (need >= {CHECK['ratio']:.0f})"
        f"   {'ok' if verdict['ratio_ok'] else 'MISS'}"
    )
    print(
        f"  max |dmean|/sd {verdict['max_mean_err_sd']:9.3f}   (need <= {CHECK['mean_sd']}; "
        f"MCSE of the difference {verdict['mcse_of_mean_difference_sd']:.3f} sd; worst "
        f"{verdict['mean_err_in_mcse']:.1f} MCSE)   {'ok' if verdict['mean_ok'] else 'MISS'}"
    )
    print(
        f"  max |sd/sd - 1| {verdict['max_sd_rel_err']:8.3f}   (need <= {CHECK['sd_rel']}; "
        f"MCSE of the ratio {verdict['mcse_of_sd_ratio']:.3f}; worst "
        f"{verdict['sd_err_in_mcse']:.1f} MCSE)   {'ok' if verdict['sd_ok'] else 'MISS'}"
    )
    return verdict


def side_by_side(problems, sizes, problem_names, save):
    results = []
    cases = [("logistic", 10, n, ["NUTS", "FullMH", "TunaMH", "TFMH", "FlyMC"]) for n in sizes]
    cases = [c for c in cases if "logistic" in problem_names]
    if "robust" in problem_names and not problems.quick:
        # FlyMC has no collapsible bound for Student-t rows
        cases.append(("robust", 10, 10**5, ["NUTS", "FullMH", "TunaMH", "TFMH"]))
    for kind, d, n_rows, samplers in cases:
        block = [{**problems.get(name, kind, d, n_rows)} for name in samplers]
        reference = block[0]
        for result in block:
            result.update(compare(result, reference))
        print(f"\nSIDE BY SIDE: {kind} d = {d}, N = {n_rows:,}")
        print_table(block)
        results += block
        problems.release()
        save()
    return results


def print_table(results):
    header = (
        f"  {'sampler':<7} {'draws':>6} {'setup s':>8} {'sample s':>9} {'ESS':>8} "
        f"{'ESS/s':>9} {'/NUTS':>8} {'rows/draw':>11} {'floor':>9} {'accept':>7} "
        f"{'err/sd':>7} {'err/mcse':>8}"
    )
    print(header)
    for r in results:
        floor = f"{r['floor']:9.1f}" if "floor" in r else f"{'':>9}"
        print(
            f"  {r['sampler']:<7} {r['draws']:>6} {r['setup_s']:8.1f} {r['sample_s']:9.1f} "
            f"{r['ess']:8.1f} {r['ess_per_s']:9.2f} {r['ratio_to_nuts']:8.2f} "
            f"{r['rows_per_draw']:11.0f} {floor} {r['accept']:7.2f} {r['max_err_sd']:7.2f} "
            f"{r['max_err_mcse']:8.2f}"
        )


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = list(dict.fromkeys((r["problem"], r["n_rows"]) for r in results))
    samplers = list(dict.fromkeys(r["sampler"] for r in results))
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(samplers)
    for k, name in enumerate(samplers):
        values = [
            next(
                (
                    r["ess_per_s"]
                    for r in results
                    if (r["problem"], r["n_rows"]) == p and r["sampler"] == name
                ),
                np.nan,
            )
            for p in problems
        ]
        ax.bar(np.arange(len(problems)) + k * width, values, width, label=name)
    ax.set_xticks(np.arange(len(problems)) + 0.4 - width / 2)
    ax.set_xticklabels([f"{p}\nN={n:,}" for p, n in problems])
    ax.set_yscale("log")
    ax.set_ylabel("ESS per second (min over parameters)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 1e4 only, small budgets")
    part = parser.add_mutually_exclusive_group()
    part.add_argument("--scaling-only", action="store_true", help="only the scaling table")
    part.add_argument("--side-only", action="store_true", help="only the side-by-side table")
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e4, 1e5, 1e6, 1e7],
                        help="N of the scaling table (d = 50 runs at 1e6 only)")  # fmt: skip
    parser.add_argument("--scaling-problems", nargs="+", choices=list(SCALING_PROBLEMS),
                        default=list(SCALING_PROBLEMS))  # fmt: skip
    parser.add_argument("--side-sizes", nargs="+", type=float, default=[1e4, 1e5],
                        help="N of the side-by-side logistic problems (1e4, 1e5, 1e6)")  # fmt: skip
    parser.add_argument(
        "--problems", nargs="+", choices=["logistic", "robust"], default=["logistic", "robust"],
        help="problems of the side-by-side table",
    )  # fmt: skip
    parser.add_argument("--nuts-draws", type=int,
                        help="NUTS draws at the checked point (logistic d = 10, N = 1e6; "
                        "default 1000)")  # fmt: skip
    parser.add_argument("--memmap", metavar="DIR", help="write X to numpy.memmap files in DIR")
    parser.add_argument("--json", default=str(RESULTS / "tunamh.json"))
    parser.add_argument("--plot", default=str(RESULTS / "tunamh.png"))
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    started = time.perf_counter()
    sizes = [10**4] if args.quick else [int(n) for n in args.sizes]
    side_sizes = [10**4] if args.quick else [int(n) for n in args.side_sizes]
    scaling_problems = args.scaling_problems
    if args.quick:
        scaling_problems = [p for p in scaling_problems if p != "logistic50"]
    problems = Problems(quick=args.quick, memmap_dir=args.memmap, nuts_draws=args.nuts_draws)
    output = {"environment": environment(), "scaling": [], "acceptance_check": None,
              "side_by_side": []}  # fmt: skip

    def save():
        output["total_s"] = time.perf_counter() - started
        write_results(args.json, output)

    if not args.side_only:
        output["scaling"] = scaling_table(problems, scaling_problems, sizes, save)
        output["acceptance_check"] = acceptance_check(output["scaling"])
    if not args.scaling_only:
        output["side_by_side"] = side_by_side(problems, side_sizes, args.problems, save)
        if output["side_by_side"]:
            plot(output["side_by_side"], args.plot)
    save()
    wrote = f"{args.json}" + (f" and {args.plot}" if output["side_by_side"] else "")
    print(f"\nwrote {wrote}; total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
