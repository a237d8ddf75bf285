"""SGLD on hierarchical models with batches stratified by group against uniform batches.

The centred varying-intercept logistic models of the hierarchical zoo
(``tests/support/zoo_hierarchical.py``: 10^5 rows, 100 or 1000 groups, 5% of them empty and 10% with
fewer than ten rows), ``pmm.SGLD(batch_size=1000)`` at its defaults with ``stratify=True``
and ``stratify=False``: 2 chains of 1000 tuning and 5000 kept draws, one core, seed 7.
Per row: the measured noise ratio ``r`` and the default step ``h`` it gives, setup and
sampling seconds, min and median bulk ESS over all scalars, ESS/s (min ESS over sampling
seconds), and against NUTS's stored reference (``tests/support/zoo_hierarchical_reference.json``)
the largest |mean error| in posterior sds, the largest in combined Monte Carlo standard
errors, and the range of sd / NUTS sd.

Run: ``python benchmarks/stratified_batches.py`` (about a minute on 2 cores). Writes ``--json``
(by default ``benchmarks/results/stratified_batches.json``, committed, with the machine,
versions and command).
"""

import argparse
import logging
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
from tests.support.zoo_hierarchical import HIERARCHICAL_ZOO, hierarchical_reference  # noqa: E402

MODELS = ("intercepts_logistic_G100_centred", "intercepts_logistic_G1000_centred")


def _row(name, stratify):
    model = HIERARCHICAL_ZOO[name].build()
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        started = time.perf_counter()
        step = pmm.SGLD(batch_size=1000, stratify=stratify)
        setup = time.perf_counter() - started
        started = time.perf_counter()
        idata = pm.sample(step=step, draws=5000, tune=1000, chains=2, cores=1, random_seed=7,
                          progressbar=False, compute_convergence_checks=False)  # fmt: skip
        sampling = time.perf_counter() - started
    summary = summarise(idata, particles=False)
    effective = np.array([entry["ess"] for entry in summary.values()])
    accuracy = compare(summary, hierarchical_reference(name))
    return {"model": name, "stratify": stratify, "noise_ratio": step.noise_ratio,
            "step_size": step.schedule(0), "setup_s": setup, "sampling_s": sampling,
            "min_ess": effective.min(), "median_ess": np.median(effective),
            "ess_per_s": effective.min() / sampling, **accuracy}  # fmt: skip


def _line(row):
    return (f"{row['model']:34s} {str(row['stratify']):6s} {row['noise_ratio']:7.3f} "
            f"{row['step_size']:6.3f} {row['setup_s']:6.1f} {row['sampling_s']:6.1f} "
            f"{row['min_ess']:7.0f} {row['median_ess']:7.0f} {row['ess_per_s']:7.1f} "
            f"{row['max_mean_error_sd']:6.3f} {row['max_mean_error_mcse']:6.2f} "
            f"{row['sd_ratio_min']:5.2f}-{row['sd_ratio_max']:4.2f}")  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(RESULTS / "stratified_batches.json"))
    args = parser.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    header = (f"{'model':34s} {'strat':6s} {'r':>7s} {'h':>6s} {'setup':>6s} {'samp s':>6s} "
              f"{'minESS':>7s} {'medESS':>7s} {'ESS/s':>7s} {'dmean':>6s} {'max z':>6s}")
    print(header, "sd ratio")
    rows = []
    for name in MODELS:
        for stratify in (True, False):
            rows.append(_row(name, stratify))
            print(_line(rows[-1]), flush=True)
    write_results(args.json, {"environment": environment(), "runs": rows})
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
