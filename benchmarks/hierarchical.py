"""A hierarchical model on tall data: time to the answer of TunaMH, SGLD and SVGD against NUTS.

The centred varying-intercept logistic regression of the hierarchical zoo
(``tests/support/zoo_hierarchical.py``: ``a[g] + X @ beta`` with 4 covariates, ``a ~ Normal(mu,
tau)``, 5% of the groups empty and 10% with fewer than ten rows, the rest log-normally
sized) at ``--rows`` rows and each of ``--groups``. Every group here has many rows on
average, so the centred form is also NUTS's better parametrisation.

Samplers, one after the other in this process, each on one core and 2 chains:

- ``nuts``: PyMC's NUTS, ``--nuts-draws`` (default 1000) tuning and as many kept draws per
  chain;
- ``nutpie``: nutpie's NUTS (PyMC 6's default when installed), the same draws; its
  compilation counts as setup;
- ``tunamh``: ``pmm.TunaMH()`` at its defaults (group moves on a hierarchical model), 1000
  tuning and 5000 kept draws;
- ``tunamh_unblocked``: the same with ``group_moves=False`` (every parameter moved at once,
  the default before group moves);
- ``sgld``: ``pmm.SGLD(batch_size=1000)`` at its defaults (stratified batches), the same;
- ``sghmc``: ``pmm.SGHMC(batch_size=1000)``, likewise (the preset the docs recommend on
  many groups);
- ``svgd``: ``pmm.sample_particles("svgd")`` at its defaults (its particles are the draws:
  no ESS; one kernel per coordinate here, as the model has more coordinates than
  particles; batches stratified by group);
- ``svgd_joint``: the same with the joint RBF kernel (``kernel="joint"``), the default
  before the per-coordinate kernel, whose particles collapse in this dimension.

For the particle rows, ``answer_check`` holds the answer check's warning, if it fired.

Per row: setup seconds (building the step: structure, Laplace fit, bounds; nutpie's
compilation; PyMC's NUTS compiles inside ``pm.sample`` and its setup is counted in its
total), total wall seconds (setup included), min bulk ESS over every scalar, ESS per
second of the total, rows per step (TunaMH's mean batch, with its moves' acceptance rates),
and against the reference (nutpie
when it ran, else PyMC's NUTS) the largest |mean error| in reference sds, the largest in
combined Monte Carlo standard errors, and the range of sd / reference sd. For TunaMH the
Laplace fit's full-data passes and seconds are printed, and its peak resident memory in the
setup (the Laplace fit on all rows and the bounds; the data already in memory count) and
over the whole row. Each row's peak memory is its own (reset before it, on Linux).

Results go to ``--json`` (default ``benchmarks/results/hierarchical.json``, rewritten
after every sampler). The committed results came from one process per group count, side
by side on a 2-core machine (``pip install -e ".[bench]"`` installs nutpie)::

    python benchmarks/hierarchical.py --rows 100000 --groups 100 \
        --json benchmarks/results/hierarchical_N1e5_G100.json
    python benchmarks/hierarchical.py --rows 100000 --groups 1000 \
        --samplers nutpie tunamh tunamh_unblocked sgld svgd svgd_joint \
        --json benchmarks/results/hierarchical_N1e5_G1000.json
    python benchmarks/hierarchical.py --rows 1000000 --groups 100 --nuts-draws 500 \
        --samplers nutpie tunamh sgld sghmc svgd \
        --json benchmarks/results/hierarchical_N1e6_G100.json
    python benchmarks/hierarchical.py --rows 1000000 --groups 1000 --nuts-draws 500 \
        --samplers nutpie tunamh sgld sghmc svgd \
        --json benchmarks/results/hierarchical_N1e6_G1000.json

The results record the machine (CPU model, cores), the versions and the command.

(PyMC's NUTS is left out at 1000 groups and at a million rows for time, nutpie is the
reference there; at a million rows nutpie takes 500 tuning and 500 kept draws per chain, as
its gradients read every row: those took 1542 s at 1000 groups, in the committed results.)

Each NUTS gradient sums over every row, so the NUTS rows' time grows in proportion to
``--rows``; the minibatch samplers' sampling time does not.
"""

import argparse
import logging
import pathlib
import resource
import sys
import time
import warnings

import numpy as np
import pymc as pm

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from run_record import RESULTS, environment, write_results  # noqa: E402

import pymc_minibatch as pmm  # noqa: E402
from pymc_minibatch._compat import sample_stats  # noqa: E402
from tests.support.mcse import ess, mcse_mean  # noqa: E402
from tests.support.zoo import scalar_draws  # noqa: E402
from tests.support.zoo_hierarchical import intercepts_logistic  # noqa: E402

SAMPLERS = ("nuts", "nutpie", "tunamh", "tunamh_unblocked", "sgld", "sghmc", "svgd",
            "svgd_joint")
SG_PRESETS = {"sgld": pmm.SGLD, "sghmc": pmm.SGHMC}
PARTICLES = {"svgd": "auto", "svgd_joint": "joint"}
MINIBATCH_DRAWS, TUNE, CHAINS, SEED = 5000, 1000, 2, 1


def _sample(model, step, draws, tune=TUNE):
    return pm.sample(step=step, draws=draws, tune=tune, chains=CHAINS, cores=1,
                     random_seed=SEED, progressbar=False, compute_convergence_checks=False,
                     model=model)  # fmt: skip


def run_sampler(name, model, nuts_draws):
    """``(result, extra)``: the draws and what the row reports besides them."""
    reset_peak_memory()
    started = time.perf_counter()
    extra = {}
    if name == "nuts":
        idata = _sample(model, None, nuts_draws, tune=nuts_draws)
        setup = 0.0
    elif name == "nutpie":
        import nutpie

        compiled = nutpie.compile_pymc_model(model)
        setup = time.perf_counter() - started
        idata = nutpie.sample(compiled, draws=nuts_draws, tune=nuts_draws, chains=CHAINS,
                              cores=1, seed=SEED, progress_bar=False)  # fmt: skip
    elif name in PARTICLES:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pmm.AnswerCheckWarning)
            idata = pmm.sample_particles("svgd", kernel=PARTICLES[name], model=model,
                                        random_seed=SEED, progressbar=False)  # fmt: skip
        extra["answer_check"] = " ".join(
            str(w.message) for w in caught if issubclass(w.category, pmm.AnswerCheckWarning)
        )
        setup = 0.0
    else:
        with model:
            step = (pmm.TunaMH(group_moves=name == "tunamh" and "auto")
                    if name.startswith("tunamh")
                    else SG_PRESETS[name](batch_size=1000))  # fmt: skip
        setup = time.perf_counter() - started
        setup_memory = peak_memory_gb()
        idata = _sample(model, step, MINIBATCH_DRAWS)
        if name.startswith("tunamh"):
            stats = sample_stats(idata)
            extra = {
                "rows_per_step": float(stats["batch_size"].mean()),
                "laplace_passes": int(step.laplace.passes),
                "laplace_seconds": float(step.laplace.seconds),
                "setup_peak_memory_gb": setup_memory,
            }
            if step.group_moves is None:
                extra["accept"] = float(stats["accepted"].mean())
            else:
                for move in ("group", "shared", "population"):
                    extra[f"{move}_accept"] = float(stats[f"{move}_accept"].mean())
    extra["setup_s"] = setup
    extra["total_s"] = time.perf_counter() - started
    return idata, extra


def summarise(idata, particles):
    """Per scalar: mean, sd, and (for chains) bulk ESS and MCSE of the mean."""
    summary = {}
    for label, values in scalar_draws(idata).items():
        entry = {"mean": float(values.mean()), "sd": float(values.std())}
        if not particles:
            entry["ess"] = ess(values)
            entry["mcse_mean"] = mcse_mean(values)
        summary[label] = entry
    return summary


def compare(summary, reference):
    """Largest |mean error| in reference sds and in combined MCSE; sd ratio range."""
    errors, z_scores, ratios = [], [], []
    for label, ref in reference.items():
        if label not in summary:  # nutpie also stores the transformed values
            continue
        ours = summary[label]
        difference = abs(ours["mean"] - ref["mean"])
        errors.append(difference / ref["sd"])
        if "mcse_mean" in ours:  # chains; particles have no Monte Carlo standard error
            z_scores.append(difference / np.hypot(ours["mcse_mean"], ref["mcse_mean"]))
        ratios.append(ours["sd"] / ref["sd"])
    return {"max_mean_error_sd": max(errors),
            "max_mean_error_mcse": max(z_scores) if z_scores else None,
            "sd_ratio_min": min(ratios), "sd_ratio_max": max(ratios)}  # fmt: skip


_STATUS, _CLEAR_REFS = pathlib.Path("/proc/self/status"), pathlib.Path("/proc/self/clear_refs")


def reset_peak_memory():
    """Start the process's peak resident memory afresh (Linux), so each row has its own."""
    if _CLEAR_REFS.exists():
        _CLEAR_REFS.write_text("5")


def peak_memory_gb():
    """Peak resident memory in GB since `reset_peak_memory` (Linux), else of the process."""
    if _STATUS.exists():
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1e6  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def print_row(row):
    ess_text = f"{row['min_ess']:8.0f} {row['ess_per_s']:8.2f}" if "min_ess" in row else (
        f"{'-':>8s} {'-':>8s}")  # fmt: skip
    accuracy = row.get("accuracy")
    accuracy_text = "reference"
    if accuracy:
        z = accuracy["max_mean_error_mcse"]
        z_text = "-" if z is None else format(z, ".2f")
        accuracy_text = (f"{accuracy['max_mean_error_sd']:6.3f} {z_text:>6s} "
                         f"{accuracy['sd_ratio_min']:5.2f}-{accuracy['sd_ratio_max']:4.2f}")
    rows = f"{row['rows_per_step']:9.0f}" if "rows_per_step" in row else f"{'-':>9s}"
    print(f"G={row['groups']:<5d} {row['sampler']:10s} {row['setup_s']:7.1f} {row['total_s']:8.1f} "
          f"{ess_text} {rows}  {accuracy_text}", flush=True)  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, nargs="+", default=[100])
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    parser.add_argument("--nuts-draws", type=int, default=1000,
                        help="tuning and kept draws per chain of each NUTS row")
    parser.add_argument("--json", default=str(RESULTS / "hierarchical.json"))
    args = parser.parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    # the reference first (nutpie if asked for, else PyMC's NUTS), PyMC's NUTS otherwise last
    rank = {"nutpie": 0, "nuts": 3 if "nutpie" in args.samplers else 1}
    order = sorted(args.samplers, key=lambda s: rank.get(s, 2))
    results = {"rows": args.rows, "draws": {"nuts": args.nuts_draws, "minibatch": MINIBATCH_DRAWS,
               "tune": TUNE, "chains": CHAINS}, "environment": environment(("nutpie",)),
               "runs": []}  # fmt: skip
    print(f"N = {args.rows}; setup and total in s, ESS/s over the total, accuracy against "
          "the first NUTS row: max |mean error| (ref sd), (combined MCSE), sd / ref sd")
    print(f"{'groups':7s} {'sampler':10s} {'setup':>7s} {'total':>8s} {'min ESS':>8s} "
          f"{'ESS/s':>8s} {'rows/step':>9s}  accuracy")  # fmt: skip
    for n_groups in args.groups:
        reference = None
        for name in order:
            model = intercepts_logistic(n_groups, args.rows, centred=True)
            idata, extra = run_sampler(name, model, args.nuts_draws)
            summary = summarise(idata, particles=name in PARTICLES)
            row = {"groups": n_groups, "sampler": name, **extra,
                   "peak_memory_gb": peak_memory_gb()}  # fmt: skip
            if name not in PARTICLES:
                row["min_ess"] = min(entry["ess"] for entry in summary.values())
                row["ess_per_s"] = row["min_ess"] / row["total_s"]
            if reference is None and name in ("nutpie", "nuts"):
                reference = summary
            elif reference is not None:
                row["accuracy"] = compare(summary, reference)
            print_row(row)
            if row.get("answer_check"):
                print(f"    answer check: {row['answer_check'][:160]}...")
            if "laplace_passes" in row:
                accepts = ", ".join(f"{key.removesuffix('_accept')} {value:.3f}"
                                    for key, value in row.items() if key.endswith("accept"))
                print(f"    TunaMH: accept {accepts}; Laplace fit {row['laplace_passes']} "
                      f"full-data passes in {row['laplace_seconds']:.1f} s; "
                      f"peak memory {row['setup_peak_memory_gb']:.2f} GB in the setup (data "
                      f"included), {row['peak_memory_gb']:.2f} GB in all")  # fmt: skip
            results["runs"].append(row)
            write_results(args.json, results)


if __name__ == "__main__":
    main()
