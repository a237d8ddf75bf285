"""SVGD on hierarchical models: momentum, particles and steps, against NUTS's stored reference.

Two models of the hierarchical zoo (``tests/support/zoo_hierarchical.py``, 10^5 rows, 1000 groups,
5% of them empty and 10% with fewer than ten rows), both centred:
``intercepts_logistic_G1000_centred`` (1006 parameters, the group scale ``tau``) and
``slopes_normal_G1000_centred`` (2007 parameters, a varying intercept and slope, the group
scales ``tau_a`` and ``tau_b``). ``pmm.sample_particles("svgd")`` runs at its defaults (100
particles, 1000 steps on uniform batches of 1000 rows, the kernel per coordinate with its
linear part, ``pmm.kernels.particle_velocities.LINEAR_WEIGHT``, heavy-ball momentum 0.95 over the
first 80% of the steps: ``pmm.particles.GROUP_MOMENTUM``)
and with other ``n_particles``, ``momentum``, ``n_steps``, linear weights (0: the RBF
kernel alone, the kernel before the linear part) and seeds, one core each. Per row:
seconds, each group scale's signed mean error in posterior sds (the Laplace start puts it
at the joint mode, several sds below its posterior mean, and the particles must carry it
up), the largest |mean error| over all scalars in posterior sds, the range of sd / NUTS sd,
and whether the answer check warned.
With ``M`` particles a mean's standard error is about ``1 / sqrt(M)`` posterior sd (if
they were independent draws): 0.1 with 100, 0.07 with 200.

Run: ``python benchmarks/particle_momentum.py`` (about half an hour on 2 cores: two runs
at a time). Writes ``--json`` (by default ``benchmarks/results/particle_momentum.json``,
with the machine, versions and command). Committed: ``particle_momentum.json`` from the
first 13 settings, and ``particle_momentum_1000.json`` from the last two, added after
(``--only 13 14 --json benchmarks/results/particle_momentum_1000.json``).
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
from pymc_minibatch.kernels import particle_velocities  # noqa: E402
from tests.support.zoo_hierarchical import HIERARCHICAL_ZOO, hierarchical_reference  # noqa: E402

INTERCEPTS, SLOPES = "intercepts_logistic_G1000_centred", "slopes_normal_G1000_centred"
#: Each model's group scales.
SCALES = {INTERCEPTS: ("tau",), SLOPES: ("tau_a", "tau_b")}
DEFAULT_LINEAR_WEIGHT = particle_velocities.LINEAR_WEIGHT
#: ``(model, n_particles, momentum, n_steps, linear_weight, seed)`` of each run; "auto" and
#: None are the defaults (None: ``pmm.kernels.particle_velocities.LINEAR_WEIGHT``).
SETTINGS = (
    (INTERCEPTS, 100, "auto", 3000, None, 7),
    (INTERCEPTS, 100, "auto", 3000, None, 8),
    (INTERCEPTS, 100, "auto", 1000, None, 7),
    (INTERCEPTS, 100, "auto", 3000, 0.0, 7),
    (INTERCEPTS, 100, "auto", 3000, 0.0, 8),
    (INTERCEPTS, 100, "auto", 1000, 0.0, 7),
    (INTERCEPTS, 200, "auto", 3000, 0.0, 7),
    (INTERCEPTS, 100, 0.0, 3000, None, 7),
    (INTERCEPTS, 100, 0.98, 3000, None, 7),
    (SLOPES, 100, "auto", 3000, None, 7),
    (SLOPES, 100, "auto", 3000, None, 8),
    (SLOPES, 100, "auto", 1000, None, 7),
    (SLOPES, 100, "auto", 3000, 0.0, 7),
    (INTERCEPTS, 100, 0.0, 1000, None, 7),
    (SLOPES, 100, "auto", 1000, 0.0, 7),
)


def _row(name, n_particles, momentum, n_steps, linear_weight, seed):
    # set for every run: a worker process runs several
    particle_velocities.LINEAR_WEIGHT = (
        DEFAULT_LINEAR_WEIGHT if linear_weight is None else linear_weight
    )
    model = HIERARCHICAL_ZOO[name].build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.perf_counter()
        idata = pmm.sample_particles("svgd", n_particles=n_particles, momentum=momentum,
                                     n_steps=n_steps, model=model, random_seed=seed,
                                     progressbar=False)  # fmt: skip
        seconds = time.perf_counter() - started
    reference = hierarchical_reference(name)
    summary = summarise(idata, particles=True)
    scales = {label: (summary[label]["mean"] - reference[label]["mean"]) / reference[label]["sd"]
              for label in SCALES[name]}  # fmt: skip
    warned = any(issubclass(w.category, pmm.AnswerCheckWarning) for w in caught)
    attrs = idata["posterior"].attrs
    return {"model": name, "n_particles": attrs["n_particles"], "momentum": attrs["momentum"],
            "n_steps": attrs["n_steps"], "linear_weight": particle_velocities.LINEAR_WEIGHT,
            "seed": seed, "seconds": seconds, "scale_errors_sd": scales,
            "answer_check_warned": warned, **compare(summary, reference)}  # fmt: skip


def _cost(settings):
    name, n_particles, _, n_steps, _, _ = settings
    return n_particles**2 * n_steps * len(SCALES[name])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(RESULTS / "particle_momentum.json"))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time, one core each")
    parser.add_argument("--only", type=int, nargs="+", help="run these SETTINGS (0-based)")
    args = parser.parse_args()
    chosen = SETTINGS if args.only is None else [SETTINGS[i] for i in args.only]
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        # the longest runs first (particles^2 x steps x coordinates), to keep both cores busy
        futures = {settings: pool.submit(_row, *settings)
                   for settings in sorted(chosen, key=_cost, reverse=True)}  # fmt: skip
        rows = [futures[settings].result() for settings in chosen]
    print(f"{'model':10s} {'M':>4s} {'momentum':>8s} {'steps':>6s} {'linear':>6s} {'seed':>4s} "
          f"{'s':>6s} "
          f"{'max err':>8s} {'sd ratio':>11s} warned  scale errors")  # fmt: skip
    for row in rows:
        scales = ", ".join(f"{label} {error:+.3f}"
                           for label, error in row["scale_errors_sd"].items())  # fmt: skip
        print(f"{row['model'].split('_')[0]:10s} {row['n_particles']:4d} {row['momentum']:8.2f} "
              f"{row['n_steps']:6d} {row['linear_weight']:6.2f} {row['seed']:4d} "
              f"{row['seconds']:6.1f} "
              f"{row['max_mean_error_sd']:8.3f} "
              f"{row['sd_ratio_min']:5.2f}-{row['sd_ratio_max']:4.2f} "
              f"{str(row['answer_check_warned']):6s}  {scales}")  # fmt: skip
    write_results(args.json, {"models": list(SCALES), "environment": environment(), "runs": rows})
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
