"""TunaMH on rows in a Zarr store against the same rows in memory: memory, passes, µs/step.

What it measures
----------------
A Bernoulli-logit regression (intercept and ``d`` slopes, ``Normal`` priors; synthetic rows
with a fixed seed, ``X ~ Normal(0.3, 1)`` float64, ``y`` int8) is written to a Zarr store in
chunks of ``--chunk-rows`` rows. Two fresh processes then build the model and sample it with
``pmm.TunaMH()`` at its defaults (one chain, ``--tune`` + ``--draws`` steps, seed 1):

* ``memory``: the rows loaded into NumPy arrays, in the model;
* ``zarr``: the model on a 1000-row placeholder and ``data=`` the Zarr arrays, read through
  :class:`pymc_minibatch.ChunkedRows` with a ``--cache-mb`` cache; full-data passes as Dask
  tasks on Dask's threads.

A third process, ``placeholder``, samples the model on its 1000 placeholder rows in memory:
its peak memory is what the process needs whatever the data (Python, PyMC, the compiled
functions, the trace), so the zarr process's peak above it is the memory that grows with
the rows.

Each process prints: its resident memory after the imports and the model (before any rows
in memory are counted for ``memory``: the baseline is taken before loading them), its peak
resident memory (``ru_maxrss``), the time and the number of full-data passes of the step's
construction (mode, curvature, bounds), the time of one more full-data pass
(``logp_and_grad``), the time ``pm.sample`` takes to its first draw (setup and the first
step, which builds the sampler of rows by their bounds and draws the first queue of rows,
prefetched for ``zarr``), µs per step after the first draw (from ``pm.sample``'s
``callback``; each later refill of the queue, one pass over the chunks its rows touch, is
included) and, for ``zarr``, the mean chunk-cache hit rate. The
parent prints both and the ratios: µs/step zarr / memory, and the zarr process's peak
memory above its baseline against the rows' in-memory size.

Usage: ``python benchmarks/chunked_rows.py`` (10^7 rows, about 4 minutes on 2 cores;
``--rows 1000000`` for a smaller run, ``--store DIR`` keeps the store for later runs).
Writes every process's figures and the ratios to ``--json`` (by default
``benchmarks/results/chunked_rows.json``, committed, with the machine, versions and command).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from run_record import RESULTS, environment, write_results

SEED = 20261202


def write_store(path, n_rows, n_features, chunk_rows):
    """The synthetic rows, written to ``path/X.zarr`` and ``path/y.zarr`` block by block."""
    import zarr

    rng = np.random.default_rng(SEED)
    beta = rng.normal(0.0, 0.5, size=n_features)
    X = zarr.create_array(f"{path}/X.zarr", shape=(n_rows, n_features), dtype="float64",
                          chunks=(chunk_rows, n_features), overwrite=True)  # fmt: skip
    y = zarr.create_array(f"{path}/y.zarr", shape=(n_rows,), dtype="int8",
                          chunks=(chunk_rows,), overwrite=True)  # fmt: skip
    block = max(chunk_rows, (2**20 // chunk_rows) * chunk_rows)
    for start in range(0, n_rows, block):
        rows = min(block, n_rows - start)
        X_block = rng.normal(0.3, 1.0, size=(rows, n_features))
        p = 1.0 / (1.0 + np.exp(-(0.5 + X_block @ beta)))
        X[start : start + rows] = X_block
        y[start : start + rows] = (rng.random(rows) < p).astype("int8")


def resident_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(args):
    """Build, construct and sample in this process; print one JSON line."""
    # every process loads the same modules (Dask too), so that their peaks differ only by
    # what the rows cost
    import dask.array  # noqa: F401
    import pymc as pm
    import zarr

    import pymc_minibatch as pmm
    from pymc_minibatch._compat import sample_stats

    X_store = zarr.open_array(f"{args.store}/X.zarr", mode="r")
    y_store = zarr.open_array(f"{args.store}/y.zarr", mode="r")
    baseline = resident_mb()
    if args.child == "memory":
        X_rows, y_rows, data = X_store[:], y_store[:], None
    elif args.child == "placeholder":
        X_rows, y_rows, data = X_store[:1000], y_store[:1000], None
    else:
        X_rows, y_rows = X_store[:1000], y_store[:1000]
        cache_bytes = int(args.cache_mb * 2**20)
        data = {name: pmm.ChunkedRows(store, cache_bytes)
                for name, store in (("X", X_store), ("y", y_store))}  # fmt: skip
    with pm.Model():
        X_data = pm.Data("X", X_rows)
        alpha = pm.Normal("alpha", 0.0, 5.0)
        beta = pm.Normal("beta", 0.0, 1.0, shape=X_store.shape[1])
        pm.Bernoulli("y", logit_p=alpha + X_data @ beta, observed=y_rows)
        started = time.perf_counter()
        step = pmm.TunaMH(data=data)
        construct = time.perf_counter() - started
        passes = step.minibatch_model.full_data_passes
        started = time.perf_counter()
        step.minibatch_model.logp_and_grad(step.laplace.mode)
        one_pass = time.perf_counter() - started
        draw_times = []
        started = time.perf_counter()
        idata = pm.sample(
            step=step, draws=args.draws, tune=args.tune, chains=1, cores=1, random_seed=1,
            progressbar=False, compute_convergence_checks=False,
            callback=lambda trace, draw: draw_times.append(time.perf_counter()),
        )  # fmt: skip
    stats = sample_stats(idata)
    result = {
        "source": args.child,
        "baseline_mb": baseline,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "construct_s": construct,
        "construct_passes": passes,
        "pass_s": one_pass,
        "first_draw_s": draw_times[0] - started,
        "us_per_step": 1e6 * (draw_times[-1] - draw_times[0]) / (len(draw_times) - 1),
        "rows_per_step": float(stats["batch_size"].mean()),
        "accept": float(stats["accept"].mean()),
    }
    if "chunk_cache_hit_rate" in stats:
        result["hit_rate"] = float(np.nanmean(stats["chunk_cache_hit_rate"].values))
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10**7)
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--chunk-rows", type=int, default=1024)
    parser.add_argument("--cache-mb", type=float, default=128.0)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--tune", type=int, default=500)
    parser.add_argument("--store", help="directory of the Zarr store (default: a temporary one)")
    parser.add_argument("--json", default=str(RESULTS / "chunked_rows.json"))
    parser.add_argument("--child", choices=["memory", "zarr", "placeholder"],
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory() as scratch:
        store = args.store or scratch
        if not os.path.exists(f"{store}/X.zarr"):
            started = time.perf_counter()
            write_store(store, args.rows, args.features, args.chunk_rows)
            print(f"wrote {args.rows} rows in {time.perf_counter() - started:.0f} s to {store}")
        results = {}
        for source in ("placeholder", "memory", "zarr"):
            command = [sys.executable, __file__, "--child", source, "--store", store,
                       "--cache-mb", str(args.cache_mb), "--draws", str(args.draws),
                       "--tune", str(args.tune)]  # fmt: skip
            output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            results[source] = json.loads(output.strip().splitlines()[-1])
            print(json.dumps(results[source]))
    data_mb = args.rows * (args.features * 8 + 1) / 2**20
    zarr_run, memory_run = results["zarr"], results["memory"]
    grown = zarr_run["peak_mb"] - results["placeholder"]["peak_mb"]
    above = zarr_run["peak_mb"] - zarr_run["baseline_mb"]
    print(f"rows in memory: {data_mb:.0f} MB; zarr process: peak {zarr_run['peak_mb']:.0f} MB, "
          f"{grown:.0f} MB above the placeholder's peak = {grown / data_mb:.3f} of the rows "
          f"({above:.0f} MB above its baseline)")  # fmt: skip
    step_ratio = zarr_run["us_per_step"] / memory_run["us_per_step"]
    print(f"us/step zarr / memory: {step_ratio:.2f}; "
          f"one full-data pass: {zarr_run['pass_s']:.2f} s zarr, {memory_run['pass_s']:.2f} s "
          "memory")  # fmt: skip
    write_results(args.json, {
        "environment": environment(extra_packages=("zarr", "dask")),
        "rows": args.rows, "features": args.features, "chunk_rows": args.chunk_rows,
        "cache_mb": args.cache_mb, "draws": args.draws, "tune": args.tune,
        "runs": results, "data_mb": data_mb, "zarr_peak_above_placeholder_mb": grown,
        "zarr_peak_above_placeholder_fraction_of_rows": grown / data_mb,
        "zarr_peak_above_baseline_mb": above, "us_per_step_zarr_over_memory": step_ratio,
    })  # fmt: skip
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
