"""SGMGT and SGMGT-D against SGLD, SGHMC and SGNHT, in the settings of Zhang et al. (2017).

(a) Multi-well potential (the paper's Section 4.1): a 1-D mixture of nine N(c, 0.5^2) wells
    at c = -16, -12, ..., 16 (barriers of 8 nats), with gradient noise N(0, 2B), B = 1. The
    pure-NumPy kernel runs 50 independent chains (the coordinates of one state) from 0 for
    40,000 steps (one gradient each) at h in {0.05, 0.1, 0.15, 0.2}; A = sigma_p = 0.1,
    gamma = 1, c = 10, resampling of p and xi every 100 steps for SGMGT(-D), sigma_theta =
    0.01 and sigma_xi = 0.1 for SGMGT-D. Table, at every h: the fraction of the wells a
    chain came within 2 sd of (mean over chains) and the 1-Wasserstein distance W1 between
    all draws (no burn-in: the start is the middle well's centre) and the exact density by
    quadrature on a grid. Each method's best h is the one with the smallest W1.
(b) Bayesian logistic regression (the paper's Section 4.2 and Table 1) on scikit-learn's
    breast-cancer data: 70/30 split (fixed seed), features standardised with training
    statistics, an intercept, beta ~ N(0, I_31); batch 16, 5000 draws after 1000 tuning
    updates, one chain per seed (3 seeds), every step method with its default step-size
    rule, NUTS as the reference. Table, averaged over seeds: test AUROC of the posterior-mean
    predictive probability, median bulk ESS over coefficients, wall seconds (tuning
    included), and for the SG methods the max over coefficients of |mean - NUTS mean| /
    NUTS sd and the median of sd / NUTS sd (NUTS pooled over seeds).
(c) Bayesian neural network on scikit-learn's digits: 64 inputs in [0, 1], 32 tanh units,
    10 classes, N(0, 1) priors on all weights and biases, 1200 training and 597 test images,
    batch 100 (an epoch is 12 updates), small random initial weights. After 25 tuning epochs,
    one draw every 3 updates; table: test accuracy of the predictive class probabilities
    averaged over the draws of the first k sampling epochs (k up to 200).

Every step method runs with its defaults (only ``batch_size``, and ``thin`` in (c)); a run
that raises ``SamplerDivergenceError`` is reported as diverged (column "defaults" in (b)).

Run ``python benchmarks/sgmgt.py`` (about 7 minutes on 2 cores; ``--quick``, about 2 minutes:
10,000 steps in (a), one seed of 2000 draws after 500 in (b), 20 epochs in (c)). Writes
``--json`` and ``--plot`` (PNG).
"""

import argparse
import functools
import json
import logging
import time
import warnings

import arviz as az
import numpy as np
import pymc as pm
from bench_data import breast_cancer_data
from scipy import special, stats
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior
from pymc_minibatch.kernels import sgmgt
from pymc_minibatch.kernels.kinetics import make_kinetics
from pymc_minibatch.kernels.sgmgt import SGMGTConfig

WELLS = np.arange(-16.0, 16.1, 4.0)
WELL_SD = 0.5
GRADIENT_NOISE_VARIANCE = 2.0  # 2B with B = 1
MULTIWELL_SAMPLERS = {
    # name: (config, resampling period of p and xi)
    "SGNHT": (SGMGTConfig(make_kinetics(0.5, 1.0), 0.0, 0.1, 0.0, 1.0), None),
    "SGMGT (a=1)": (SGMGTConfig(make_kinetics(1, 10.0), 0.0, 0.1, 0.0, 1.0), 100),
    "SGMGT (a=2)": (SGMGTConfig(make_kinetics(2, 10.0), 0.0, 0.1, 0.0, 1.0), 100),
    "SGMGT-D (a=1)": (SGMGTConfig(make_kinetics(1, 10.0), 0.01, 0.1, 0.1, 1.0), 100),
    "SGMGT-D (a=2)": (SGMGTConfig(make_kinetics(2, 10.0), 0.01, 0.1, 0.1, 1.0), 100),
}
STEP_SIZES = (0.05, 0.1, 0.15, 0.2)

SG_METHODS = {
    "SGLD": pmm.SGLD,
    "SGHMC": pmm.SGHMC,
    "SGNHT": pmm.SGNHT,
    "SGMGT (a=1)": functools.partial(pmm.SGMGT, a=1),
    "SGMGT-D (a=1)": functools.partial(pmm.SGMGTD, a=1),
    "SGMGT (a=2)": functools.partial(pmm.SGMGT, a=2),
    "SGMGT-D (a=2)": functools.partial(pmm.SGMGTD, a=2),
}
BNN_METHODS = ["SGLD", "SGHMC", "SGNHT", "SGMGT-D (a=1)", "SGMGT-D (a=2)"]
BNN_TRAIN, BNN_BATCH, BNN_THIN, BNN_HIDDEN = 1200, 100, 3, 32
BNN_TUNE_EPOCHS = 25


def multiwell_gradient(theta, rng):
    """Noisy gradient of the log density of the equal-weight mixture of the wells."""
    z = (theta[:, None] - WELLS) / WELL_SD
    weights = special.softmax(-0.5 * z**2, axis=1)
    exact = -(weights * z).sum(axis=1) / WELL_SD
    return exact + np.sqrt(GRADIENT_NOISE_VARIANCE) * rng.standard_normal(theta.shape)


def run_chains(config, period, step_size, n_steps, n_chains, seed):
    """Positions of ``n_chains`` independent chains from 0, shape (n_steps, n_chains)."""
    rng = np.random.default_rng(seed)
    state = sgmgt.init_state(rng, np.zeros(n_chains), config)
    draws = np.empty((n_steps, n_chains))
    for t in range(n_steps):
        state, _ = sgmgt.euler_step(
            rng, state, lambda theta: multiwell_gradient(theta, rng), step_size, config
        )
        if period and (t + 1) % period == 0:
            state, _ = sgmgt.resample_momentum(rng, state, config)
            state = sgmgt.resample_thermostat(rng, state)
        draws[t] = state.position
    return draws


def run_multiwell(n_steps, n_chains, seed=0):
    """W1 and wells visited at every step size; the draws of each method's best run."""
    grid = np.linspace(WELLS[0] - 8 * WELL_SD, WELLS[-1] + 8 * WELL_SD, 4001)
    density = stats.norm.pdf(grid[:, None], WELLS, WELL_SD).mean(axis=1)
    results, best_draws = {}, {}
    for name, (config, period) in MULTIWELL_SAMPLERS.items():
        runs = {}
        for step_size in STEP_SIZES:
            start = time.perf_counter()
            draws = run_chains(config, period, step_size, n_steps, n_chains, seed)
            run = {"seconds": time.perf_counter() - start, "w1": np.inf, "visited": np.nan}
            if np.all(np.isfinite(draws)):
                visits = [np.any(np.abs(draws - well) < 2 * WELL_SD, axis=0) for well in WELLS]
                run["visited"] = float(np.mean(visits))
                run["w1"] = stats.wasserstein_distance(draws.ravel(), grid, v_weights=density)
            runs[step_size] = run
            if run["w1"] <= min(r["w1"] for r in runs.values()):  # keep the best for the plot
                best_draws[name] = draws.ravel()
        best = min(runs, key=lambda h: runs[h]["w1"])
        results[name] = {"runs": {str(h): r for h, r in runs.items()}, "best_step_size": best}
    return results, best_draws, (grid, density)


def print_multiwell(results):
    print(f"  {'':14}" + "".join(f"{f'h={h:g}':>13}" for h in STEP_SIZES) + f"{'best h':>9}")
    print(f"  {'method':14}" + f"{'visited':>8}{'W1':>5}" * len(STEP_SIZES))
    for name, result in results.items():
        runs = [result["runs"][str(h)] for h in STEP_SIZES]
        cells = "".join(f"{run['visited']:8.2f}{run['w1']:5.2f}" for run in runs)
        print(f"  {name:14}{cells}{result['best_step_size']:9g}")


def sample_sg(method, sample_kwargs, **step_kwargs):
    """Sample with the library's defaults.

    Returns ``(idata or None, seconds, status, message)``: status ``"ok"`` or
    ``"diverged"`` with the ``SamplerDivergenceError`` message.
    """
    start = time.perf_counter()
    try:
        idata = pm.sample(step=method(**step_kwargs), **sample_kwargs)
    except pmm.SamplerDivergenceError as error:
        return None, np.nan, "diverged", str(error).split(" Pass a smaller")[0]
    return idata, time.perf_counter() - start, "ok", None


def logistic_summary(draws, x_test, y_test, seconds):
    """AUROC, median bulk ESS, mean and sd of one chain's coefficient draws (draw, coef)."""
    probability = special.expit(x_test @ draws.T).mean(axis=1)
    ess = [az.ess(draws[None, :, k]) for k in range(draws.shape[1])]
    return {
        "auroc": float(roc_auc_score(y_test, probability)),
        "median_ess": float(np.median(ess)),
        "seconds": seconds,
        "mean": draws.mean(axis=0),
        "sd": draws.std(axis=0),
    }


def run_logistic(seeds, draws, tune, batch_size=16):
    """One chain per seed and method; returns a row of averages per method."""
    (x, y), (x_test, y_test) = breast_cancer_data()
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=x.shape[1])
        pm.Bernoulli("y", logit_p=pm.math.dot(x, beta), observed=y)
    kwargs = dict(draws=draws, tune=tune, chains=1, progressbar=False,
                  compute_convergence_checks=False)  # fmt: skip
    runs = {name: [] for name in [*SG_METHODS, "NUTS"]}
    nuts_draws = []
    with model:
        for seed in seeds:
            start = time.perf_counter()
            idata = pm.sample(random_seed=seed, **kwargs)
            seconds = time.perf_counter() - start
            nuts_draws.append(posterior(idata)["beta"].values[0])
            summary = logistic_summary(nuts_draws[-1], x_test, y_test, seconds)
            runs["NUTS"].append({"status": "ok", "message": None, **summary})
            for name, method in SG_METHODS.items():
                idata, seconds, status, message = sample_sg(
                    method, kwargs | {"random_seed": seed}, batch_size=batch_size
                )
                run = {"status": status, "message": message}
                if idata is not None:
                    draws_sg = posterior(idata)["beta"].values[0]
                    run |= logistic_summary(draws_sg, x_test, y_test, seconds)
                runs[name].append(run)
    reference = np.concatenate(nuts_draws)
    ref_mean, ref_sd = reference.mean(axis=0), reference.std(axis=0)
    results = {}
    for name, method_runs in runs.items():
        done = [run for run in method_runs if run["status"] != "diverged"]
        row = {key: [run[key] for run in method_runs] for key in ("status", "message")}
        for key in ("auroc", "median_ess", "seconds"):
            row[key] = float(np.mean([run[key] for run in done])) if done else np.nan
        if name != "NUTS" and done:
            errors = [np.max(np.abs(run["mean"] - ref_mean) / ref_sd) for run in done]
            ratios = [np.median(run["sd"] / ref_sd) for run in done]
            row["max_error_over_sd"] = float(np.mean(errors))
            row["median_sd_ratio"] = float(np.mean(ratios))
        results[name] = row
    return results


def print_logistic(results):
    print(
        f"  {'method':16} {'defaults':>12} {'AUROC':>7} {'median ESS':>11} {'seconds':>8} "
        f"{'max|dmean|/sd':>14} {'sd/NUTS sd':>11}"
    )
    for name, row in results.items():
        statuses = row["status"]
        failed = statuses.count("diverged")
        defaults = "ok" if failed == 0 else f"diverged {failed}/{len(statuses)}"
        if np.isnan(row["auroc"]):
            print(f"  {name:16} {defaults:>12} {'diverged':>7}")
            continue
        error = f"{row['max_error_over_sd']:14.2f}" if "max_error_over_sd" in row else f"{'-':>14}"
        ratio = f"{row['median_sd_ratio']:11.2f}" if "median_sd_ratio" in row else f"{'-':>11}"
        print(
            f"  {name:16} {defaults:>12} {row['auroc']:7.3f} {row['median_ess']:11.0f} "
            f"{row['seconds']:8.1f} {error} {ratio}"
        )
    _print_divergences({name: row["message"] for name, row in results.items()})


def _print_divergences(messages):
    """The first divergence message per method (``messages`` maps a name to a list)."""
    failed = {name: next((m for m in found if m), None) for name, found in messages.items()}
    failed = {name: message for name, message in failed.items() if message}
    if not failed:
        return
    print("  SamplerDivergenceError (averages above are over the runs that finished):")
    for name, message in failed.items():
        print(f"    {name}: {message}")


def digits_data(seed=0):
    x, y = load_digits(return_X_y=True)
    return train_test_split(x / 16.0, y, train_size=BNN_TRAIN, random_state=seed, stratify=y)


def bnn_model(x, y):
    with pm.Model() as model:
        w1 = pm.Normal("w1", 0.0, 1.0, shape=(x.shape[1], BNN_HIDDEN))
        b1 = pm.Normal("b1", 0.0, 1.0, shape=BNN_HIDDEN)
        w2 = pm.Normal("w2", 0.0, 1.0, shape=(BNN_HIDDEN, 10))
        b2 = pm.Normal("b2", 0.0, 1.0, shape=10)
        hidden = pm.math.tanh(pm.math.dot(x, w1) + b1)
        pm.Categorical("y", logit_p=pm.math.dot(hidden, w2) + b2, observed=y)
    return model


def bnn_initvals(n_inputs, seed):
    """Small random weights: from PyMC's all-zero point every hidden unit gets equal gradients."""
    rng = np.random.default_rng(seed)
    return {
        "w1": 0.1 * rng.standard_normal((n_inputs, BNN_HIDDEN)),
        "b1": np.zeros(BNN_HIDDEN),
        "w2": 0.1 * rng.standard_normal((BNN_HIDDEN, 10)),
        "b2": np.zeros(10),
    }


def accuracy_curve(samples, x_test, y_test, draws_per_epoch, checkpoints):
    """Test accuracy of the class probabilities averaged over the draws of the first k epochs."""
    weights = [samples[name].values[0] for name in ("w1", "b1", "w2", "b2")]
    total = np.zeros((len(x_test), 10))
    curve, done = [], 0
    for epoch in checkpoints:
        chunk = [w[done : epoch * draws_per_epoch] for w in weights]
        for w1, b1, w2, b2 in zip(*chunk, strict=True):
            total += special.softmax(np.tanh(x_test @ w1 + b1) @ w2 + b2, axis=1)
        done = epoch * draws_per_epoch
        curve.append(float(np.mean(total.argmax(axis=1) == y_test)))
    return curve


def run_bnn(checkpoints, seed=0):
    x, x_test, y, y_test = digits_data()
    draws_per_epoch = BNN_TRAIN // BNN_BATCH // BNN_THIN
    kwargs = dict(
        draws=checkpoints[-1] * draws_per_epoch, tune=BNN_TUNE_EPOCHS * draws_per_epoch,
        chains=1, initvals=bnn_initvals(x.shape[1], seed), random_seed=seed,
        progressbar=False, compute_convergence_checks=False,
    )  # fmt: skip
    results = {}
    with bnn_model(x, y):
        for name in BNN_METHODS:
            idata, seconds, status, message = sample_sg(
                SG_METHODS[name], kwargs, batch_size=BNN_BATCH, thin=BNN_THIN
            )
            curve = [np.nan] * len(checkpoints)
            if idata is not None:
                curve = accuracy_curve(
                    posterior(idata), x_test, y_test, draws_per_epoch, checkpoints
                )
            results[name] = {"accuracy": curve, "seconds": seconds, "status": status,
                             "message": message}  # fmt: skip
    return results


def print_bnn(results, checkpoints):
    print(f"  {'epochs':>6}" + "".join(f"{name:>16}" for name in results))
    for k, epoch in enumerate(checkpoints):
        cells = [
            f"{'diverged':>16}" if row["status"] == "diverged" else f"{row['accuracy'][k]:16.3f}"
            for row in results.values()
        ]
        print(f"  {epoch:6d}" + "".join(cells))
    seconds = ", ".join(f"{name} {row['seconds']:.1f}" for name, row in results.items())
    print(f"  seconds (tuning included): {seconds}")
    _print_divergences({name: [row["message"]] for name, row in results.items()})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs, one seed in (b)")
    parser.add_argument("--json", default="sgmgt_benchmark.json")
    parser.add_argument("--plot", default="sgmgt_benchmark.png")
    args = parser.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    started = time.perf_counter()
    n_steps, n_chains = (10_000 if args.quick else 40_000), 50
    seeds = [0] if args.quick else [0, 1, 2]
    draws, tune = (2000, 500) if args.quick else (5000, 1000)
    checkpoints = [1, 2, 5, 10, 20] if args.quick else [1, 2, 5, 10, 20, 50, 100, 200]

    print(f"=== (a) multi-well potential: {n_chains} chains x {n_steps:,} steps from 0")
    multiwell, best_draws, exact = run_multiwell(n_steps, n_chains)
    print("  per step size h: fraction of wells visited, W1 to the exact density; best h: min W1")
    print_multiwell(multiwell)

    print(f"\n=== (b) logistic regression, breast cancer: batch 16, {draws} draws after "
          f"{tune} tuning updates, seeds {seeds}", flush=True)  # fmt: skip
    logistic = run_logistic(seeds, draws, tune)
    print_logistic(logistic)

    print(f"\n=== (c) BNN on digits: {BNN_TRAIN} train images, batch {BNN_BATCH}, "
          f"{BNN_TUNE_EPOCHS} tuning epochs", flush=True)  # fmt: skip
    bnn = run_bnn(checkpoints)
    print("  test accuracy of the averaged predictive, by sampling epochs after tuning")
    print_bnn(bnn, checkpoints)

    total = time.perf_counter() - started
    with open(args.json, "w") as handle:
        json.dump(
            {"multiwell": multiwell, "logistic": logistic,
             "bnn": {"epochs": checkpoints, "methods": bnn}, "total_seconds": total},
            handle, indent=2,
        )  # fmt: skip
    _plot(args.plot, best_draws, exact, multiwell, logistic, bnn, checkpoints)
    print(f"\nwrote {args.json} and {args.plot}; total {total:.0f} s")


def _plot(path, best_draws, exact, multiwell, logistic, bnn, checkpoints):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(16, 7))
    grid = fig.add_gridspec(2, len(best_draws))
    x, density = exact
    for k, (name, draws) in enumerate(best_draws.items()):
        ax = fig.add_subplot(grid[0, k])
        ax.hist(draws, bins=160, range=(x[0], x[-1]), density=True, alpha=0.6)
        ax.plot(x, density, color="k", lw=0.8)
        ax.set(title=f"{name}, h={multiwell[name]['best_step_size']:g}", xlabel="theta")
    ess = fig.add_subplot(grid[1, :2])
    names = list(logistic)
    ess.barh(names, [logistic[name]["median_ess"] for name in names])
    ess.set(xscale="log", xlabel="median ESS", title="(b) logistic regression")
    ess.invert_yaxis()
    curves = fig.add_subplot(grid[1, 2:])
    for name, row in bnn.items():
        curves.plot(checkpoints, row["accuracy"], marker="o", label=name)
    curves.set(xscale="log", xlabel="sampling epochs", ylabel="test accuracy",
               title="(c) BNN on digits")  # fmt: skip
    curves.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
