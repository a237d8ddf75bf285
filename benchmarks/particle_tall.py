"""SVGD's momentum on a million rows: the heavy ball against the minibatch gradients' noise.

The centred varying-intercept logistic regression of ``benchmarks/hierarchical.py``
(``tests/support/zoo_hierarchical.py``, 1000 groups) on 10^6 rows, where the default batch
of 1000 rows makes the noise ratio ``r = N / B - 1`` 999 (99 on the 10^5 rows of the
hierarchical zoo). ``pmm.sample_particles("svgd")`` at its defaults but for ``momentum``:
0.95 (``pmm.particles.GROUP_MOMENTUM``) and 0, seed 1, one core each.

Per run: seconds; the particles' root mean variance in preconditioned units at the end and
its largest over the steps (about 1 for particles that follow the posterior); the group
scale's particle mean and sd; the group effects' largest particle sd; and the answer
check's warning, if it fired. No NUTS reference at this size here (nutpie's takes half an
hour: ``benchmarks/hierarchical.py``): a run whose particles ran away shows it without one.

Run: ``python benchmarks/particle_tall.py`` (about 5 minutes on 2 cores). Writes ``--json``
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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from run_record import RESULTS, environment, write_results  # noqa: E402

import pymc_minibatch as pmm  # noqa: E402
from tests.support.zoo_hierarchical import intercepts_logistic  # noqa: E402

ROWS, GROUPS, SEED = 1_000_000, 1000, 1
MOMENTA = (pmm.particles.GROUP_MOMENTUM, 0.0)


def _row(momentum):
    model = intercepts_logistic(GROUPS, ROWS, centred=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", pmm.AnswerCheckWarning)
        started = time.perf_counter()
        idata = pmm.sample_particles("svgd", momentum=momentum, model=model, random_seed=SEED,
                                     progressbar=False)  # fmt: skip
        seconds = time.perf_counter() - started
    posterior, spread = idata["posterior"], idata["sample_stats"]["spread"].values
    warned = [str(w.message) for w in caught if issubclass(w.category, pmm.AnswerCheckWarning)]
    return {"momentum": momentum, "seconds": seconds,
            "n_particles": int(posterior.attrs["n_particles"]),
            "noise_ratio": ROWS / int(posterior.attrs["batch_size"]) - 1,
            "final_spread": float(spread[-1]), "largest_spread": float(np.nanmax(spread)),
            "tau_mean": float(posterior["tau"].mean()), "tau_sd": float(posterior["tau"].std()),
            "largest_group_sd": float(posterior["a"].std(("chain", "draw")).max()),
            "answer_check": " ".join(warned)}  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(RESULTS / "particle_tall.json"))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time, one core each")
    args = parser.parse_args()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(_row, MOMENTA))
    print(f"N = {ROWS}, G = {GROUPS}: momentum, s, spread (final, largest), tau mean and sd, "
          "largest group sd, answer check")  # fmt: skip
    for row in rows:
        print(f"{row['momentum']:4.2f} {row['seconds']:6.1f} {row['final_spread']:7.3f} "
              f"{row['largest_spread']:7.3f} {row['tau_mean']:7.3f} {row['tau_sd']:6.3f} "
              f"{row['largest_group_sd']:7.3f}  {row['answer_check'][:120]}")  # fmt: skip
    write_results(args.json, {"rows": ROWS, "groups": GROUPS, "seed": SEED,
                              "environment": environment(), "runs": rows})  # fmt: skip
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
