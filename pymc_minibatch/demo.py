"""The main job: a minibatch sampler against NUTS on a tall logistic regression.

Run ``python -m pymc_minibatch demo --help`` for the options.
"""

import argparse
import time

import arviz as az
import numpy as np
import pymc as pm

from pymc_minibatch._compat import plot_forest_comparison, posterior, sample_stats
from pymc_minibatch.model.adapter import MinibatchModel
from pymc_minibatch.step_methods.flymc import FlyMC
from pymc_minibatch.step_methods.full_mh import FullMH
from pymc_minibatch.step_methods.tfmh import TFMH
from pymc_minibatch.step_methods.tuna import TunaMH

SAMPLERS = {"tunamh": TunaMH, "tfmh": TFMH, "flymc": FlyMC, "fullmh": FullMH}


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m pymc_minibatch demo",
        description="Compare a minibatch sampler with PyMC's NUTS on a synthetic tall "
        "logistic regression and plot both posteriors.",
    )
    parser.add_argument("--n-rows", type=int, default=50_000, help="rows N (default 50,000)")
    parser.add_argument("--n-features", type=int, default=5, help="covariates d (default 5)")
    parser.add_argument("--sampler", choices=sorted(SAMPLERS), default="tunamh")
    parser.add_argument("--draws", type=int, default=5000, help="minibatch draws per chain")
    parser.add_argument("--nuts-draws", type=int, default=500, help="NUTS draws per chain")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--output", default="pmm_demo.png", help="where to write the plot")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def make_model(n_rows, n_features, seed):
    """A Bernoulli-logit regression with an intercept on synthetic data."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    beta = rng.normal(scale=0.5, size=n_features)
    y = (rng.random(n_rows) < 1.0 / (1.0 + np.exp(-(0.3 + X @ beta)))).astype("int64")
    with pm.Model(coords={"feature": np.arange(n_features)}) as model:
        intercept = pm.Normal("intercept", 0.0, 2.0)
        coefs = pm.Normal("beta", 0.0, 1.0, dims="feature")
        pm.Bernoulli("y", logit_p=intercept + X @ coefs, observed=y)
    return model


def run(model, step, draws, chains, seed, initvals):
    """``pm.sample`` with PyMC's default tuning (1000 steps); the wall time includes the
    step's construction (for TunaMH: the Laplace fit and the bounds)."""
    start = time.perf_counter()
    with model:
        step = step() if step else None
        if step is not None:
            print(f"{step!r} built in {time.perf_counter() - start:.1f} s")
        idata = pm.sample(
            step=step,
            draws=draws,
            tune=1000,
            chains=chains,
            cores=min(chains, 2),
            initvals=initvals,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return idata, time.perf_counter() - start


def summarise(label, idata, seconds, rows_per_draw):
    draws = posterior(idata)
    ess = min(float(np.min(az.ess(draws[[name]])[name].values)) for name in draws.data_vars)
    print(
        f"  {label:<8} wall {seconds:7.1f} s   min ESS {ess:8.1f}   ESS/s {ess / seconds:8.2f}"
        f"   rows/draw {rows_per_draw:>12,.0f}"
    )
    return ess / seconds


def main(argv=None):
    args = build_parser().parse_args(argv)
    model = make_model(args.n_rows, args.n_features, args.seed)
    mm = MinibatchModel(model)
    started = time.perf_counter()
    initvals = mm.point_from_theta(mm.find_map())
    print(
        f"Logistic regression, N = {args.n_rows:,} rows, d = {args.n_features} (+ intercept); "
        f"both samplers start at the MAP (found in {time.perf_counter() - started:.1f} s)."
    )

    sampler = SAMPLERS[args.sampler]
    idata_mb, seconds_mb = run(model, sampler, args.draws, args.chains, args.seed, initvals)
    idata_nuts, seconds_nuts = run(model, None, args.nuts_draws, args.chains, args.seed, initvals)

    stats = sample_stats(idata_mb)
    rows_mb = float(stats["batch_size"].mean())
    # one NUTS leapfrog step evaluates the gradient over all rows
    rows_nuts = float(sample_stats(idata_nuts)["n_steps"].mean()) * args.n_rows
    label = sampler.__name__
    print("\nPosterior means (sd):")
    for name, mb, ref in _compare(posterior(idata_mb), posterior(idata_nuts)):
        print(
            f"  {name:<14} {label} {mb[0]: .4f} ({mb[1]:.4f})   NUTS {ref[0]: .4f} ({ref[1]:.4f})"
            f"   diff/sd {(mb[0] - ref[0]) / ref[1]: .2f}"
        )
    print("\nEfficiency (tuning included in wall time):")
    rate_mb = summarise(label, idata_mb, seconds_mb, rows_mb)
    rate_nuts = summarise("NUTS", idata_nuts, seconds_nuts, rows_nuts)
    print(f"  ESS/s ratio {label} / NUTS: {rate_mb / rate_nuts:.2f}")
    import matplotlib

    matplotlib.use("Agg")  # the demo writes a file; it opens no window
    plot_forest_comparison({label: idata_mb, "NUTS": idata_nuts}, args.output)
    print(f"\nComparison plot written to {args.output}")


def _compare(draws, reference):
    for name in draws.data_vars:
        values = draws[name].values.reshape(-1, *draws[name].shape[2:])
        ref = reference[name].values.reshape(-1, *reference[name].shape[2:])
        for k in np.ndindex(values.shape[1:]):
            column, ref_column = values[(slice(None), *k)], ref[(slice(None), *k)]
            label = name + (str(list(k)) if k else "")
            yield label, (column.mean(), column.std()), (ref_column.mean(), ref_column.std())
