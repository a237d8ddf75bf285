"""The Laplace fit of a hierarchical model from all rows: time, passes and memory against G.

The varying-intercept logistic regression of the hierarchical zoo
(``tests/support/zoo_hierarchical.py``, centred) on ``N`` rows with ``G`` groups: the exact
block-arrowhead curvature and the Newton search of :meth:`pymc_minibatch.MinibatchModel.laplace`
(every row in every pass, whatever ``G``). Each fit runs in a fresh process, so that its
peak memory is its own. Run from the repository root::

    python benchmarks/laplace_scaling.py                        # N = 10^6, G = 10^2, 10^3, 10^4
    python benchmarks/laplace_scaling.py --rows 100000 --groups 100 1000

Prints, per ``G``: the parameters ``d``, the seconds to build the model adapter and to fit,
the full-data passes, the Newton searches, the peak resident memory of the process and the
memory of the data itself, and whether the search ended at a mode with its Newton decrement
(the gradient at the end relative to the curvature); writes them to ``--json`` (by default
``benchmarks/results/laplace_scaling.json``, committed, with the machine, versions and
command). About a minute on 2 cores at the defaults.
"""

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from run_record import RESULTS, environment, write_results

ROOT = Path(__file__).resolve().parents[1]


def fit_once(n_groups, n_rows):
    """One fit, in this process: a dict of the measurements."""
    sys.path.insert(0, str(ROOT))  # import tests.support.zoo_hierarchical
    import warnings

    import numpy as np

    import pymc_minibatch as pmm
    from tests.support.zoo_hierarchical import intercepts_logistic

    model = intercepts_logistic(n_groups, n_rows, centred=True)
    data_bytes = sum(array.nbytes for array in _constants(model))
    started = time.perf_counter()
    mm = pmm.MinibatchModel(model)
    built = time.perf_counter() - started
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyTensor's BLAS notice
        fit = mm.laplace(rng=np.random.default_rng(0))
    return {
        "groups": n_groups,
        "rows": n_rows,
        "ndim": mm.ndim,
        "build_s": built,
        "fit_s": fit.seconds,
        "passes": fit.passes,
        "searches": fit.starts,
        "is_mode": bool(fit.is_mode),
        "decrement": float(fit.decrement),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "data_mb": data_bytes / 2**20,
    }


def _constants(model):
    """The observed data and the design arrays of ``model`` (its large constants)."""
    import numpy as np
    from pytensor.graph.basic import Constant
    from pytensor.graph.traversal import ancestors

    graphs = [*model.observed_RVs, *model.rvs_to_values.values()]
    seen = {}
    for var in ancestors(graphs):
        data = var.data if isinstance(var, Constant) else None
        if isinstance(data, np.ndarray) and data.size > 1000:
            seen[id(data)] = data
    return list(seen.values())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, nargs="+", default=[100, 1000, 10_000])
    parser.add_argument("--json", default=str(RESULTS / "laplace_scaling.json"))
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(fit_once(args.one, args.rows)))
        return
    print(f"Laplace fit from all {args.rows:,} rows, varying-intercept logistic (centred)")
    print(f"{'G':>6} {'d':>6} {'build s':>8} {'fit s':>7} {'passes':>6} {'searches':>8} "
          f"{'mode':>5} {'peak MB':>8} {'data MB':>8}")  # fmt: skip
    rows = []
    for n_groups in args.groups:
        child = subprocess.run(
            [sys.executable, __file__, "--rows", str(args.rows), "--one", str(n_groups)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        row = json.loads(child.stdout.strip().splitlines()[-1])
        print(f"{row['groups']:>6} {row['ndim']:>6} {row['build_s']:>8.1f} {row['fit_s']:>7.1f} "
              f"{row['passes']:>6} {row['searches']:>8} {str(row['is_mode']):>5} "
              f"{row['peak_rss_mb']:>8.0f} {row['data_mb']:>8.0f}", flush=True)  # fmt: skip
        rows.append(row)
    write_results(args.json, {"environment": environment(), "fits": rows})
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
