"""Data checks run when a ``MinibatchModel`` is built (with ``check=True``).

A minibatch sampler touches only a few rows per step, so bad data that a full-data sampler
would reveal at once (a NaN log-density) can go unnoticed for many steps, or surface as an
error that names no variable. These checks refuse such data at construction and say which
variable, which row and what to do:

* :func:`refuse_imputed_observations`: observed data with missing values, which PyMC
  splits into an observed part and an imputed free variable;
* :func:`refuse_non_finite_rows`: NaN or infinite values in any data array on the rows
  (run before ``MinibatchModel.check``, which such rows can make fail with a message that
  blames the model);
* :func:`refuse_rows_outside_support`: rows whose log-likelihood is ``-inf`` (or NaN) at
  every parameter value tried, such as a Bernoulli observation of 3 (run after
  ``MinibatchModel.check``, which confirms that the rows can be evaluated in chunks).

Every refusal raises :class:`~pymc_minibatch.exceptions.DataValidationError`.
"""

import numpy as np
import pytensor
from pytensor.compile.mode import get_mode
from pytensor.graph.traversal import ancestors
from pytensor.tensor.subtensor import AdvancedIncSubtensor

from pymc_minibatch.exceptions import DataValidationError
from pymc_minibatch.model.rows import root_value

#: Rows read at a time by the checks that run over all the data.
VALIDATION_CHUNK_ROWS = 2**16
#: Jittered points tried, besides the initial point, before a row is called impossible.
N_JITTERED_POINTS = 3
#: Half-width of the uniform jitter in the transformed space (pm.sample jitters by 1).
JITTER_HALF_WIDTH = 2.0
#: Seed of the jitter, so that a model is accepted or refused the same way every time.
JITTER_SEED = 20261130


# ---- missing observed values (imputation) --------------------------------------------------
def refuse_imputed_observations(model):
    """Refuse observed variables whose missing values PyMC turned into free variables.

    For observed data with NaN (or masked) entries, PyMC registers an observed variable
    ``<name>_observed`` for the present values, a free variable ``<name>_unobserved`` for
    the missing ones and a Deterministic ``<name>`` that writes both into one array. The
    imputed values are per-row latent variables, which minibatches cannot subsample (and
    the observed part no longer lines up with the covariates).

    Parameters
    ----------
    model : pymc.Model

    Raises
    ------
    DataValidationError
        Naming the observed variable, its number of missing values and the imputed
        free variable.
    """
    for name, unobserved, n_missing in _imputed_variables(model):
        raise DataValidationError(
            f"observed variable '{name}' has {n_missing} missing values that PyMC turned into "
            f"the imputed free variable '{unobserved.name}'; minibatch samplers cannot "
            "subsample imputed rows. Drop those rows before building the model (e.g. "
            f"mask = ~np.isnan({name}) and keep the rows [mask] of the observations and of "
            "every covariate), or model the missing values explicitly"
        )


def _imputed_variables(model):
    """``(name, unobserved free variable, number of missing values)`` per imputed variable.

    The marker is structural rather than a naming convention: PyMC's Deterministic joins
    the two parts by writing a free variable and an observed variable into one array with
    ``set_subtensor`` (in both PyMC 5 and 6, with or without a ``PartialObservedRV``).
    """
    free_rvs, observed_rvs = set(model.free_RVs), set(model.observed_RVs)
    for deterministic in model.deterministics:
        written = _set_subtensor_writes(deterministic, blockers=free_rvs | observed_rvs)
        unobserved = [(rv, index) for rv, index in written if rv in free_rvs]
        if unobserved and any(rv in observed_rvs for rv, _ in written):
            rv, index = unobserved[0]
            yield deterministic.name, rv, _count_selected(index)


def _set_subtensor_writes(var, blockers):
    """``(value, index)`` of each ``set_subtensor`` in the graph of ``var``."""
    writes = []
    for node_output in ancestors([var], blockers=list(blockers)):
        node = node_output.owner
        if node is not None and isinstance(node.op, AdvancedIncSubtensor):
            if node.op.set_instead_of_inc:
                writes.append((node.inputs[1], node.inputs[2]))
    return writes


def _count_selected(mask):
    """Number of entries a constant boolean mask selects (PyMC's masks are constants)."""
    return int(np.count_nonzero(root_value(mask)))


# ---- non-finite data -----------------------------------------------------------------------
def refuse_non_finite_rows(minibatch_model):
    """Refuse NaN or infinite values in the float data arrays on the row axis.

    Covariates and observed values are read chunk by chunk (so ``np.memmap`` data is
    never loaded whole). A NaN row would make every minibatch that draws it NaN, which a
    sampler notices only when it happens to draw that row.

    Parameters
    ----------
    minibatch_model : MinibatchModel

    Raises
    ------
    DataValidationError
        Naming the data array, the number of rows with non-finite values, the first of
        them and its bad value.
    """
    found = _non_finite_rows(minibatch_model.row_source)
    if found:
        position, (n_bad, index, value) = next(iter(found.items()))
        location = ", ".join(map(str, index))
        raise DataValidationError(
            f"{n_bad} row(s) of {_describe_data(minibatch_model.row_graph, position)} hold "
            f"non-finite values; the first is row {index[0]} ([{location}] = {value}). Drop "
            "or impute those rows before building the model (e.g. keep the rows where "
            "np.isfinite(data).all(axis=1), in the observations and in every covariate)"
        )


def _non_finite_rows(rows):
    """``{position in rows.roots: (n bad rows, index of the first bad entry, its value)}``."""
    counts, firsts = {}, {}
    for start, arrays in _chunks_with_start(rows):
        for position, array in enumerate(arrays):
            if not np.issubdtype(array.dtype, np.inexact):
                continue  # integer and boolean data cannot hold NaN or inf
            bad_rows = np.flatnonzero(~np.isfinite(array).reshape(len(array), -1).all(axis=1))
            if bad_rows.size:
                counts[position] = counts.get(position, 0) + bad_rows.size
                if position not in firsts:
                    firsts[position] = _first_non_finite(array, bad_rows[0], start)
    return {position: (counts[position], *firsts[position]) for position in counts}


def _chunks_with_start(rows):
    """``(first row, arrays)`` of each chunk of the rows (views, as ``RowSource.chunks``)."""
    starts = range(0, rows.n_data, VALIDATION_CHUNK_ROWS)
    return zip(starts, rows.chunks(VALIDATION_CHUNK_ROWS), strict=True)


def _first_non_finite(chunk, row_in_chunk, chunk_start):
    """``(index in the full array, value)`` of the first non-finite entry of a row."""
    row = np.asarray(chunk[row_in_chunk])
    within_row = np.unravel_index(np.flatnonzero(~np.isfinite(row))[0], row.shape)
    index = (chunk_start + int(row_in_chunk), *(int(i) for i in within_row))
    return index, row[within_row].item()


def _describe_data(graph, position):
    """How a message names the data root at ``position`` of ``graph.roots``."""
    root, row_input = graph.roots[position], graph.row_inputs[position]
    label = f"data '{root.name}'" if root.name else "an unnamed data array"
    for name, value in zip(graph.row_term_names, graph.row_values, strict=True):
        # the root holds this variable's observed values (perhaps cast to its dtype)
        if row_input in ancestors([value]):
            return f"the observed values of '{name}'" + (f" ({label})" if root.name != name else "")
    users = [
        name
        for name, rv in zip(graph.row_term_names, graph.row_rvs, strict=True)
        if row_input in ancestors([rv])
    ]
    return f"{label} used by observed variable(s) {', '.join(map(repr, users))}"


# ---- observed values outside the support ----------------------------------------------------
def refuse_rows_outside_support(minibatch_model):
    """Refuse rows whose log-likelihood is ``-inf`` (or NaN) at every parameter value tried.

    Tries the initial point and :data:`N_JITTERED_POINTS` points jittered uniformly by
    :data:`JITTER_HALF_WIDTH` in the transformed space (a fixed seed). A row that is finite
    at any of them passes, so a row that only the initial point rules out is not refused.

    Each chunk of rows is screened on the summed per-row log-likelihood with the adapter's
    compiled ``loglik``: one pass over the data at the initial point, the other points see
    only the rows still failing. Only the rows that fail everywhere are then split into the
    terms of the separate observed variables, to name the culprit, and evaluated without
    PyMC's parameter checks, which fail whole batches at once.

    Observed variables whose likelihood depends on free variables outside ``theta`` (when
    the model was built with ``vars``) are not judged: other step methods move those.

    Parameters
    ----------
    minibatch_model : MinibatchModel

    Raises
    ------
    DataValidationError
        Naming the observed variable, the number of such rows, the first of them and its
        observed value.
    """
    points = _trial_points(minibatch_model)
    judged = [
        term_index
        for term_index in range(len(minibatch_model.row_term_names))
        if not _depends_on_shared(minibatch_model, term_index)
    ]
    counts, first_rows = {}, {}
    evaluate_terms = None  # compiled only when some rows fail
    for start, rows in _chunks_with_start(minibatch_model.row_source):
        candidates = _rows_failing_everywhere(minibatch_model, points, rows)
        if not candidates.size:
            continue
        if evaluate_terms is None:
            evaluate_terms = _compile_terms_without_parameter_checks(minibatch_model)
        failing = _terms_failing_everywhere(evaluate_terms, points, [a[candidates] for a in rows])
        for term_index in judged:
            bad_rows = candidates[failing[term_index]]
            if bad_rows.size:
                counts[term_index] = counts.get(term_index, 0) + bad_rows.size
                first_rows.setdefault(term_index, start + int(bad_rows[0]))
    if counts:
        term_index = min(counts)
        first_row = first_rows[term_index]
        value = _observed_value(minibatch_model, term_index, first_row)
        raise DataValidationError(
            f"observed variable '{minibatch_model.row_term_names[term_index]}' has "
            f"{counts[term_index]} row(s) whose log-likelihood is -inf or NaN at every "
            f"parameter value tried; the first is row {first_row}, with observed value {value}. "
            "The value is outside the support of the distribution (or a per-row parameter "
            "built from the data is invalid there); fix or drop those rows before building "
            "the model"
        )


def _trial_points(minibatch_model):
    """The initial ``theta`` and :data:`N_JITTERED_POINTS` jittered copies of it."""
    rng = np.random.default_rng(JITTER_SEED)
    initial = minibatch_model.initial_theta()
    jitter = rng.uniform(
        -JITTER_HALF_WIDTH, JITTER_HALF_WIDTH, size=(N_JITTERED_POINTS, initial.size)
    )
    return [initial, *(initial + jitter)]


def _impossible(loglik):
    """Rows with zero likelihood: ``-inf`` or NaN (``+inf`` is a density spike, not bad data)."""
    return ~(loglik > -np.inf)


def _rows_failing_everywhere(minibatch_model, points, rows):
    """Positions in ``rows`` whose summed log-likelihood is impossible at every point.

    Each point after the first is tried only on the rows still failing, so valid data costs
    a single pass.
    """
    loglik = minibatch_model.functions["loglik"]
    remaining = np.flatnonzero(_impossible(loglik(points[0], *rows)))
    for theta in points[1:]:
        if not remaining.size:
            break
        values = loglik(theta, *(a[remaining] for a in rows))
        remaining = remaining[_impossible(values)]
    return remaining


def _terms_failing_everywhere(evaluate_terms, points, rows):
    """Boolean array (observed variable, row): impossible at every point."""
    return np.logical_and.reduce(
        [[_impossible(term) for term in evaluate_terms(theta, *rows)] for theta in points]
    )


def _compile_terms_without_parameter_checks(minibatch_model):
    """``f(theta, *rows)``: each observed variable's per-row terms, parameter checks removed.

    PyMC turns a failed parameter check (e.g. ``sigma > 0``) into ``-inf`` for the whole
    batch, since the check reduces over all rows: a single row with an invalid per-row
    parameter hides which row it is. Without the checks, such a row usually gives NaN or
    ``-inf`` on its own, and the other rows keep their values; values outside the support
    are refused by the log-densities themselves, row by row.
    """
    mode = get_mode("FAST_COMPILE").including("local_remove_check_parameter")
    graph = minibatch_model.theta_graph
    return pytensor.function(
        [graph.theta, *graph.rows],
        graph.terms,
        mode=mode,
        on_unused_input="ignore",
    )


def _depends_on_shared(minibatch_model, term_index):
    """Whether an observed variable's term uses free variables that ``theta`` leaves out."""
    shared = set(minibatch_model.shared.values())
    return any(var in shared for var in ancestors([minibatch_model.theta_graph.terms[term_index]]))


def _observed_value(minibatch_model, term_index, row):
    """The observed value of one observed variable at one row, as a NumPy scalar or array."""
    graph = minibatch_model.row_graph
    read = pytensor.function(
        graph.row_inputs,
        graph.row_values[term_index],
        mode="FAST_COMPILE",
        on_unused_input="ignore",
    )
    return read(*minibatch_model.row_source.gather(np.array([row])))[0]
