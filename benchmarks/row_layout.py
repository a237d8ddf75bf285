"""Row gathers from data as users hold it: a column-major design against a row-major one.

A logistic regression's design of ``--rows`` rows and ``--columns`` columns, built as
``pd.DataFrame(...).to_numpy()`` gives it (column-major, Fortran order) and as a C-ordered
copy. The script prints, in microseconds per call (median of 21 repeats of a loop, on the
same pre-drawn index arrays of ``--batch`` random rows):

- ``np.take(X, idx, axis=0)`` on each layout: what a row gather costs without a copy;
- ``MinibatchModel.loglik(theta, idx)`` on a model built from each layout: the adapter
  lays a column-major design out by rows once (``pymc_minibatch.model.rows.row_major``),
  so both should cost the same;

and the ratios column-major / row-major, and writes them with the machine, the versions and
the command to ``--json``. Run::

    python benchmarks/row_layout.py --rows 1000000 --columns 20 --batch 250 \
        --json benchmarks/results/row_layout.json
"""

import argparse
import gc
import pathlib
import sys
import time

import numpy as np
import pandas as pd
import pymc as pm

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from run_record import RESULTS, environment, write_results  # noqa: E402

import pymc_minibatch as pmm  # noqa: E402


def per_call_us(call, indices, repeats=21):
    """Median over ``repeats`` of the mean time of ``call(idx)`` over ``indices``, in us."""
    call(indices[0])
    times = []
    gc.disable()
    try:
        for _ in range(repeats):
            started = time.perf_counter()
            for idx in indices:
                call(idx)
            times.append((time.perf_counter() - started) / len(indices))
    finally:
        gc.enable()
    return 1e6 * float(np.median(times))


def model_on(X, y):
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=X.shape[1])
        pm.Bernoulli("y", logit_p=X @ beta, observed=y)
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--columns", type=int, default=20)
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--json", default=str(RESULTS / "row_layout.json"))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(args.rows, args.columns)))
    by_columns = frame.to_numpy()
    by_rows = np.ascontiguousarray(by_columns)
    print(f"DataFrame.to_numpy(): C-contiguous {by_columns.flags.c_contiguous}, "
          f"F-contiguous {by_columns.flags.f_contiguous}")  # fmt: skip
    y = (rng.random(args.rows) < 0.5).astype("int64")
    indices = [rng.integers(0, args.rows, size=args.batch) for _ in range(50)]
    theta = rng.normal(scale=0.1, size=args.columns)

    rows = {}
    for layout, X in (("column-major", by_columns), ("row-major", by_rows)):
        mm = pmm.MinibatchModel(model_on(X, y), check=False)
        rows[layout] = (per_call_us(lambda idx, X=X: np.take(X, idx, axis=0), indices),
                        per_call_us(lambda idx, mm=mm: mm.loglik(theta, idx), indices))  # fmt: skip
    print(f"N = {args.rows}, {args.columns} columns, {args.batch} random rows per call; "
          "us per call")
    print(f"{'layout':14s} {'np.take':>10s} {'mm.loglik':>10s}")
    for layout, (take, loglik) in rows.items():
        print(f"{layout:14s} {take:10.1f} {loglik:10.1f}")
    (take_f, loglik_f), (take_c, loglik_c) = rows["column-major"], rows["row-major"]
    print(f"column-major / row-major: np.take {take_f / take_c:.1f}x, "
          f"mm.loglik {loglik_f / loglik_c:.2f}x")  # fmt: skip
    write_results(args.json, {
        "rows": args.rows, "columns": args.columns, "batch": args.batch,
        "environment": environment(), "us_per_call": {
            layout: {"np.take": take, "mm.loglik": loglik}
            for layout, (take, loglik) in rows.items()},
        "ratio_column_to_row_major": {"np.take": take_f / take_c,
                                      "mm.loglik": loglik_f / loglik_c}})  # fmt: skip


if __name__ == "__main__":
    main()
