"""Bayesian neural networks on real images: every big-model sampler at its defaults against
SGD, SGD with momentum and PyMC's own route for networks on tall data, minibatch ADVI.

What it measures
----------------
scikit-learn's bundled digits (1,797 images of 8 x 8 pixels, 10 classes; MNIST cannot be
downloaded here), a stratified 80/20 split, pixels scaled to [0, 1]; a 64-100-10 ReLU network
with ``Normal(0, 1)`` priors on every weight and bias (the seeds' networks scaled down to the
data: MINT's 784-200-10 of Li & Wong 2017, Figure 3; the 784-X-X-10 of Chen et al. 2018,
Table 1), batches of 100 rows, :data:`EPOCHS` epochs of updates for every method:

* the stochastic-gradient presets (SGLD, SGHMC, SGNHT, SGMGT and SGMGT-D with ``a = 1`` and
  ``a = 2``), MINT and CMINT through ``pm.sample`` at their defaults, one chain, one draw
  per epoch (CMINT: its snapshots, one per round, its rounds scaled to the budget); MINT
  and CMINT also with the random-walk proposal (``proposal="rw"``, tuned toward
  acceptance 0.3), which the defaults replace on big models;
* the particle methods (SVGD, w-SGLD, w-SGLD-B, pi-SGLD) through ``sample_particles`` at
  their defaults (20 particles), one step per update;
* SGD and SGD with momentum 0.9 on the same minibatch gradients (step 0.1 on the mean
  log-likelihood), and the diagonal fit's Adam center, as point estimates;
* ADVI on ``pm.Minibatch`` batches of 100 with ``total_size`` (mean-field, weights started
  at standard normal draws, as PyMC's Bayesian neural network example), the same number of
  updates and its usual 30,000, 500 draws of the fit;
* SGHMC, SGMGT-D and CMINT again with ADVI's 30,000 updates (:data:`EQUAL_BUDGET_SAMPLERS`,
  rows "... 30000"; CMINT's rounds scaled the same way): the same number of minibatch
  gradients as ADVI's usual fit.

For each: the **test accuracy**, **test log-likelihood** (mean over the test images of the
log of the predictive probability, averaged over the draws, of the true class), the
**expected calibration error** (15 bins of the top predicted probability) and the wall time
(compilation and setup included), and the test error after each epoch (the draws so far;
MINT's Figure 3 in shape). Every method but the deterministic Adam center runs with each of
:data:`SEEDS`: the table holds the means over them and the range of the accuracy (a test
image is 0.0028 of it, and one seed's chain differs from the next by a few images).

How to run
----------
From the repository's root (the ``bench`` extra: scikit-learn)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/networks_digits.py

It writes ``benchmarks/results/networks_digits.json`` (or ``--json``) with the machine, the
versions and the command. It takes about forty minutes on one core.
"""

import argparse
import time
import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from networks import digits_data, network_model
from run_record import RESULTS, environment, write_results

import pymc_minibatch as pmm

HIDDEN = (100,)
BATCH = 100
EPOCHS = 100
#: The samplers' seeds: a network's accuracy moves by a few of the 360 test images from one
#: seed to the next, so every stochastic method runs with each and the table shows the mean.
SEEDS = (20261207, 20261208, 20261209)
SG_PRESETS = {
    "SGLD": {}, "SGHMC": {}, "SGNHT": {}, "SGMGT": {},
    "SGMGTD": {"a": 1}, "SGMGTD a=2": {"a": 2},
}  # fmt: skip
PARTICLE_METHODS = ("svgd", "wsgld", "wsgld_blob", "pisgld")
SGD_STEP, MOMENTUM = 0.1, 0.9
ECE_BINS = 15
ADVI_DRAWS = 500
#: ADVI's updates in its usual budget (PyMC's Bayesian neural network example, and the
#: tall-data comparisons of this repository, run 30,000).
ADVI_LONG = 30_000
#: Samplers also run with ADVI's usual number of updates (the same number of gradients).
EQUAL_BUDGET_SAMPLERS = ("SGHMC", "SGMGTD", "CMINT")


def predict(weights, x):
    """Class probabilities of the ReLU network ``weights`` (a dict) on rows ``x``."""
    layer = x
    n_layers = len(HIDDEN) + 1
    for k in range(1, n_layers + 1):
        layer = layer @ weights[f"w{k}"] + weights[f"b{k}"]
        if k < n_layers:
            layer = np.maximum(layer, 0.0)
    layer = layer - layer.max(axis=1, keepdims=True)
    probs = np.exp(layer)
    return probs / probs.sum(axis=1, keepdims=True)


def scores(probs, y):
    """Accuracy, mean log-likelihood of the true class and expected calibration error."""
    confidence, predicted = probs.max(axis=1), probs.argmax(axis=1)
    correct = predicted == y
    edges = np.linspace(0.0, 1.0, ECE_BINS + 1)
    which = np.clip(np.digitize(confidence, edges[1:-1]), 0, ECE_BINS - 1)
    ece = sum(abs(correct[which == b].mean() - confidence[which == b].mean()) * np.mean(which == b)
              for b in range(ECE_BINS) if np.any(which == b))  # fmt: skip
    log_likelihood = np.log(np.maximum(probs[np.arange(len(y)), y], 1e-300)).mean()
    return {"accuracy": float(correct.mean()), "log_likelihood": float(log_likelihood),
            "ece": float(ece)}  # fmt: skip


def ensemble_result(draws, x_test, y_test, seconds, per_epoch=None):
    """Scores of the predictive average over ``draws`` (dicts of weights), and the test
    error of the average over the draws so far after each epoch (``per_epoch`` draws)."""
    probs = [predict(w, x_test) for w in draws]
    result = {**scores(np.mean(probs, axis=0), y_test), "seconds": seconds,
              "draws": len(draws)}  # fmt: skip
    if per_epoch:
        running = np.cumsum(probs, axis=0)
        result["test_error_by_epoch"] = [
            float(np.mean(running[e].argmax(axis=1) != y_test))
            for e in range(per_epoch - 1, len(draws), per_epoch)
        ]
    return result


def posterior_draws(idata, names):
    posterior = idata.posterior
    n_chains, n_draws = posterior.sizes["chain"], posterior.sizes["draw"]
    return [{name: posterior[name].values[c, d] for name in names}
            for c in range(n_chains) for d in range(n_draws)]  # fmt: skip


def run_sg(name, options, model, names, steps_per_epoch, test, seed, epochs=EPOCHS):
    started = time.perf_counter()
    with model:
        step = getattr(pmm, name.split()[0])(batch_size=BATCH, updates_per_draw=steps_per_epoch,
                                             **options)  # fmt: skip
        idata = pm.sample(step=step, draws=epochs, tune=0, chains=1, progressbar=False,
                          random_seed=seed, compute_convergence_checks=False)  # fmt: skip
    draws = posterior_draws(idata, names)
    # the predictive average over the second half (the first is the chain's burn-in)
    result = ensemble_result(draws[epochs // 2:], *test, time.perf_counter() - started)
    result["test_error_by_epoch"] = ensemble_result(draws, *test, 0.0, 1)["test_error_by_epoch"]
    return {**result, "repr": repr(step)}


def run_mint(name, model, names, steps_per_epoch, test, seed, epochs=EPOCHS):
    started = time.perf_counter()
    # a step per draw, the draws of an epoch's end picked below: the chain the default
    # thinning (a draw per epoch) keeps part of
    options = {"steps_per_draw": 1, **({"proposal": "rw"} if name.endswith(" rw") else {})}
    with model:
        if name.startswith("MINT"):
            step = pmm.MINT(batch_size=BATCH, **options)
            draws = epochs * steps_per_epoch
        else:  # ten rounds, decay every epoch: the paper's shape in the budget
            step = pmm.CMINT(batch_size=BATCH, round_epochs=max(1, epochs // 10), decay_every=1,
                             **options)  # fmt: skip
            draws = step.schedule_draws
        idata = pm.sample(step=step, draws=draws, tune=steps_per_epoch * 10, chains=1,
                          progressbar=False, random_seed=seed,
                          compute_convergence_checks=False)  # fmt: skip
    if name.startswith("CMINT"):
        ensemble = pmm.cmint_ensemble(idata)
        kept = [{n: ensemble[n].values[0, k] for n in names}
                for k in range(ensemble.sizes["draw"])]  # fmt: skip
    else:  # one draw per epoch, the second half
        every = posterior_draws(idata, names)[steps_per_epoch - 1 :: steps_per_epoch]
        kept = every[epochs // 2 :]
    result = ensemble_result(kept, *test, time.perf_counter() - started)
    accepted = float(idata.sample_stats["accepted"].mean())
    return {**result, "repr": repr(step), "acceptance": accepted,
            "temperature": step.temperature}  # fmt: skip


def run_particles(method, model, names, steps_per_epoch, test, seed):
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = pmm.sample_particles(method, n_steps=EPOCHS * steps_per_epoch, model=model,
                                     random_seed=seed, progressbar=False)  # fmt: skip
    draws = posterior_draws(idata, names)
    result = ensemble_result(draws, *test, time.perf_counter() - started)
    result["warnings"] = [type(w.message).__name__ for w in caught
                          if issubclass(w.category, pmm.AnswerCheckWarning)
                          or "settled" in str(w.message)]  # fmt: skip
    return result


def run_sgd(momentum, model, names, steps_per_epoch, test, seed):
    """SGD (with ``momentum``) on the mean log posterior's minibatch gradient, from the
    diagonal fit's starting point."""
    started = time.perf_counter()
    mm = pmm.MinibatchModel(model)
    rng = np.random.default_rng(seed)
    theta = mm.initial_theta() + 0.01 * rng.standard_normal(mm.ndim)
    velocity = np.zeros_like(theta)
    errors = []
    for _ in range(EPOCHS):
        order = rng.permutation(mm.n_data)
        for k in range(steps_per_epoch):
            gradient = mm.grad_estimate(theta, order[k * BATCH:(k + 1) * BATCH])[1] / mm.n_data
            velocity = momentum * velocity + gradient
            theta = theta + SGD_STEP * velocity
        errors.append(1.0 - scores(predict(mm.point_from_theta(theta), test[0]), test[1])[
            "accuracy"])
    result = ensemble_result([mm.point_from_theta(theta)], *test, time.perf_counter() - started)
    return {**result, "test_error_by_epoch": errors}


def run_adam_center(model, test):
    started = time.perf_counter()
    mm = pmm.MinibatchModel(model)
    fit = mm.laplace()
    result = ensemble_result([mm.point_from_theta(fit.mode)], *test, time.perf_counter() - started)
    return {**result, "adam_updates": fit.updates, "stiffness": fit.stiffness}


def run_advi(x, y, n_updates, test, seed):
    """Mean-field ADVI on minibatches (``pm.Minibatch`` with ``total_size``), the weights
    started at standard normal draws as in PyMC's Bayesian neural network example (a
    network's all-zero start is a saddle)."""
    started = time.perf_counter()
    widths = (x.shape[1], *HIDDEN, 10)
    rng = np.random.default_rng(seed)
    with pm.Model():
        # int32 labels: int64 ones are cast inside the graph, which PyMC refuses as observed
        x_batch, y_batch = pm.Minibatch(x, y.astype(np.int32), batch_size=BATCH)
        layer = x_batch
        for k, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
            w = pm.Normal(f"w{k + 1}", 0.0, 1.0, shape=(n_in, n_out),
                          initval=rng.standard_normal((n_in, n_out)))  # fmt: skip
            b = pm.Normal(f"b{k + 1}", 0.0, 1.0, shape=n_out)
            layer = layer @ w + b
            if k < len(widths) - 2:
                layer = pt.maximum(layer, 0.0)
        pm.Categorical("obs", logit_p=layer, observed=y_batch, total_size=len(y))
        approx = pm.fit(n=n_updates, method="advi", random_seed=seed,
                        progressbar=False)  # fmt: skip
        idata = approx.sample(ADVI_DRAWS, random_seed=seed)
    names = [f"{kind}{k + 1}" for k in range(len(widths) - 1) for kind in ("w", "b")]
    draws = posterior_draws(idata, names)
    return ensemble_result(draws, *test, time.perf_counter() - started)


def over_seeds(results):
    """The mean of each score over the seeds' runs, the range of the accuracy, and the first
    run's other entries (its test error by epoch, its repr) with every run's scores."""
    scores_ = ("accuracy", "log_likelihood", "ece", "seconds")
    run = {**results[0], **{key: float(np.mean([r[key] for r in results])) for key in scores_}}
    run["accuracy_min"] = min(r["accuracy"] for r in results)
    run["accuracy_max"] = max(r["accuracy"] for r in results)
    run["by_seed"] = [{key: r[key] for key in scores_} for r in results]
    return run


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=str(RESULTS / "networks_digits.json"),
                        help="where to write the results (with the machine and versions)")
    args = parser.parse_args(argv)
    (x, y), test = digits_data()
    model = network_model(x, y, hidden=HIDDEN)
    names = [v.name for v in model.free_RVs]
    steps_per_epoch = len(y) // BATCH
    by_seed = {}

    def report(name, result, seed=None):
        by_seed.setdefault(name, []).append(result)
        print(f"{name:<12} seed {seed}: accuracy {result['accuracy']:.3f}  log-likelihood "
              f"{result['log_likelihood']:.3f}  ECE {result['ece']:.3f}  "
              f"{result['seconds']:.1f} s", flush=True)  # fmt: skip

    report("Adam center", run_adam_center(model, test))  # deterministic: once
    for seed in SEEDS:
        report("ADVI", run_advi(x, y, EPOCHS * steps_per_epoch, test, seed), seed)
        report(f"ADVI {ADVI_LONG}", run_advi(x, y, ADVI_LONG, test, seed), seed)
        report("SGD", run_sgd(0.0, model, names, steps_per_epoch, test, seed), seed)
        report("SGD momentum", run_sgd(MOMENTUM, model, names, steps_per_epoch, test, seed),
               seed)  # fmt: skip
        for name, options in SG_PRESETS.items():
            report(name, run_sg(name, options, model, names, steps_per_epoch, test, seed), seed)
        for name in ("MINT", "CMINT", "MINT rw", "CMINT rw"):
            report(name, run_mint(name, model, names, steps_per_epoch, test, seed), seed)
        for method in PARTICLE_METHODS:
            report(method, run_particles(method, model, names, steps_per_epoch, test, seed),
                   seed)  # fmt: skip
        equal_epochs = ADVI_LONG // steps_per_epoch  # ADVI's updates, in whole epochs
        for name in EQUAL_BUDGET_SAMPLERS:
            run = (run_mint(name, model, names, steps_per_epoch, test, seed, equal_epochs)
                   if name == "CMINT" else
                   run_sg(name, SG_PRESETS[name], model, names, steps_per_epoch, test, seed,
                          equal_epochs))  # fmt: skip
            report(f"{name} {equal_epochs * steps_per_epoch}", run, seed)
    runs = {name: over_seeds(results) for name, results in by_seed.items()}
    print(f"means over the seeds {SEEDS}:")
    for name, run in runs.items():
        print(f"{name:<12} accuracy {run['accuracy']:.3f} ({run['accuracy_min']:.3f}-"
              f"{run['accuracy_max']:.3f})  log-likelihood {run['log_likelihood']:.3f}  "
              f"ECE {run['ece']:.3f}  {run['seconds']:.1f} s")  # fmt: skip
    write_results(args.json, {
        "environment": environment(("scikit-learn",)),
        "network": {"shape": [x.shape[1], *HIDDEN, 10], "activation": "relu",
                    "train_rows": len(y), "test_rows": len(test[1]), "batch_size": BATCH,
                    "epochs": EPOCHS},
        "seeds": list(SEEDS),
        "runs": runs,
    })  # fmt: skip


if __name__ == "__main__":
    main()
