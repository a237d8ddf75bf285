"""The seed papers' network experiments at their shapes: 784-200-10 and 784-X-X-10 ReLU
networks on 60,000 rows of MNIST's shape, every sampler of the papers at its defaults.

What it measures
----------------
MNIST cannot be downloaded here: :data:`N_TRAIN` training and :data:`N_TEST` test rows of
MNIST's shape (784 standard normal inputs, 10 classes), each labelled by a draw from a fixed
random 784-20-10 tanh network (:func:`networks.mnist_shaped_data`; the test rows are drawn
with another seed). The labels are noisy: the labeller itself, predicting its most probable
class, misclassifies some test rows (``labeller`` in the results: the lowest error any
classifier can expect). Networks with ``Normal(0, 1)`` priors on every weight and bias and
``pm.Categorical(logit_p=...)`` rows (:func:`networks.network_model`):

* **(a)** MINT's MNIST experiment (Li & Wong 2017, Figure 3): a 784-200-10 ReLU network,
  batches of :data:`BATCH` rows, SGD and SGD with momentum 0.9 (step 0.1 on the mean log
  posterior's minibatch gradient, as ``networks_digits.py``), SGLD, SGHMC, MINT and CMINT
  at their defaults through ``pm.sample``, one chain, a draw per epoch (the defaults on a
  network), :data:`EPOCHS` epochs: 20, against the paper's 500, what fits a budget of half
  an hour. CMINT runs its 10 rounds (10 snapshots) in those epochs, the paper's schedule
  scaled down: :func:`cmint_schedule`.
* **(b)** Chen et al. 2018, Table 1: the smaller of its networks, 784-100-100-10 ReLU
  (it also ran 784-200-200-10), SVGD, w-SGLD and pi-SGLD through ``sample_particles`` at
  their defaults (20 particles and batches of 100 rows on a network) for
  :data:`PARTICLE_EPOCHS` epoch (600 steps), and SGLD at its defaults on the same batches
  and number of updates (:data:`SGLD_B_DRAWS` draws, the second half averaged): the final
  test error.
* **(c)** Zhang et al. 2017: SGNHT, SGMGT and SGMGT-D with ``a = 1`` and ``a = 2`` on the
  network of (a), as (a).

For each: the **test error** of the predictive average (class probabilities averaged over
the draws so far, from the first) after each epoch, and of each draw alone (SGD: of its
point); at the end the test error, log-likelihood and calibration error
(``networks_digits.scores``); the test error at the chains' start, the diagonal fit's center;
the wall time: of a chain, its step's construction (the diagonal fit, also on its own) and
its sampling; of SGD and of a particle run, the whole run, its test predictions included
(``sampling_time``: the particles' fit and steps). CMINT's curve is the ensemble of its
snapshots taken so far (one per round, as in the paper), empty before the first. A method
that diverges or is refused at its defaults has that as its result (``outcome``, ``error``).

One seed (:data:`SEED`) for every method: a run takes minutes. Wall times were measured on a
machine shared with other jobs, and vary with its load.

How to run
----------
From the repository's root, with one BLAS thread::

    OPENBLAS_NUM_THREADS=1 python benchmarks/networks_mnist_shape.py

It writes ``benchmarks/results/networks_mnist_shape.json`` (or ``--json``) with the machine,
the versions and the command. The rows take 440 MB; the run took 24 minutes on two cores
shared with other jobs (``total_seconds``).
"""

import argparse
import time
import warnings

import networks_digits as digits
import numpy as np
import pymc as pm
from networks import LABELLER_SEED, LABELLER_SHAPE, mnist_shaped_data, network_model
from networks_digits import posterior_draws, scores
from run_record import RESULTS, environment, write_results

import pymc_minibatch as pmm

N_TRAIN, N_TEST = 60_000, 10_000
HIDDEN_A, HIDDEN_B = (200,), (100, 100)
BATCH = 200
#: Epochs of (a) and (c) (Li & Wong 2017 ran 500): what fits the budget of half an hour.
EPOCHS = 20
#: Epochs of the particle runs of (b), at their default batch of 100 rows (a step costs 20
#: gradients, about 20 times an update of (a)).
PARTICLE_EPOCHS = 1
SEED = 20261207
#: CMINT's schedule in the paper (Li & Wong 2017, Section 3.2.3), its defaults.
PAPER_ROUND_EPOCHS, PAPER_DECAY_EVERY, PAPER_DECAY = 50, 5, 0.9
PRESETS_A = {"SGLD": {}, "SGHMC": {}}
PRESETS_C = {"SGNHT": {}, "SGMGT": {}, "SGMGTD": {"a": 1}, "SGMGTD a=2": {"a": 2}}
PARTICLE_METHODS = ("svgd", "wsgld", "pisgld")
#: SGLD's draws in (b): the second half is averaged.
SGLD_B_DRAWS = 10


def labeller_probabilities(x):
    """The class probabilities of the network that labels :func:`networks.mnist_shaped_data`
    (the same weights, from ``LABELLER_SEED``)."""
    n_inputs, n_hidden, n_classes = LABELLER_SHAPE
    weights = np.random.default_rng(LABELLER_SEED)
    w1 = weights.normal(size=(n_inputs, n_hidden)) / np.sqrt(n_inputs)
    w2 = 3.0 * weights.normal(size=(n_hidden, n_classes))
    return softmax(np.tanh(x @ w1) @ w2)


def softmax(logits):
    logits = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    return probs / probs.sum(axis=1, keepdims=True)


def predict(weights, x):
    """Class probabilities of the ReLU network ``weights`` (``w1, b1, w2, ...``) of any
    depth on rows ``x`` (``networks_digits.predict`` has its own network's depth)."""
    n_layers = sum(name.startswith("w") for name in weights)
    layer = x
    for k in range(1, n_layers + 1):
        layer = layer @ weights[f"w{k}"] + weights[f"b{k}"]
        if k < n_layers:
            layer = np.maximum(layer, 0.0)
    return softmax(layer)


def error(probs, y):
    return float(np.mean(probs.argmax(axis=1) != y))


def evaluate(draws, test, snapshots=None):
    """Scores of the predictive average over ``draws`` (dicts of weights, one per epoch),
    the test error of the average over the draws so far and of each draw alone; with
    ``snapshots`` (indices of draws), the average over the snapshots so far instead."""
    x_test, y_test = test
    probs = [predict(w, x_test) for w in draws]
    kept = probs if snapshots is None else [probs[k] for k in snapshots]
    result = scores(np.mean(kept, axis=0), y_test)
    result["test_error"] = 1.0 - result["accuracy"]
    result["test_error_each"] = [error(p, y_test) for p in probs]
    if snapshots is None:
        running = np.cumsum(probs, axis=0)
        result["test_error_by_epoch"] = [error(r, y_test) for r in running]
    else:  # the ensemble of the snapshots so far, None before the first
        by_epoch, total = [], None
        for k, p in enumerate(probs):
            if k in snapshots:
                total = p if total is None else total + p
            by_epoch.append(None if total is None else error(total, y_test))
        result["test_error_by_epoch"] = by_epoch
    return result


def guarded(run):
    """``run()``'s result, or the divergence or refusal it raised, as the result."""
    started = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = {"outcome": "ok", **run()}
    except pmm.SamplerDivergenceError as failure:
        result = {"outcome": "diverged", "error": f"{type(failure).__name__}: {failure}"}
    except (ValueError, TypeError, MemoryError) as failure:
        result = {"outcome": "refused", "error": f"{type(failure).__name__}: {failure}"}
    result.setdefault("seconds", time.perf_counter() - started)
    result["warnings"] = sorted({f"{w.category.__name__}: {str(w.message)[:200]}"
                                 for w in caught
                                 if issubclass(w.category, UserWarning)})  # fmt: skip
    if result["outcome"] == "ok" and not np.isfinite(result["log_likelihood"]):
        result["outcome"] = "diverged"  # non-finite predictions
    return result


def cmint_schedule(epochs):
    """CMINT's schedule for its 10 rounds in ``epochs`` epochs: the paper's 500 epochs in
    rounds of 50, the scale decayed by 0.9 every 5 (0.9^10 over a round), scaled down
    together. Rounds of ``epochs // 10`` epochs, a decay every epoch by the factor that
    gives the round the paper's 0.9^10 (``decay_every`` counts whole epochs)."""
    round_epochs = max(1, epochs // 10)
    return {"round_epochs": round_epochs, "decay_every": 1,
            "decay": PAPER_DECAY ** (PAPER_ROUND_EPOCHS / PAPER_DECAY_EVERY / round_epochs)}


def run_step(name, model, names, test, epochs, batch):
    """A preset (``SG``: ``"SGLD"``, ``"SGMGTD a=2"``, ...) or MINT/CMINT at its defaults
    through ``pm.sample``, one chain from the fit's center, a draw per epoch."""
    options = {**PRESETS_A, **PRESETS_C}.get(name, {})
    started = time.perf_counter()
    with model:
        if name == "CMINT":
            step = pmm.CMINT(batch_size=batch, **cmint_schedule(epochs))
            draws = step.schedule_draws
        else:
            step = getattr(pmm, name.split()[0])(batch_size=batch, **options)
            draws = epochs
        setup = time.perf_counter() - started
        idata = pm.sample(step=step, draws=draws, tune=0, chains=1, progressbar=False,
                          random_seed=SEED, compute_convergence_checks=False)  # fmt: skip
    seconds = time.perf_counter() - started
    snapshots = None
    if name == "CMINT":
        snapshots = set(np.flatnonzero(idata.sample_stats["snapshot"].values[0]).tolist())
    result = evaluate(posterior_draws(idata, names), test, snapshots)
    result.update(seconds=seconds, setup_seconds=setup, repr=repr(step), draws=draws)
    if getattr(step, "laplace", None) is not None:  # the chain's start: the fit's center
        center = step.minibatch_model.point_from_theta(step.laplace.mode)
        result["center_test_error"] = error(predict(center, test[0]), test[1])
    if name in ("MINT", "CMINT"):
        result.update(acceptance=float(idata.sample_stats["accepted"].mean()),
                      temperature=float(step.temperature))  # fmt: skip
        if snapshots is not None:
            result["snapshot_epochs"] = sorted(k + 1 for k in snapshots)
    return result


def run_sgd(momentum, model, test, epochs, batch):
    """``networks_digits.run_sgd`` (step 0.1 on the mean log posterior) at this script's
    epochs and batch."""
    digits.EPOCHS, digits.BATCH = epochs, batch  # the module's settings, read by run_sgd
    run = digits.run_sgd(momentum, model, None, N_TRAIN // batch, test, SEED)
    result = {key: run[key] for key in ("accuracy", "log_likelihood", "ece", "seconds")}
    return {**result, "test_error": 1.0 - run["accuracy"],
            "test_error_each": run["test_error_by_epoch"],
            "test_error_by_epoch": run["test_error_by_epoch"], "step": digits.SGD_STEP,
            "momentum": momentum}  # fmt: skip


def run_particles(method, model, names, test, epochs):
    """``sample_particles(method)`` at its defaults for ``epochs`` epochs of its batches:
    the final particles' predictive average."""
    n_steps = round(epochs * N_TRAIN / 100)  # its default batch on a network: 100 rows
    idata = pmm.sample_particles(method, n_steps=n_steps, model=model, random_seed=SEED,
                                 progressbar=False)  # fmt: skip
    attrs = idata.posterior.attrs
    result = evaluate(posterior_draws(idata, names), test)
    result["test_error_by_epoch"] = result["test_error_by_epoch"][-1:]  # not one per epoch
    result["test_error_each"] = sorted(result["test_error_each"])  # the particles alone
    settings = ("n_particles", "batch_size", "step_size", "sampling_time")
    return {**result, "n_steps": n_steps,
            **{key: _plain(attrs[key]) for key in settings if key in attrs}}  # fmt: skip


def run_sgld_b(model, names, test, epochs):
    """SGLD at its defaults on the particles' batches and updates: :data:`SGLD_B_DRAWS`
    draws, the predictive average over the second half."""
    n_updates = round(epochs * N_TRAIN / 100)
    started = time.perf_counter()
    with model:
        step = pmm.SGLD(batch_size=100, updates_per_draw=n_updates // SGLD_B_DRAWS)
        idata = pm.sample(step=step, draws=SGLD_B_DRAWS, tune=0, chains=1, progressbar=False,
                          random_seed=SEED, compute_convergence_checks=False)  # fmt: skip
    seconds = time.perf_counter() - started
    draws = posterior_draws(idata, names)
    result = evaluate(draws[SGLD_B_DRAWS // 2 :], test)
    result["test_error_by_epoch"] = result["test_error_by_epoch"][-1:]
    center = step.minibatch_model.point_from_theta(step.laplace.mode)
    return {**result, "seconds": seconds, "n_steps": n_updates, "repr": repr(step),
            "center_test_error": error(predict(center, test[0]), test[1])}  # fmt: skip


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=str(RESULTS / "networks_mnist_shape.json"),
                        help="where to write the results (with the machine and versions)")
    parser.add_argument("--epochs", type=int, default=EPOCHS, help="epochs of (a) and (c)")
    parser.add_argument("--particle-epochs", type=float, default=PARTICLE_EPOCHS,
                        help="epochs of the particle runs of (b)")  # fmt: skip
    parser.add_argument("--only", nargs="*", help="run only these methods (a trial)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    x, y = mnist_shaped_data(N_TRAIN)
    test = mnist_shaped_data(N_TEST, seed=1)
    labeller = scores(labeller_probabilities(test[0]), test[1])
    print(f"labeller: test error {1 - labeller['accuracy']:.4f}", flush=True)
    wanted = set(args.only) if args.only else None
    sections = {"a": {}, "b": {}, "c": {}}

    def report(section, name, run):
        if wanted is not None and name not in wanted:
            return
        result = guarded(run)
        sections[section][name] = result
        if result["outcome"] == "ok":
            print(f"({section}) {name:<12} test error {result['test_error']:.4f}  by epoch "
                  f"{[e if e is None else round(e, 4) for e in result['test_error_by_epoch']]}"
                  f"  {result['seconds']:.0f} s", flush=True)  # fmt: skip
        else:
            print(f"({section}) {name:<12} {result['outcome']}: {result['error']}", flush=True)

    model = network_model(x, y, hidden=HIDDEN_A)
    names = [v.name for v in model.free_RVs]
    for momentum, name in ((0.0, "SGD"), (digits.MOMENTUM, "SGD momentum")):
        report("a", name, lambda m=momentum: run_sgd(m, model, test, args.epochs, BATCH))
    for name in (*PRESETS_A, "MINT", "CMINT"):
        report("a", name, lambda n=name: run_step(n, model, names, test, args.epochs, BATCH))
    for name in PRESETS_C:
        report("c", name, lambda n=name: run_step(n, model, names, test, args.epochs, BATCH))
    del model
    model = network_model(x, y, hidden=HIDDEN_B)
    names = [v.name for v in model.free_RVs]
    for method in PARTICLE_METHODS:
        report("b", method,
               lambda m=method: run_particles(m, model, names, test, args.particle_epochs))
    report("b", "SGLD", lambda: run_sgld_b(model, names, test, args.particle_epochs))
    total = time.perf_counter() - started
    print(f"total {total:.0f} s", flush=True)
    write_results(args.json, {
        "environment": environment(),
        "data": {"train_rows": N_TRAIN, "test_rows": N_TEST, "inputs": x.shape[1],
                 "classes": 10, "labeller_shape": list(LABELLER_SHAPE),
                 "labeller": {**labeller, "test_error": 1.0 - labeller["accuracy"]}},
        "seed": SEED,
        "total_seconds": total,
        "a": {"network": [x.shape[1], *HIDDEN_A, 10], "batch_size": BATCH,
              "epochs": args.epochs, "paper_epochs": 500, "cmint": cmint_schedule(args.epochs),
              "runs": sections["a"]},
        "b": {"network": [x.shape[1], *HIDDEN_B, 10], "batch_size": 100,
              "epochs": args.particle_epochs, "runs": sections["b"]},
        "c": {"network": [x.shape[1], *HIDDEN_A, 10], "batch_size": BATCH,
              "epochs": args.epochs, "runs": sections["c"]},
    })  # fmt: skip


if __name__ == "__main__":
    main()
