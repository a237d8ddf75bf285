"""TunaMH against NUTS and the exact baselines, side by side in one run.

Bernoulli-logit regression with d = 10 covariates and N in {1e4, 1e5, 1e6} rows (synthetic,
fixed seed), plus the TunaMH paper's robust linear regression (Student-t, nu = 4, fixed scale,
N = 1e5, d = 10). Every sampler runs one chain on one core from the same start (the MAP,
found once and reported), and the table shows, per sampler:

- ESS: bulk effective sample size, the minimum over parameters;
- ESS/s: ESS per second of sampling (tuning included), and its ratio to NUTS on the same data;
- setup: seconds spent building the step (compilation, bounds, the MAP for control variates);
- rows/draw: rows evaluated per draw (NUTS: leapfrog steps x N); for TunaMH also the floor
  C E[M] of its expected batch;
- accept: mean acceptance probability;
- err/sd: max over parameters of |mean - NUTS mean| / NUTS sd; err/mcse: the same error over
  the Monte Carlo standard error of the difference (values up to ~3 are noise).

Run ``python benchmarks/tunamh.py`` (about 15–20 minutes on 2 cores, most of it NUTS at
N = 1e6); ``--quick`` runs the smallest size only. Writes ``--json`` and ``--plot`` (PNG) files.
"""

import argparse
import json
import logging
import os
import time
import warnings

import arviz as az
import numpy as np
import pymc as pm
from pymc.step_methods.hmc.quadpotential import QuadPotentialDiagAdapt

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior, sample_stats

# (tune, draws) per sampler and N, sized so that the whole run stays well under 20 minutes
BUDGETS = {
    "NUTS": {10**4: (500, 1000), 10**5: (300, 700), 10**6: (150, 600)},
    "FullMH": {10**4: (1000, 4000), 10**5: (500, 1500), 10**6: (200, 400)},
    "TunaMH": {10**4: (1000, 10000), 10**5: (2000, 20000), 10**6: (2000, 50000)},
    "TFMH": {10**4: (1000, 5000), 10**5: (1000, 5000), 10**6: (1000, 5000)},
    "FlyMC": {10**4: (500, 2000), 10**5: (300, 1000), 10**6: (200, 500)},
}
STEPS = {
    "FullMH": pmm.FullMH,
    "TunaMH": pmm.TunaMH,
    "TFMH": pmm.TFMH,
    "FlyMC": pmm.FlyMC,
}


def logistic_model(n_rows, n_features=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    beta = rng.normal(scale=0.5, size=n_features)
    y = (rng.random(n_rows) < 1.0 / (1.0 + np.exp(-X @ beta))).astype("int64")
    with pm.Model() as model:
        coefs = pm.Normal("beta", 0.0, 1.0, shape=n_features)
        pm.Bernoulli("y", logit_p=X @ coefs, observed=y)
    return model


def robust_regression_model(n_rows=10**5, n_features=10, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    beta = rng.normal(size=n_features)
    y = X @ beta + rng.standard_t(4, size=n_rows)
    with pm.Model() as model:
        coefs = pm.Normal("beta", 0.0, 10.0, shape=n_features)
        pm.StudentT("y", nu=4.0, mu=X @ coefs, sigma=1.0, observed=y)
    return model


def laplace_variances(model, theta, step=1e-4):
    """Diagonal of the inverse Hessian of the negative log posterior at ``theta``."""
    mm = pmm.MinibatchModel(model)
    variances = np.empty(mm.ndim)
    for j in range(mm.ndim):
        shift = np.zeros(mm.ndim)
        shift[j] = step
        curvature = mm.logp_and_grad(theta + shift)[1][j] - mm.logp_and_grad(theta - shift)[1][j]
        variances[j] = -2.0 * step / curvature
    return variances


def nuts_step(theta, variances):
    """NUTS starting from the MAP with a Laplace-approximation mass matrix.

    Every sampler starts at the MAP. NUTS's default ``jitter+adapt_diag`` would move the start
    by U(-1, 1), thousands of posterior sds at N = 1e6, and adapting a unit mass matrix to
    posterior sds of 1e-3 within a short tuning phase left trees of 31-255 leapfrog steps.
    """
    potential = QuadPotentialDiagAdapt(theta.size, theta, variances, 10)
    return pm.NUTS(potential=potential)


def run_sampler(model, name, tune, draws, initvals, seed, laplace):
    setup_start = time.perf_counter()
    with model:
        step = nuts_step(*laplace) if name == "NUTS" else STEPS[name](rng=seed)
    setup = time.perf_counter() - setup_start
    start = time.perf_counter()
    with model:
        idata = pm.sample(
            step=step, tune=tune, draws=draws, chains=1, cores=1, initvals=initvals,
            random_seed=seed, progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
    seconds = time.perf_counter() - start
    draws_ = posterior(idata)["beta"].values[0]  # (draw, coefficient)
    ess_per_coefficient = np.array([az.ess(draws_[None, :, k]) for k in range(draws_.shape[1])])
    stats = sample_stats(idata)
    result = {
        "sampler": name,
        "setup_s": setup,
        "sample_s": seconds,
        "ess": float(min(ess_per_coefficient)),
        "mcse": (draws_.std(0) / np.sqrt(ess_per_coefficient)).tolist(),
        "mean": draws_.mean(0).tolist(),
        "sd": draws_.std(0).tolist(),
    }
    if name == "NUTS":
        result["accept"] = float(stats["acceptance_rate"].mean())
        result["steps_per_draw"] = float(stats["n_steps"].mean())
    else:
        result["accept"] = float(stats["accept"].mean())
        result["rows_per_draw"] = float(stats["batch_size"].mean())
        if name == "TunaMH":
            result["floor"] = step.bounds.total * step.mean_metric
            result["control_variates"] = step.bounds.center is not None
    result["ess_per_s"] = result["ess"] / seconds
    return result


def run_problem(label, model, n_rows, samplers, seed=11):
    print(f"\n=== {label}: N = {n_rows:,}", flush=True)
    mm = pmm.MinibatchModel(model)
    start = time.perf_counter()
    theta_map = mm.find_map()
    initvals = mm.point_from_theta(theta_map)
    laplace = (theta_map, laplace_variances(model, theta_map))
    print(f"MAP (common start) in {time.perf_counter() - start:.1f} s", flush=True)
    results = []
    for name in samplers:
        tune, draws = BUDGETS[name][n_rows]
        result = run_sampler(model, name, tune, draws, initvals, seed, laplace)
        result.update(problem=label, n_rows=n_rows, tune=tune, draws=draws)
        if name == "NUTS":
            result["rows_per_draw"] = result["steps_per_draw"] * n_rows
        results.append(result)
        print(f"  {name:<7} done in {result['setup_s'] + result['sample_s']:.1f} s", flush=True)
    reference = results[0]
    ref_mean, ref_sd = np.array(reference["mean"]), np.array(reference["sd"])
    ref_mcse = np.array(reference["mcse"])
    for result in results:
        result["ratio_to_nuts"] = result["ess_per_s"] / reference["ess_per_s"]
        error = np.abs(np.array(result["mean"]) - ref_mean)
        result["max_err_sd"] = float(np.max(error / ref_sd))
        # the same error in units of the Monte Carlo standard error of the difference
        combined = np.hypot(np.array(result["mcse"]), ref_mcse)
        result["max_err_mcse"] = 0.0 if result is reference else float(np.max(error / combined))
    print_table(results)
    return results


def print_table(results):
    header = (
        f"  {'sampler':<7} {'draws':>6} {'setup s':>8} {'sample s':>9} {'ESS':>8} "
        f"{'ESS/s':>9} {'/NUTS':>7} {'rows/draw':>11} {'floor':>9} {'accept':>7} "
        f"{'err/sd':>7} {'err/mcse':>8}"
    )
    print(header)
    for r in results:
        floor = f"{r['floor']:9.0f}" if "floor" in r else f"{'':>9}"
        print(
            f"  {r['sampler']:<7} {r['draws']:>6} {r['setup_s']:8.1f} {r['sample_s']:9.1f} "
            f"{r['ess']:8.1f} {r['ess_per_s']:9.2f} {r['ratio_to_nuts']:7.2f} "
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
    parser.add_argument("--quick", action="store_true", help="only N = 1e4")
    parser.add_argument(
        "--problems", nargs="+", choices=["logistic", "robust"], default=["logistic", "robust"]
    )
    parser.add_argument("--json", default="benchmarks/results/tunamh.json")
    parser.add_argument("--plot", default="benchmarks/results/tunamh.png")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("pymc").setLevel(logging.ERROR)
    started = time.perf_counter()
    sizes = [10**4] if args.quick else [10**4, 10**5, 10**6]
    logistic_samplers = ["NUTS", "FullMH", "TunaMH", "TFMH", "FlyMC"]
    results = []
    for n_rows in sizes if "logistic" in args.problems else []:
        results += run_problem("logistic", logistic_model(n_rows), n_rows, logistic_samplers)
    if not args.quick and "robust" in args.problems:
        # FlyMC has no collapsible bound for Student-t rows
        results += run_problem(
            "robust", robust_regression_model(), 10**5, ["NUTS", "FullMH", "TunaMH", "TFMH"]
        )
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as handle:
        json.dump(results, handle, indent=1)
    plot(results, args.plot)
    print(f"\nwrote {args.json} and {args.plot}; total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
