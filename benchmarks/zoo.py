"""Every sampler x every zoo model, with defaults: one table of ok / refused / error.

The zoo (``tests/support/zoo.py``) holds everyday PyMC models on 10^5 rows with reference
posteriors; ``tests/support/zoo_samplers.py`` says how each sampler is run and judged. Run from the
repository root::

    python benchmarks/zoo.py                      # the whole table (about half an hour)
    python benchmarks/zoo.py --samplers SGLD SVGD --models mixture
    python benchmarks/zoo.py --models network_classifier   # the network's row alone
    python benchmarks/zoo.py --details            # also each cell's errors and message

Every cell (outcome, seconds, worst mean error and sd ratios, message) goes to ``--json``
(default ``benchmarks/results/zoo.json``, with the machine, the versions and the command);
the network's cells (``tests/support/zoo_network.py``, judged on its predictive at held-out
inputs) go to ``--network-json`` (default ``benchmarks/results/zoo_network.json``), so that
either can be rerun alone: each file is written only when the run includes its models. The
docs build renders the table of both into "Which sampler".

A cell is ``ok`` (within the sampler's tolerance of the reference), ``refused`` (at
construction, naming the observed variable and what is missing), ``inaccurate`` (ran, but
missed the tolerance), ``error`` (anything else, e.g. a divergence) or, for MINT and CMINT
only, ``unchecked`` (ran, but ``tests/support/zoo_tempered_reference.json`` holds no reliable
tempered reference for the model; every model has one at present).
"""

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from run_record import RESULTS, environment, write_results

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import tests.support.zoo*

from tests.support.zoo import ZOO  # noqa: E402
from tests.support.zoo_network import NETWORK, run_network_cell  # noqa: E402
from tests.support.zoo_samplers import SAMPLERS, run_cell  # noqa: E402

MODELS = [*ZOO, NETWORK.name]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samplers", nargs="+", default=SAMPLERS, choices=SAMPLERS)
    parser.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--details", action="store_true", help="print every cell's numbers")
    parser.add_argument("--json", default=str(RESULTS / "zoo.json"))
    parser.add_argument("--network-json", default=str(RESULTS / "zoo_network.json"))
    args = parser.parse_args()

    started = time.perf_counter()
    run = environment()  # once: it asks git for the commit
    cells = {}
    first_cell = {}  # per results file, when its first cell started
    for model in args.models:
        network = model == NETWORK.name
        first_cell.setdefault(network, time.perf_counter())
        for sampler in args.samplers:
            if network:
                cell = run_network_cell(sampler, random_seed=args.seed)
            else:
                cell = run_cell(sampler, model, random_seed=args.seed)
            cells[sampler, model] = cell
            print(_detail(cell), flush=True)
            models = [m for m in args.models if (m == NETWORK.name) == network]
            write_results(args.network_json if network else args.json, {
                "environment": run, "seed": args.seed, "samplers": args.samplers,
                "models": models, "seconds": time.perf_counter() - first_cell[network],
                "cells": [_record(c) for (_, m), c in cells.items() if m in models],
            })  # fmt: skip
    print()
    print(_table(cells, args.samplers, args.models))
    if args.details:
        print()
        for cell in cells.values():
            if cell.outcome != "ok":
                print(f"{cell.sampler} x {cell.model}: {cell.message}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


def _record(cell):
    """A cell as JSON: NaN (not measured) as None."""
    def measured(value):
        return None if isinstance(value, float) and value != value else value

    record = dataclasses.asdict(cell)
    record["sd_ratio"] = [measured(float(value)) for value in record["sd_ratio"]]
    return {key: measured(value) for key, value in record.items()}


def _detail(cell):
    low, high = cell.sd_ratio
    return (
        f"{cell.sampler:>9} x {cell.model:<22} {cell.outcome:<10} {cell.seconds:6.1f} s  "
        f"mean err {cell.mean_error:7.3g} sd ({cell.mean_error_mcse:6.3g} mcse)  "
        f"sd ratio {low:5.3g}..{high:5.3g} ({cell.sd_error_mcse:5.3g} mcse)  "
        f"{cell.message[:120]}"
    )


def _table(cells, samplers, models):
    width = max(len(m) for m in models)
    header = " " * width + " | " + " | ".join(f"{s:>10}" for s in samplers)
    lines = [header, "-" * len(header)]
    for model in models:
        row = " | ".join(f"{cells[s, model].outcome:>10}" for s in samplers)
        lines.append(f"{model:<{width}} | {row}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
