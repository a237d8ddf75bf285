"""``MinibatchModel``: per-row log-likelihood, log-prior and gradients of a PyMC model.

Every sampler in this package sees a PyMC model only through this class: plain NumPy in,
plain NumPy out, with ``theta`` the flat vector of PyMC's transformed value variables in
``DictToArrayBijection`` order (the order of ``vars``).

The class is a facade: its construction, the bijection between points and ``theta``, the
read-only views of its pieces and pickling are here; its other public methods come from
mixins, one module each: :mod:`~pymc_minibatch.model.row_evaluation` (on a set of rows),
:mod:`~pymc_minibatch.model.gradient_estimates`, :mod:`~pymc_minibatch.model.full_data`
(passes over all rows, the fits) and :mod:`~pymc_minibatch.model.graph_functions`.
"""

import time

import numpy as np
import pymc as pm
from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.pytensorf import make_shared_replacements
from pytensor.graph.traversal import ancestors

from pymc_minibatch._compat import default_compile_mode
from pymc_minibatch.model.builders import build_theta_graph
from pymc_minibatch.model.full_data import FullData
from pymc_minibatch.model.functions import CompiledFunctions
from pymc_minibatch.model.gradient_estimates import GradientEstimates
from pymc_minibatch.model.graph import build_row_graph
from pymc_minibatch.model.graph_functions import GraphFunctions
from pymc_minibatch.model.row_evaluation import RowEvaluation
from pymc_minibatch.model.rows import (
    RowSource,
    picklable_rows,
    resolve_data_sources,
    unpickled_rows,
)
from pymc_minibatch.model.setup_report import SetupReport
from pymc_minibatch.model.validation import (
    refuse_imputed_observations,
    refuse_non_finite_rows,
    refuse_rows_outside_support,
)
from pymc_minibatch.model.variables import select_value_vars


class MinibatchModel(RowEvaluation, GradientEstimates, FullData, GraphFunctions):
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
