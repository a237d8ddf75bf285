"""Per-call overhead of ``MinibatchModel`` against a hand-written NumPy floor.

What it measures
----------------
A Bernoulli-logit regression with ``d = 10`` features (synthetic data, fixed seed;
``beta ~ Normal(0, 1)``, ``X`` a plain float64 NumPy array, ``y`` int64) is built as a
PyMC model for ``N = 10^4`` and ``N = 10^6`` rows and wrapped in
``pymc_minibatch.MinibatchModel``. For every ``N`` and batch size
``B in {1, 10, 100, 1000, 10000}`` the script times, in microseconds per call,

* ``mm.loglik(theta, idx)``,
* ``mm.loglik_pair(theta, theta2, idx)``,
* ``mm.grad_estimate(theta, idx)``,

and, on the very same pre-drawn index arrays (``B`` rows drawn uniformly with
replacement), the plain NumPy floor for each: gather ``X[idx]``, ``y[idx]``, compute
``eta = X_b @ beta`` and ``y * eta - logaddexp(0, eta)`` (one ``theta`` for ``loglik``,
both for ``loglik_pair``), and for ``grad_estimate`` the value and gradient of
``log N(beta | 0, 1) + N / B * sum(loglik)``. The ratio adapter / floor is the price of
going through PyMC/PyTensor. It also times one full-data ``mm.logp_and_grad(theta)``
per ``N`` (milliseconds) against the NumPy equivalent over all rows.

For particle methods it also times, per ``N``, ``mm.grad_estimate_particles(thetas, idx)``
(one compiled call vectorised over the particles) against the per-particle loop it replaced
(rows gathered once, then one compiled ``grad_estimate`` call per particle), for
``M in {50, 200}`` particles and ``B in {100, 1000}`` rows, side by side on the same index
arrays and particles, after asserting that both give the same values and gradients. The
vectorised call's matrix products go to NumPy's BLAS, which may use several threads: on a
machine whose cores are busy with other work, ``OPENBLAS_NUM_THREADS=1`` shows the comparison
without their contention.

Each timing is the median over several repeats of ``time.perf_counter`` around a loop
of calls (loop length chosen so that one repeat takes about 10 ms; 21 repeats at
``B <= 100``, fewer at large ``B``), with the garbage collector off, after a warm-up
call: the first call of a compiled function includes its compilation (C code or Numba
JIT). Repeats of the adapter and of its floor alternate, so both see the same background
load; on a busy machine the absolute numbers still move by tens of percent from run to
run, the ratios less. Before timing, the
adapter's outputs are checked against the NumPy floor on one batch (``assert``), so the
two sides compute the same numbers.

Target (printed with a per-``B`` verdict): ratio <= 3 at ``B <= 100``, and the time per
call at a fixed ``B`` independent of ``N``. "Independent of ``N``" is judged per call as
``t(N_max) / t(N_min) <= 1.5``, or no more than 1.25 times the NumPy floor's own growth
(random gathers from a large array miss the CPU caches for NumPy as much as for the
adapter).

How to run
----------
From the repository root, in either environment::

    python benchmarks/adapter_overhead.py
    python benchmarks/adapter_overhead.py --json benchmarks/results/adapter_overhead_py312.json

The whole run (compilation included) takes well under two minutes on two cores.
``--n-data`` and ``--batch-sizes`` override the grid (``--particles`` and
``--particle-batch-sizes`` the particle part's); every number is written to ``--json``
(default ``benchmarks/results/adapter_overhead.json``, committed, with the machine, versions
and command).
"""

import argparse
import gc
import math
import statistics
import sys
import time
import warnings
from functools import partial

import numpy as np
from run_record import RESULTS, environment, write_results
from scipy.special import expit

N_FEATURES = 10
DEFAULT_N_DATA = (10**4, 10**6)
DEFAULT_BATCH_SIZES = (1, 10, 100, 1000, 10000)
CALLS = ("loglik", "loglik_pair", "grad_estimate")
TARGET_RATIO = 3.0
TARGET_MAX_B = 100
N_GROWTH_LIMIT = 1.5
N_GROWTH_VS_FLOOR = 1.25
REPEAT_SECONDS = 0.01  # target duration of one timed loop (many short repeats: robust median)
MAX_INDEX_ENTRIES = 2_000_000  # bounds the memory of the pre-drawn index pool
MAX_POOL = 5000
DEFAULT_PARTICLES = (50, 200)
DEFAULT_PARTICLE_BATCH_SIZES = (100, 1000)


# ---- model and NumPy floor ------------------------------------------------------------------
def make_data(n_data, seed):
    """Synthetic ``(X, y)``: standard normal features, labels from a logistic model."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_data, N_FEATURES))
    beta_true = rng.normal(scale=0.5, size=N_FEATURES)
    y = (rng.random(n_data) < expit(x @ beta_true)).astype(np.int64)
    return x, y


def make_model(x, y):
    """The PyMC model: ``beta ~ Normal(0, 1)``, ``y ~ Bernoulli(logit_p = X @ beta)``."""
    import pymc as pm

    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=N_FEATURES)
        pm.Bernoulli("y", logit_p=x @ beta, observed=y)
    return model


class NumpyFloor:
    """The same quantities as the adapter, written directly in NumPy."""

    def __init__(self, x, y):
        self.x = x
        self.y = y
        self.n_data = x.shape[0]
        self.log_norm = -0.5 * N_FEATURES * math.log(2.0 * math.pi)

    def loglik(self, beta, idx):
        xb, yb = self.x[idx], self.y[idx]
        eta = xb @ beta
        return yb * eta - np.logaddexp(0.0, eta)

    def loglik_pair(self, beta, beta2, idx):
        xb, yb = self.x[idx], self.y[idx]
        eta, eta2 = xb @ beta, xb @ beta2
        return yb * eta - np.logaddexp(0.0, eta), yb * eta2 - np.logaddexp(0.0, eta2)

    def grad_estimate(self, beta, idx):
        xb, yb = self.x[idx], self.y[idx]
        eta = xb @ beta
        scale = self.n_data / idx.size
        loglik = np.sum(yb * eta - np.logaddexp(0.0, eta))
        value = self.log_norm - 0.5 * (beta @ beta) + scale * loglik
        grad = scale * ((yb - expit(eta)) @ xb) - beta
        return float(value), grad

    def logp_and_grad(self, beta):
        eta = self.x @ beta
        value = self.log_norm - 0.5 * (beta @ beta) + np.sum(self.y * eta - np.logaddexp(0.0, eta))
        grad = (self.y - expit(eta)) @ self.x - beta
        return float(value), grad


# ---- timing ---------------------------------------------------------------------------------
def time_loop(fn, args):
    """Seconds per call of ``fn(a)`` over ``a in args`` (one pass, GC off)."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for a in args:
            fn(a)
        return (time.perf_counter() - start) / len(args)
    finally:
        if gc_was_enabled:
            gc.enable()


def loop_length(fn, pool, min_calls):
    """Calls per repeat so that one repeat takes about ``REPEAT_SECONDS`` (at most the pool)."""
    fn(pool[0])  # warm-up (compilation / JIT on the first call of a compiled function)
    per_call = time_loop(fn, pool[:1])
    if per_call < REPEAT_SECONDS / 10:
        per_call = time_loop(fn, pool[: min(len(pool), 5)])
    return int(min(len(pool), max(min_calls, REPEAT_SECONDS / max(per_call, 1e-9))))


def time_pair(fn, floor_fn, pool, repeats, min_calls=3):
    """Median seconds per call of ``fn`` and of ``floor_fn`` on the same index arrays.

    The repeats of the two alternate, so that both see the same background load.
    """
    args = pool[: loop_length(fn, pool, min_calls)]
    floor_args = pool[: loop_length(floor_fn, pool, min_calls)]
    times, floor_times = [], []
    for _ in range(repeats):
        times.append(time_loop(fn, args))
        floor_times.append(time_loop(floor_fn, floor_args))
    return statistics.median(times), statistics.median(floor_times), len(args), len(floor_args)


def index_pool(rng, n_data, batch_size):
    """Pre-drawn index arrays of ``batch_size`` rows, uniform with replacement."""
    n_arrays = int(min(MAX_POOL, max(20, MAX_INDEX_ENTRIES // batch_size)))
    flat = rng.integers(0, n_data, size=(n_arrays, batch_size), dtype=np.int64)
    return list(flat)


def repeats_for(batch_size):
    return 21 if batch_size <= 100 else 11 if batch_size <= 1000 else 7


def particle_loop(mm, thetas, idx):
    """``grad_estimate_particles`` as it was before vectorising: rows gathered once, then one
    compiled ``grad_estimate`` call per particle."""
    weights = np.full(idx.size, mm.n_data / idx.size)
    rows = mm.row_source.gather(idx)
    values, grads = np.empty(len(thetas)), np.empty(thetas.shape)
    for i, theta in enumerate(thetas):
        values[i], grads[i] = mm.functions.call("grad_estimate", np.ascontiguousarray(theta),
                                                weights, *rows)  # fmt: skip
    return values, grads


# ---- checks ---------------------------------------------------------------------------------
def check_against_floor(mm, floor, theta, theta2, rng):
    """Assert the adapter and the NumPy floor agree on one batch (with repeated rows)."""
    idx = rng.integers(0, mm.n_data, size=64)
    idx[-4:] = idx[:4]
    ll = mm.loglik(theta, idx)
    ll_np = floor.loglik(theta, idx)
    assert ll.shape == ll_np.shape == (idx.size,)
    assert np.allclose(ll, ll_np, rtol=1e-10, atol=1e-12), "loglik differs from the NumPy floor"
    for got, want in zip(
        mm.loglik_pair(theta, theta2, idx), floor.loglik_pair(theta, theta2, idx), strict=True
    ):
        assert np.allclose(got, want, rtol=1e-10, atol=1e-12), "loglik_pair differs from NumPy"
    value, grad = mm.grad_estimate(theta, idx)
    value_np, grad_np = floor.grad_estimate(theta, idx)
    assert np.isclose(value, value_np, rtol=1e-10), "grad_estimate value differs from NumPy"
    assert np.allclose(grad, grad_np, rtol=1e-9, atol=1e-9), "grad_estimate grad differs"


def check_full_data(mm, floor, theta):
    value, grad = mm.logp_and_grad(theta)
    value_np, grad_np = floor.logp_and_grad(theta)
    assert np.isclose(value, value_np, rtol=1e-9), "logp_and_grad value differs from NumPy"
    assert np.allclose(grad, grad_np, rtol=1e-8, atol=1e-6), "logp_and_grad grad differs"


# ---- one N ----------------------------------------------------------------------------------
def bench_particles(mm, theta, n_particles, batch_sizes, rng):
    """µs per call of the vectorised ``grad_estimate_particles`` and of the per-particle loop."""
    rows = []
    for m in n_particles:
        thetas = theta + rng.normal(scale=0.1, size=(m, mm.ndim))
        vectorised = partial(mm.grad_estimate_particles, thetas)
        loop = partial(particle_loop, mm, thetas)
        for batch_size in batch_sizes:
            pool = index_pool(rng, mm.n_data, batch_size)
            for got, want in zip(vectorised(pool[0]), loop(pool[0]), strict=True):
                assert np.allclose(got, want, rtol=1e-10, atol=0), "vectorised != loop"
            t_vec, t_loop, n_vec, n_loop = time_pair(
                vectorised, loop, pool, repeats_for(batch_size)
            )
            rows.append(
                {
                    "N": mm.n_data,
                    "M": m,
                    "B": batch_size,
                    "vectorised_us": t_vec * 1e6,
                    "loop_us": t_loop * 1e6,
                    "speedup": t_loop / t_vec,
                    "loops": n_vec,
                    "loop_loops": n_loop,
                }
            )
    return rows


def bench_n(n_data, batch_sizes, seed, log, n_particles=(), particle_batch_sizes=()):
    import pymc_minibatch as pmm

    t0 = time.perf_counter()
    x, y = make_data(n_data, seed)
    model = make_model(x, y)
    mm = pmm.MinibatchModel(model)
    assert mm.n_data == n_data and mm.ndim == N_FEATURES
    t_build = time.perf_counter() - t0

    floor = NumpyFloor(x, y)
    rng = np.random.default_rng(seed + 1)
    theta = rng.normal(scale=0.3, size=N_FEATURES)
    theta2 = theta + rng.normal(scale=0.05, size=N_FEATURES)

    # warm-up: compile every function used below (first call = compilation / JIT)
    t0 = time.perf_counter()
    warm_idx = rng.integers(0, n_data, size=8)
    mm.loglik(theta, warm_idx)
    mm.loglik_pair(theta, theta2, warm_idx)
    mm.grad_estimate(theta, warm_idx)
    mm.logp_and_grad(theta)
    t_compile = time.perf_counter() - t0

    check_against_floor(mm, floor, theta, theta2, rng)
    check_full_data(mm, floor, theta)
    log(
        f"  N={fmt_n(n_data)}: data+model+adapter {t_build:.1f} s, compile/warm-up "
        f"{t_compile:.1f} s; adapter == NumPy floor on a check batch: OK"
    )

    adapter_fns = {
        "loglik": lambda idx: mm.loglik(theta, idx),
        "loglik_pair": lambda idx: mm.loglik_pair(theta, theta2, idx),
        "grad_estimate": lambda idx: mm.grad_estimate(theta, idx),
    }
    floor_fns = {
        "loglik": lambda idx: floor.loglik(theta, idx),
        "loglik_pair": lambda idx: floor.loglik_pair(theta, theta2, idx),
        "grad_estimate": lambda idx: floor.grad_estimate(theta, idx),
    }
    rows = []
    for batch_size in batch_sizes:
        pool = index_pool(rng, n_data, batch_size)
        repeats = repeats_for(batch_size)
        for call in CALLS:
            t_mm, t_np, n_mm, n_np = time_pair(adapter_fns[call], floor_fns[call], pool, repeats)
            rows.append(
                {
                    "N": n_data,
                    "B": batch_size,
                    "call": call,
                    "us": t_mm * 1e6,
                    "numpy_us": t_np * 1e6,
                    "ratio": t_mm / t_np,
                    "loops": n_mm,
                    "numpy_loops": n_np,
                    "repeats": repeats,
                }
            )

    # one full-data logp_and_grad per N, in ms
    t_full, t_full_np, _, _ = time_pair(
        mm.logp_and_grad, floor.logp_and_grad, [theta] * 200, 3 if n_data >= 10**6 else 5, 1
    )
    full = {
        "N": n_data,
        "call": "logp_and_grad",
        "ms": t_full * 1e3,
        "numpy_ms": t_full_np * 1e3,
        "ratio": t_full / t_full_np,
    }
    particles = bench_particles(mm, theta, n_particles, particle_batch_sizes, rng)
    return rows, full, particles, {"N": n_data, "build_s": t_build, "compile_s": t_compile}


# ---- report ---------------------------------------------------------------------------------
def fmt_n(n):
    exponent = round(math.log10(n)) if n > 0 else 0
    return f"10^{exponent}" if 10**exponent == n else str(n)


def print_table(rows, fulls, log):
    header = f"{'N':>6} {'B':>6}  {'call':<14} {'µs/call':>10} {'numpy µs':>10} {'ratio':>7}"
    log(header)
    log("-" * len(header))
    previous = None
    for r in rows:
        if previous is not None and (r["N"], r["B"]) != previous:
            log("")
        previous = (r["N"], r["B"])
        log(
            f"{fmt_n(r['N']):>6} {r['B']:>6}  {r['call']:<14} {r['us']:>10.1f} "
            f"{r['numpy_us']:>10.1f} {r['ratio']:>7.2f}"
        )
    log("")
    header = f"{'N':>6}  {'call':<14} {'ms/call':>10} {'numpy ms':>10} {'ratio':>7}"
    log("full data (all N rows):")
    log(header)
    log("-" * len(header))
    for f in fulls:
        log(
            f"{fmt_n(f['N']):>6}  {f['call']:<14} {f['ms']:>10.2f} {f['numpy_ms']:>10.2f} "
            f"{f['ratio']:>7.2f}"
        )


def print_particles(particles, log):
    header = (
        f"{'N':>6} {'M':>5} {'B':>6}  {'loop µs':>10} {'vectorised µs':>14} {'loop/vectorised':>16}"
    )
    log("grad_estimate_particles: per-particle loop against one vectorised call")
    log(header)
    log("-" * len(header))
    for r in particles:
        log(
            f"{fmt_n(r['N']):>6} {r['M']:>5} {r['B']:>6}  {r['loop_us']:>10.1f} "
            f"{r['vectorised_us']:>14.1f} {r['speedup']:>16.2f}"
        )


def evaluate_target(rows, log):
    """Per-B verdicts for the two halves of the target; returns them as dicts."""
    log(f"target: ratio <= {TARGET_RATIO:g} at B <= {TARGET_MAX_B}; µs at fixed B independent of N")
    log(
        f"  (independent of N: t(N_max)/t(N_min) <= {N_GROWTH_LIMIT:g}, or <= "
        f"{N_GROWTH_VS_FLOOR:g} x the NumPy floor's own growth)"
    )
    by_key = {(r["N"], r["B"], r["call"]): r for r in rows}
    ns = sorted({r["N"] for r in rows})
    verdicts = []
    for batch_size in sorted({r["B"] for r in rows}):
        at_b = [r for r in rows if r["B"] == batch_size]
        worst = max(at_b, key=lambda r: r["ratio"])
        ratio_ok = all(r["ratio"] <= TARGET_RATIO for r in at_b)
        if batch_size <= TARGET_MAX_B:
            ratio_text = "holds " if ratio_ok else "FAILS "
        else:
            ratio_text = "n/a   "
        ratio_text += f"(max {worst['ratio']:.2f}: {worst['call']} at N={fmt_n(worst['N'])})"

        growth = {}
        n_ok = True
        if len(ns) > 1:
            for call in CALLS:
                lo, hi = by_key[(ns[0], batch_size, call)], by_key[(ns[-1], batch_size, call)]
                g_mm, g_np = hi["us"] / lo["us"], hi["numpy_us"] / lo["numpy_us"]
                ok = g_mm <= N_GROWTH_LIMIT or g_mm <= N_GROWTH_VS_FLOOR * g_np
                growth[call] = {"adapter": g_mm, "numpy": g_np, "holds": ok}
                n_ok &= ok
            # the call closest to (or furthest past) its allowance
            worst_call = max(
                growth,
                key=lambda c: (
                    growth[c]["adapter"]
                    / max(N_GROWTH_LIMIT, N_GROWTH_VS_FLOOR * growth[c]["numpy"])
                ),
            )
            w = growth[worst_call]
            n_text = ("holds " if n_ok else "FAILS ") + (
                f"(worst x{w['adapter']:.2f} {worst_call}, NumPy x{w['numpy']:.2f}, "
                f"N={fmt_n(ns[0])} -> {fmt_n(ns[-1])})"
            )
        else:
            n_text = "n/a (one N only)"
        log(
            f"  B={batch_size:<6} ratio<={TARGET_RATIO:g}: {ratio_text:<48} N-independent: {n_text}"
        )
        verdicts.append(
            {
                "B": batch_size,
                "ratio_target_applies": batch_size <= TARGET_MAX_B,
                "ratio_holds": ratio_ok,
                "max_ratio": worst["ratio"],
                "n_independent_holds": n_ok if len(ns) > 1 else None,
                "n_growth": growth,
            }
        )
    applicable = [v for v in verdicts if v["ratio_target_applies"]]
    overall = all(v["ratio_holds"] for v in applicable) and all(
        v["n_independent_holds"] is not False for v in verdicts
    )
    log(f"  overall: target {'holds' if overall else 'does NOT hold'}")
    return verdicts, overall


def pytensor_settings():
    """The PyTensor settings that decide the adapter's per-call cost."""
    import pytensor

    return {
        "pytensor_linker": pytensor.config.linker,
        "pytensor_mode": str(pytensor.config.mode),
        "pytensor_blas_ldflags": pytensor.config.blas__ldflags,
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", default=str(RESULTS / "adapter_overhead.json"),
                        help="the results as JSON (default: %(default)s)")  # fmt: skip
    parser.add_argument(
        "--n-data",
        type=int,
        nargs="+",
        default=list(DEFAULT_N_DATA),
        metavar="N",
        help="numbers of rows (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=list(DEFAULT_BATCH_SIZES),
        metavar="B",
        help="batch sizes (default: %(default)s)",
    )
    parser.add_argument(
        "--particles",
        type=int,
        nargs="*",
        default=list(DEFAULT_PARTICLES),
        metavar="M",
        help="particle counts for grad_estimate_particles (default: %(default)s; none: skip)",
    )
    parser.add_argument(
        "--particle-batch-sizes",
        type=int,
        nargs="+",
        default=list(DEFAULT_PARTICLE_BATCH_SIZES),
        metavar="B",
        help="batch sizes for grad_estimate_particles (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=20260101, help="data and index seed")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    warnings.filterwarnings("ignore", message=".*could not link to a BLAS.*")
    warnings.filterwarnings("ignore", category=FutureWarning)

    def log(line=""):
        print(line, flush=True)

    start = time.perf_counter()
    env = {**environment(), **pytensor_settings()}
    log(
        f"adapter overhead: Python {env['python']}, PyMC {env['pymc']}, PyTensor "
        f"{env['pytensor']}, NumPy {env['numpy']}; linker={env['pytensor_linker']}, "
        f"blas_ldflags={env['pytensor_blas_ldflags'] or '(none)'}, {env['cores']} CPUs"
    )
    log(
        f"model: Bernoulli-logit regression, d={N_FEATURES}, beta ~ Normal(0, 1); "
        "idx uniform with replacement, pre-drawn"
    )

    rows, fulls, particles, setup = [], [], [], []
    for n_data in args.n_data:
        r, f, p, s = bench_n(
            n_data, args.batch_sizes, args.seed, log, args.particles, args.particle_batch_sizes
        )
        rows += r
        fulls.append(f)
        particles += p
        setup.append(s)
    log("")
    print_table(rows, fulls, log)
    if particles:
        log("")
        print_particles(particles, log)
    log("")
    verdicts, overall = evaluate_target(rows, log)
    total = time.perf_counter() - start
    log("")
    log(f"total runtime of main() (PyMC import, compilation, timing): {total:.1f} s")

    write_results(args.json, {
        "environment": env,
        "setup": setup,
        "rows": rows,
        "full_data": fulls,
        "particles": particles,
        "target": {
            "text": f"ratio <= {TARGET_RATIO:g} at B <= {TARGET_MAX_B}; "
            "µs at fixed B independent of N",
            "per_batch_size": verdicts,
            "holds": overall,
        },
        "total_runtime_s": total,
    })  # fmt: skip
    log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
