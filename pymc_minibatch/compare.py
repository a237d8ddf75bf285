"""Side-by-side comparison of samplers against a reference (NUTS by default) on one model."""

import inspect
import math
import time
import warnings

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr
from pymc.step_methods.compound import BlockedStep, CompoundStep
from scipy.stats import wasserstein_distance

from pymc_minibatch._compat import (
    plot_density_comparison,
    plot_forest_comparison,
    posterior,
    result_group,
    sample_stats,
)
from pymc_minibatch.model.graph import build_row_graph

COLUMNS = (
    "wall_time_s",
    "draws",
    "ess_bulk_min",
    "ess_tail_min",
    "ess_bulk_per_s",
    "ess_per_s_ratio",
    "max_std_mean_error",
    "max_rel_sd_error",
    "mean_std_wasserstein",
    "loglik_rows_per_draw",
    "setup_passes",
)
"""Columns of the table :func:`compare` returns, in order."""

_ERROR_COLUMNS = ("max_std_mean_error", "max_rel_sd_error", "mean_std_wasserstein")

_CALL_ARGUMENTS = ("model", "draws", "tune", "chains", "random_seed")


def compare(
    samplers,
    *,
    model=None,
    reference="nuts",
    draws=1000,
    tune=1000,
    chains=2,
    cores=1,
    random_seed=None,
    var_names=None,
    return_results=False,
):
    """Run samplers and a reference on one model and tabulate speed and accuracy.

    Every sampler and the reference run on the same model with the same ``draws``,
    ``tune``, ``chains`` and ``random_seed``; each is timed from the call to the returned
    result (compilation and tuning included). Accuracy is measured against the
    reference's draws, one scalar parameter at a time.

    Parameters
    ----------
    samplers : dict of {str : step class, step method, callable or result}
        What to run, by label. A value may be

        - a step method class such as ``pmm.TunaMH``: instantiated with no arguments
          inside the model and run with ``pm.sample``;
        - a step method instance (created inside the model): run with ``pm.sample``;
        - a callable: called inside the model with whichever of ``model``, ``draws``,
          ``tune``, ``chains`` and ``random_seed`` its signature names; it returns a step
          method (run with ``pm.sample``) or a result, e.g. ``lambda random_seed:
          pmm.sample_particles("svgd", random_seed=random_seed)``;
        - a result (``InferenceData`` or ``DataTree``) computed earlier: used as it is,
          its wall time read from the posterior's ``sampling_time`` attribute if present.
    model : pymc.Model, optional
        Defaults to the model in context.
    reference : "nuts" or any value accepted in ``samplers``, default "nuts"
        ``"nuts"`` runs ``pm.sample`` with PyMC's default NUTS. Pass an earlier NUTS result
        to compare several times against one reference.
    draws, tune, chains : int
        Passed to ``pm.sample`` (and to callables that name them).
    cores : int, default 1
        Passed to ``pm.sample``. One core keeps wall times comparable between samplers.
    random_seed : int, optional
        The same seed is given to every sampler, so the table is reproducible.
    var_names : list of str, optional
        Variables to compare; defaults to the model's free variables (constrained values).
        Each scalar element is a parameter.
    return_results : bool, default False
        Also return the results, for :func:`plot_compare`.

    Returns
    -------
    table : pandas.DataFrame
        One row per sampler, the reference first, indexed by label, with the columns

        - ``wall_time_s``: seconds from call to result.
        - ``draws``: draws kept, summed over chains.
        - ``ess_bulk_min``, ``ess_tail_min``: the smallest bulk and tail ESS over parameters.
        - ``ess_bulk_per_s``: ``ess_bulk_min / wall_time_s``.
        - ``ess_per_s_ratio``: ``ess_bulk_per_s`` over the reference's.
        - ``max_std_mean_error``: largest ``|mean - mean_ref| / sd_ref`` over parameters.
        - ``max_rel_sd_error``: largest ``|sd / sd_ref - 1|``.
        - ``mean_std_wasserstein``: the 1-D Wasserstein-1 distance between the marginal
          draws and the reference's, divided by ``sd_ref`` and averaged over parameters.
        - ``loglik_rows_per_draw``: the cost, in rows of log-likelihood evaluated (a row's
          gradient counting as one row) per kept draw, averaged: the ``batch_size``
          statistic of the exact and tempered MH samplers; ``updates_per_draw *
          batch_size`` for SG-MCMC; ``n_steps * batch_size`` per particle for
          :func:`~pymc_minibatch.sample_particles`; NUTS's leapfrog steps times N. NaN where
          unknown. A step built here also adds its setup passes times N, spread over the
          kept draws.
        - ``setup_passes``: passes over all N rows before the first step: while the step was
          built (data checks, the Laplace fit, bounds and control variates) and at each chain's
          start (FlyMC's brightness draw); 0 for NUTS, NaN where unknown. Tuning steps are
          counted for no sampler.

        The reference's error columns are NaN (it is the yardstick, not a measurement).
    results : dict of {str : InferenceData or DataTree}
        Only with ``return_results=True``: the reference first, then the samplers.

    Warns
    -----
    UserWarning
        If the reference's chains disagree (``r_hat > 1.05``), e.g. NUTS stuck in different
        modes of a multimodal posterior: errors measured against it are then unreliable.

    Raises
    ------
    ValueError
        If a sampler's label is the reference's (``"NUTS"`` for ``"nuts"``, otherwise
        ``"reference"``), a value is a string other than ``"nuts"``, or a result lacks a
        compared variable.
    TypeError
        If a value is none of the kinds above, or a callable returns something else.

    Notes
    -----
    Errors relative to the reference include the reference's own Monte Carlo error: with
    ``n`` effective draws the standardised mean error of an exact sampler is of order
    ``sqrt(1/ESS + 1/ESS_ref)``. Compare biased samplers with a reference of many draws.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 2))
    >>> y = (rng.random(2000) < 1 / (1 + np.exp(-X @ [1.0, -0.5]))).astype(int)
    >>> with pm.Model() as model:
    ...     beta = pm.Normal("beta", 0, 1, shape=2)
    ...     _ = pm.Bernoulli("y", logit_p=X @ beta, observed=y)
    ...     table = pmm.compare({"TunaMH": pmm.TunaMH}, random_seed=1)  # doctest: +SKIP
    >>> table[["ess_per_s_ratio", "max_std_mean_error"]]  # doctest: +SKIP
    """
    model = pm.modelcontext(model)
    reference_label = "NUTS" if isinstance(reference, str) and reference == "nuts" else "reference"
    if reference_label in samplers:
        raise ValueError(
            f"the label {reference_label!r} names the reference; choose another sampler label"
        )
    for label, sampler in [(reference_label, reference), *samplers.items()]:
        _check_sampler(label, sampler)
    settings = {"draws": draws, "tune": tune, "chains": chains, "cores": cores}
    # the reference runs last, so that a failing sampler fails before the longest run
    runs = {label: _run(label, sampler, model, settings, random_seed)
            for label, sampler in samplers.items()}  # fmt: skip
    runs = {reference_label: _run(reference_label, reference, model, settings, random_seed)} | runs

    names = var_names or [rv.name for rv in model.free_RVs]
    n_rows = _n_rows(model)
    columns = {label: _parameter_columns(run.result, names, label) for label, run in runs.items()}
    _warn_if_unconverged(columns[reference_label], reference_label)
    rows = {}
    for label, run in runs.items():
        row = _efficiency(run, columns[label], n_rows)
        if label == reference_label:
            row.update(dict.fromkeys(_ERROR_COLUMNS, math.nan))
        else:
            row.update(_accuracy(columns[label], columns[reference_label]))
        rows[label] = row
    for row in rows.values():
        row["ess_per_s_ratio"] = row["ess_bulk_per_s"] / rows[reference_label]["ess_bulk_per_s"]
    table = pd.DataFrame.from_dict(rows, orient="index")[list(COLUMNS)]
    table.index.name = "sampler"
    if return_results:
        return table, {label: run.result for label, run in runs.items()}
    return table


def plot_compare(results, *, var_names=None):
    """Overlaid marginal densities and a forest plot of several results of one model.

    Parameters
    ----------
    results : dict of {str : InferenceData or DataTree}
        Results by label, e.g. the second value of ``compare(..., return_results=True)``.
    var_names : list of str, optional
        Variables to plot; all posterior variables by default.

    Returns
    -------
    dict
        ``"density"`` and ``"forest"``: what ArviZ's plotting functions returned (matplotlib
        axes with ArviZ 0.x; ``PlotCollection`` objects with ArviZ 1.x), one colour per
        label. A result with (almost) no spread in some parameter, e.g. particles collapsed
        onto a point (sd below 1/1000 of the largest sd of that parameter among the
        results), is left out of the density plot, with a warning, and shown in the forest
        plot; ``"density"`` is None if no result is left.

    Examples
    --------
    >>> table, results = pmm.compare(  # doctest: +SKIP
    ...     {"TunaMH": pmm.TunaMH}, model=model, return_results=True
    ... )
    >>> plots = pmm.plot_compare(results, var_names=["beta"])  # doctest: +SKIP
    """
    if not results:
        raise ValueError("results is empty: pass a dict of {label: InferenceData or DataTree}")
    collapsed = _point_masses(results, var_names)
    if collapsed:
        # a kernel density estimate needs spread: ArviZ fails on a point mass, and a near
        # point mass becomes a spike that flattens every other curve of its panel
        warnings.warn(
            f"the draws of {collapsed} have (almost) no spread in some parameter: they "
            "are left out of the density plot and shown in the forest plot only",
            UserWarning,
            stacklevel=2,
        )
    spread = {label: result for label, result in results.items() if label not in collapsed}
    return {
        "density": plot_density_comparison(spread, var_names=var_names) if spread else None,
        "forest": plot_forest_comparison(results, var_names=var_names),
    }


def _point_masses(results, var_names):
    """Labels of results with a parameter whose sd is below 1/1000 of the largest sd of any."""
    sds = {}
    for label, result in results.items():
        draws = posterior(result)
        names = var_names or list(draws.data_vars)
        sds[label] = np.concatenate(
            [np.atleast_1d(draws[name].std(("chain", "draw")).values).ravel() for name in names]
        )
    largest = np.max(list(sds.values()), axis=0)
    return [label for label, sd in sds.items() if np.any(sd <= 1e-3 * largest)]


class _Run:
    """One sampler's result, its wall time and its cost in rows per draw (if known)."""

    def __init__(self, result, seconds, step=None, setup_passes=math.nan):
        self.result = result
        self.seconds = seconds
        self.step = step
        self.setup_passes = setup_passes


def _run(label, sampler, model, settings, random_seed):
    if _is_result(sampler):
        attrs = posterior(sampler).attrs
        return _Run(sampler, float(attrs.get("sampling_time", math.nan)))
    started = time.perf_counter()
    with model:
        if isinstance(sampler, str) and sampler == "nuts":
            step = None
        elif _is_step(sampler):
            step = sampler
        else:
            produced = _call(sampler, model, settings, random_seed)
            if _is_result(produced):
                return _Run(produced, time.perf_counter() - started)
            if not _is_step(produced):
                raise TypeError(
                    f"sampler {label!r} returned {type(produced).__name__}; a callable must "
                    "return a PyMC step method or an InferenceData/DataTree result"
                )
            step = produced
        setup_passes = _passes_so_far(step) + settings["chains"] * _passes_per_chain(step)
        result = pm.sample(
            step=step,
            random_seed=random_seed,
            progressbar=False,
            compute_convergence_checks=False,
            **settings,
        )
    return _Run(result, time.perf_counter() - started, step, setup_passes)


def _passes_so_far(step):
    """Full-data passes of a step method of this package so far: 0 for NUTS (``None``),
    NaN for steps of other packages."""
    if step is None:
        return 0.0
    minibatch_model = getattr(step, "minibatch_model", None)
    return math.nan if minibatch_model is None else float(minibatch_model.full_data_passes)


def _passes_per_chain(step):
    """Full-data passes each chain of ``step`` makes before its first step (0 if unknown)."""
    return getattr(step, "setup_passes_per_chain", 0)


def _check_sampler(label, sampler):
    if isinstance(sampler, str):
        if sampler != "nuts":
            raise ValueError(f"sampler {label!r} is {sampler!r}; the only name known is 'nuts'")
    elif not (_is_result(sampler) or _is_step(sampler) or callable(sampler)):
        raise TypeError(
            f"sampler {label!r} is a {type(sampler).__name__}; pass a step method class or "
            "instance, a callable, or an InferenceData/DataTree result"
        )


def _call(function, model, settings, random_seed):
    """Call ``function`` with the arguments its signature names (a class gets none)."""
    if isinstance(function, type):
        return function()
    available = {**settings, "model": model, "random_seed": random_seed}
    parameters = inspect.signature(function).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    wanted = _CALL_ARGUMENTS if takes_any else [n for n in _CALL_ARGUMENTS if n in parameters]
    return function(**{name: available[name] for name in wanted})


def _is_step(value):
    if isinstance(value, list | tuple):
        return bool(value) and all(_is_step(v) for v in value)
    return isinstance(value, BlockedStep | CompoundStep)


def _is_result(value):
    try:
        result_group(value, "posterior")
    except (KeyError, TypeError, AttributeError):
        return False
    return not isinstance(value, dict)


def _n_rows(model):
    """Rows N of the model's likelihood, or NaN if it does not factorise over rows."""
    try:
        return build_row_graph(model).n_data
    except Exception:  # any model compare can run NUTS on, even one without rows
        return math.nan


def _parameter_columns(result, names, label):
    """Dict of scalar parameter label -> (n_chains, n_draws) array."""
    draws = posterior(result)
    missing = [name for name in names if name not in draws]
    if missing:
        raise ValueError(f"the result of {label!r} has no variable(s) {missing} in its posterior")
    columns = {}
    for name in names:
        values = np.asarray(draws[name].transpose("chain", "draw", ...).values, dtype=float)
        flat = values.reshape(*values.shape[:2], -1)
        for k, index in enumerate(np.ndindex(values.shape[2:])):
            columns[name + (str(list(index)) if index else "")] = flat[:, :, k]
    return columns


def _efficiency(run, columns, n_rows):
    draws = _as_dataset(columns)
    ess_bulk, ess_tail = (
        min(float(ess) for ess in az.ess(draws, method=method).data_vars.values())
        for method in ("bulk", "tail")
    )
    n_draws = next(iter(columns.values())).size
    setup_passes = run.setup_passes
    setup_rows = 0.0 if math.isnan(setup_passes) else setup_passes * n_rows / n_draws
    return {
        "wall_time_s": run.seconds,
        "draws": n_draws,
        "ess_bulk_min": ess_bulk,
        "ess_tail_min": ess_tail,
        "ess_bulk_per_s": ess_bulk / run.seconds,
        "loglik_rows_per_draw": _rows_per_draw(run, n_rows) + setup_rows,
        "setup_passes": setup_passes,
    }


def _warn_if_unconverged(columns, label):
    """Warn when the reference's chains disagree: errors measured against it mean little."""
    values = next(iter(columns.values()))
    if values.shape[0] < 2:
        return
    rhat = max(float(value) for value in az.rhat(_as_dataset(columns)).data_vars.values())
    if rhat > 1.05:
        warnings.warn(
            f"the reference {label!r} has r_hat {rhat:.2f}: its chains disagree (several "
            "modes, or too few draws), so the errors measured against it are unreliable; "
            "run it longer or pass a converged reference=",
            UserWarning,
            stacklevel=3,
        )


def _as_dataset(columns):
    return xr.Dataset({name: (("chain", "draw"), values) for name, values in columns.items()})


def _accuracy(columns, reference_columns):
    mean_errors, sd_errors, distances = [], [], []
    for name, reference in reference_columns.items():
        values, reference = columns[name].ravel(), reference.ravel()
        sd_ref = reference.std()
        mean_errors.append(abs(values.mean() - reference.mean()) / sd_ref)
        sd_errors.append(abs(values.std() / sd_ref - 1.0))
        distances.append(wasserstein_distance(values, reference) / sd_ref)
    return {
        "max_std_mean_error": max(mean_errors),
        "max_rel_sd_error": max(sd_errors),
        "mean_std_wasserstein": float(np.mean(distances)),
    }


def _rows_per_draw(run, n_rows):
    """Rows evaluated per kept draw, from the result's statistics or the step's settings."""
    attrs = posterior(run.result).attrs
    if "n_steps" in attrs and "batch_size" in attrs:  # a particle method: cost per particle
        return float(attrs["n_steps"]) * float(attrs["batch_size"])
    try:
        stats = sample_stats(run.result)
    except (KeyError, AttributeError):
        stats = {}
    if "batch_size" in stats:
        return float(stats["batch_size"].mean())
    if "n_steps" in stats:  # NUTS/HMC: every leapfrog step evaluates the gradient on all rows
        return float(stats["n_steps"].mean()) * n_rows
    if run.step is not None and hasattr(run.step, "batch_size"):  # SG-MCMC
        return float(run.step.batch_size) * getattr(run.step, "updates_per_draw", 1)
    return math.nan
