"""``MinibatchModel``'s factories of compiled functions from the model's graphs.

:class:`GraphFunctions` is the part of :class:`~pymc_minibatch.MinibatchModel` that the
modules built on the adapter (bounds, curvature, Taylor expansions, diagnostics) and users
call to compile their own expressions of ``theta`` and the rows: the symbolic pieces, a
function of ``theta`` and a block of rows, of ``theta`` alone, of per-row expressions of
the model's variables, and the construction-time parity check that such per-row values
ignore the other rows of a batch.

It is a mixin: it has no state of its own (the compiled functions are kept by the class's
cache) and needs from the class that mixes it in only public names: ``theta_graph`` (the
symbolic ``theta``, row inputs, log-likelihood and log prior,
:class:`~pymc_minibatch.model.builders.ThetaGraph`), ``functions`` (the cache of compiled
functions, :class:`~pymc_minibatch.model.functions.CompiledFunctions`), and what
:mod:`~pymc_minibatch.model.functions` and :mod:`~pymc_minibatch.model.parity` read of the
model (``model``, ``mode``, ``value_vars``, ``shared``, ``initial_point``, ``row_source``,
``n_data``, ``row_term_names``, ``initial_theta``, ``over_all_rows``).
"""

from pymc_minibatch.model import functions as compiled
from pymc_minibatch.model.functions import RowsFunction, SymbolicModel
from pymc_minibatch.model.parity import check_rows_factorise


class GraphFunctions:
    """The factories of compiled functions of :class:`~pymc_minibatch.MinibatchModel` (see
    the module docstring for what they need from the class)."""

    def symbolic(self):
        """The symbolic pieces compiled functions are built from: ``theta`` (the flat vector
        of sampled values), the row inputs, the per-row log-likelihood over a batch of rows
        and the log prior (see :class:`SymbolicModel`).

        Examples
        --------
        >>> symbolic = mm.symbolic()
        >>> symbolic.theta.type.shape, symbolic.loglik.ndim
        ((3,), 1)
        """
        graph = self.theta_graph
        return SymbolicModel(graph.theta, list(graph.rows), graph.loglik, graph.logprior)

    def graph_function(self, name, graph):
        """A function of ``theta`` and a block of rows built from :meth:`symbolic`, compiled
        once, as a :class:`BlockFunction` (for :meth:`over_all_rows`, also through Dask).

        ``graph(symbolic)`` returns ``(extra_inputs, outputs)``; the compiled function is
        ``f(theta, *extra_inputs, *rows)``. ``graph`` must pickle (a module-level function
        or a ``functools.partial`` of one) and ``name`` identify it.

        Examples
        --------
        >>> def block_total(symbolic):
        ...     return [], symbolic.loglik.sum()
        >>> total = mm.graph_function("block_total", block_total)
        >>> bool(np.isclose(total(np.zeros(3), *mm.gather_rows(np.arange(1000))),
        ...                 mm.full_loglik(np.zeros(3))))
        True
        """
        return self.functions.block_function(f"graph:{name}", graph=graph)

    def prior_function(self, name, graph):
        """A compiled function of ``theta`` alone built from :meth:`symbolic`: ``graph``
        returns ``(extra_inputs, outputs)`` that must not depend on the rows; the function
        is ``f(theta, *extra_inputs)``, compiled once.

        Examples
        --------
        >>> import pytensor
        >>> def prior_gradient(symbolic):
        ...     return [], pytensor.grad(symbolic.logprior, symbolic.theta)
        >>> mm.prior_function("prior_gradient", prior_gradient)(np.ones(3))
        array([-1., -1., -1.])
        """
        return compiled.prior_function(self, name, graph)

    def theta_function(self, outputs):
        """A compiled function of ``theta`` alone computing ``outputs``, graphs in the model's
        value variables that do not depend on the rows (such as
        ``model.logp(vars, sum=False)``).

        Examples
        --------
        >>> f = mm.theta_function(mm.model.logp(vars=mm.model.free_RVs, sum=False))
        >>> [term.shape for term in f(np.zeros(3))]
        [(3,)]
        """
        return compiled.theta_function(self, outputs)

    def rows_function(self, outputs):
        """Per-row expressions of the model's free variables and rows, as a picklable
        :class:`RowsFunction` ``f(theta, *rows)`` (rows from :meth:`gather_rows`).

        ``outputs`` are scalars or vectors over the batch, built from the observed
        variables of the row graph (whose parameters refer to free random variables and to
        the symbolic row inputs); ``f`` gives one array of shape ``(len(idx),)`` per output.

        Examples
        --------
        A scalar expression of the free variables is broadcast over the rows:

        >>> evaluate = mm.rows_function([model["beta"].sum()])
        >>> evaluate(np.ones(3), *mm.gather_rows(np.arange(2)))
        [array([3., 3.])]
        """
        return RowsFunction(self, outputs)

    def compile_rows_function(self, outputs):
        """:meth:`rows_function` read at any rows: ``evaluate(theta, idx=None)`` gives one
        array of shape ``(len(idx),)`` per output; ``idx=None`` means all N rows (one pass).

        Examples
        --------
        >>> evaluate = mm.compile_rows_function([model["beta"].sum()])
        >>> evaluate(np.ones(3), idx=np.arange(2))
        [array([3., 3.])]
        """
        return compiled.rows_evaluator(self.rows_function(outputs))

    def rows_graph_function(self, name, rows_function, graph):
        """As :meth:`graph_function`, with the outputs of ``rows_function`` (a
        :class:`RowsFunction`) as graphs: ``graph(symbolic, per_row)`` returns
        ``(extra_inputs, outputs)``, and the function is ``f(theta, *extra_inputs,
        *rows)``, so that expressions of several points' per-row outputs compile into one
        function. ``name`` identifies ``graph`` for ``rows_function``.

        Examples
        --------
        >>> from pytensor.graph.replace import clone_replace
        >>> def at_two_points(symbolic, per_row):
        ...     theta2 = symbolic.theta.type("theta2")
        ...     return [theta2], [*per_row, *clone_replace(per_row, {symbolic.theta: theta2})]
        >>> total = mm.rows_function([model["beta"].sum()])
        >>> pair = mm.rows_graph_function("at_two_points", total, at_two_points)
        >>> pair(np.ones(3), np.zeros(3), *mm.gather_rows(np.arange(2)))
        [array([3., 3.]), array([0., 0.])]
        """
        return self.functions.block_function(f"rows_graph:{name}:{rows_function.name}",
                                              rows_function.outputs, rows_function.row_inputs,
                                              graph)  # fmt: skip

    # ---- construction-time parity check -------------------------------------------------
    def check(self, n_reference_rows=24, random_seed=20261129):
        """Confirm that each row's log-likelihood ignores the other rows in its batch.

        At the initial point and a jittered one, evaluates a reference batch of rows and
        then sub-batches of it (a single row, and a shuffled batch with repeats); every
        per-row value must equal the reference value of the same row.

        Raises
        ------
        NonFactorizableError
            Naming the observed variable whose per-row values differ or fail to evaluate.

        Examples
        --------
        >>> mm.check()  # passes silently for a model that factorises
        """
        check_rows_factorise(self, n_reference_rows, random_seed)
