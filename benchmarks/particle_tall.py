"""SVGD on a million rows and 1000 groups: stratified batches and momentum, against exact draws.

The centred varying-intercept logistic regression of ``benchmarks/hierarchical.py``
(``tests/support/zoo_hierarchical.py``, 1000 groups) on 10^6 rows, where the default batch
of 1000 rows makes the noise ratio ``r = N / B - 1`` 999 (99 on the 10^5 rows of the
hierarchical zoo). ``pmm.sample_particles("svgd")``, seed 1, one core each:

- ``defaults``: batches stratified by group (``stratify="auto"``: every group of one row
  whole, one row drawn from each larger group and weighted by its size) and plain steps
  (``momentum="auto"`` keeps no heavy ball at this ``r``);
- ``uniform``: uniform batches (``stratify=False``), plain steps, the defaults before
  stratified batches;
- ``uniform, momentum``: uniform batches and the heavy ball
  (``pmm.particles.GROUP_MOMENTUM``), the defaults before ``MOMENTUM_NOISE_LIMIT``.

The reference: ``pmm.TunaMH()`` (exact) at its defaults, 2 chains of 1000 tuning and 20,000
kept draws, seed 3 (nutpie's reference at this size takes half an hour:
``benchmarks/hierarchical.py``). Per run: seconds; the particles' root mean variance in
preconditioned units at the end and its largest over the steps (about 1 for particles that
follow the posterior); the group scale's particle mean and sd; against the reference, the
largest |mean error| in reference sds and the range of sd / reference sd over every scalar;
and the answer check's warning, if it fired.

Run: ``python benchmarks/particle_tall.py`` (about 6 minutes on 2 cores). Writes ``--json``
(by default ``benchmarks/results/particle_tall.json``, with the machine, versions and
command).
"""

import argparse
import concurrent.futures
import pathlib
import sys
import time
import warnings

import numpy as np
import pymc as pm

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from hierarchical import compare, summarise  # noqa: E402
from run_record import RESULTS, environment, write_results  # noqa: E402

import pymc_minibatch as pmm  # noqa: E402
from tests.support.zoo_hierarchical import intercepts_logistic  # noqa: E402

ROWS, GROUPS, SEED, REFERENCE_SEED, REFERENCE_DRAWS = 1_000_000, 1000, 1, 3, 20_000
RUNS = {
    "defaults": {},
    "uniform": {"stratify": False},
    "uniform, momentum": {"stratify": False, "momentum": pmm.particles.GROUP_MOMENTUM},
}


def _model():
    return intercepts_logistic(GROUPS, ROWS, centred=True)


def _reference():
    """The exact draws' summary (``hierarchical.summarise``) and their seconds."""
    started = time.perf_counter()
    with _model():
        idata = pm.sample(step=pmm.TunaMH(), draws=REFERENCE_DRAWS, tune=1000, chains=2,
                          cores=1, random_seed=REFERENCE_SEED, progressbar=False,
                          compute_convergence_checks=False)  # fmt: skip
    return summarise(idata, particles=False), time.perf_counter() - started


def _row(name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", pmm.AnswerCheckWarning)
        started = time.perf_counter()
        idata = pmm.sample_particles("svgd", model=_model(), random_seed=SEED,
                                     progressbar=False, **RUNS[name])  # fmt: skip
        seconds = time.perf_counter() - started
    posterior, spread = idata["posterior"], idata["sample_stats"]["spread"].values
    warned = [str(w.message) for w in caught if issubclass(w.category, pmm.AnswerCheckWarning)]
    return {"run": name, "seconds": seconds, "stratified": bool(posterior.attrs["stratified"]),
            "momentum": float(posterior.attrs["momentum"]),
            "n_particles": int(posterior.attrs["n_particles"]),
            "noise_ratio": ROWS / int(posterior.attrs["batch_size"]) - 1,
            "final_spread": float(spread[-1]), "largest_spread": float(np.nanmax(spread)),
            "tau_mean": float(posterior["tau"].mean()), "tau_sd": float(posterior["tau"].std()),
            "summary": summarise(idata, particles=True),
            "answer_check": " ".join(warned)}  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(RESULTS / "particle_tall.json"))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time, one core each")
    args = parser.parse_args()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        reference_future = pool.submit(_reference)
        futures = [pool.submit(_row, name) for name in RUNS]
        (reference, reference_seconds), rows = reference_future.result(), [
            future.result() for future in futures]  # fmt: skip
    for row in rows:
        row["accuracy"] = compare(row.pop("summary"), reference)
    ess = min(entry["ess"] for entry in reference.values())
    print(f"N = {ROWS}, G = {GROUPS}; reference: TunaMH, {reference_seconds:.1f} s, min ESS "
          f"{ess:.0f}, tau {reference['tau']['mean']:.4f} (sd {reference['tau']['sd']:.4f})")
    print("run, s, spread (final, largest), tau mean and sd, largest |mean error| (sd), "
          "sd ratio range, answer check")
    for row in rows:
        accuracy = row["accuracy"]
        print(f"{row['run']:18s} {row['seconds']:6.1f} {row['final_spread']:7.3f} "
              f"{row['largest_spread']:7.3f} {row['tau_mean']:7.4f} {row['tau_sd']:6.4f} "
              f"{accuracy['max_mean_error_sd']:6.3f} {accuracy['sd_ratio_min']:5.3f}-"
              f"{accuracy['sd_ratio_max']:5.3f}  {row['answer_check'][:100]}")  # fmt: skip
    write_results(args.json, {"rows": ROWS, "groups": GROUPS, "seed": SEED,
                              "environment": environment(),
                              "reference": {"sampler": "TunaMH", "draws": REFERENCE_DRAWS,
                                            "chains": 2, "seed": REFERENCE_SEED,
                                            "seconds": reference_seconds, "min_ess": ess,
                                            "tau": reference["tau"]},
                              "runs": rows})  # fmt: skip
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
