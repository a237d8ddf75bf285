"""SVGD on a hierarchical model: momentum and particles, against NUTS's stored reference.

The centred varying-intercept logistic model of the hierarchical zoo with 1000 groups
(``tests/zoo_hierarchical.py``: 10^5 rows, 1006 parameters, 5% of the groups empty and 10%
with fewer than ten rows), ``pmm.sample_particles("svgd")`` at its defaults (100 particles,
1000 steps on uniform batches of 1000 rows, heavy-ball momentum 0.95 over the first 80%
of the steps: ``pmm.particles.GROUP_MOMENTUM``) and with 200 particles and other
``momentum``, ``n_steps`` and seeds, one core each. Per row: seconds, the group scale's
signed mean error in posterior sds (the Laplace start puts it at the joint mode, several
sds below its posterior mean, and the particles must carry it up), the largest |mean
error| over all scalars in posterior sds, the range of sd / NUTS sd, and whether the
answer check warned.
With ``M`` particles a mean's standard error is about ``1 / sqrt(M)`` posterior sd (if
they were independent draws): 0.1 with 100, 0.07 with 200.

Run: ``python benchmarks/particle_momentum.py`` (about 25 minutes on 2 cores: two runs at
a time; 200 particles take five times as long as 100). Writes ``--json`` (by default
``benchmarks/results/particle_momentum.json``, committed, with the machine, versions and
command).
"""

import argparse
import concurrent.futures
import pathlib
import sys
import time
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from hierarchical import compare, summarise  # noqa: E402
from run_record import RESULTS, environment, write_results  # noqa: E402

import pymc_minibatch as pmm  # noqa: E402
from tests.zoo_hierarchical import HIERARCHICAL_ZOO, hierarchical_reference  # noqa: E402

MODEL = "intercepts_logistic_G1000_centred"
SCALE = "tau"
#: ``(n_particles, momentum, n_steps, seed)`` of each run; "auto" is the default.
SETTINGS = (
    (200, "auto", 1000, 7),
    (200, "auto", 1000, 8),
    (100, "auto", 1000, 7),
    (100, "auto", 1000, 8),
    (100, 0.0, 1000, 7),
    (100, 0.0, 3000, 7),
    (100, 0.98, 1000, 7),
)


def _row(n_particles, momentum, n_steps, seed):
    model = HIERARCHICAL_ZOO[MODEL].build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.perf_counter()
        idata = pmm.sample_particles("svgd", n_particles=n_particles, momentum=momentum,
                                     n_steps=n_steps, model=model, random_seed=seed,
                                     progressbar=False)  # fmt: skip
        seconds = time.perf_counter() - started
    reference = hierarchical_reference(MODEL)
    summary = summarise(idata, particles=True)
    scale = (summary[SCALE]["mean"] - reference[SCALE]["mean"]) / reference[SCALE]["sd"]
    warned = any(issubclass(w.category, pmm.AnswerCheckWarning) for w in caught)
    attrs = idata["posterior"].attrs
    return {"n_particles": attrs["n_particles"], "momentum": attrs["momentum"],
            "n_steps": n_steps, "seed": seed, "seconds": seconds, "scale_error_sd": scale,
            "answer_check_warned": warned, **compare(summary, reference)}  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(RESULTS / "particle_momentum.json"))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time, one core each")
    args = parser.parse_args()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(_row, *zip(*SETTINGS, strict=True)))
    print(f"{'M':>4s} {'momentum':>8s} {'steps':>6s} {'seed':>4s} {'s':>6s} "
          f"{SCALE + ' err':>8s} {'max err':>8s} {'sd ratio':>11s} warned")  # fmt: skip
    for row in rows:
        print(f"{row['n_particles']:4d} {row['momentum']:8.2f} {row['n_steps']:6d} "
              f"{row['seed']:4d} {row['seconds']:6.1f} "
              f"{row['scale_error_sd']:8.3f} {row['max_mean_error_sd']:8.3f} "
              f"{row['sd_ratio_min']:5.2f}-{row['sd_ratio_max']:4.2f} "
              f"{row['answer_check_warned']}")  # fmt: skip
    write_results(args.json, {"model": MODEL, "environment": environment(), "runs": rows})
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
