"""NUTS reference posteriors of the hierarchical zoo models (``tests/support/zoo_hierarchical.py``).

For each family and group count, NUTS samples the *centred* model on the zoo's rows (nutpie's
NUTS when nutpie is installed, else ``pm.sample``'s; 4 chains of 2000 draws after 1000 tuning
steps, a fixed seed). Stored per scalar, as ``benchmarks/zoo_reference.py`` stores them: the
posterior ``mean``, ``sd`` and the Monte Carlo standard errors of ``tests/support/mcse.py``, under
``"parameters"`` for the centred model's variables (``a``, ``b`` and the hyperparameters) and
under ``"noncentred_parameters"`` for the non-centred model's (``z_a = (a - mu) / tau`` from
the same draws, and the rest unchanged). The same posterior in the other coordinates: the
non-centred model has no reference run of its own, whose NUTS mixes badly when groups are
large (the reason this zoo exists).

Each entry also records the run (sampler, settings, versions, wall time, minimum bulk and tail
ESS, maximum r_hat, divergences); the script warns where r_hat >= 1.01 or NUTS diverged.

How to regenerate
-----------------
From the repository root (the ``bench`` extra installs nutpie)::

    python benchmarks/zoo_hierarchical_reference.py               # all four (about 20 min)
    python benchmarks/zoo_hierarchical_reference.py --families slopes_normal --groups 1000
"""

import argparse
import importlib.util
import json
import platform
import sys
import time
from pathlib import Path

import arviz as az
import pymc as pm

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # for ``tests`` when run as a script

from benchmarks.zoo_reference import diagnostics, summarise  # noqa: E402
from tests.support.zoo import scalar_draws  # noqa: E402
from tests.support.zoo_hierarchical import (  # noqa: E402
    FAMILIES,
    GROUP_COUNTS,
    N_ROWS,
    REFERENCE_PATH,
    model_name,
)


def sample_nuts(model, args):
    """``(idata, sampler name)`` of NUTS on ``model``: nutpie's if installed, else PyMC's."""
    if importlib.util.find_spec("nutpie") is not None and not args.pymc_nuts:
        import nutpie

        compiled = nutpie.compile_pymc_model(model)
        idata = nutpie.sample(
            compiled, draws=args.draws, tune=args.tune, chains=args.chains, cores=1,
            seed=args.seed, target_accept=args.target_accept, progress_bar=False,
        )  # fmt: skip
        return idata, f"nutpie {nutpie.__version__}"
    with model:
        idata = pm.sample(
            draws=args.draws, tune=args.tune, chains=args.chains, cores=1,
            random_seed=args.seed, target_accept=args.target_accept, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    return idata, f"pymc {pm.__version__}"


def noncentred_columns(columns, effects):
    """The non-centred model's scalars from the centred model's: ``z_a = (a - mu) / tau`` for
    every group effect ``a`` with hyperparameters ``(mu, tau)``, the rest as they are."""
    out = dict(columns)
    for effect, (mu, tau) in effects.items():
        labels = [label for label in columns if label.startswith(f"{effect}[")]
        for label in labels:
            out[f"z_{label}"] = (columns[label] - columns[mu]) / columns[tau]
    return out


def run(family, n_groups, args):
    build, effects = FAMILIES[family]
    model = build(n_groups, N_ROWS, centred=True)
    start = time.perf_counter()
    idata, sampler = sample_nuts(model, args)
    seconds = time.perf_counter() - start
    names = [rv.name for rv in model.free_RVs]
    columns = scalar_draws(idata, names)
    run_info = {
        "sampler": sampler, "draws": args.draws, "tune": args.tune, "chains": args.chains,
        "target_accept": args.target_accept, "random_seed": args.seed,
        "python": platform.python_version(), "pymc": pm.__version__, "arviz": az.__version__,
        "seconds": round(seconds, 1), **diagnostics(columns, idata),
    }  # fmt: skip
    return {
        "n_rows": N_ROWS,
        "n_groups": n_groups,
        "nuts": run_info,
        "parameters": summarise(columns),
        "noncentred_parameters": summarise(noncentred_columns(columns, effects)),
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--groups", nargs="+", type=int, choices=GROUP_COUNTS,
                        default=list(GROUP_COUNTS))  # fmt: skip
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--target-accept", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--pymc-nuts", action="store_true", help="PyMC's NUTS even with nutpie")
    parser.add_argument("--output", type=Path, default=REFERENCE_PATH)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    stored = json.loads(args.output.read_text()) if args.output.exists() else {}
    models = stored.get("models", {})
    for family in args.families:
        for n_groups in args.groups:
            name = model_name(family, n_groups, centred=True)
            models[name] = entry = run(family, n_groups, args)
            info = entry["nuts"]
            print(
                f"{name:40s} {info['seconds']:8.1f} s  ess_bulk_min {info['ess_bulk_min']:7.0f}"
                f"  ess_tail_min {info['ess_tail_min']:7.0f}  r_hat_max {info['r_hat_max']:.4f}"
                f"  divergences {info['divergences']}",
                flush=True,
            )
            if info["r_hat_max"] >= 1.01 or info["divergences"] > 0:
                print(f"WARNING: {name}: NUTS did not converge cleanly", flush=True)
            stored = {
                "about": "NUTS reference posteriors of tests/support/zoo_hierarchical.py; "
                "regenerate with python benchmarks/zoo_hierarchical_reference.py",
                "models": dict(sorted(models.items())),
            }
            # one line: the group effects make thousands of entries
            args.output.write_text(json.dumps(stored, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
