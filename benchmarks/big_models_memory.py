"""The peak memory of 100 epochs of SGHMC on MINT's MNIST network, at its defaults.

What it measures
----------------
The 784-200-10 ReLU network of :mod:`big_models` (159,010 weights and biases) over 60,000
rows of MNIST's shape (:func:`networks.mnist_shaped_data`), ``pmm.SGHMC(batch_size=100)``
at its defaults (a draw per epoch of 600 updates on a model this big), one chain of 100
draws without tuning through ``pm.sample``: 60,000 updates, 100 epochs. It records

* the process's peak resident memory (``ru_maxrss``), once after building the data, the
  model and the step and once after the run;
* what the draws take by the package's own arithmetic
  (:func:`pymc_minibatch.draw_memory.draw_bytes`), and the rows' own size;
* the test accuracy of the draws' predictive average (second half), on 10,000 fresh rows
  labelled by the same network (the labelling network itself scores about 0.85).

How to run
----------
From the repository's root, on one core::

    OPENBLAS_NUM_THREADS=1 python benchmarks/big_models_memory.py

It writes ``benchmarks/results/big_models_memory.json`` (or ``--json``) with the machine,
the versions and the command; about ten minutes.
"""

import argparse
import resource
import time

import numpy as np
import pymc as pm
from networks import mnist_shaped_data, network_model
from run_record import RESULTS, environment, write_results

import pymc_minibatch as pmm
from pymc_minibatch.draw_memory import draw_bytes

N_ROWS, BATCH, EPOCHS, TEST_ROWS = 60_000, 100, 100, 10_000


def peak_gigabytes():
    """The process's peak resident memory so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def predictive_accuracy(posterior, x, y):
    """Accuracy of the class probabilities averaged over the draws of ``posterior``."""
    probs = 0.0
    for draw in range(posterior.sizes["draw"]):
        w = {name: posterior[name].values[0, draw] for name in ("w1", "b1", "w2", "b2")}
        logits = np.maximum(x @ w["w1"] + w["b1"], 0.0) @ w["w2"] + w["b2"]
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        probs = probs + p / p.sum(axis=1, keepdims=True)
    return float(np.mean(np.argmax(probs, axis=1) == y))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=str(RESULTS / "big_models_memory.json"),
                        help="where to write the results (with the machine and versions)")
    args = parser.parse_args(argv)
    x, y = mnist_shaped_data(N_ROWS)
    model = network_model(x, y)
    started = time.perf_counter()
    with model:
        step = pmm.SGHMC(batch_size=BATCH)
    setup_seconds = time.perf_counter() - started
    before = peak_gigabytes()
    started = time.perf_counter()
    with model:
        idata = pm.sample(step=step, draws=EPOCHS, tune=0, chains=1, cores=1, random_seed=1,
                          progressbar=False, compute_convergence_checks=False)  # fmt: skip
    run_seconds = time.perf_counter() - started
    after = peak_gigabytes()
    ndim = pmm.MinibatchModel(model).ndim
    x_test, y_test = mnist_shaped_data(TEST_ROWS, seed=1)
    accuracy = predictive_accuracy(idata.posterior.isel(draw=slice(EPOCHS // 2, None)),
                                   x_test, y_test)  # fmt: skip
    draws_gb = EPOCHS * draw_bytes(ndim) / 1e9
    print(f"{step!r}: {EPOCHS} epochs ({EPOCHS * step.updates_per_draw} updates) in "
          f"{run_seconds:.0f} s after {setup_seconds:.0f} s of setup")  # fmt: skip
    print(f"  peak memory {before:.2f} GB before sampling, {after:.2f} GB after; the rows "
          f"take {x.nbytes / 1e9:.2f} GB, the draws {draws_gb:.3f} GB")  # fmt: skip
    print(f"  test accuracy of the second half's predictive average {accuracy:.3f}")
    write_results(args.json, {
        "environment": environment(),
        "network": {"shape": [x.shape[1], 200, 10], "parameters": ndim, "rows": N_ROWS,
                    "batch_size": BATCH},
        "repr": repr(step),
        "epochs": EPOCHS,
        "updates": EPOCHS * step.updates_per_draw,
        "setup_seconds": setup_seconds,
        "run_seconds": run_seconds,
        "peak_gb_before_sampling": before,
        "peak_gb": after,
        "rows_gb": x.nbytes / 1e9,
        "draws_gb": draws_gb,
        "test_accuracy": accuracy,
    })  # fmt: skip


if __name__ == "__main__":
    main()
