"""Particles of ``pmm.sample_particles`` at fixed seeds, recorded once to hold a refactor to.

The models of :func:`tests.step_methods.same_draws.build_models` (a logistic regression, a
regression with a free scale and a centred varying-intercept model with 8 groups; 300
rows), a non-centred varying-intercept model (moved centred, reported as written) and a
Poisson model started far out whose log density overflows, and a linear regression whose
particles run away with too large a step. Each case is one call with few particles
and steps and a fixed seed: every method at its defaults on the first three, and options
that take distinct paths of the particle loop (momentum on and off, uniform batches where
they would be stratified by group, AdaGrad, control variates off and the default
decaying schedule, the joint and per-coordinate kernels, the Wasserstein constants, no
preconditioning, the prior and jitter starts, a schedule, every row in every step). The
recorded values are the final particles (every posterior variable, flattened), the
``sample_stats`` (``minibatch_logp`` and the per-step history) and a text of the settings
the run chose and the warnings it gave, or the message of the error it raised.

Record (before a change that must not alter the particles), from the repository root, in
each supported environment (the C and numba backends of PyMC 5 and 6 round differently)::

    python -m tests.same_particles

It writes :data:`FIXTURE` for the running PyMC major version.
"""

import pathlib
import warnings

import numpy as np
import pymc as pm

import pymc_minibatch as pmm
from pymc_minibatch._compat import PYMC_MAJOR, posterior, sample_stats
from tests.step_methods.same_draws import _data
from tests.step_methods.same_draws import build_models as build_step_models

SEED = 20261206
BASE = {"n_particles": 10, "n_steps": 60, "batch_size": 100, "random_seed": SEED,
        "progressbar": False}  # fmt: skip
#: The recorded particles of the running PyMC major version.
FIXTURE = pathlib.Path(__file__).with_name("same_particles") / f"pymc{PYMC_MAJOR}.npz"
STATS = ("minibatch_logp", "step_size", "bandwidth", "mean_grad_norm", "mean_velocity_norm",
         "spread")  # fmt: skip
SETTINGS = ("kernel", "bandwidth_scale", "momentum", "control_variates", "wasserstein_weight",
            "stratified")


def build_models():
    """``{name: pm.Model}`` of the module docstring."""
    models = build_step_models()
    del models["box"]
    X, groups, _, y_real = _data()
    with pm.Model() as non_centred:
        mu = pm.Normal("mu", 0.0, 1.0)
        tau = pm.HalfNormal("tau", 1.0)
        z = pm.Normal("z", 0.0, 1.0, shape=8)
        a = pm.Deterministic("a", mu + tau * z)
        beta = pm.Normal("beta", 0.0, 2.0, shape=2)
        pm.Normal("y", a[groups] + X @ beta, 0.7, observed=y_real)
    with pm.Model() as linear:
        beta = pm.Normal("beta", 0.0, 2.0, shape=2)
        pm.Normal("y", X @ beta, 0.7, observed=y_real)
    counts = np.random.default_rng(0).poisson(20.0, size=200)
    with pm.Model() as poisson:
        log_rate = pm.Normal("log_rate", 0.0, 1.0)
        pm.Poisson("y", pm.math.exp(log_rate), observed=counts)
    models.update(non_centred=non_centred, linear=linear, poisson=poisson)
    return models


def cases():
    """``{case name: (model name, keyword arguments of sample_particles)}``."""
    found = {}
    for method in pmm.particles.METHODS:
        for model in ("logistic", "free_scale", "varying_intercept"):
            found[f"{method}/{model}"] = (model, {"method": method})
    options = {
        "svgd/free_scale/momentum": ("free_scale", {"momentum": 0.9}),
        "svgd/varying_intercept/no_momentum": ("varying_intercept", {"momentum": 0.0}),
        "svgd/varying_intercept/uniform_batches": ("varying_intercept", {"stratify": False}),
        "svgd/varying_intercept/joint": ("varying_intercept", {"kernel": "joint"}),
        "svgd/free_scale/coordinates": ("free_scale", {"kernel": "coordinates"}),
        "svgd/free_scale/coordinates_momentum_adagrad": (
            "free_scale", {"kernel": "coordinates", "momentum": 0.8, "adagrad": True}),
        "wsgld_blob/free_scale/adagrad": ("free_scale", {"method": "wsgld_blob", "adagrad": True}),
        "svgd/logistic/adagrad_momentum": ("logistic", {"adagrad": True, "momentum": 0.5}),
        "svgd/free_scale/no_control_variates": ("free_scale", {"control_variates": False}),
        "pisgld/logistic/wasserstein": ("logistic", {
            "method": "pisgld", "control_variates": False, "wasserstein_weight": 0.2,
            "entropic_reg": 0.5}),
        "wsgld/free_scale/entropic_reg": ("free_scale", {"method": "wsgld", "entropic_reg": 0.3}),
        "svgd/logistic/unpreconditioned_jitter": ("logistic", {
            "precondition": False, "init": "jitter", "step_size": 0.01}),
        "wsgld_blob/free_scale/prior_schedule": ("free_scale", {
            "method": "wsgld_blob", "init": "prior",
            "step_size": pmm.schedules.polynomial_decay(0.02)}),
        "svgd/logistic/all_rows": ("logistic", {"batch_size": 300}),
        "svgd/non_centred": ("non_centred", {}),
        "pisgld/non_centred/no_control_variates": ("non_centred", {
            "method": "pisgld", "control_variates": False}),
        "svgd/poisson/diverges": ("poisson", {
            "precondition": False, "step_size": 1.0, "init": "jitter", "batch_size": 200}),
        "wsgld/poisson/diverges": ("poisson", {
            "method": "wsgld", "precondition": False, "step_size": 1.0, "init": "jitter",
            "batch_size": 200}),
        "svgd/linear/runs_away": ("linear", {"precondition": False, "step_size": 0.05}),
        "pisgld/linear/runs_away": ("linear", {
            "method": "pisgld", "step_size": 30.0, "init": "jitter"}),
    }  # fmt: skip
    found.update(options)
    return found


def particles(model, kwargs):
    """``(draws, stats, notes)``: the final particles ``(n_particles, k)`` (every posterior
    variable flattened), the stats concatenated, and a text of the chosen settings and the
    warnings; or ``(None, None, message)`` when the run raised ``SamplerDivergenceError``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = pmm.sample_particles(model=model, **BASE | kwargs)
        except pmm.SamplerDivergenceError as error:
            return None, None, f"SamplerDivergenceError: {error}"
    post, stats = posterior(result), sample_stats(result)
    draws = np.concatenate(
        [post[name].values[0].reshape(BASE["n_particles"], -1) for name in sorted(post.data_vars)],
        axis=1,
    )
    values = np.concatenate([np.ravel(stats[name].values) for name in STATS])
    notes = [f"{name}={post.attrs.get(name)!r}" for name in SETTINGS]
    notes += sorted(f"{w.category.__name__}: {w.message}" for w in caught
                    if w.category.__module__.startswith("pymc_minibatch"))  # fmt: skip
    return draws, values, "\n".join(notes)


def record(path=FIXTURE):
    """Run every case and write ``path`` (an ``.npz`` keyed ``"case|draws"``,
    ``"case|stats"`` and ``"case|notes"``; a diverging case has notes only)."""
    models = build_models()
    results = {}
    for case, (model, kwargs) in cases().items():
        draws, stats, notes = particles(models[model], kwargs)
        results[f"{case}|notes"] = np.asarray(notes)
        if draws is not None:
            results[f"{case}|draws"], results[f"{case}|stats"] = draws, stats
    path.parent.mkdir(exist_ok=True)
    np.savez_compressed(path, **results)
    return results


if __name__ == "__main__":
    for key, value in record().items():
        print(key, value if value.dtype.kind == "U" else value.shape)
    print(f"wrote {FIXTURE}")
