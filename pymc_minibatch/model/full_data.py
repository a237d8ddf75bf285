"""``MinibatchModel``'s passes over all N rows and what is fitted from them.

:class:`FullData` is the part of :class:`~pymc_minibatch.MinibatchModel` that reads every
row: the full-data log-likelihood and log posterior with its gradient, any compiled
function over all rows (in blocks, in this process or through Dask), the count and wall
time of these passes, and the fits built on them: the posterior mode, the Laplace
approximation and the row structure of ``theta``.

It is a mixin. Its own state is the two caches of :meth:`FullData.laplace` and
:meth:`FullData.structure`, ``_laplace`` and ``_structure`` (``None`` at the class level
until first computed; pickling drops them with the compiled functions). From the class
that mixes it in it needs only public names:

- ``functions``: the compiled functions by name, of which ``block_function(name)`` gives
  the picklable function of a block of rows
  (:class:`~pymc_minibatch.model.functions.CompiledFunctions`);
- ``row_source``: the data arrays on the row axis, whose ``map_chunks`` runs a function on
  each block of rows (:class:`~pymc_minibatch.model.rows.RowSource`);
- ``setup_report``: where each pass and stage is counted and timed
  (:class:`~pymc_minibatch.model.setup_report.SetupReport`);
- ``as_theta``, ``initial_theta`` and ``logprior_and_grad`` (and, through the fits of
  :mod:`~pymc_minibatch.model.laplace` and :mod:`~pymc_minibatch.model.structure`, the
  rest of the public interface).
"""

import numpy as np
import scipy.optimize

from pymc_minibatch.model.curvature import MAX_SHARED
from pymc_minibatch.model.dask_passes import SummedFirstOutput
from pymc_minibatch.model.diagonal_fit import needs_diagonal_fit
from pymc_minibatch.model.laplace import fit_laplace
from pymc_minibatch.model.structure import detect_structure

#: Rows per call when a method runs over all the data (bounds memory for memmap data). A
#: block is also a Dask task's read of chunked rows: at 2^17 rows, glibc kept per thread
#: what the blocks freed (see ``benchmarks/chunked_rows.py``'s peak memory).
FULL_DATA_CHUNK_ROWS = 2**16


class FullData:
    """The full-data passes and fits of :class:`~pymc_minibatch.MinibatchModel` (see the
    module docstring for what they need from the class)."""

    # the caches of laplace() and structure(): computed once, on first call
    _laplace = None
    _structure = None

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
        function = self.functions.block_function(name)
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
            return self.row_source.map_chunks(function, theta, FULL_DATA_CHUNK_ROWS, consume,
                                         advance)  # fmt: skip

    @property
    def full_data_passes(self):
        """Passes over all N rows so far (mode search, curvature, bounds, fallback steps)."""
        return self.setup_report.passes

    @property
    def pass_seconds(self):
        """The wall time of each of these passes, in order."""
        return self.setup_report.pass_seconds

    # ---- the fits built on these passes --------------------------------------------------
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
        :mod:`pymc_minibatch.model.laplace`. Where that curvature is out of reach (see
        :meth:`laplace_is_exact`), a center found by Adam and a diagonal precision
        (:class:`~pymc_minibatch.model.diagonal_fit.DiagonalFit`). ``rng`` jitters the
        starts of the searches tried again when the first does not end at a mode, or draws
        the diagonal fit's batches (default: a fixed seed, so that the fit is a function of
        the model).

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

    def laplace_is_exact(self):
        """Whether :meth:`laplace` is the exact Laplace fit, as opposed to the diagonal fit
        of models whose exact curvature is out of reach (networks;
        :mod:`pymc_minibatch.model.diagonal_fit`). Needs :meth:`structure` only.

        Examples
        --------
        >>> mm.laplace_is_exact()  # three coefficients: the exact curvature is cheap
        True
        """
        # at most MAX_SHARED coordinates in all: exact without detecting the structure
        return self.ndim <= MAX_SHARED or not needs_diagonal_fit(self.structure())

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
