"""The compiled functions of a :class:`~pymc_minibatch.MinibatchModel`, built on first use.

The named ones are built from :data:`~pymc_minibatch.model.builders.BUILDERS`; the others
from per-row outputs (:class:`RowsFunction`) or from a user's graph of the model's
:class:`SymbolicModel`. Each is compiled once per adapter, also in a process that
unpickled it (:class:`~pymc_minibatch.model.dask_passes.BlockFunction`).
"""

import functools
import uuid
from typing import NamedTuple

import numpy as np
import pytensor.tensor as pt
from pymc.pytensorf import compile as compile_pymc
from pymc.pytensorf import join_nonshared_inputs
from pytensor.graph.replace import clone_replace

from pymc_minibatch.model.builders import BUILDERS
from pymc_minibatch.model.dask_passes import BlockFunction


class SymbolicModel(NamedTuple):
    """What :meth:`MinibatchModel.graph_function` builds from (PyTensor variables)."""

    theta: object
    """The flat vector of sampled values, shape ``(d,)``."""
    rows: list
    """The row inputs: each data array on the row axis, restricted to a batch of B rows."""
    loglik: object
    """The log-likelihood of each row of the batch, shape ``(B,)``."""
    logprior: object
    """The log prior with the transforms' Jacobians (a scalar)."""


class CompiledFunctions:
    """The compiled functions of one adapter, by name, each compiled on first use and kept.

    Parameters
    ----------
    minibatch_model : MinibatchModel
        Read for its model, compile mode and :attr:`~MinibatchModel.theta_graph`.
    """

    def __init__(self, minibatch_model):
        self.minibatch_model = minibatch_model
        self._functions = {}
        self._block_functions = {}

    def __contains__(self, name):
        return name in self._functions

    def __getitem__(self, name):
        """The function ``name`` of :data:`~pymc_minibatch.model.builders.BUILDERS`."""
        return self.cached(name, functools.partial(self._build, name))

    def call(self, name, *args):
        """``self[name](*args)``: the function of :data:`BUILDERS` ``name`` on ``args``."""
        return self[name](*args)

    def cached(self, key, build):
        """The function kept under ``key``, or ``build()`` kept under it."""
        function = self._functions.get(key)
        if function is None:
            function = self._functions[key] = build()
        return function

    def _build(self, name):
        inputs, outputs, *mode = BUILDERS[name](self.minibatch_model.theta_graph)
        return self.compile(inputs, outputs, *mode)

    def compile(self, inputs, outputs, mode=None):
        """``outputs`` compiled as a function of ``inputs`` in the adapter's mode (or
        ``mode``), as the model compiles its log-density."""
        # PyMC's compile turns parameter checks into -inf (or drops them when the model has
        # check_bounds=False), as model.compile_logp() does, instead of raising
        mm = self.minibatch_model
        with mm.model:
            function = compile_pymc(inputs, outputs, mode=mode or mm.mode,
                                    on_unused_input="ignore")  # fmt: skip
        function.trust_input = True
        return function

    def block_function(self, name, outputs=None, row_inputs=None, graph=None):
        """The function ``name`` (or of per-row ``outputs`` over ``row_inputs``, see
        :meth:`MinibatchModel.rows_function`, or built by ``graph``, see
        :meth:`MinibatchModel.graph_function`) as a :class:`BlockFunction`, built once."""
        block_function = self._block_functions.get(name)
        if block_function is None:
            mm = self.minibatch_model
            build = functools.partial(
                compiled_function,
                name=name,
                outputs=outputs,
                row_inputs=mm.theta_graph.rows if row_inputs is None else row_inputs,
                graph=graph,
            )
            block_function = self._block_functions[name] = BlockFunction(mm, build)
        return block_function


def compiled_function(minibatch_model, name, outputs, row_inputs, graph=None):
    """The adapter's compiled function ``name``, or that of per-row ``outputs`` (over
    ``row_inputs``), or that built by ``graph`` (:meth:`MinibatchModel.graph_function`),
    compiled on first use (what a :class:`BlockFunction` builds, in any process)."""
    functions = minibatch_model.functions
    if graph is None and outputs is None:
        return functions[name]
    return functions.cached(
        name, functools.partial(_build_outputs, minibatch_model, outputs, row_inputs, graph)
    )


def _build_outputs(minibatch_model, outputs, row_inputs, graph):
    mm = minibatch_model
    rows = mm.theta_graph.rows
    if graph is None:
        return mm.functions.compile([mm.theta_graph.theta, *rows],
                                    rows_outputs(mm, outputs, row_inputs))  # fmt: skip
    if outputs is None:
        extra, graph_outputs = graph(mm.symbolic())
    else:
        extra, graph_outputs = graph(mm.symbolic(), rows_outputs(mm, outputs, row_inputs))
    return mm.functions.compile([mm.theta_graph.theta, *extra, *rows], graph_outputs)


def rows_outputs(minibatch_model, outputs, row_inputs):
    """Per-row ``outputs`` (see :meth:`MinibatchModel.rows_function`) as graphs of the
    adapter's ``theta`` and row inputs; ``outputs`` refer to ``row_inputs``, the row inputs
    of this adapter or of the one it was pickled from (which rebuilt its own)."""
    mm = minibatch_model
    own_rows = mm.theta_graph.rows
    n_rows = row_inputs[0].shape[0]
    per_row = [pt.broadcast_to(out, (n_rows,)) for out in outputs]
    values = mm.model.replace_rvs_by_values(per_row)
    if list(row_inputs) != own_rows:  # after the line above, which needs the RVs
        values = clone_replace(values, replace=dict(zip(row_inputs, own_rows, strict=True)))
    joined, theta = join_nonshared_inputs(mm.initial_point, values, mm.value_vars, mm.shared)
    return clone_replace(joined, replace={theta: mm.theta_graph.theta})


def prior_function(minibatch_model, name, graph):
    """:meth:`MinibatchModel.prior_function`: ``f(theta, *extra_inputs)`` of ``(extra_inputs,
    outputs) = graph(symbolic)``, compiled once under ``name``."""
    mm = minibatch_model

    def build():
        extra, outputs = graph(mm.symbolic())
        return mm.functions.compile([mm.theta_graph.theta, *extra], outputs)

    return mm.functions.cached(f"prior:{name}", build)


def theta_function(minibatch_model, outputs):
    """:meth:`MinibatchModel.theta_function`: ``outputs`` (graphs in the model's value
    variables, free of rows) compiled as a function of ``theta``."""
    mm = minibatch_model
    joined, theta = join_nonshared_inputs(mm.initial_point, list(outputs), mm.value_vars,
                                          mm.shared)  # fmt: skip
    return mm.functions.compile([theta], joined)


def rows_evaluator(rows_function):
    """:meth:`MinibatchModel.compile_rows_function`: ``evaluate(theta, idx=None)``, the
    outputs of ``rows_function`` at rows ``idx``, or at all N rows in one pass."""
    mm = rows_function.minibatch_model
    block_function = rows_function.block_function()

    def evaluate(theta_value, idx=None):
        if idx is not None:
            return block_function(mm.as_theta(theta_value), *mm.row_source.gather(idx))
        chunks = mm.over_all_rows(block_function, theta_value)
        return [np.concatenate(parts) for parts in zip(*chunks, strict=True)]

    return evaluate


class RowsFunction:
    """Per-row ``outputs`` of a :class:`MinibatchModel`, compiled on first call:
    ``f(theta, *rows)`` gives one array per output over the rows (see
    :meth:`MinibatchModel.rows_function`).

    It pickles with its adapter (in the same pickle, as in a step method sent to a chain's
    process) and compiles again where it is unpickled.
    """

    def __init__(self, minibatch_model, outputs):
        self.minibatch_model = minibatch_model
        self.outputs = list(outputs)
        # the graphs refer to these inputs; an unpickled adapter builds its own
        self.row_inputs = list(minibatch_model.theta_graph.rows)
        self.name = f"rows_function_{uuid.uuid4().hex}"

    def block_function(self):
        """The compiled function as a :class:`BlockFunction`, for passes over all rows."""
        return self.minibatch_model.functions.block_function(self.name, self.outputs,
                                                             self.row_inputs)  # fmt: skip

    def __call__(self, theta, *rows):
        return self.block_function()(theta, *rows)
