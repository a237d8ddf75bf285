"""Rewrite a PyMC model into per-row log-likelihood graphs whose rows are inputs.

The observed random variables are rebuilt with every row-axis data array replaced by a
symbolic input of unknown length B, resized to B rows with ``change_dist_size``, and their
conditional log-density is derived again. Patching the output of ``model.logp(sum=False)``
does not work: PyMC pins the N-row shapes there (the terms carry the observed variables'
static N-row shapes, so a batch of B rows fails a shape check). Every refusal raises
:class:`NonFactorizableError` naming the variable.
"""

from collections import Counter
from types import SimpleNamespace
from typing import NamedTuple

import pytensor.tensor as pt
from pymc.data import MinibatchOp
from pymc.distributions.distribution import SymbolicRandomVariable
from pymc.distributions.shape_utils import _change_dist_size, change_dist_size
from pymc.logprob.basic import transformed_conditional_logp
from pymc.variational.minibatch_rv import MinibatchRandomVariable
from pytensor.graph.traversal import ancestors, graph_inputs, io_toposort
from pytensor.scalar.basic import AND, OR
from pytensor.tensor.elemwise import CAReduce

from pymc_minibatch.exceptions import NonFactorizableError
from pymc_minibatch.model.rows import is_data_root, leading_length


class RowGraph(NamedTuple):
    """Symbolic pieces of a factorising model, in terms of the model's value variables."""

    roots: list
    """Data roots (constants / shared variables) whose leading axis is the row axis."""
    row_inputs: list
    """One symbolic input per root: the same array restricted to a batch of B rows."""
    row_terms: list
    """Per observed variable on the rows: its log-likelihood per row, shape (B,)."""
    row_term_names: list
    row_rvs: list
    """The observed variables rebuilt on B rows (for inspecting their distributions)."""
    row_values: list
    """Their observed values on the B rows."""
    logprior: object
    """Scalar: priors with Jacobians, observed terms off the row axis, Potentials."""
    log_jacobian: object
    """Scalar: the transforms' log-Jacobians alone (part of ``logprior``)."""
    n_data: int
    uses_pm_minibatch: bool


def rebuild_replace(outputs, replace):
    """Rebuild only the nodes downstream of ``replace``; everything else keeps its identity.

    Unlike ``clone_replace``, free random variables stay the same objects (so
    ``conditional_logp`` can map them to value variables); unlike
    ``graph_replace(strict=False)``, no ``SpecifyShape`` pins the old static shapes.
    """
    memo = dict(replace)
    for node in io_toposort(list(replace), outputs):
        if any(i in memo for i in node.inputs):
            new_node = node.clone_with_new_inputs(
                [memo.get(i, i) for i in node.inputs], strict=False
            )
            memo.update(zip(node.outputs, new_node.outputs, strict=True))
    return [memo.get(o, o) for o in outputs]


def _value_length(value):
    if value.ndim == 0:
        return None
    if is_data_root(value):
        return leading_length(value)
    try:
        return int(value.shape[0].eval())
    except Exception:  # a symbolic value whose length is unknown: not on the row axis
        return None


def _reduces_first_axis(node, row_inputs):
    """Whether ``node`` sums/averages/maximises over axis 0 of something built from rows."""
    if not isinstance(node.op, CAReduce) or isinstance(node.op.scalar_op, AND | OR):
        return False  # parameter checks reduce with all/any; they couple no values
    axis = node.op.axis
    if axis is not None and 0 not in axis:
        return False
    return any(r in row_inputs for r in ancestors([node.inputs[0]]))


def build_row_graph(model) -> RowGraph:
    """Split ``model`` into per-row log-likelihood terms and a row-free log-prior."""
    # dict.fromkeys: PyMC 5 can list an observed variable twice after
    # pm.sample_posterior_predictive inside the model's context
    observed = list(dict.fromkeys(model.observed_RVs))
    if not observed:
        raise NonFactorizableError(
            "the model has no observed variables: there are no rows to take minibatches of"
        )
    free_rvs = list(model.free_RVs)

    # pm.Minibatch outputs stand for their full inputs; total_size wrappers are dropped
    minibatch_to_full = {}
    for node in io_toposort(graph_inputs(observed, blockers=free_rvs), observed):
        if isinstance(node.op, MinibatchOp):
            minibatch_to_full.update(zip(node.outputs[:-1], node.inputs[:-1], strict=True))
    unwrapped = {
        rv: rv.owner.inputs[0] if isinstance(rv.owner.op, MinibatchRandomVariable) else rv
        for rv in observed
    }
    full_values = dict(
        zip(
            observed,
            rebuild_replace([model.rvs_to_values[rv] for rv in observed], minibatch_to_full),
            strict=True,
        )
    )
    lengths = {rv: _value_length(full_values[rv]) for rv in observed}
    counts = Counter(n for n in lengths.values() if n is not None)
    if not counts:
        names = ", ".join(rv.name for rv in observed)
        raise NonFactorizableError(
            f"no observed variable ({names}) has a leading row axis: nothing to minibatch"
        )
    n_data = counts.most_common(1)[0][0]
    on_rows = [rv for rv in observed if lengths[rv] == n_data]
    off_rows = [rv for rv in observed if lengths[rv] != n_data]

    graph_of_rows = [unwrapped[rv] for rv in on_rows] + [full_values[rv] for rv in on_rows]
    roots = [
        r
        for r in graph_inputs(graph_of_rows + list(minibatch_to_full.values()), blockers=free_rvs)
        if leading_length(r) == n_data
    ]
    _refuse_row_latents(model, free_rvs, on_rows, unwrapped, n_data)
    _refuse_row_potentials(model, n_data)

    row_inputs = [
        r.type.clone(shape=(None, *r.type.shape[1:]))(name=f"{r.name or 'data'}_rows")
        for r in roots
    ]
    to_rows = dict(zip(roots, row_inputs, strict=True))
    for out, full in minibatch_to_full.items():
        to_rows[out] = to_rows.get(full, full)

    # an observed variable inside another one's graph stands for its observed values,
    # as in PyMC's own logp
    values_on_rows = dict(
        zip(
            on_rows,
            rebuild_replace([model.rvs_to_values[rv] for rv in on_rows], to_rows),
            strict=True,
        )
    )
    observed_as_values = {unwrapped[rv]: values_on_rows[rv] for rv in on_rows}
    observed_as_values.update({unwrapped[rv]: model.rvs_to_values[rv] for rv in off_rows})
    batched_rvs, batched_values = [], []
    for rv in on_rows:
        original = unwrapped[rv]
        ndim_supp = getattr(original.owner.op, "ndim_supp", 0)
        batch_ndim = original.ndim - ndim_supp
        if batch_ndim < 1:
            raise NonFactorizableError(
                f"observed variable '{rv.name}' has {n_data} rows, but its distribution "
                f"({type(original.owner.op).__name__}) is multivariate over that axis "
                f"(ndim_supp={ndim_supp}): its log-density does not split into per-row terms"
            )
        others = {o: v for o, v in observed_as_values.items() if o is not original}
        inputs = rebuild_replace(original.owner.inputs, {**to_rows, **others})
        value_rows = values_on_rows[rv]
        new_size = [value_rows.shape[0], *(original.shape[i] for i in range(1, batch_ndim))]
        batched_rvs.append(_resized_rv(original, inputs, new_size))
        batched_values.append(value_rows)

    rvs_to_values = {rv: model.rvs_to_values[rv] for rv in free_rvs}
    rvs_to_values.update(zip(batched_rvs, batched_values, strict=True))
    transforms = {rv: model.rvs_to_transforms.get(rv) for rv in free_rvs}
    terms = transformed_conditional_logp(
        batched_rvs, rvs_to_values=rvs_to_values, rvs_to_transforms=transforms, jacobian=False
    )
    row_terms = [t.sum(axis=tuple(range(1, t.ndim))) if t.ndim > 1 else t for t in terms]
    for rv, term in zip(on_rows, row_terms, strict=True):
        if term.ndim != 1:
            raise NonFactorizableError(
                f"the log-density of observed variable '{rv.name}' is not one value per row"
            )
        for node in io_toposort(row_inputs, [term]):
            if _reduces_first_axis(node, row_inputs):
                raise NonFactorizableError(
                    f"the likelihood of observed variable '{rv.name}' reduces over the row "
                    f"axis ({node.op}): every row depends on all the others (e.g. in-graph "
                    "standardisation X - X.mean(0)); compute such statistics in NumPy "
                    "before building the model"
                )

    prior_vars = free_rvs + off_rows + list(model.potentials)
    logprior = model.logp(vars=prior_vars, jacobian=True) if prior_vars else pt.constant(0.0)
    log_jacobian = (
        model.logp(vars=free_rvs, jacobian=True) - model.logp(vars=free_rvs, jacobian=False)
        if free_rvs
        else pt.constant(0.0)
    )
    return RowGraph(
        roots=roots,
        row_inputs=row_inputs,
        row_terms=row_terms,
        row_term_names=[rv.name for rv in on_rows],
        row_rvs=batched_rvs,
        row_values=batched_values,
        logprior=pt.as_tensor(logprior, dtype="float64"),
        log_jacobian=pt.as_tensor(log_jacobian, dtype="float64"),
        n_data=n_data,
        uses_pm_minibatch=bool(minibatch_to_full)
        or any(unwrapped[rv] is not rv for rv in observed),
    )


def _resized_rv(rv, new_inputs, new_size):
    """``rv`` rebuilt on ``new_inputs`` (row-sized data) with batch size ``new_size``."""
    op = rv.owner.op
    if isinstance(op, SymbolicRandomVariable):
        # Mixtures, Censored, ... are OpFromGraphs whose inner input types pin the N-row
        # shapes: cloning the node would wrap the row inputs in SpecifyShape(N). PyMC's
        # size dispatch rebuilds the op from its inputs instead; it reads only
        # ``rv.owner.op`` and ``rv.owner.inputs``.
        stand_in = SimpleNamespace(owner=SimpleNamespace(op=op, inputs=new_inputs))
        return _change_dist_size(op, stand_in, new_size, expand=False)
    node = rv.owner.clone_with_new_inputs(new_inputs, strict=False)
    return change_dist_size(node.outputs[rv.owner.outputs.index(rv)], new_size, expand=False)


def _refuse_row_latents(model, free_rvs, on_rows, unwrapped, n_data):
    """Free variables with one value per row cannot be minibatched; say what to do."""
    likelihood_ancestors = set(ancestors([unwrapped[rv] for rv in on_rows]))
    initial_point = model.initial_point()
    for rv in free_rvs:
        shape = initial_point[model.rvs_to_values[rv].name].shape
        if n_data > 1 and len(shape) and shape[0] == n_data and rv in likelihood_ancestors:
            raise NonFactorizableError(
                f"free variable '{rv.name}' has one value per row (shape {shape}): per-row "
                "latent variables grow with the data and cannot be minibatched; marginalise "
                "it out of the likelihood (e.g. a pm.Mixture instead of latent labels)"
            )


def _refuse_row_potentials(model, n_data):
    for pot in model.potentials:
        if any(leading_length(r) == n_data for r in graph_inputs([pot])):
            raise NonFactorizableError(
                f"Potential '{pot.name}' uses data on the row axis; minibatch samplers cannot "
                "subsample it. Write that term as an observed distribution over the rows"
            )
