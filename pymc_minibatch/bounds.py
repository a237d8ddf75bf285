"""TunaMH bounds (Assumption 1 of Zhang, Cooper & De Sa 2020, "Asymptotically optimal exact
minibatch Metropolis-Hastings", NeurIPS): per-row constants ``c_i`` and a metric ``M`` with::

    |U_i(theta) - U_i(theta')| <= c_i * M(theta, theta')   for every row i and all theta, theta',

where ``U_i = -log p(y_i | theta)``. ``M`` is the Euclidean distance between ``theta`` and
``theta'``, optionally over a subset of the coordinates (the ones the likelihood depends on).

With a ``center`` (control variates, as in Cornish et al. 2019, "Scalable Metropolis-Hastings
for exact Bayesian inference with large datasets", ICML), the bounds are for the residuals
``R_i(theta) = U_i(theta) - U_i(center) - grad U_i(center) . (theta - center)`` instead, with
the symmetric metric ``M = ||theta - theta'|| (||theta - center|| + ||theta' - center||) / 2``:
if ``|d^2 U_i / d eta^2| <= K_i`` for a linear predictor ``eta_i = x_i . theta``, then
``|R_i(theta) - R_i(theta')| <= K_i ||x_i||^2 M``. Near the mode ``M`` is of the order of
``step^2``, so the expected batch ``C M`` stays small however many rows there are.
:func:`pymc_minibatch.model.lipschitz.derive_bounds` obtains both kinds from a PyMC model.

:class:`GlobalBounds` are the stronger bounds PoissonMH needs (Zhang & De Sa 2019): an
interval ``[lower_i, upper_i]`` holding each row's log-likelihood for every ``theta`` in the
support. They exist only when the parameters live on a bounded set;
:func:`pymc_minibatch.model.lipschitz.derive_global_bounds` obtains them for the same
regressions when their coefficients have ``Uniform`` priors.

Examples
--------
Bounds for a Laplace location regression with scale ``b = 2``, whose per-row negative
log-likelihood ``|y_i - x_i' beta| / b`` is ``||x_i|| / b``-Lipschitz in ``beta``:

>>> import numpy as np
>>> import pymc_minibatch as pmm
>>> X = np.random.default_rng(0).normal(size=(100, 3))
>>> bounds = pmm.bounds.Bounds(np.linalg.norm(X, axis=1) / 2.0, metric_vars=["beta"])
>>> bounds.c.shape
(100,)
"""

from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.arrowhead import ArrowheadFactor
from pymc_minibatch.kernels.pcn import cubic_metric
from pymc_minibatch.kernels.weighted_rows import GroupedRows, WeightedRows

#: Relative slack for rounding in the log-densities when a step checks that a row stays within
#: its bound (``|Delta_i| <= c_i M`` for :class:`Bounds`, ``lower_i <= l_i <= upper_i`` for
#: :class:`GlobalBounds`): only an excess above this fraction of the bound is a violation.
BOUND_TOLERANCE = 1e-7


class Bounds:
    """Per-row Lipschitz constants ``c`` and the metric for TunaMH.

    Parameters
    ----------
    c : array_like, shape (N,)
        Non-negative finite constants, one per row of the data, in row order.
    metric_vars : list of str, optional
        Names of the (value) variables the metric runs over; default all sampled variables.
        The bound must hold with the distance measured over these coordinates only.
    center : array_like, optional
        A point in ``theta``-space (typically the MAP): ``c`` then bounds the control-variate
        residuals with the Taylor metric above.
    whiten : array_like or ArrowheadFactor, optional
        With ``center``: ``c`` bounds second-order residuals, with the cubic metric in the
        whitened coordinates ``z = whiten @ (theta - center)`` (see :func:`metric`); all
        ``c`` may then be zero (a likelihood that is exactly quadratic). An
        :class:`~pymc_minibatch.kernels.arrowhead.ArrowheadFactor` (``z = whiten.to_z(theta -
        center)``) with ``groups`` gives each group of rows its own metric, over its own
        coordinates of ``z`` and the shared ones (see :meth:`metrics`).
    groups : array of int, optional
        With a structured ``whiten``: each row's group (-1 for rows in none), whose
        coordinates are ``whiten.local[g]``.
    region_radius : float, optional
        With ``center``: the bounds hold only for pairs inside the trust region ``||z|| <=
        region_radius`` with ``z = region_whiten @ (theta - center)``
        (:mod:`pymc_minibatch.model.region`); a step with a point outside it is a full-data
        step.
    region_whiten : array_like, optional
        The whitening of the trust region (default ``whiten``).

    Examples
    --------
    For a logistic regression ``logit p_i = x_i' beta`` the log-likelihood is 1-Lipschitz in
    the linear predictor, so ``c_i = ||x_i||``:

    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> bounds = Bounds(np.linalg.norm(X, axis=1), metric_vars=["beta"])
    """

    def __init__(self, c, metric_vars=None, *, center=None, whiten=None, region_radius=None,
                 region_whiten=None, groups=None, _metric_indices=None):  # fmt: skip
        c = np.asarray(c)
        if c.dtype != np.float32:  # float32 bounds (rounded up, as expansions' are) are kept
            c = c.astype(np.float64, copy=False)
        if c.ndim != 1 or c.size == 0:
            raise ValueError(f"bounds c must be a 1-D array with one value per row, got {c.shape}")
        if whiten is not None and center is None:
            raise ValueError("bounds with whiten= need the center of the expansion")
        region_whiten = whiten if region_whiten is None else region_whiten
        if region_radius is not None and (
            center is None or region_whiten is None or not region_radius > 0
        ):
            raise ValueError("region_radius must be positive and needs center= and whiten= or "
                             "region_whiten= (a trust region in whitened coordinates), got "
                             f"{region_radius}")  # fmt: skip
        if not np.all(np.isfinite(c)) or np.any(c < 0) or (c.sum() <= 0 and whiten is None):
            raise ValueError("bounds c must be finite, non-negative and not all zero")
        self.c = c
        self.total = float(np.sum(c, dtype=np.float64))
        self.metric_vars = None if metric_vars is None else list(metric_vars)
        self.center = None if center is None else np.asarray(center, dtype=np.float64)
        self.whiten = _operator(whiten)
        self.region_radius = None if region_radius is None else float(region_radius)
        self.region_whiten = _operator(region_whiten)
        self.structured = isinstance(self.whiten, ArrowheadFactor)
        """Whether each group of rows has a metric of its own (:meth:`metrics`)."""
        if groups is not None and not self.structured:
            raise ValueError("groups= needs a structured whiten (an ArrowheadFactor)")
        self.groups = groups
        """Each row's group (-1: none), or None."""
        self.n_groups = int(self.whiten.local.shape[0]) if self.structured else 0
        self._metric_indices = _metric_indices
        self._row_sampler = None

    @property
    def row_sampler(self):
        """Draws row ``i`` with probability ``c_i / C`` (built once, on demand): a
        :class:`~pymc_minibatch.kernels.weighted_rows.GroupedRows` (within groups) when the
        rows are in groups."""
        if self._row_sampler is None:
            if self.groups is not None:
                self._row_sampler = GroupedRows(self.c, self.groups, self.n_groups)
            else:
                self._row_sampler = WeightedRows(self.c)
        return self._row_sampler

    def metrics(self, theta, theta2, indices=None, whitened=None):
        """``M_g(theta, theta')`` of each group of rows, shape ``(n_groups + 1,)`` (the last
        for rows in no group): with a structured ``whiten``, the cubic metric of
        :func:`metric` over each group's coordinates of ``z`` and the shared ones (a row of
        group ``g`` depends on ``z`` only through them); else ``[metric(...)]``.
        ``whitened``: ``(z, z')``, the pair already whitened by ``whiten`` around
        ``center``, when the caller has them."""
        if not self.structured:
            return np.array([metric(self, theta, theta2, indices)])
        if whitened is None:
            whitened = (self.whiten.to_z(theta - self.center),
                        self.whiten.to_z(theta2 - self.center))  # fmt: skip
        z, z2 = whitened
        if not self.n_groups:  # one metric, of the whole (shared) vector
            return np.array([cubic_metric(z, z2)])
        a2, b2 = _group_squares(self.whiten, z), _group_squares(self.whiten, z2)
        jump = np.sqrt(_group_squares(self.whiten, z2 - z))
        a, b = np.sqrt(a2), np.sqrt(b2)
        return jump * (a2 + a * b + b2)

    @property
    def order(self):
        """Order of the control variates these bounds are for: 0 (none), 1 or 2."""
        return 0 if self.center is None else 1 if self.whiten is None else 2

    def inside_region(self, theta):
        """Whether ``theta`` lies where the bounds hold (everywhere without a region)."""
        if self.region_radius is None:
            return True
        if isinstance(self.region_whiten, ArrowheadFactor):
            # the region of each group's coordinates and the shared ones: convex, as their
            # intersection
            return bool(np.max(self._region_squares(theta)) <= self.region_radius**2)
        z = self.region_whiten @ (theta - self.center)
        return bool(z @ z <= self.region_radius**2)

    def groups_outside_region(self, theta, theta2):
        """Whether ``theta`` or ``theta2`` lies outside the trust region of each group's
        bounds (``||(z_g, z_S)|| > region_radius``), shape ``(n_groups,)``; all False
        without a region."""
        outside = np.zeros(self.n_groups, dtype=bool)
        if self.region_radius is None:
            return outside
        for point in (theta, theta2):
            outside |= self._region_squares(point)[: self.n_groups] > self.region_radius**2
        return outside

    def _region_squares(self, theta):
        """``||(z_g, z_S)||^2`` of each group and ``||z_S||^2`` last in the trust region's
        whitening (an ArrowheadFactor)."""
        return _group_squares(self.region_whiten, self.region_whiten.to_z(theta - self.center))

    def metric_indices(self, minibatch_model):
        """Indices of ``theta`` the metric runs over (``None``: all of them)."""
        if self._metric_indices is not None:
            return self._metric_indices
        if self.metric_vars is None:
            return None
        return minibatch_model.theta_indices(self.metric_vars)

    def __getstate__(self):
        return {**self.__dict__, "_row_sampler": None}  # rebuilt on demand, never shipped


class PairMetrics(NamedTuple):
    """``metrics(theta, theta', whitened)``: :meth:`Bounds.metrics` over fixed coordinates,
    as the exact MH kernel calls it (:class:`~pymc_minibatch.kernels.exact_mh.ExactModel`).
    ``whitened``, the pair's ``(z, z')`` when the caller has them, is used only when the
    bounds whiten as the proposal does (same factor, same center).

    Examples
    --------
    >>> import numpy as np
    >>> metrics = PairMetrics(Bounds(np.ones(10)), None, shares_whitening=False)
    >>> metrics(np.zeros(2), np.array([3.0, 4.0]))
    array([5.])
    """

    bounds: Bounds
    indices: np.ndarray | None
    shares_whitening: bool

    def __call__(self, theta, theta2, whitened=None):
        shared = whitened if self.shares_whitening else None
        return self.bounds.metrics(theta, theta2, self.indices, shared)


def _operator(whiten):
    """A whitening as given: an ArrowheadFactor, or a dense array (float64), or None."""
    if whiten is None or isinstance(whiten, ArrowheadFactor):
        return whiten
    return np.asarray(whiten, dtype=np.float64)


def _group_squares(factor, z):
    """``||(z_g, z_S)||^2`` for every group ``g`` and ``||z_S||^2`` last, shape ``(G + 1,)``:
    the squared norm of each group's coordinates of ``z`` with the shared ones."""
    shared = float(np.sum(z[factor.shared] ** 2))
    own = np.sum(z[factor.local] ** 2, axis=1) if factor.local.size else np.empty(0)
    return np.append(own + shared, shared)


class GlobalBounds:
    """Per-row global bounds ``lower_i <= log p(y_i | theta) <= upper_i`` for PoissonMH.

    The bounds must hold for every ``theta`` the prior allows (outside its support the
    prior is zero and proposals there are rejected before any row is evaluated).

    Parameters
    ----------
    lower, upper : array_like, shape (N,) or scalars
        Finite bounds with ``lower <= upper``, one pair per row in row order (scalars are
        broadcast to every row once the number of rows is known).

    Examples
    --------
    A Bernoulli likelihood with success probability restricted to ``[0.2, 0.8]`` has
    ``log 0.2 <= log p(y_i | p) <= log 0.8`` for every row:

    >>> import numpy as np
    >>> bounds = GlobalBounds(np.log(0.2), np.log(0.8))
    """

    def __init__(self, lower, upper):
        lower = np.asarray(lower, dtype=np.float64)
        upper = np.asarray(upper, dtype=np.float64)
        if lower.ndim > 1 or upper.ndim > 1:
            raise ValueError("global bounds must be scalars or 1-D arrays with one value per row")
        lower, upper = np.broadcast_arrays(lower, upper)
        if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
            raise ValueError("global bounds must be finite")
        if np.any(upper < lower):
            raise ValueError("global bounds need lower <= upper for every row")
        if np.all(upper == lower):
            raise ValueError("global bounds with upper == lower everywhere: nothing to sample")
        self.lower = lower.copy()
        self.upper = upper.copy()
        self.spread = upper - lower
        """``M_i = upper_i - lower_i``."""
        self.total = float(np.sum(self.spread))
        """``L = sum_i M_i``: the expected batch of PoissonMH is ``lambda + L``."""
        self._row_sampler = None

    def for_rows(self, n_data):
        """These bounds with one value per row of ``n_data`` rows (scalars broadcast)."""
        if self.lower.ndim == 0:
            return GlobalBounds(np.full(n_data, self.lower), np.full(n_data, self.upper))
        if self.lower.shape != (n_data,):
            raise ValueError(
                f"global bounds have {self.lower.size} values but the model has {n_data} rows"
            )
        return self

    @property
    def row_sampler(self):
        """Draws row ``i`` with probability ``M_i / L`` (built once, on demand)."""
        if self._row_sampler is None:
            self._row_sampler = WeightedRows(self.spread)
        return self._row_sampler

    def __getstate__(self):
        return {**self.__dict__, "_row_sampler": None}  # rebuilt on demand, never shipped


def distance(theta, theta2, indices=None):
    """Euclidean distance between two points, over ``indices`` if given.

    Parameters
    ----------
    theta, theta2 : ndarray, shape (ndim,)
    indices : array of int, optional
        Coordinates to measure over (default: all).

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> distance(np.zeros(3), np.array([3.0, 4.0, 12.0]))
    13.0
    >>> distance(np.zeros(3), np.array([3.0, 4.0, 12.0]), indices=[0, 1])
    5.0
    """
    diff = theta2 - theta
    if indices is not None:
        diff = diff[indices]
    return float(np.sqrt(diff @ diff))


def metric(bounds, theta, theta2, indices=None):
    """``M(theta, theta')`` of ``bounds``: Euclidean, or the Taylor metric with a center.

    Parameters
    ----------
    bounds : Bounds
        Without ``center``, ``M`` is the Euclidean distance; with one, it is
        ``||theta - theta'|| (||theta - center|| + ||theta' - center||) / 2``; with ``whiten``
        too, ``||z' - z|| (a^2 + a a' + a'^2)`` with ``z = whiten @ (theta - center)``,
        ``a = ||z||`` and ``a' = ||z'||`` (over all coordinates).
    theta, theta2 : ndarray, shape (ndim,)
    indices : array of int, optional
        Coordinates to measure over (default: all).

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> plain = Bounds(np.ones(10))
    >>> metric(plain, np.zeros(2), np.array([3.0, 4.0]))
    5.0
    >>> taylor = Bounds(np.ones(10), center=np.zeros(2))
    >>> metric(taylor, np.array([1.0, 0.0]), np.array([3.0, 0.0]))
    4.0
    >>> cubic = Bounds(np.ones(10), center=np.zeros(2), whiten=np.eye(2))
    >>> metric(cubic, np.array([1.0, 0.0]), np.array([3.0, 0.0]))
    26.0
    """
    if bounds.whiten is not None:
        whiten = bounds.whiten.to_z if bounds.structured else bounds.whiten.__matmul__
        return cubic_metric(whiten(theta - bounds.center), whiten(theta2 - bounds.center))
    step = distance(theta, theta2, indices)
    if bounds.center is None:
        return step
    center = bounds.center
    return step * 0.5 * (distance(center, theta, indices) + distance(center, theta2, indices))
