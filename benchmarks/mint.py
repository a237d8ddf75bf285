"""MINT-MCMC side by side with NUTS, SGLD and full-data MH, in the settings of Li & Wong (2017).

(a) The tied-means Gaussian mixture of the paper's Section 3.1 (after Welling & Teh 2011):
    theta1 ~ N(0, 10), theta2 ~ N(0, 1), x_i ~ N(theta1, 2)/2 + N(theta1 + theta2, 2)/2 with
    data drawn at theta = (0, 1); the posterior has a second mode near (1, -1). Every sampler
    starts in the first mode. Table: fraction of draws in the start mode (theta2 > 0), mode
    switches, and for MINT the same fraction under the tempered posterior pi^(1/T) by grid
    quadrature. The paper uses n = 10^6 and batches of 5000; here n = 10^5 (``--n-rows``).
(b) The paper's synthetic logistic regression (Section 3.2: y ~ Bernoulli(1/2),
    x | y ~ N(+-0.2 * 1, I_10)), n = 10^5 training and 10^4 test rows, batch 1000: test
    accuracy of the running posterior mean against passes over the training data for MINT,
    full-data MH and NUTS (warm-up included; all start at zero).

Run ``python benchmarks/mint.py`` (a few minutes on 2 cores; ``--quick`` for a smaller run).
Writes ``--json`` (by default ``benchmarks/results/mint.json``, committed: the machine,
versions and command beside the tables) and ``--plot`` (PNG, beside it; not committed).
"""

import argparse
import logging
import time
import warnings

import numpy as np
import pymc as pm
from run_record import RESULTS, environment, write_results
from scipy import stats

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior, sample_stats

START = {"theta1": 0.0, "theta2": 1.0}


def mixture_model(n_rows, seed=0):
    rng = np.random.default_rng(seed)
    first = rng.random(n_rows) < 0.5
    x = np.where(first, rng.normal(0, np.sqrt(2), n_rows), rng.normal(1, np.sqrt(2), n_rows))
    with pm.Model() as model:
        theta1 = pm.Normal("theta1", 0.0, np.sqrt(10.0))
        theta2 = pm.Normal("theta2", 0.0, 1.0)
        pm.NormalMixture(
            "x",
            w=[0.5, 0.5],
            mu=pm.math.stack([theta1, theta1 + theta2]),
            sigma=np.sqrt(2.0),
            observed=x,
        )
    return model, x


def tempered_start_mode_mass(x, temperature):
    """Mass of theta2 > 0 under the posterior raised to 1/T, by quadrature on a grid."""
    grid1, grid2 = np.linspace(-2.5, 3.5, 61), np.linspace(-3.0, 3.0, 60)
    t1, t2 = np.meshgrid(grid1, grid2, indexing="ij")
    log_post = stats.norm.logpdf(t1, 0, np.sqrt(10)) + stats.norm.logpdf(t2, 0, 1)
    for rows in np.array_split(np.arange(x.size), max(1, x.size // 500)):
        xi = x[rows]
        both = np.logaddexp(
            stats.norm.logpdf(xi, t1[..., None], np.sqrt(2)),
            stats.norm.logpdf(xi, (t1 + t2)[..., None], np.sqrt(2)),
        )
        log_post += np.sum(both + np.log(0.5), axis=-1)
    weights = np.exp((log_post - log_post.max()) / temperature)
    return float(weights[t2 > 0].sum() / weights.sum())


def sgld_chain(model, n_steps, batch_size, seed):
    """Plain SGLD with polynomially decaying steps (Welling & Teh 2011), as a baseline."""
    mm = pmm.MinibatchModel(model)
    rng = np.random.default_rng(seed)
    theta = mm.theta_from_point({name: np.asarray(value) for name, value in START.items()})
    draws = np.empty((n_steps, mm.ndim))
    for t in range(n_steps):
        step = 1e-4 * (1.0 + t / 100.0) ** -0.55
        _, grad = mm.grad_estimate(theta, rng.choice(mm.n_data, batch_size, replace=False))
        theta = theta + 0.5 * step * grad + np.sqrt(step) * rng.standard_normal(mm.ndim)
        draws[t] = theta
    names = mm.var_names
    return {name: draws[:, mm.theta_indices([name])[0]] for name in names}


def mode_summary(theta2):
    in_start = theta2 > 0
    return {
        "start_mode_fraction": float(in_start.mean()),
        "switches": int(np.count_nonzero(np.diff(in_start.astype(int)))),
    }


def run_mixture(n_rows, batch_size, n_steps, nuts_draws, seed=0):
    model, x = mixture_model(n_rows, seed)
    results = {}
    with model:
        step = pmm.MINT(batch_size=batch_size)
        start = time.perf_counter()
        idata = pm.sample(
            step=step, draws=n_steps, tune=1000, chains=1, initvals=START,
            random_seed=seed, progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
        mint_time = time.perf_counter() - start
        mint = posterior(idata)["theta2"].values.ravel()
        results["MINT"] = {**mode_summary(mint), "seconds": mint_time, "draws": n_steps}
        results["MINT"]["tempered_start_mode_mass"] = tempered_start_mode_mass(x, step.temperature)
        results["MINT"]["temperature"] = step.temperature
        start = time.perf_counter()
        idata = pm.sample(
            draws=nuts_draws, tune=nuts_draws, chains=1, initvals=START, random_seed=seed,
            progressbar=False, compute_convergence_checks=False,
        )  # fmt: skip
        nuts = posterior(idata)["theta2"].values.ravel()
        results["NUTS"] = {
            **mode_summary(nuts),
            "seconds": time.perf_counter() - start,
            "draws": nuts_draws,
        }
    start = time.perf_counter()
    sgld = sgld_chain(model, n_steps, batch_size, seed)["theta2"]
    results["SGLD"] = {
        **mode_summary(sgld),
        "seconds": time.perf_counter() - start,
        "draws": n_steps,
    }
    return results, mint


def logistic_data(n_train, n_test, seed=0):
    rng = np.random.default_rng(seed)

    def draw(n):
        y = (rng.random(n) < 0.5).astype("int64")
        x = rng.normal(size=(n, 10)) + np.where(y[:, None] == 1, -0.2, 0.2)
        return x, y

    return draw(n_train), draw(n_test)


def accuracy_curve(draws, passes_per_draw, x_test, y_test, checkpoints):
    """Test accuracy of the running posterior mean at given numbers of passes."""
    passes = np.cumsum(passes_per_draw)
    running_mean = np.cumsum(draws, axis=0) / np.arange(1, len(draws) + 1)[:, None]
    curve = []
    for point in checkpoints:
        done = np.searchsorted(passes, point, side="right")
        if done == 0:
            curve.append(0.5)  # no draw yet: the zero start predicts at chance
            continue
        beta = running_mean[min(done, len(draws)) - 1]
        curve.append(float(np.mean((x_test @ beta > 0) == (y_test == 1))))
    return curve


def run_logistic(n_train, batch_size, checkpoints, seed=0):
    (x, y), (x_test, y_test) = logistic_data(n_train, n_train // 10, seed)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 10.0, shape=10)
        pm.Bernoulli("y", logit_p=pm.math.dot(x, beta), observed=y)
    max_passes = checkpoints[-1]
    kwargs = dict(
        chains=1, initvals={"beta": np.zeros(10)}, random_seed=seed, progressbar=False,
        compute_convergence_checks=False, discard_tuned_samples=False,
    )  # fmt: skip
    curves, seconds = {}, {}
    with model:
        n_mint = int(max_passes * n_train / batch_size)
        start = time.perf_counter()
        idata = pm.sample(step=pmm.MINT(batch_size=batch_size), draws=n_mint // 2,
                          tune=n_mint // 2, **kwargs)  # fmt: skip
        seconds["MINT"] = time.perf_counter() - start
        curves["MINT"] = _curve(idata, batch_size / n_train, x_test, y_test, checkpoints)
        start = time.perf_counter()
        idata = pm.sample(step=pmm.FullMH(), draws=max_passes // 2, tune=max_passes // 2,
                          **kwargs)  # fmt: skip
        seconds["FullMH"] = time.perf_counter() - start
        curves["FullMH"] = _curve(idata, 1.0, x_test, y_test, checkpoints)
        start = time.perf_counter()
        idata = pm.sample(draws=60, tune=60, **kwargs)
        seconds["NUTS"] = time.perf_counter() - start
        stats_nuts = _all_draws(sample_stats, idata, "n_steps")
        curves["NUTS"] = _curve(idata, stats_nuts, x_test, y_test, checkpoints)
    return curves, seconds


def _all_draws(group, idata, name):
    """Warm-up and posterior draws of one variable of a single chain, in order."""
    warmup_group = "warmup_" + ("sample_stats" if group is sample_stats else "posterior")
    values = [idata[warmup_group][name].values[0], group(idata)[name].values[0]]
    return np.concatenate(values)


def _curve(idata, passes, x_test, y_test, checkpoints):
    draws = _all_draws(posterior, idata, "beta")
    passes = np.broadcast_to(np.asarray(passes, dtype=float), (len(draws),))
    return accuracy_curve(draws, passes, x_test, y_test, checkpoints)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-rows", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="n = 2 10^4, fewer steps")
    parser.add_argument("--json", default=str(RESULTS / "mint.json"))
    parser.add_argument("--plot", default=str(RESULTS / "mint.png"))
    args = parser.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    n_rows = 20_000 if args.quick else args.n_rows
    batch = 2000 if args.quick else 5000
    n_steps = 5000 if args.quick else 20_000

    print(f"=== (a) tied-means mixture: n = {n_rows:,}, batch {batch}, start at (0, 1)")
    mixture, mint_theta2 = run_mixture(n_rows, batch, n_steps, nuts_draws=300)
    tempered = mixture["MINT"]["tempered_start_mode_mass"]
    print(f"  MINT temperature T = {mixture['MINT']['temperature']:.1f}")
    print(f"  {'sampler':8} {'draws':>6} {'seconds':>8} {'in start mode':>14} {'switches':>9}")
    for name, row in mixture.items():
        print(
            f"  {name:8} {row['draws']:6d} {row['seconds']:8.1f} "
            f"{row['start_mode_fraction']:14.3f} {row['switches']:9d}"
        )
    print(f"  pi^(1/T) mass in the start mode (grid quadrature): {tempered:.3f}")
    fraction = mixture["MINT"]["start_mode_fraction"]
    ratio = fraction / (1 - fraction) / (tempered / (1 - tempered)) if fraction < 1 else np.inf
    print(f"  MINT mode ratio / quadrature mode ratio: {ratio:.3f}")

    n_train = 20_000 if args.quick else 100_000
    checkpoints = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 50]
    print(f"\n=== (b) logistic regression: n = {n_train:,} train, batch 1000")
    curves, seconds = run_logistic(n_train, 1000, checkpoints)
    print("  test accuracy of the running posterior mean, by passes over the training data")
    print("  " + f"{'passes':>8}" + "".join(f"{name:>9}" for name in curves))
    for k, point in enumerate(checkpoints):
        print("  " + f"{point:8.2f}" + "".join(f"{curves[name][k]:9.3f}" for name in curves))
    print("  seconds: " + ", ".join(f"{name} {value:.1f}" for name, value in seconds.items()))
    bayes = stats.norm.cdf(0.2 * np.sqrt(10))
    print(f"  Bayes rate (accuracy of the true classifier): {bayes:.3f}")

    write_results(args.json, {
        "environment": environment(), "n_rows": n_rows, "batch_size": batch, "n_steps": n_steps,
        "mixture": mixture, "mint_mode_ratio_over_quadrature": ratio,
        "logistic": {"n_train": n_train, "checkpoints": checkpoints, "accuracy": curves,
                     "seconds": seconds, "bayes_accuracy": bayes},
    })  # fmt: skip
    _plot(args.plot, mint_theta2, curves, checkpoints, bayes)
    print(f"\nwrote {args.json} and {args.plot}")


def _plot(path, mint_theta2, curves, checkpoints, bayes):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(mint_theta2, lw=0.3)
    left.set(xlabel="draw", ylabel="theta2", title="MINT on the tied-means mixture")
    for name, curve in curves.items():
        right.plot(checkpoints, curve, marker="o", label=name)
    right.axhline(bayes, color="k", ls="--", label="Bayes rate")
    right.set(xscale="log", xlabel="passes over the data", ylabel="test accuracy",
              title="logistic regression")  # fmt: skip
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
