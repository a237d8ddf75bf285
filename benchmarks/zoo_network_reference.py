"""References of the zoo's network (``tests/support/zoo_network.py``): its predictive.

The network's weights have a multimodal posterior (unit permutations and sign flips), so
the reference summarises what every mode shares: the probabilities ``p[k] = P(y = 1 | x_k)``
at the held-out inputs, over long runs on the full data of two targets (``SETTINGS``):

- ``"posterior"``: the network's posterior, by NUTS (``pm.sample(draws=2000, tune=1000,
  chains=4, cores=1, target_accept=0.9)``);
- ``"tempered"``: MINT's target for batches of ``BATCH_SIZE`` rows and ``alpha`` 0.99, the
  posterior raised to ``1/T`` (prior tempered too; the network has no transforms, so no
  Jacobian), built as ``benchmarks/zoo_tempered_reference.py`` builds it: the model plus
  ``pm.Potential("tempering", (1 / T - 1) * model.logp(jacobian=False))``. By PyMC's
  random-walk Metropolis (``pm.sample(step=pm.Metropolis(), draws=10000, tune=2000,
  chains=4, cores=1)``), not NUTS: the tempered weights spread over tens (the tempered
  prior's sd is ``sqrt(T)`` = 12.8), where a unit's tanh switches within a small move and
  the curvature varies by orders of magnitude. NUTS diverged there, 46 times in 2 x 300
  draws at target_accept 0.95 and 301 times in 4 x 2000 at 0.99 (5314 s); a divergence
  marks a region it could not enter. Metropolis has none to hide one behind (it mixes
  slowly instead, which ESS and r_hat measure). The stored run's means of the ``p[k]``
  agree with that NUTS run's within 1.25 combined Monte Carlo standard errors, and its sds
  within 6%.

Both use a fixed ``random_seed``. Per target the file
``tests/support/zoo_network_reference.json`` stores, for every ``p[k]``, the ``mean``,
``sd`` (over all draws), ``mcse_mean`` and ``mcse_sd`` (``tests/support/mcse.py``, 6
significant digits), and the run (``"run"``): method and settings, versions, wall time,
minimum bulk and tail ESS and maximum r_hat of the ``p[k]``, divergences (NUTS), the
largest spread of the chains' means of a ``p[k]``, in sds (whether the chains' modes
predict alike), and the weights' maximum r_hat (large where chains settle in different
copies of the mode). The script warns when r_hat >= 1.01 or NUTS diverged.

How to regenerate
-----------------
From the repository root::

    python benchmarks/zoo_network_reference.py                # both targets (about an hour)
    python benchmarks/zoo_network_reference.py --targets tempered

``--targets`` replaces only those entries and keeps the others. The stored references were
generated with Python 3.11 and PyMC 5.28.5 on 2 cores (shared with other jobs: the wall
times are long).
"""

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm
import xarray as xr

from pymc_minibatch._compat import posterior, sample_stats
from pymc_minibatch.kernels.mint import tempering_settings

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # for ``tests.support`` when run as a script

from benchmarks.zoo_reference import summarise  # noqa: E402
from tests.support.zoo_network import (  # noqa: E402
    BATCH_SIZE,
    N_ROWS,
    REFERENCE_PATH,
    network_classifier,
    predictive_draws,
)

TARGETS = ["posterior", "tempered"]
ALPHA = 0.99
#: How each target is sampled (``pm.sample`` arguments; ``step`` names the step method).
SETTINGS = {
    "posterior": {"step": "NUTS", "draws": 2000, "tune": 1000, "target_accept": 0.9},
    "tempered": {"step": "Metropolis", "draws": 10000, "tune": 2000},
}


def tempered_network(temperature):
    """The network with log density ``logp / T`` (it has no transforms)."""
    model = network_classifier()
    with model:
        pm.Potential("tempering", (1.0 / temperature - 1.0) * model.logp(jacobian=False))
    return model


def diagnostics(columns, stats):
    """Minimum bulk and tail ESS and maximum r_hat of the ``p[k]``, and NUTS's divergences
    (0 for Metropolis)."""
    draws = xr.Dataset({label: (("chain", "draw"), v) for label, v in columns.items()})

    def extreme(values, pick):
        return float(f"{pick(float(v) for v in values.data_vars.values()):.6g}")

    divergences = int(stats["diverging"].sum()) if "diverging" in stats else 0
    return {
        "ess_bulk_min": extreme(az.ess(draws, method="bulk"), min),
        "ess_tail_min": extreme(az.ess(draws, method="tail"), min),
        "r_hat_max": extreme(az.rhat(draws), max),
        "divergences": divergences,
    }


def check_tempered_logp(model, temperature, n_points=3, seed=0):
    """Largest ``|tempered logp - logp / T|`` at random points."""
    base = network_classifier().compile_logp()
    tempered = model.compile_logp()
    rng = np.random.default_rng(seed)
    start = model.initial_point()
    error = 0.0
    for _ in range(n_points):
        point = {key: rng.normal(0.0, 1.0, size=np.shape(v)) for key, v in start.items()}
        error = max(error, abs(float(tempered(point)) - float(base(point)) / temperature))
    return error


def run_target(target, args):
    """Sample one target as ``SETTINGS`` says; return its reference entry."""
    entry = {"n_rows": N_ROWS}
    if target == "tempered":
        tempering = tempering_settings(N_ROWS, BATCH_SIZE, ALPHA)
        model = tempered_network(tempering.temperature)
        error = check_tempered_logp(model, tempering.temperature)
        if error > 1e-6:
            raise RuntimeError(f"the tempered logp is off by {error:.3g}")
        entry.update(batch_size=BATCH_SIZE, alpha=ALPHA, tau=tempering.tau,
                     temperature=tempering.temperature)  # fmt: skip
    else:
        model = network_classifier()
    settings = dict(SETTINGS[target])
    method = settings.pop("step")
    start = time.perf_counter()
    with model:
        step = pm.Metropolis() if method == "Metropolis" else None
        idata = pm.sample(
            step=step, chains=args.chains, cores=1, random_seed=args.seed, progressbar=False,
            compute_convergence_checks=False, **settings,
        )  # fmt: skip
    seconds = time.perf_counter() - start
    columns = predictive_draws(idata)
    summaries = summarise(columns)
    chain_means = np.array([values.mean(axis=1) for values in columns.values()])  # (K, chain)
    sds = np.array([summary["sd"] for summary in summaries.values()])
    stats = sample_stats(idata)
    run = {
        "step": method, **settings, "chains": args.chains, "random_seed": args.seed,
        "python": platform.python_version(), "pymc": pm.__version__, "arviz": az.__version__,
        "seconds": round(seconds, 1), **diagnostics(columns, stats),
        "chain_mean_spread_max_sd": float(f"{np.max(np.ptp(chain_means, axis=1) / sds):.6g}"),
        "weights_r_hat_max": float(f"{float(az.rhat(posterior(idata)).to_array().max()):.6g}"),
    }  # fmt: skip
    if method == "NUTS":
        run["tree_depth_mean"] = float(f"{float(np.mean(stats['tree_depth'])):.4g}")
    else:
        run["accept_rate"] = float(f"{float(np.mean(stats['accepted'])):.4g}")
    return {**entry, "run": run, "predictions": summaries}


def report(target, entry):
    """Print one target's run; warn if it did not converge cleanly."""
    run = entry["run"]
    print(
        f"{target:10s} {run['step']:10s} {run['seconds']:8.1f} s  "
        f"ess_bulk_min {run['ess_bulk_min']:8.0f}  ess_tail_min {run['ess_tail_min']:8.0f}  "
        f"r_hat_max {run['r_hat_max']:.4f}  "
        f"divergences {run['divergences']}  chain means within "
        f"{run['chain_mean_spread_max_sd']:.3f} sd",
        flush=True,
    )
    if run["r_hat_max"] >= 1.01 or run["divergences"] > 0:
        print(f"WARNING: {target}: {run['step']} did not converge cleanly", flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=TARGETS)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seed", type=int, default=20250)
    parser.add_argument("--output", type=Path, default=REFERENCE_PATH)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    stored = json.loads(args.output.read_text()) if args.output.exists() else {}
    for target in args.targets:
        stored[target] = run_target(target, args)
        report(target, stored[target])
        stored["about"] = (
            "References of the predictive of tests/support/zoo_network.py; regenerate "
            "with python benchmarks/zoo_network_reference.py"
        )
        ordered = {key: stored[key] for key in ["about", *TARGETS] if key in stored}
        args.output.write_text(json.dumps(ordered, indent=1) + "\n")


if __name__ == "__main__":
    main()
