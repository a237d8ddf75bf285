"""What an install costs before the first draw: compilation of the model, NUTS and TunaMH.

A logistic regression with 10 coefficients on 10,000 rows, in fresh processes: ``import
pymc``; the model's log density and gradient compiled (``model.compile_logp()`` and
``compile_dlogp()``); ``pm.sample`` of NUTS (one chain, 200 tuning and 200 kept draws) and
the building of ``pmm.TunaMH()`` with 200 draws of it, each timed from the call. Each is
measured twice: with PyTensor's compilation cache empty (a new ``base_compiledir``, which
holds its C modules and its Numba cache, as on a fresh install) and again with that cache
filled (every later run). Also recorded: whether PyTensor links a BLAS (``blas__ldflags``;
pip's wheels find none and warn "Using NumPy C-API based implementation for BLAS
functions"), the linker of PyTensor's default mode (PyMC 6 on Python 3.12 compiles through
Numba), and the seconds of one gradient of the log density on 10^6 rows.

Run ``python benchmarks/compile_times.py`` in each environment (about a minute each);
results go to ``benchmarks/results/compile_times_py{major}{minor}.json``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from run_record import RESULTS, environment, write_results


def _model(n_rows, seed=0):
    import numpy as np
    import pymc as pm

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 10))
    y = (rng.random(n_rows) < 1 / (1 + np.exp(-X @ np.linspace(-0.5, 0.5, 10)))).astype("int64")
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=10)
        pm.Bernoulli("y", logit_p=X @ beta, observed=y)
    return model


def child():
    """Time each stage in this process; print them as JSON."""
    import warnings

    started = time.perf_counter()
    import pymc as pm
    import pytensor

    import pymc_minibatch as pmm

    seconds = {"import": time.perf_counter() - started}
    warnings.simplefilter("ignore")
    model = _model(10_000)
    started = time.perf_counter()
    model.compile_logp()
    model.compile_dlogp()
    seconds["compile_logp_dlogp"] = time.perf_counter() - started
    common = {"draws": 200, "tune": 200, "chains": 1, "progressbar": False, "random_seed": 1,
              "compute_convergence_checks": False}  # fmt: skip
    with model:
        started = time.perf_counter()
        pm.sample(**common)
        seconds["nuts_sample"] = time.perf_counter() - started
        started = time.perf_counter()
        step = pmm.TunaMH(progressbar=False)
        seconds["tunamh_setup"] = time.perf_counter() - started
        pm.sample(step=step, **common)
        seconds["tunamh_setup_and_sample"] = time.perf_counter() - started
    tall = _model(1_000_000)
    gradient = tall.compile_dlogp()
    point = tall.initial_point()
    gradient(point)
    started = time.perf_counter()
    for _ in range(10):
        gradient(point)
    seconds["gradient_1e6_rows"] = (time.perf_counter() - started) / 10
    from pytensor.compile.mode import get_default_mode

    linker = type(get_default_mode().linker).__name__
    print(json.dumps({"seconds": seconds, "blas_ldflags": pytensor.config.blas__ldflags,
                      "linker": linker}))  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", default=str(RESULTS / "compile_times_py{major}{minor}.json"))
    args = parser.parse_args(argv)
    if args.child:
        return child()
    runs = {}
    with tempfile.TemporaryDirectory() as cache:
        # PyTensor keeps its C modules and its Numba cache under base_compiledir
        env = dict(os.environ)
        flags = [f for f in env.get("PYTENSOR_FLAGS", "").split(",") if f]
        env["PYTENSOR_FLAGS"] = ",".join([*flags, f"base_compiledir={cache}"])
        for label in ("empty cache", "filled cache"):
            out = subprocess.run([sys.executable, __file__, "--child"], env=env, check=True,
                                 capture_output=True, text=True).stdout  # fmt: skip
            runs[label] = json.loads(out.strip().splitlines()[-1])
            print(label, json.dumps(runs[label], indent=1))
    path = args.json.format(major=sys.version_info.major, minor=sys.version_info.minor)
    write_results(path, {"environment": environment(), "runs": runs})
    print("wrote", path)


if __name__ == "__main__":
    main()
