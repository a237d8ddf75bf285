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
(d) Tall data: logistic regression with d = 10 (``bench_data.tall_logistic_data``): an
    intercept column with coefficient -2 (about 16 % ones) and 9 standard normal covariates
    with correlation 0.3 (one shared factor), fixed seed, beta ~ N(0, 5^2 I), at N = 1e5 and
    1e6. Reference: NUTS on the full data, one chain of 1000 draws after 500 tuning, from the
    MAP with the inverse Hessian diagonal as initial mass matrix (``bench_data.nuts_step``).
    Each of SGLD, SGHMC, SGNHT, SGMGT (a=1) and SGMGT-D (a=1) with batch 1000 and its
    defaults (step size from the measured gradient noise in the Laplace-preconditioned
    coordinates, start from a Laplace draw), with control variates (the default) and with
    ``control_variates=False``: one chain, 10 updates per draw, 200 tuning draws and 3000
    draws (2,000 + 30,000 updates). Per row: step size h, noise ratio r (``step.noise_ratio``),
    setup seconds (building the step: its Laplace fit and noise measurement), microseconds per
    update (``pm.sample``'s wall time over all updates, tuning and PyMC's per-draw overhead
    included) and its ratio to the "NumPy floor" (one plain-NumPy batch gradient of 1000 random
    rows, gather included; target: at most 2 x floor + 30 us, rows over it marked ``*``), min
    bulk ESS over the coefficients, ESS/s (over ``pm.sample``'s wall time) and its ratio to
    NUTS, ``dmean`` = max |mean - NUTS mean| / NUTS sd and ``dsd`` = max |sd / NUTS sd - 1|
    (each also in MCSEs of the difference, ``z``: up to ~3 is noise), and the KSD
    (``pmm.ksd`` on 300 draws; one full-data gradient per draw). Acceptance verdict at
    N = 1e6: every CV preset has dmean <= 0.1 and dsd <= 0.1, and SGLD's and SGHMC's ESS/s is
    at least 100 x NUTS's (printed as an informational check at other N; NUTS's cost grows
    with N, the CV presets' does not). The tolerances are only 2-3 MCSEs of the differences
    for the slower-mixing thermostat presets (ESS of a few hundred against NUTS's ~1300), so
    the max over 10 coefficients can miss by chance: read the ``z`` columns. SGLD's default
    step inflates the variance by design (about 5 %, i.e. sds about 2.5 % high). Without
    control variates r = N / B - 1 and the steps are 100-1000 times smaller: 30,000 updates
    leave those chains near their start (ESS of a few), which is the point of the comparison.

Every step method runs with its defaults (only ``batch_size``, ``updates_per_draw`` in (c)
and (d), and ``control_variates=False`` in half the rows of (d)); a run that raises
``SamplerDivergenceError`` is reported as diverged (column "defaults" in (b); a "DIVERGED"
row with the message in (d)).

Run ``python benchmarks/sgmgt.py`` for (a)-(c) (about 7 minutes on 2 cores) followed by (d)
at N = 1e5 and 1e6 (see below); ``--quick``: 10,000 steps in (a), one seed of 2000 draws
after 500 in (b), 20 epochs in (c) (about 2 minutes), and (d) at N = 1e5 only with 5000
updates after tuning per sampler and NUTS 500 draws after 300. ``--tall`` runs (d) alone,
``--tall-sizes 1e5 1e6`` sets its N. ``python benchmarks/sgmgt.py --tall --quick`` took 4
minutes on a shared machine (another benchmark used about 1.3 of the 2 cores; a full-data
gradient at N = 1e5 took 16 ms under that load): NUTS's 800 iterations 156 s, each sampler
1-2 s of setup, 2 s of sampling and 5 s of KSD. With NUTS at 1000 draws after 500, the same
run took 7 minutes (NUTS 292 s). ``python benchmarks/sgmgt.py --tall`` (N = 1e5 and 1e6)
took 31 minutes while another benchmark and the test suite shared the 2 cores: 5 minutes at
1e5, 26 at 1e6, of
which NUTS took 21 (about 10 on an idle core, as in ``tunamh.py``) and each sampler 2-4 s of
setup, 5-7 s of sampling and 15-30 s of KSD. Writes ``--json`` (default
``benchmarks/results/sgmgt.json``, ``sgmgt_tall.json`` with ``--tall``; (d) is under the key
``"tall"``, rewritten after each N; the machine, the versions and the command beside) and
``--plot`` (PNG, of (a)-(c); not with ``--tall``).
"""

import argparse
import functools
import gc
import logging
import time
import warnings

import arviz as az
import numpy as np
import pymc as pm
from bench_data import (
    breast_cancer_data,
    laplace_variances,
    nuts_step,
    tall_logistic_data,
    tall_logistic_model,
)
from run_record import RESULTS, environment, write_results
from scipy import special, stats
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior, sample_stats
from pymc_minibatch.kernels import sgmgt
from pymc_minibatch.kernels.sgmgt import SGMGTConfig

WELLS = np.arange(-16.0, 16.1, 4.0)
WELL_SD = 0.5
GRADIENT_NOISE_VARIANCE = 2.0  # 2B with B = 1
MULTIWELL_SAMPLERS = {
    # name: (config, resampling period of p and xi)
    "SGNHT": (SGMGTConfig.sgnht(0.1), None),
    "SGMGT (a=1)": (SGMGTConfig.sgmgt(1, 10.0, sigma_p=0.1, gamma=1.0), 100),
    "SGMGT (a=2)": (SGMGTConfig.sgmgt(2, 10.0, sigma_p=0.1, gamma=1.0), 100),
    "SGMGT-D (a=1)": (
        SGMGTConfig.sgmgt(1, 10.0, sigma_p=0.1, gamma=1.0, sigma_theta=0.01, sigma_xi=0.1),
        100,
    ),
    "SGMGT-D (a=2)": (
        SGMGTConfig.sgmgt(2, 10.0, sigma_p=0.1, gamma=1.0, sigma_theta=0.01, sigma_xi=0.1),
        100,
    ),
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

TALL_METHODS = {
    "SGLD": pmm.SGLD,
    "SGHMC": pmm.SGHMC,
    "SGNHT": pmm.SGNHT,
    "SGMGT (a=1)": pmm.SGMGT,
    "SGMGT-D (a=1)": pmm.SGMGTD,
}
TALL_BATCH, TALL_UPDATES_PER_DRAW, TALL_TUNE_DRAWS = 1000, 10, 200
TALL_UPDATES = {False: 30_000, True: 5_000}  # updates after tuning, by --quick
TALL_NUTS = {False: (500, 1000), True: (300, 500)}  # (tune, draws) by --quick
TALL_KSD_DRAWS = 300
TALL_SEED = 3
TALL_FLOOR_CALLS, TALL_FLOOR_BLOCKS = 2000, 3
#: acceptance at N = 1e6: every CV preset's means within 0.1 NUTS sd and sds within 10 %;
#: SGLD's and SGHMC's (CV) ESS/s at least 100 x NUTS's
TALL_CHECK = {"mean_sd": 0.1, "sd_rel": 0.1, "ratio": 100.0, "fast": ("SGLD", "SGHMC")}
TALL_CHECK_N = 10**6


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
                SG_METHODS[name], kwargs, batch_size=BNN_BATCH, updates_per_draw=BNN_THIN
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


# ---- (d) tall data -------------------------------------------------------------------------
def numpy_floor(X, y, beta, batch_size, seed=0):
    """Microseconds of one plain-NumPy logistic batch gradient (random rows, gather included).

    The mean over ``TALL_FLOOR_CALLS`` calls, the smallest of ``TALL_FLOOR_BLOCKS`` blocks
    (the machine may be shared).
    """
    rng = np.random.default_rng(seed)
    n_rows = len(y)

    def gradient():
        idx = rng.integers(0, n_rows, batch_size)
        Xb = np.take(X, idx, axis=0)  # about 2.5x faster than X[idx] on random rows
        r = np.take(y, idx) - 1.0 / (1.0 + np.exp(-(Xb @ beta)))
        return Xb.T @ r

    for _ in range(200):  # warm-up
        gradient()
    blocks = []
    for _ in range(TALL_FLOOR_BLOCKS):
        start = time.perf_counter()
        for _ in range(TALL_FLOOR_CALLS):
            gradient()
        blocks.append(1e6 * (time.perf_counter() - start) / TALL_FLOOR_CALLS)
    return float(min(blocks))


def chain_summary(draws):
    """Min bulk ESS, means, sds and their MCSEs of one chain's draws (draw, coefficient)."""
    ess = np.array([az.ess(draws[None, :, k]) for k in range(draws.shape[1])])
    sd = draws.std(axis=0)
    # MCSE of the sd by the delta method: sd^2 is the mean of squared deviations
    squares = (draws - draws.mean(axis=0)) ** 2
    ess_sq = np.array([az.ess(squares[None, :, k], method="mean") for k in range(ess.size)])
    return {
        "ess": float(ess.min()),
        "mean": draws.mean(axis=0).tolist(),
        "sd": sd.tolist(),
        "mcse": (sd / np.sqrt(ess)).tolist(),
        "mcse_sd": (squares.std(axis=0) / np.sqrt(ess_sq) / (2.0 * sd)).tolist(),
    }


def compare_to_reference(row, reference):
    """Max errors of ``row``'s means and sds against NUTS's, raw and in MCSEs of the difference."""
    ref_mean, ref_sd = np.array(reference["mean"]), np.array(reference["sd"])
    mean_err = np.abs(np.array(row["mean"]) - ref_mean) / ref_sd
    mean_mcse = np.hypot(np.array(row["mcse"]), np.array(reference["mcse"])) / ref_sd
    ratio = np.array(row["sd"]) / ref_sd
    sd_mcse = ratio * np.hypot(
        np.array(row["mcse_sd"]) / np.array(row["sd"]), np.array(reference["mcse_sd"]) / ref_sd
    )
    return {
        "ratio_to_nuts": row["ess_per_s"] / reference["ess_per_s"],
        "max_err_sd": float(mean_err.max()),
        "max_err_mcse": float(np.max(mean_err / mean_mcse)),
        "max_sd_err": float(np.abs(ratio - 1.0).max()),
        "max_sd_err_mcse": float(np.max(np.abs(ratio - 1.0) / sd_mcse)),
    }


def timed_ksd(idata, mm):
    start = time.perf_counter()
    try:
        value = float(pmm.ksd(idata, model=mm, max_draws=TALL_KSD_DRAWS))
    except ValueError as error:  # a draw with a non-finite score
        print(f"    KSD failed: {error}", flush=True)
        value = np.nan
    return value, time.perf_counter() - start


def run_tall_nuts(model, mm, theta_map, variances, seed, tune, draws):
    with model:
        step = nuts_step(theta_map, variances)
        start = time.perf_counter()
        idata = pm.sample(
            step=step, tune=tune, draws=draws, chains=1, cores=1,
            initvals=mm.point_from_theta(theta_map), random_seed=seed, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    seconds = time.perf_counter() - start
    row = {"sampler": "NUTS", "status": "ok", "tune": tune, "draws": draws, "sample_s": seconds}
    row |= chain_summary(posterior(idata)["beta"].values[0])
    row["ess_per_s"] = row["ess"] / seconds
    stats = sample_stats(idata)
    row["steps_per_draw"] = float(stats["n_steps"].mean())
    row["divergences"] = int(stats["diverging"].sum())
    row["ksd"], row["ksd_s"] = timed_ksd(idata, mm)
    return row


def run_tall_sg(model, mm, name, cv, tune, draws, seed):
    """One chain of preset ``name``; its step starts from a draw of its own Laplace fit."""
    row = {"sampler": name, "cv": cv, "tune": tune, "draws": draws,
           "updates_per_draw": TALL_UPDATES_PER_DRAW}  # fmt: skip
    with model:
        start = time.perf_counter()
        step = TALL_METHODS[name](
            batch_size=TALL_BATCH, control_variates="auto" if cv else False,
            updates_per_draw=TALL_UPDATES_PER_DRAW, rng=seed,
        )  # fmt: skip
        row["setup_s"] = time.perf_counter() - start
        row |= {"repr": repr(step), "step_size": float(step.schedule(0)),
                "noise_ratio": float(step.noise_ratio)}  # fmt: skip
        start = time.perf_counter()
        try:
            idata = pm.sample(
                step=step, tune=tune, draws=draws, chains=1, cores=1, random_seed=seed,
                progressbar=False, compute_convergence_checks=False,
            )  # fmt: skip
        except pmm.SamplerDivergenceError as error:
            return row | {"status": "diverged", "message": str(error)}
    seconds = time.perf_counter() - start
    row |= {"status": "ok", "sample_s": seconds,
            "us_per_update": 1e6 * seconds / ((tune + draws) * TALL_UPDATES_PER_DRAW)}  # fmt: skip
    row |= chain_summary(posterior(idata)["beta"].values[0])
    row["ess_per_s"] = row["ess"] / seconds
    row["ksd"], row["ksd_s"] = timed_ksd(idata, mm)
    return row


def tall_check(rows):
    """Pass/fail of every item of ``TALL_CHECK`` over the CV rows of one N."""
    items = []
    for row in rows:
        if not row["cv"]:
            continue
        name = f"{row['sampler']} (CV)"
        if row["status"] != "ok":
            items.append({"check": f"{name} finished", "pass": False})
            continue
        mean_err, sd_err = row["max_err_sd"], row["max_sd_err"]
        items.append({"check": f"{name} max|dmean|/sd {mean_err:.3f} <= {TALL_CHECK['mean_sd']}",
                      "pass": mean_err <= TALL_CHECK["mean_sd"]})  # fmt: skip
        items.append({"check": f"{name} max|sd/NUTS sd - 1| {sd_err:.3f} <= {TALL_CHECK['sd_rel']}",
                      "pass": sd_err <= TALL_CHECK["sd_rel"]})  # fmt: skip
        if row["sampler"] in TALL_CHECK["fast"]:
            ratio = row["ratio_to_nuts"]
            items.append({"check": f"{name} ESS/s {ratio:.0f} x NUTS >= {TALL_CHECK['ratio']:.0f}",
                          "pass": ratio >= TALL_CHECK["ratio"]})  # fmt: skip
    items = [item | {"pass": bool(item["pass"])} for item in items]
    return {"items": items, "pass": all(item["pass"] for item in items)}


TALL_HEADER = (
    f"  {'sampler':14} {'cv':>3} {'h':>7} {'r':>8} {'setup s':>7} {'us/upd':>7} "
    f"{'x floor':>7} {'minESS':>7} {'ESS/s':>8} {'x NUTS':>7} {'dmean':>6} {'z':>4} "
    f"{'dsd':>6} {'z':>4} {'KSD':>6}"
)


def print_tall_row(row, floor_us):
    name, cv = row["sampler"], ("yes" if row.get("cv") else "no")
    if name == "NUTS":
        print(
            f"  {name:14} {'-':>3} {'-':>7} {'-':>8} {'-':>7} {'-':>7} {'-':>7} "
            f"{row['ess']:7.0f} {row['ess_per_s']:8.1f} {1.0:7.2f} {'':>6} {'':>4} {'':>6} "
            f"{'':>4} {row['ksd']:6.3f}   ({row['steps_per_draw']:.1f} leapfrog steps per draw, "
            f"{row['sample_s']:.0f} s)",
            flush=True,
        )
        return
    head = (f"  {name:14} {cv:>3} {row['step_size']:7.4f} {row['noise_ratio']:8.3g} "
            f"{row['setup_s']:7.1f}")  # fmt: skip
    if row["status"] != "ok":
        print(f"{head} DIVERGED: {row['message']}", flush=True)
        return
    target = 2.0 * floor_us + 30.0
    flag = "" if row["us_per_update"] <= target else "*"
    print(
        f"{head} {row['us_per_update']:7.1f} {row['us_per_update'] / floor_us:6.1f}{flag:1} "
        f"{row['ess']:7.0f} {row['ess_per_s']:8.1f} {row['ratio_to_nuts']:7.1f} "
        f"{row['max_err_sd']:6.3f} {row['max_err_mcse']:4.1f} {row['max_sd_err']:6.3f} "
        f"{row['max_sd_err_mcse']:4.1f} {row['ksd']:6.3f}",
        flush=True,
    )


def run_tall(sizes, quick, save=None):
    """Section (d) at every N of ``sizes``; results keyed by ``str(N)``."""
    tune = TALL_TUNE_DRAWS
    draws = TALL_UPDATES[quick] // TALL_UPDATES_PER_DRAW
    results = {}
    for n_rows in sizes:
        gc.collect()
        started = time.perf_counter()
        X, y = tall_logistic_data(n_rows)
        model = tall_logistic_model(X, y)
        mm = pmm.MinibatchModel(model)
        theta_map = mm.find_map()
        variances = laplace_variances(mm, theta_map)
        floor_us = numpy_floor(X, y, theta_map, TALL_BATCH)
        prep_s = time.perf_counter() - started
        print(
            f"\n  N = {n_rows:,}: mean y {y.mean():.3f}, MAP intercept {theta_map[0]:.3f}, "
            f"conditional sds {np.sqrt(variances.min()):.2g}-{np.sqrt(variances.max()):.2g} "
            f"(data, MAP, floor: {prep_s:.1f} s)\n"
            f"  NumPy floor of one batch gradient (B = {TALL_BATCH}): {floor_us:.1f} us; "
            f"target: <= 2 x floor + 30 us = {2 * floor_us + 30:.0f} us per update",
            flush=True,
        )
        print(TALL_HEADER, flush=True)
        nuts = run_tall_nuts(model, mm, theta_map, variances, TALL_SEED, *TALL_NUTS[quick])
        print_tall_row(nuts, floor_us)
        rows = []
        for name in TALL_METHODS:
            for cv in (True, False):
                row = run_tall_sg(model, mm, name, cv, tune, draws, TALL_SEED)
                if row["status"] == "ok":
                    row |= compare_to_reference(row, nuts)
                    row["x_floor"] = row["us_per_update"] / floor_us
                print_tall_row(row, floor_us)
                rows.append(row)
                gc.collect()
        check = tall_check(rows)
        label = (
            "ACCEPTANCE VERDICT"
            if n_rows == TALL_CHECK_N
            else "check, informational (the verdict is at N = 1e6)"
        )
        print(f"  {label}: {'PASS' if check['pass'] else 'FAIL'}")
        for item in check["items"]:
            print(f"    {'pass' if item['pass'] else 'FAIL'}  {item['check']}")
        results[str(n_rows)] = {
            "n_rows": n_rows, "floor_us": floor_us, "target_us": 2 * floor_us + 30.0,
            "map": theta_map.tolist(), "conditional_sd": np.sqrt(variances).tolist(),
            "nuts": nuts, "rows": rows, "check": check,
            "acceptance_verdict": n_rows == TALL_CHECK_N,
            "seconds": time.perf_counter() - started,
        }  # fmt: skip
        print(f"  N = {n_rows:,} took {results[str(n_rows)]['seconds']:.0f} s", flush=True)
        del model, mm, X, y
        if save is not None:
            save(results)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="shorter runs, one seed in (b), N = 1e5 only in (d)")  # fmt: skip
    parser.add_argument("--tall", action="store_true", help="run only (d), the tall data")
    parser.add_argument("--tall-sizes", nargs="+", type=float, metavar="N",
                        help="N of (d) (default 1e5 1e6; 1e5 with --quick)")  # fmt: skip
    parser.add_argument("--json", help="default results/sgmgt.json (results/sgmgt_tall.json "
                        "with --tall)")  # fmt: skip
    parser.add_argument("--plot", default="sgmgt_benchmark.png", help="not written with --tall")
    args = parser.parse_args()
    json_path = args.json or str(RESULTS / ("sgmgt_tall.json" if args.tall else "sgmgt.json"))
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    started = time.perf_counter()
    output = {"environment": environment()}

    def save(tall=None):
        if tall is not None:
            output["tall"] = tall
        output["total_seconds"] = time.perf_counter() - started
        write_results(json_path, output)

    plot_data = None
    if not args.tall:
        plot_data = run_small(args.quick, output)
        save()
    if args.tall_sizes:
        sizes = [int(n) for n in args.tall_sizes]
    else:
        sizes = [10**5] if args.quick else [10**5, 10**6]
    updates = TALL_UPDATES[args.quick]
    print(f"\n=== (d) tall logistic regression, d = 10: batch {TALL_BATCH}, "
          f"{TALL_UPDATES_PER_DRAW} updates per draw, {TALL_TUNE_DRAWS * TALL_UPDATES_PER_DRAW:,} "
          f"tuning + {updates:,} updates, one chain per sampler; NUTS (tune, draws) = "
          f"{TALL_NUTS[args.quick]}", flush=True)  # fmt: skip
    print(
        "  h: step size (z units), r: gradient-noise ratio, us/upd: pm.sample wall time per "
        "update (tuning\n  included), x floor: over the NumPy floor (* over the target), minESS: "
        "min bulk ESS over the\n  coefficients, dmean: max |mean - NUTS mean| / NUTS sd, dsd: "
        "max |sd / NUTS sd - 1|, z: each\n  in MCSEs of the difference (up to ~3 is noise), "
        f"KSD: pmm.ksd on {TALL_KSD_DRAWS} draws"
    )
    save(run_tall(sizes, args.quick, save))
    total = time.perf_counter() - started
    if args.tall:
        print(f"\nwrote {json_path}; total {total:.0f} s")
        return
    _plot(args.plot, *plot_data)
    print(f"\nwrote {json_path} and {args.plot}; total {total:.0f} s")


def run_small(quick, output):
    """Sections (a) to (c); results go into ``output``, the data of the plot are returned."""
    n_steps, n_chains = (10_000 if quick else 40_000), 50
    seeds = [0] if quick else [0, 1, 2]
    draws, tune = (2000, 500) if quick else (5000, 1000)
    checkpoints = [1, 2, 5, 10, 20] if quick else [1, 2, 5, 10, 20, 50, 100, 200]

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
    output |= {"multiwell": multiwell, "logistic": logistic,
               "bnn": {"epochs": checkpoints, "methods": bnn}}  # fmt: skip
    return best_draws, exact, multiwell, logistic, bnn, checkpoints


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
