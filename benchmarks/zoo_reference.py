"""NUTS reference posteriors of the model zoo (``tests/support/zoo.py``) on the full data.

For every zoo model but ``normal_mean`` (whose reference is closed-form) this runs
``pm.sample(draws=2000, tune=1000, chains=4, cores=1, target_accept=0.9)`` with a fixed
``random_seed``, and stores per scalar of every free variable (constrained space, labelled
``"beta[0]"`` as in ``pmm.compare``) the posterior ``mean``, ``sd`` (over all draws) and the
Monte Carlo standard errors ``mcse_mean`` and ``mcse_sd`` of ``tests/support/mcse.py``,
rounded to 6 significant digits, in ``tests/support/zoo_reference.json``. Each model's entry
also records the run: settings, Python/PyMC/ArviZ versions, wall time of ``pm.sample``
(compilation and tuning included), minimum bulk and tail ESS, maximum r_hat and the number
of divergences. The script
prints these per model and warns when r_hat >= 1.01 or NUTS diverged.

How to regenerate
-----------------
From the repository root::

    python benchmarks/zoo_reference.py                          # every model (about an hour)
    python benchmarks/zoo_reference.py --models mixture gamma_regression

``--models`` replaces only those models' entries and keeps the others. The stored references
were generated with Python 3.11, PyMC 5.28.5 and ArviZ 0.23.4 on 2 cores, one model per run.
"""

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import arviz as az
import pymc as pm
import xarray as xr

from pymc_minibatch._compat import sample_stats

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # for ``tests.support.zoo`` when run as a script

from tests.support.mcse import mcse_mean, mcse_sd  # noqa: E402
from tests.support.zoo import REFERENCE_PATH, ZOO, scalar_draws  # noqa: E402

#: Models whose reference is a NUTS run (``normal_mean`` has a closed form).
NUTS_MODELS = [name for name in ZOO if name != "normal_mean"]


def _round(value):
    return float(f"{value:.6g}")


def summarise(columns):
    """Per-scalar ``mean``, ``sd``, ``mcse_mean``, ``mcse_sd`` of ``(chain, draw)`` arrays."""
    return {
        label: {
            "mean": _round(draws.mean()),
            "sd": _round(draws.std()),
            "mcse_mean": _round(mcse_mean(draws)),
            "mcse_sd": _round(mcse_sd(draws)),
        }
        for label, draws in columns.items()
    }


def diagnostics(columns, idata):
    """Minimum bulk and tail ESS, maximum r_hat and divergences of a run."""
    draws = xr.Dataset({label: (("chain", "draw"), v) for label, v in columns.items()})

    def extreme(values, pick):
        return _round(pick(float(v) for v in values.data_vars.values()))

    return {
        "ess_bulk_min": extreme(az.ess(draws, method="bulk"), min),
        "ess_tail_min": extreme(az.ess(draws, method="tail"), min),
        "r_hat_max": extreme(az.rhat(draws), max),
        "divergences": int(sample_stats(idata)["diverging"].sum()),
    }


def run_nuts(name, args):
    """Sample zoo model ``name`` with NUTS; return its reference entry."""
    model = ZOO[name].build()
    start = time.perf_counter()
    with model:
        idata = pm.sample(
            draws=args.draws, tune=args.tune, chains=args.chains, cores=1,
            random_seed=args.seed, target_accept=args.target_accept, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    seconds = time.perf_counter() - start
    columns = scalar_draws(idata, [rv.name for rv in model.free_RVs])
    run = {
        "draws": args.draws, "tune": args.tune, "chains": args.chains,
        "target_accept": args.target_accept, "random_seed": args.seed,
        "python": platform.python_version(), "pymc": pm.__version__, "arviz": az.__version__,
        "seconds": round(seconds, 1), **diagnostics(columns, idata),
    }  # fmt: skip
    return {"n_rows": ZOO[name].n_rows, "nuts": run, "parameters": summarise(columns)}


def report(name, entry):
    """Print one model's run; warn if NUTS did not converge cleanly."""
    run = entry["nuts"]
    print(
        f"{name:24s} {run['seconds']:8.1f} s  ess_bulk_min {run['ess_bulk_min']:8.0f}  "
        f"ess_tail_min {run['ess_tail_min']:8.0f}  r_hat_max {run['r_hat_max']:.4f}  "
        f"divergences {run['divergences']}",
        flush=True,
    )
    if run["r_hat_max"] >= 1.01 or run["divergences"] > 0:
        print(f"WARNING: {name}: NUTS did not converge cleanly", flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=NUTS_MODELS, default=NUTS_MODELS)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--target-accept", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=20250)
    parser.add_argument("--output", type=Path, default=REFERENCE_PATH)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    stored = json.loads(args.output.read_text()) if args.output.exists() else {}
    models = stored.get("models", {})
    for name in args.models:
        models[name] = run_nuts(name, args)
        report(name, models[name])
        stored = {
            "about": "NUTS reference posteriors of tests/support/zoo.py; "
            "regenerate with python benchmarks/zoo_reference.py",
            "models": {key: models[key] for key in NUTS_MODELS if key in models},
        }
        args.output.write_text(json.dumps(stored, indent=1) + "\n")


if __name__ == "__main__":
    main()
