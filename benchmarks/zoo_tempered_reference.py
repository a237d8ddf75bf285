"""NUTS references of MINT's tempered targets on the model zoo (``tests/support/zoo.py``).

:class:`pymc_minibatch.MINT` with ``temper_prior=True`` samples (approximately) the
posterior raised to ``1/T``: in PyMC's transformed space its target is

    log f(theta) = [log prior(constrained) + log lik] / T + log|Jacobian|,

with ``T = n^(1 - alpha tau)``, ``tau = log(m) / (2 log n)``, ``n`` the model's rows and
``m`` the batch size (``pymc_minibatch.kernels.mint.tempering_settings``); transform
Jacobians are not tempered. For every zoo model this script builds that target by adding

    pm.Potential("tempering", (1 / T - 1) * model.logp(jacobian=False, sum=True))

to the model: PyMC's ``model.logp()`` is ``logp_nojac + log_jacobian``, so the tempered
model's log density is ``logp_nojac / T + log_jacobian`` exactly (``check_tempered_logp``
confirms it at random points before sampling). ``normal_mean`` has a closed form: the
tempered posterior of ``mu`` is ``Normal(sum(y) / (N + 1/100), (T / (N + 1/100)) ** 0.5)``
(the untempered mean, ``sqrt(T)`` times the untempered sd); both mcse are 0.

Tempering makes ``varying_intercepts`` weakly identified: ``mu_a`` and ``sigma_a`` keep little
more than their tempered priors (sds about 340 and 110), and ``mu_a``'s spread shrinks with
``sigma_a``, a funnel on which NUTS diverges even at ``target_accept=0.99``. Its reference is
therefore sampled in ``(w = mu_a / sigma_a, log sigma_a, a, b, log sigma)``: the same target
density times the Jacobian ``sigma_a`` of ``mu_a = sigma_a w`` (``scaled_mu_a``), with
``mu_a``, ``sigma_a`` and ``sigma`` recovered as deterministics; ``check_tempered_logp``
confirms the change of variables too. (MINT and CMINT, whose random-walk proposal has
``T`` times the covariance of the Laplace approximation, an sd of about 13 for ``mu_a``, do
not cross its range of sd 344 in the zoo's run lengths: ``KNOWN_DEVIATIONS`` in
``tests/statistical/test_zoo.py``.)

Each other model is sampled with ``pm.sample(draws=2000, tune=1000, chains=4, cores=1,
target_accept=0.9)`` and a fixed ``random_seed``. If NUTS diverges or ``r_hat >= 1.01`` the
run is repeated with the next ``--target-accept`` (0.95, then 0.99); a model that fails at
all of them is stored as ``{"unavailable": "<reason>"}`` instead of numbers (then
``tests/support/zoo_samplers.py`` reports its MINT and CMINT cells as ``unchecked``). In the stored
file no model is unavailable: every NUTS run converged at 0.9 (r_hat at most 1.0023, no
divergences), except ``varying_intercepts``, reparametrised, at 0.95. Per scalar of every
free variable of the zoo model (constrained space, labelled ``"beta[0]"`` as by
``tests.support.zoo.scalar_draws``, whatever variables NUTS sampled) the file
``tests/support/zoo_tempered_reference.json`` stores the tempered ``mean``, ``sd``,
``mcse_mean`` and ``mcse_sd`` (``tests/support/mcse.py``, 6 significant digits), as
``tests/support/zoo_reference.json`` does for the posterior, plus the temperature, batch
size, alpha, and the run: settings, Python/PyMC/ArviZ versions, wall time, minimum bulk and
tail ESS, maximum r_hat, divergences and the target_accept values tried. Read it with
``tests.support.zoo_tempered.tempered_reference``.

How to regenerate
-----------------
From the repository root::

    python benchmarks/zoo_tempered_reference.py                  # every model (1-2 hours)
    python benchmarks/zoo_tempered_reference.py --models mixture gamma_regression

``--models`` replaces only those models' entries and keeps the others (the stored batch size
and alpha must match). The stored references were generated with Python 3.11, PyMC 5.28.5
and ArviZ 0.23.4 on 2 cores, one model at a time.
"""

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.replace import graph_replace

from pymc_minibatch.kernels.mint import tempering_settings

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # for ``tests.support.zoo`` when run as a script

from benchmarks.zoo_reference import diagnostics, summarise  # noqa: E402
from tests.support.zoo import ZOO, normal_mean_reference, scalar_draws  # noqa: E402

OUTPUT_PATH = REPO_ROOT / "tests" / "zoo_tempered_reference.json"
ABOUT = (
    "NUTS references of MINT's tempered targets (posterior ** (1 / T), Jacobians untempered) "
    "on tests/support/zoo.py; regenerate with python benchmarks/zoo_tempered_reference.py"
)


def _round(value):
    return float(f"{value:.6g}")


def tempered_model(name, temperature):
    """Zoo model ``name`` with log density ``logp_nojac / T + log_jacobian``."""
    model = ZOO[name].build()
    with model:
        untempered = model.logp(jacobian=False, sum=True)
        pm.Potential("tempering", (1.0 / temperature - 1.0) * untempered)
    return model


def scaled_mu_a(model):
    """``varying_intercepts``' tempered ``model`` sampled in ``w = mu_a / sigma_a``.

    The free variables become ``w``, ``log_sigma_a``, ``a``, ``b`` and ``log_sigma`` (flat),
    whose log density is the tempered one at ``mu_a = exp(log_sigma_a) w`` plus the log
    Jacobian ``log_sigma_a``; ``mu_a``, ``sigma_a`` and ``sigma`` are deterministics.
    """
    value = {var.name: var for var in model.value_vars}
    logp = model.logp()
    with pm.Model() as scaled:
        w = pm.Flat("w")
        log_sigma_a = pm.Flat("log_sigma_a")
        a = pm.Flat("a", shape=value["a"].type.shape)
        b = pm.Flat("b")
        log_sigma = pm.Flat("log_sigma")
        sigma_a = pm.Deterministic("sigma_a", pt.exp(log_sigma_a))
        mu_a = pm.Deterministic("mu_a", sigma_a * w)
        pm.Deterministic("sigma", pt.exp(log_sigma))
        replace = {
            value["mu_a"]: mu_a, value["sigma_a_log__"]: log_sigma_a, value["a"]: a,
            value["b"]: b, value["sigma_log__"]: log_sigma,
        }  # fmt: skip
        pm.Potential("target", graph_replace(logp, replace, strict=True) + log_sigma_a)
    return scaled


def _scaled_mu_a_point(point):
    """A point of ``varying_intercepts``' value variables in ``scaled_mu_a``'s, and log|J|."""
    log_sigma_a = point["sigma_a_log__"]
    scaled = {
        "w": point["mu_a"] / np.exp(log_sigma_a), "log_sigma_a": log_sigma_a, "a": point["a"],
        "b": point["b"], "log_sigma": point["sigma_log__"],
    }  # fmt: skip
    return scaled, float(log_sigma_a)


#: Exact changes of variables of the tempered targets NUTS cannot sample directly:
#: ``(build the reparametrised model from the tempered one, map a point and give log|J|,
#: description)``.
REPARAMETRISATIONS = {
    "varying_intercepts": (
        scaled_mu_a,
        _scaled_mu_a_point,
        "sampled in (w = mu_a / sigma_a, log sigma_a, a, b, log sigma), Jacobian sigma_a",
    ),
}


def check_tempered_logp(name, model, temperature, sampled=None, n_points=3, seed=0):
    """Largest ``|tempered logp - (logp_nojac / T + log_jacobian)|`` at jittered points.

    With ``sampled``, the reparametrised model of ``REPARAMETRISATIONS[name]``, the error of
    its log density (minus the change of variables' log-Jacobian) is included.
    """
    base = ZOO[name].build()
    tempered = model.compile_logp()
    nojac, full = base.compile_logp(jacobian=False), base.compile_logp()
    reparametrised = sampled.compile_logp() if sampled is not None else None
    rng = np.random.default_rng(seed)
    start = base.initial_point()
    error = 0.0
    for _ in range(n_points):
        point = {key: v + rng.normal(0.0, 0.3, size=np.shape(v)) for key, v in start.items()}
        expected = nojac(point) / temperature + (full(point) - nojac(point))
        error = max(error, abs(float(tempered(point)) - float(expected)))
        if reparametrised is not None:
            scaled, log_jacobian = REPARAMETRISATIONS[name][1](point)
            error = max(error, abs(float(reparametrised(scaled)) - log_jacobian - expected))
    return error


def normal_mean_entry(temperature):
    """Closed-form tempered posterior of ``normal_mean``: the posterior's mean, ``sqrt(T)`` sd."""
    posterior = normal_mean_reference()["mu"]
    parameters = {
        "mu": {
            "mean": _round(posterior["mean"]),
            "sd": _round(posterior["sd"] * np.sqrt(temperature)),
            "mcse_mean": 0.0,
            "mcse_sd": 0.0,
        }
    }
    return {"closed_form": "Normal(sum(y) / (N + 1/100), (T / (N + 1/100)) ** 0.5)"}, parameters


def run_nuts(name, model, target_accept, args):
    """One NUTS run of a tempered model; returns ``(run record, per-scalar summary)``.

    The summary covers the zoo model's free variables, whichever variables ``model`` samples.
    """
    start = time.perf_counter()
    with model:
        idata = pm.sample(
            draws=args.draws, tune=args.tune, chains=args.chains, cores=1,
            random_seed=args.seed, target_accept=target_accept, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    seconds = time.perf_counter() - start
    columns = scalar_draws(idata, [rv.name for rv in ZOO[name].build().free_RVs])
    run = {
        "draws": args.draws, "tune": args.tune, "chains": args.chains,
        "target_accept": target_accept, "random_seed": args.seed,
        "python": platform.python_version(), "pymc": pm.__version__, "arviz": az.__version__,
        "seconds": round(seconds, 1), **diagnostics(columns, idata),
    }  # fmt: skip
    return run, summarise(columns)


def model_entry(name, args):
    """Tempered reference entry of zoo model ``name``."""
    n_rows = ZOO[name].n_rows
    settings = tempering_settings(n_rows, args.batch_size, args.alpha)
    entry = {
        "n_rows": n_rows,
        "batch_size": args.batch_size,
        "alpha": args.alpha,
        "tau": settings.tau,
        "temperature": settings.temperature,
    }
    if name == "normal_mean":
        method, parameters = normal_mean_entry(settings.temperature)
        return {**entry, **method, "parameters": parameters}
    model = tempered_model(name, settings.temperature)
    sampled = REPARAMETRISATIONS[name][0](model) if name in REPARAMETRISATIONS else None
    error = check_tempered_logp(name, model, settings.temperature, sampled)
    if error > 1e-6:
        raise RuntimeError(f"{name}: the tempered logp is off by {error:.3g}")
    if sampled is not None:
        entry["parametrisation"] = REPARAMETRISATIONS[name][2]
        model = sampled
    tried = []
    for target_accept in args.target_accept:
        run, parameters = run_nuts(name, model, target_accept, args)
        tried.append(target_accept)
        report(name, run)
        if run["r_hat_max"] < 1.01 and run["divergences"] == 0:
            run["target_accept_tried"] = tried
            return {**entry, "nuts": run, "parameters": parameters}
    reason = (
        f"NUTS did not converge cleanly at target_accept {tried}: last run r_hat_max "
        f"{run['r_hat_max']}, {run['divergences']} divergences"
    )
    return {**entry, "nuts": {**run, "target_accept_tried": tried}, "unavailable": reason}


def report(name, run):
    """Print one NUTS run; warn if it did not converge cleanly."""
    print(
        f"{name:24s} target_accept {run['target_accept']:.2f} {run['seconds']:8.1f} s  "
        f"ess_bulk_min {run['ess_bulk_min']:8.0f}  ess_tail_min {run['ess_tail_min']:8.0f}  "
        f"r_hat_max {run['r_hat_max']:.4f}  divergences {run['divergences']}",
        flush=True,
    )
    if run["r_hat_max"] >= 1.01 or run["divergences"] > 0:
        print(f"WARNING: {name}: NUTS did not converge cleanly", flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=list(ZOO), default=list(ZOO))
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--alpha", type=float, default=0.99)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument(
        "--target-accept", type=float, nargs="+", default=[0.9, 0.95, 0.99],
        help="values tried in turn until NUTS converges without divergences",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=20251)
    parser.add_argument("--output", type=Path, default=OUTPUT_PATH)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    stored = json.loads(args.output.read_text()) if args.output.exists() else {}
    if stored and (stored["batch_size"], stored["alpha"]) != (args.batch_size, args.alpha):
        raise SystemExit(
            f"{args.output} holds batch_size {stored['batch_size']}, alpha {stored['alpha']}; "
            "regenerate every model or write to another --output"
        )
    models = stored.get("models", {})
    for name in args.models:
        models[name] = model_entry(name, args)
        if "unavailable" in models[name]:
            print(f"UNAVAILABLE: {name}: {models[name]['unavailable']}", flush=True)
        elif name == "normal_mean":
            print(f"{name:24s} closed form", flush=True)
        stored = {
            "about": ABOUT,
            "batch_size": args.batch_size,
            "alpha": args.alpha,
            "models": {key: models[key] for key in ZOO if key in models},
        }
        args.output.write_text(json.dumps(stored, indent=1) + "\n")


if __name__ == "__main__":
    main()
