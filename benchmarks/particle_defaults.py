"""SVGD at its defaults on the 1000-group models: the group scales' bias over seeds.

Two models of the hierarchical zoo (``tests/support/zoo_hierarchical.py``, 10^5 rows, 1000
groups, 5% of them empty and 10% with fewer than ten rows), centred:
``intercepts_logistic_G1000_centred`` (1006 parameters, the group scale ``tau``) and
``slopes_normal_G1000_centred`` (2007 parameters, the group scales ``tau_a`` and ``tau_b``);
or, with ``--form noncentred``, their non-centred forms (which ``sample_particles`` moves
centred; their draws of ``z`` are held to the reference too).
``pmm.sample_particles("svgd")`` runs at its defaults, whose ``n_particles="auto"`` takes
``pmm.particles.GROUP_PARTICLES`` (200) particles on these models; with 100 particles
(``pmm.particles.DEFAULT_PARTICLES``, the default elsewhere); and at its defaults without
the part of the kernel that lets the groups' spread follow the shared coordinates
(``group_spread_velocity`` in ``pymc_minibatch/kernels/particle_velocities.py``, its weight
``GROUP_SPREAD_WEIGHT`` set to 0); at seeds 7, 8 and 9, one core each. ``--variants``
picks some of them; ``--stratify false`` gives every run uniform batches instead of the
default batches stratified by group.

Per run: seconds, each group scale's signed mean error in NUTS posterior sds (the stored
reference), and for each family of scalars (``a``, ``b``: the group effects; ``beta``,
``mu``...) the mean over its scalars of the particles' sd / NUTS's sd, where the Monte
Carlo error of ``M`` particles (about ``1 / sqrt(2 M)`` per scalar) averages out; and
whether the answer check warned; and over every scalar, the largest mean error in sds and
the range of the sd ratios. Then, per setting, each group scale's mean error and sd
ratio over the seeds with their standard errors: a bias that one run's error, of the order
of ``1 / sqrt(M)`` posterior sd, cannot show.

Run: ``python benchmarks/particle_defaults.py`` (about 45 minutes of one core, 25 on 2).
Writes ``--json`` (by default ``benchmarks/results/particle_defaults.json``, with the
machine, versions and command). The committed results::

    python benchmarks/particle_defaults.py --jobs 2 --variants defaults
    python benchmarks/particle_defaults.py --jobs 1 --stratify false \
        --json benchmarks/results/particle_defaults_uniform.json

(the second measured at commit 474b4d5, before batches were stratified by default).
``benchmarks/results/particle_defaults_diagonal.json`` holds the first command's results
(with ``--jobs 1``) at commit aed3b73, before the kernel's linear part took each group's
coordinates as a block (``blocks`` of ``linear_svgd_velocity``). The non-centred forms::

    python benchmarks/particle_defaults.py --jobs 2 --variants defaults --form noncentred \
        --json benchmarks/results/particle_defaults_noncentred.json
"""

import argparse
import collections
import concurrent.futures
import pathlib
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from hierarchical import compare, summarise  # noqa: E402
from run_record import RESULTS, environment, write_results  # noqa: E402

import pymc_minibatch as pmm  # noqa: E402
from pymc_minibatch.kernels import particle_velocities  # noqa: E402
from tests.support.zoo_hierarchical import (  # noqa: E402
    HIERARCHICAL_ZOO,
    hierarchical_reference,
    model_name,
)

#: Each family's group scales.
SCALES = {"intercepts_logistic": ("tau",), "slopes_normal": ("tau_a", "tau_b")}
SEEDS = (7, 8, 9)
#: The settings compared: ``(n_particles, with the group-spread part of the kernel)``.
VARIANTS = {"defaults": ("auto", True), "100": (100, True), "no-group-spread": ("auto", False)}
DEFAULT_GROUP_SPREAD_WEIGHT = particle_velocities.GROUP_SPREAD_WEIGHT


def _variant(n_particles, group_spread):
    return f"{n_particles}" + ("" if group_spread else ", no group spread")


def _row(family, centred, n_particles, group_spread, stratify, seed):
    # set for every run: a worker process runs several
    particle_velocities.GROUP_SPREAD_WEIGHT = DEFAULT_GROUP_SPREAD_WEIGHT if group_spread else 0.0
    name = model_name(family, 1000, centred)
    model = HIERARCHICAL_ZOO[name].build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.perf_counter()
        idata = pmm.sample_particles("svgd", n_particles=n_particles, stratify=stratify,
                                     model=model, random_seed=seed, progressbar=False)  # fmt: skip
        seconds = time.perf_counter() - started
    reference = hierarchical_reference(name)
    summary = summarise(idata, particles=True)
    scales = {label: (summary[label]["mean"] - reference[label]["mean"]) / reference[label]["sd"]
              for label in SCALES[family]}  # fmt: skip
    families = collections.defaultdict(list)
    for label, ref in reference.items():
        families[label.split("[")[0]].append(summary[label]["sd"] / ref["sd"])
    return {"model": name, "n_particles": int(idata["posterior"].attrs["n_particles"]),
            "requested": n_particles, "group_spread": group_spread,
            "stratified": bool(idata["posterior"].attrs["stratified"]),
            "variant": _variant(n_particles, group_spread), "seed": seed, "seconds": seconds,
            "scale_errors_sd": scales, **compare(summary, reference),
            "sd_ratio_by_family": {family: float(np.mean(ratios))
                                   for family, ratios in families.items()},
            "answer_check_warned": any(issubclass(w.category, pmm.AnswerCheckWarning)
                                       for w in caught)}  # fmt: skip


def seed_averages(rows):
    """``{(model, variant): {scale: {"error" | "sd_ratio": (mean, its standard error)}}}``
    over the seeds."""
    grouped = collections.defaultdict(list)
    for row in rows:
        grouped[row["model"], row["variant"]].append(row)
    averages = {}
    for key, runs in grouped.items():
        averages[key] = {}
        for label in runs[0]["scale_errors_sd"]:
            errors = np.array([run["scale_errors_sd"][label] for run in runs])
            ratios = np.array([run["sd_ratio_by_family"][label] for run in runs])
            averages[key][label] = {"error": _mean_and_se(errors), "sd_ratio": _mean_and_se(ratios)}
    return averages


def _mean_and_se(values):
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(values.size))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(RESULTS / "particle_defaults.json"))
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time, one core each")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--form", choices=("centred", "noncentred"), default="centred",
                        help="the models' parametrisation")
    parser.add_argument("--stratify", choices=("auto", "false"), default="auto",
                        help="the batches of every run: sample_particles's default "
                             "(stratified by group) or uniform")  # fmt: skip
    args = parser.parse_args()
    stratify = args.stratify == "auto" and "auto"
    centred = args.form == "centred"
    chosen = [(family, centred, *VARIANTS[variant], stratify, seed)
              for family in SCALES for variant in args.variants for seed in SEEDS]  # fmt: skip
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        futures = {settings: pool.submit(_row, *settings) for settings in chosen}
        rows = [futures[settings].result() for settings in chosen]
    print(f"{'model':10s} {'M':>4s} spread {'seed':>4s} {'s':>6s} warned  scale errors; "
          "mean sd ratio by family; largest mean error (sd), sd ratio range")
    for row in rows:
        scales = ", ".join(f"{label} {error:+.3f}"
                           for label, error in row["scale_errors_sd"].items())  # fmt: skip
        ratios = ", ".join(f"{family} {ratio:.3f}"
                           for family, ratio in row["sd_ratio_by_family"].items())  # fmt: skip
        print(f"{row['model'].split('_')[0]:10s} {row['n_particles']:4d} "
              f"{str(row['group_spread']):6s} {row['seed']:4d} "
              f"{row['seconds']:6.1f} {str(row['answer_check_warned']):6s}  {scales}; "
              f"{ratios}; {row['max_mean_error_sd']:.3f}, "
              f"{row['sd_ratio_min']:.3f}-{row['sd_ratio_max']:.3f}")  # fmt: skip
    averages = seed_averages(rows)
    print("\nover the seeds (standard error): mean error in posterior sds; sd / posterior sd")
    for (name, variant), scales in averages.items():
        text = ", ".join(f"{label} {v['error'][0]:+.3f} ({v['error'][1]:.3f}); "
                         f"{v['sd_ratio'][0]:.3f} ({v['sd_ratio'][1]:.3f})"
                         for label, v in scales.items())  # fmt: skip
        print(f"{name.split('_')[0]:10s} n_particles={variant:22s}  {text}")
    write_results(args.json, {
        "models": [model_name(family, 1000, centred) for family in SCALES],
        "environment": environment(), "runs": rows,
        "seed_averages": [
            {"model": name, "variant": variant,
             **{key: {label: {"mean": v[field][0], "se": v[field][1]}
                      for label, v in scales.items()}
                for key, field in (("scale_errors_sd", "error"), ("sd_ratio", "sd_ratio"))}}
            for (name, variant), scales in averages.items()],
    })  # fmt: skip
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
