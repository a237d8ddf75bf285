"""``MinibatchModel``: per-row log-likelihood, log-prior and gradients of a PyMC model.

Every sampler in this package sees a PyMC model only through this class: plain NumPy in,
plain NumPy out, with ``theta`` the flat vector of PyMC's transformed value variables in
``DictToArrayBijection`` order (the order of ``vars``).
"""

import time

import numpy as np
import pymc as pm
import scipy.optimize
from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.pytensorf import make_shared_replacements
from pytensor.graph.traversal import ancestors

from pymc_minibatch._compat import default_compile_mode
from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.model import functions as compiled
from pymc_minibatch.model import gradients
from pymc_minibatch.model.builders import build_theta_graph
from pymc_minibatch.model.dask_passes import SummedFirstOutput
from pymc_minibatch.model.functions import CompiledFunctions, RowsFunction, SymbolicModel
from pymc_minibatch.model.graph import build_row_graph
from pymc_minibatch.model.laplace import fit_laplace
from pymc_minibatch.model.parity import check_rows_factorise
from pymc_minibatch.model.rows import (
    RowSource,
    picklable_rows,
    resolve_data_sources,
    unpickled_rows,
)
from pymc_minibatch.model.setup_report import SetupReport
from pymc_minibatch.model.structure import detect_structure
from pymc_minibatch.model.validation import (
    refuse_imputed_observations,
    refuse_non_finite_rows,
    refuse_rows_outside_support,
)
from pymc_minibatch.model.variables import select_value_vars

#: Rows per call when a method runs over all the data (bounds memory for memmap data). A
#: block is also a Dask task's read of chunked rows: at 2^17 rows, glibc kept per thread
#: what the blocks freed (see ``benchmarks/chunked_rows.py``'s peak memory).
FULL_DATA_CHUNK_ROWS = 2**16
#: Rows per vectorised Jacobian call (its cost grows with the square of the rows).
JACOBIAN_BLOCK_ROWS = 128


class MinibatchModel:
    """A PyMC model seen as ``log p(theta) + sum_i log p(y_i | theta)`` over its rows.

    A *row* is everything the observed variables hold at one index of the row axis (the
    most common leading length N of the observed data); several observed variables on the
    same rows are summed per row. Rows are gathered in NumPy and passed to compiled
    functions as inputs, so calls at a fixed batch size cost the same for any N, data is
    never baked into a compiled graph, and ``np.memmap`` arrays are read only where used.

    Parameters
    ----------
    model : pymc.Model, optional
        The model; taken from the context if omitted.
    vars : list of variables, optional
        Free variables (or their value variables) that ``theta`` covers. Defaults to all
        continuous free variables. The others enter as shared values which a step method
        refreshes from the current point before each step (as PyMC's ``ArrayStepShared``
        does), so samplers built on this class work inside a ``CompoundStep``.
    data : dict, optional
        ``{name: array}``: read the rows of the named data from ``array`` instead of the
        model, for data too large to hand to PyMC (which copies what a model holds into
        memory). ``name`` is a ``pm.Data`` variable or an observed variable (its observed
        values); ``array`` an ``np.ndarray`` or ``np.memmap`` (read only at the rows used)
        with the model's array's shape beyond the leading axis and a dtype that casts to
        its dtype. Declare the model on a placeholder (e.g. the first 1000 rows, every
        row-axis array the same length) and pass every row-axis array here: N is the
        arrays' row count. PyMC itself still sees the placeholder, so deterministics and
        posterior predictive draws that use the rows are on the placeholder's rows.
    check : bool, default True
        Confirm at construction that per-row values do not depend on which other rows are
        in the batch (catches lags and reductions over rows that structure alone misses),
        and validate the data (see :mod:`pymc_minibatch.model.validation`).
    mode : str or pytensor.compile.Mode, optional
        PyTensor compilation mode (default: PyTensor's default, without its BLAS rewrites
        when PyTensor's C backend has no BLAS to link, as with PyMC 5's pip wheels).
    progressbar : bool, default True
        On data of at least a million rows, show each full-data pass (of the Laplace fit,
        the bounds, ...) in a progress bar while it runs; ``setup_report`` keeps the passes
        and seconds of each stage either way.

    Raises
    ------
    NonFactorizableError
        If the likelihood does not split into per-row terms: no observed data, a
        multivariate distribution over the rows, a Potential or a reduction over rows,
        or per-row latent variables. The message names the variable.
    DataValidationError
        With ``check=True``: observed values PyMC would impute (NaN), non-finite values in
        the data on the rows, or observations outside their distribution's support; the
        message names the variable, the first bad row and its value.
    ValueError
        If ``vars`` contains discrete variables or no continuous variable is left.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> X = np.random.default_rng(0).normal(size=(1000, 3))
    >>> y = (X.sum(1) > 0).astype("int64")
    >>> with pm.Model() as model:
    ...     beta = pm.Normal("beta", 0, 1, shape=3)
    ...     obs = pm.Bernoulli("y", logit_p=X @ beta, observed=y)
    >>> mm = pmm.MinibatchModel(model)
    >>> theta = mm.initial_theta()
    >>> mm.loglik(theta, np.array([0, 5, 5])).shape
    (3,)

    The examples of the methods continue this one (``np``, ``model`` and ``mm``).
    """

    def __init__(self, model=None, vars=None, *, data=None, check=True, mode=None,
                 progressbar=True, _shared=None):  # fmt: skip
        started = time.perf_counter()
        model = pm.modelcontext(model)
        if check:  # first: imputed rows would fail later with an unrelated shape error
            refuse_imputed_observations(model)
        self.model = model
        self.mode = default_compile_mode() if mode is None else mode
        self.value_vars = select_value_vars(model, vars)
        self.var_names = [v.name for v in self.value_vars]
        self._initial_point = model.initial_point()
        self._point_map_info = DictToArrayBijection.map(
            {n: self._initial_point[n] for n in self.var_names}
        ).point_map_info
        self.ndim = int(sum(np.size(self._initial_point[n]) for n in self.var_names))

        graph = build_row_graph(model)
        self.data = dict(data or {})
        """The ``data=`` arrays, by name (empty when the rows are the model's own)."""
        sources, self.n_data = resolve_data_sources(model, graph.roots, graph.n_data, self.data)
        self.row_term_names = graph.row_term_names
        self.uses_pm_minibatch = graph.uses_pm_minibatch
        self._rows = RowSource(graph.roots, self.n_data, sources)
        self.reads_chunks = bool(self._rows.chunked)
        """Whether some rows are read chunk by chunk (Zarr, Dask or xarray ``data=``)."""
        self._row_graph = graph

        self.shared = (
            _shared
            if _shared is not None
            else make_shared_replacements(self._initial_point, self.value_vars, model)
        )
        self._theta_graph = build_theta_graph(graph, self._initial_point, self.value_vars,
                                              self.shared, model.check_bounds)  # fmt: skip
        self._functions = CompiledFunctions(self)
        self._laplace = None
        self._structure = None
        self.setup_report = SetupReport(self.n_data, progressbar, started)
        """Full-data passes and seconds per stage of the construction of a step on this
        model (:class:`~pymc_minibatch.model.setup_report.SetupReport`)."""
        with self.setup_report.stage("model", since=started):  # the graphs, then the checks
            if check:
                refuse_non_finite_rows(self)  # before check(), which NaN rows would fail
                self.check()
                refuse_rows_outside_support(self)

    # ---- read-only views of the pieces (for the modules built on the adapter) ------------
    @property
    def row_graph(self):
        """The model split into per-row terms on a batch of rows, in the model's value
        variables (:class:`~pymc_minibatch.model.graph.RowGraph`)."""
        return self._row_graph

    @property
    def theta_graph(self):
        """The row graph's pieces as functions of ``theta``, which the compiled functions
        are built from (:class:`~pymc_minibatch.model.builders.ThetaGraph`)."""
        return self._theta_graph

    @property
    def row_source(self):
        """The data arrays on the row axis (:class:`~pymc_minibatch.model.rows.RowSource`)."""
        return self._rows

    @property
    def functions(self):
        """The compiled functions, each built on first use
        (:class:`~pymc_minibatch.model.functions.CompiledFunctions`)."""
        return self._functions

    @property
    def initial_point(self):
        """The model's initial point (a dict by value-variable name), read once."""
        return self._initial_point

    @property
    def point_map_info(self):
        """``(name, shape, size, dtype)`` of each sampled variable, in ``theta``'s order."""
        return self._point_map_info

    # ---- points and theta ---------------------------------------------------------------
    def theta_from_point(self, point):
        """Flat ``theta`` (float64) of a point dict keyed by value-variable names.

        Examples
        --------
        >>> mm.theta_from_point({"beta": np.array([0.5, -1.0, 2.0])})
        array([ 0.5, -1. ,  2. ])
        """
        return DictToArrayBijection.map({n: point[n] for n in self.var_names}).data.astype(
            np.float64
        )

    def point_from_theta(self, theta):
        """Point dict of every value variable, with the sampled ones taken from ``theta``.

        Examples
        --------
        >>> mm.point_from_theta(np.array([0.5, -1.0, 2.0]))["beta"]
        array([ 0.5, -1. ,  2. ])
        """
        theta = self.as_theta(theta)
        return DictToArrayBijection.rmap(
            RaveledVars(theta, self._point_map_info), start_point=self._initial_point
        )

    def theta_indices(self, names):
        """Positions in ``theta`` of the named variables (value-variable or RV names).

        Examples
        --------
        >>> mm.theta_indices(["beta"])
        array([0, 1, 2])
        """
        rv_to_value = {rv.name: self.model.rvs_to_values[rv].name for rv in self.model.free_RVs}
        offsets, start = {}, 0
        for name, _, size, _ in self._point_map_info:
            offsets[name] = np.arange(start, start + size)
            start += size
        indices = []
        for name in names:
            value_name = rv_to_value.get(name, name)
            if value_name not in offsets:
                raise ValueError(f"'{name}' is not among the sampled variables {self.var_names}")
            indices.append(offsets[value_name])
        return np.concatenate(indices)

    def row_free_indices(self):
        """Positions in ``theta`` of the variables no row's log-likelihood depends on (read
        from the graph): a centred hierarchical model's population mean and scale, which
        only the prior touches.

        Examples
        --------
        >>> mm.row_free_indices()  # every row touches beta
        array([], dtype=int64)
        """
        touched = set(ancestors(self._row_graph.row_terms))
        free = [v.name for v in self.value_vars if v not in touched]
        return self.theta_indices(free) if free else np.empty(0, dtype=np.int64)

    def coordinate_names(self):
        """A readable name for each position of ``theta``, e.g. ``"beta[2]"`` or ``"sigma_log__"``.

        Examples
        --------
        >>> mm.coordinate_names()
        ['beta[0]', 'beta[1]', 'beta[2]']
        """
        names = []
        for name, shape, _, _ in self._point_map_info:
            if len(shape) == 0:
                names.append(name)
                continue
            for index in np.ndindex(*shape):
                names.append(f"{name}[{','.join(map(str, index))}]")
        return names

    def as_theta(self, theta):
        """``theta`` as a float64 array, checked to have shape ``(ndim,)``.

        Raises
        ------
        ValueError
            If ``theta`` has another shape.

        Examples
        --------
        >>> mm.as_theta([0, 1, 2])
        array([0., 1., 2.])
        """
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (self.ndim,):
            raise ValueError(f"theta must have shape ({self.ndim},), got {theta.shape}")
        return theta

    def initial_theta(self):
        """``theta`` at the model's initial point.

        Examples
        --------
        >>> mm.initial_theta()
        array([0., 0., 0.])
        """
        return self.theta_from_point(self._initial_point)

    # ---- minibatch quantities -----------------------------------------------------------
    def gather_rows(self, idx):
        """The data of rows ``idx`` (repeats allowed), one in-memory array per row input:
        read once, then passed to several evaluations as ``rows=``.

        Examples
        --------
        >>> sorted(rows.shape for rows in mm.gather_rows(np.array([0, 2])))  # X and y
        [(2,), (2, 3)]
        """
        return self._rows.gather(idx)

    def loglik(self, theta, idx):
        """Log-likelihood of rows ``idx`` (repeats allowed) at ``theta``, shape ``(len(idx),)``.

        Examples
        --------
        >>> mm.loglik(np.zeros(3), np.array([0, 1, 1])).round(4)
        array([-0.6931, -0.6931, -0.6931])
        """
        return self._functions.call("loglik", self.as_theta(theta), *self._rows.gather(idx))

    def loglik_pair(self, theta, theta2, idx=None, *, rows=None):
        """``(loglik(theta, idx), loglik(theta2, idx))`` from one call on the same rows.

        ``rows``: the rows already read by :meth:`gather_rows` (instead of ``idx``).

        Examples
        --------
        >>> current, proposed = mm.loglik_pair(np.zeros(3), np.ones(3), np.arange(5))
        >>> current.shape, proposed.shape
        ((5,), (5,))
        """
        if rows is None:
            rows = self._rows.gather(idx)
        return tuple(
            self._functions.call("loglik_pair", self.as_theta(theta), self.as_theta(theta2), *rows)
        )

    def grad_loglik(self, theta, idx, per_row=False):
        """Gradient of the log-likelihood of rows ``idx`` with respect to ``theta``.

        Returns the gradient of the sum over rows, shape ``(ndim,)``, or with
        ``per_row=True`` one gradient per row, shape ``(len(idx), ndim)``.

        Examples
        --------
        >>> mm.grad_loglik(np.zeros(3), np.arange(10)).shape
        (3,)
        >>> mm.grad_loglik(np.zeros(3), np.arange(10), per_row=True).shape  # doctest: +SKIP
        (10, 3)
        """
        theta = self.as_theta(theta)
        if not per_row:
            return self._functions.call("grad_loglik", theta, *self._rows.gather(idx))[1]
        idx = np.asarray(idx).ravel()
        # a vectorised Jacobian costs O(B^2): work in blocks of JACOBIAN_BLOCK_ROWS rows
        blocks = [
            self._jacobian_block(theta, idx[start : start + JACOBIAN_BLOCK_ROWS])
            for start in range(0, idx.size, JACOBIAN_BLOCK_ROWS)
        ]
        return np.concatenate(blocks) if blocks else np.empty((0, self.ndim))

    def loglik_and_grad(self, theta, idx):
        """``(loglik(theta, idx), grad of their sum)`` from one call on the same rows.

        Examples
        --------
        >>> values, grad = mm.loglik_and_grad(np.zeros(3), np.arange(10))
        >>> values.shape, grad.shape
        ((10,), (3,))
        """
        values, grad = self._functions.call("grad_loglik", self.as_theta(theta),
                                            *self._rows.gather(idx))  # fmt: skip
        return values, grad

    def _jacobian_block(self, theta, idx):
        if idx.size == 1:
            # PyTensor 2.x raises on a vectorised Jacobian over a single gathered row
            # (AdvancedIncSubtensor1 runtime-broadcasting check): evaluate the row twice
            rows = self._rows.gather(np.repeat(idx, 2))
            return self._functions.call("grad_loglik_rows", theta, *rows)[1][:1]
        return self._functions.call("grad_loglik_rows", theta, *self._rows.gather(idx))[1]

    def directional_grad_loglik(self, theta, direction, idx):
        """Per-row directional derivatives ``grad l_i(theta) . direction``, shape (len(idx),).

        One forward-mode product (Jacobian times vector) over the batch, in O(len(idx)).

        Examples
        --------
        Against a finite difference:

        >>> theta, direction, idx = np.zeros(3), np.array([1.0, 0.0, 0.0]), np.arange(4)
        >>> step = (mm.loglik(theta + 1e-6 * direction, idx) - mm.loglik(theta, idx)) / 1e-6
        >>> np.allclose(mm.directional_grad_loglik(theta, direction, idx), step, atol=1e-5)
        True
        """
        theta, direction = self.as_theta(theta), self.as_theta(direction)
        return self._functions.call("directional_grad_loglik", theta, direction,
                                    *self._rows.gather(idx))  # fmt: skip

    def grad_estimate(self, theta, idx, weights=None):
        """Unbiased minibatch estimate of the log posterior and its gradient.

        ``logprior(theta) + N / len(idx) * sum(loglik(theta, idx))`` and its gradient:
        unbiased for the full log posterior when ``idx`` is drawn uniformly (with or
        without replacement). ``weights`` (one per row of ``idx``) replace ``N / len(idx)``
        for batches drawn otherwise (stratified: :mod:`pymc_minibatch.kernels.strata`).

        Examples
        --------
        >>> rng = np.random.default_rng(1)
        >>> value, grad = mm.grad_estimate(np.zeros(3), rng.choice(mm.n_data, 100))
        >>> grad.shape
        (3,)
        """
        return gradients.grad_estimate(self, theta, idx, weights)

    @renamed_arguments(centre="center")
    def grad_estimate_difference(self, theta, center, idx, weights=None):
        """:meth:`grad_estimate` at ``theta`` minus its likelihood part at ``center``.

        ``logprior(theta) + N / len(idx) * sum(loglik(theta, idx) - loglik(center, idx))``
        and its gradient with respect to ``theta`` minus the likelihood part's gradient at
        ``center``, from one call on rows gathered once: the minibatch part of a
        control-variate estimate (see
        :class:`~pymc_minibatch.model.control_variates.ControlVariateGradients`).

        Examples
        --------
        >>> value, grad = mm.grad_estimate_difference(np.ones(3), np.ones(3), np.arange(100))
        >>> bool(np.isclose(value, mm.logprior(np.ones(3))))
        True
        >>> bool(np.allclose(grad, mm.logprior_and_grad(np.ones(3))[1]))
        True
        """
        return gradients.grad_estimate_difference(self, theta, center, idx, weights)

    def grad_estimate_particles(self, thetas, idx):
        """:meth:`grad_estimate` at each row of ``thetas`` (shape ``(M, ndim)``), all on the
        same rows ``idx`` (gathered once). Returns values ``(M,)`` and gradients ``(M, ndim)``.

        One call of one compiled function for all particles: the graph of
        :meth:`grad_estimate` and its gradient vectorised over a leading particle axis of
        ``theta`` (``pytensor.graph.replace.vectorize_graph``). A parameter outside its
        support gives ``-inf`` (or is not checked, with ``check_bounds=False``) at that
        particle alone, as in :meth:`grad_estimate`.

        Examples
        --------
        >>> values, grads = mm.grad_estimate_particles(np.zeros((4, 3)), np.arange(100))
        >>> values.shape, grads.shape
        ((4,), (4, 3))
        """
        return gradients.grad_estimate_particles(self, thetas, idx)

    # ---- row-free and full-data quantities ----------------------------------------------
    def logprior(self, theta):
        """Priors with transform Jacobians, plus every term that touches no rows.

        Examples
        --------
        >>> round(mm.logprior(np.zeros(3)), 4)  # three standard normals at 0
        -2.7568
        """
        return float(self._functions.call("logprior", self.as_theta(theta)))

    def logprior_and_grad(self, theta):
        """``(logprior(theta), gradient)``.

        Examples
        --------
        >>> value, grad = mm.logprior_and_grad(np.ones(3))
        >>> grad
        array([-1., -1., -1.])
        """
        value, grad = self._functions.call("logprior_and_grad", self.as_theta(theta))
        return float(value), grad

    def log_jacobian_and_grad(self, theta):
        """The transforms' log-Jacobians (included in :meth:`logprior`) and their gradient.

        Samplers that temper the prior (MINT) temper the density of the constrained
        values, not the Jacobian, so that the tempered target does not depend on the
        parametrisation.

        Examples
        --------
        >>> mm.log_jacobian_and_grad(np.zeros(3))[0]  # beta is untransformed
        0.0
        """
        value, grad = self._functions.call("log_jacobian_and_grad", self.as_theta(theta))
        return float(value), grad

    def chunk_cache_counts(self):
        """``(hits, misses)`` of the chunk caches of chunked ``data=`` arrays so far (see
        :class:`~pymc_minibatch.ChunkedRows`); ``(0, 0)`` without them.

        Examples
        --------
        >>> mm.chunk_cache_counts()  # mm's rows are NumPy arrays
        (0, 0)
        """
        return self._rows.cache_counts()

    def prefetch_rows(self, idx):
        """Announce that rows ``idx`` will be read by the next calls: chunked ``data=``
        arrays read them now, in one pass over their chunks
        (:meth:`~pymc_minibatch.ChunkedRows.prefetch`).
        Nothing changes in what any call returns.

        Examples
        --------
        >>> mm.prefetch_rows(np.array([7, 2, 7]))  # mm's rows are in memory: nothing to read
        >>> mm.loglik(theta, np.array([7, 2])).shape
        (2,)
        """
        self._rows.prefetch(idx)

    def full_loglik(self, theta):
        """Log-likelihood summed over all N rows (in chunks).

        Examples
        --------
        >>> round(mm.full_loglik(np.zeros(3)), 2)  # 1000 rows at p = 1/2
        -693.15
        """
        return sum(self._over_all_rows("loglik", theta, summed=True))

    def full_loglik_rows(self, theta):
        """The log-likelihood of each of the N rows (one pass over the data, in chunks).

        Examples
        --------
        >>> mm.full_loglik_rows(np.zeros(3)).shape
        (1000,)
        """
        return np.concatenate(self._over_all_rows("loglik", theta))

    def logp(self, theta):
        """Full log posterior (unnormalised) over all N rows; equals ``model.compile_logp()``.

        Examples
        --------
        >>> theta = np.array([0.1, 0.2, 0.3])
        >>> bool(np.isclose(mm.logp(theta), model.compile_logp()(mm.point_from_theta(theta))))
        True
        """
        return self.logprior(theta) + self.full_loglik(theta)

    def logp_and_grad(self, theta):
        """Full log posterior over all N rows and its gradient.

        Examples
        --------
        >>> value, grad = mm.logp_and_grad(np.zeros(3))
        >>> grad.shape
        (3,)
        """
        theta = self.as_theta(theta)
        total, grad = self.logprior_and_grad(theta)
        grad = grad.copy()
        for block_total, chunk_grad in self._over_all_rows("grad_loglik", theta, summed=True):
            total += block_total
            grad += chunk_grad
        return total, grad

    def _over_all_rows(self, name, theta, summed=False):
        """Compiled function ``name`` on each chunk of all N rows, in order: one full-data
        pass, in this process or through Dask when rows are in chunked arrays. With
        ``summed``, its first output (one value per row) is summed within each chunk."""
        function = self._functions.block_function(name)
        return self.over_all_rows(SummedFirstOutput(function) if summed else function, theta)

    def over_all_rows(self, function, theta, consume=None):
        """``[function(theta, *rows) for each block of rows]``, in order: one full-data pass
        over blocks of ``FULL_DATA_CHUNK_ROWS`` rows, in this process or as Dask tasks when
        rows are in chunked arrays (``function`` must then pickle; a
        :meth:`RowsFunction.block_function` pickles once per pass and compiles once per
        worker). With ``consume``, each block's result goes to ``consume(result)`` in order
        instead, and is not kept.

        Examples
        --------
        >>> evaluate = mm.rows_function([model["beta"].sum()]).block_function()
        >>> [values[0].shape for values in mm.over_all_rows(evaluate, np.ones(3))]
        [(1000,)]
        """
        theta = self.as_theta(theta)
        with self.setup_report.full_data_pass() as advance:
            return self._rows.map_chunks(function, theta, FULL_DATA_CHUNK_ROWS, consume,
                                         advance)  # fmt: skip

    @property
    def full_data_passes(self):
        """Passes over all N rows so far (mode search, curvature, bounds, fallback steps)."""
        return self.setup_report.passes

    @property
    def pass_seconds(self):
        """The wall time of each of these passes, in order."""
        return self.setup_report.pass_seconds

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
        graph = self._theta_graph
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
        return self._functions.block_function(f"graph:{name}", graph=graph)

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

    def find_map(self, theta=None):
        """Posterior mode in ``theta``-space by L-BFGS on the full-data log posterior.

        Starts from ``theta`` (default: the initial point); each iteration is one pass over
        the data.

        Examples
        --------
        >>> theta_map = mm.find_map()
        >>> bool(np.all(mm.point_from_theta(theta_map)["beta"] > 0))
        True
        """
        start = self.initial_theta() if theta is None else self.as_theta(theta)

        def objective(value):
            logp, grad = self.logp_and_grad(value)
            return -logp, -grad

        result = scipy.optimize.minimize(objective, start, jac=True, method="L-BFGS-B")
        return result.x

    def laplace(self, rng=None):
        """The Laplace approximation of the full-data posterior (computed once, then cached).

        The mode by Newton's method with the exact full-data Hessian from the initial point,
        and that Hessian there, factorised (block by block in hierarchical models); see
        :mod:`pymc_minibatch.model.laplace`. ``rng`` jitters the starts of the searches tried
        again when the first does not end at a mode (default: a fixed seed, so that the fit
        is a function of the model).

        Examples
        --------
        >>> fit = mm.laplace()
        >>> bool(np.allclose(fit.mode, mm.find_map(), atol=1e-3))
        True
        >>> fit.draw(np.random.default_rng(0), size=5).shape
        (5, 3)
        """
        if self._laplace is None:
            with self.setup_report.stage("Laplace fit"):
                self._laplace = fit_laplace(self, rng=rng)
        return self._laplace

    def structure(self):
        """Which coordinates of ``theta`` each row touches (computed once, then cached):
        shared ones, and in hierarchical models the local ones of the row's group; see
        :mod:`pymc_minibatch.model.structure`.

        Examples
        --------
        >>> structure = mm.structure()
        >>> structure.shared, structure.local.shape  # beta: every row touches all three
        (array([0, 1, 2]), (0, 0))
        """
        if self._structure is None:
            self._structure = detect_structure(self)
        return self._structure

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

    # ---- compiled functions (built on first use) -----------------------------------------
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
        return self._functions.block_function(f"rows_graph:{name}:{rows_function.name}",
                                              rows_function.outputs, rows_function.row_inputs,
                                              graph)  # fmt: skip

    # ---- pickling: compiled functions are rebuilt, shared variables kept -----------------
    def __getstate__(self):
        return {
            "model": self.model,
            "var_names": self.var_names,
            "mode": self.mode,
            "shared": self.shared,
            "data": {name: picklable_rows(array) for name, array in self.data.items()},
        }

    def __setstate__(self, state):
        model = state["model"]
        # value variables of transformed RVs ("sigma_log__") are not among model's named vars
        by_name = {value.name: value for value in model.value_vars}
        value_vars = [by_name[name] for name in state["var_names"]]
        data = {name: unpickled_rows(array) for name, array in state.get("data", {}).items()}
        self.__init__(
            model, value_vars, data=data, check=False, mode=state["mode"], _shared=state["shared"]
        )
