"""Which sampled parameters each row touches: shared ones, and the local ones of its group.

In a hierarchical model, ``a[g] + X @ beta`` with ``a`` of length G, every row touches
``beta`` (and through ``a``'s prior nothing else), but only one entry of ``a``: its group's.
The Hessian of the log posterior is then block arrowhead
(:mod:`pymc_minibatch.kernels.arrowhead`), exact curvature costs a few passes whatever
G is, and a row's bound can follow its own group's parameters.

The structure is read numerically from the compiled model, for any way the model indexes
its parameters (``a[g]``, ``(mu + tau * z)[g]``, one-hot columns ``X @ beta``): for a
variable of shape ``(..., G, ...)`` and an axis of length G, three per-row directional
derivatives ``J_i u``, ``J_i w`` and ``J_i q`` along directions that weigh the variable's
coordinates by slot (``u``), by slot times ``g + 1`` (``w``) and by slot times a random
weight of the group (``q``) tell, for a row that touches the entries of one group only,
that group: ``J_i w / J_i u = g + 1`` and ``J_i q = rho_g J_i u``. A row that touches
entries of two groups fails these identities (with probability one under the random
weights), and the variable is then *shared*. A variable is local when every row passes
(rows that touch none of it count as group -1) on a random subsample first, then on all
rows, in one pass over the data.

Several local variables are one block when their rows' groups agree (varying intercepts
and slopes on the same grouping); another grouping (crossed effects, a coarser level) is
left among the shared parameters, where the shared block of the Hessian is dense.
"""

from typing import NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.replace import clone_replace

#: Rows of the subsample that rules out most candidate variables before the full pass.
SUBSAMPLE_ROWS = 512
#: Relative tolerance of the identities above (exact up to rounding in the derivatives).
IDENTITY_RTOL = 1e-6


class ParameterStructure(NamedTuple):
    """The coordinates of ``theta`` each row touches."""

    shared: np.ndarray
    """``(S,)`` coordinates that any row may touch (sorted)."""
    local: np.ndarray
    """``(G, k)`` coordinates of each group: a row touches those of its group only."""
    row_groups: np.ndarray | None
    """``(N,)`` int32: each row's group, -1 for a row that touches no local coordinate;
    None without local coordinates."""
    local_names: tuple
    """The variables whose coordinates are local."""

    @property
    def n_groups(self):
        return int(self.local.shape[0])

    def group_sizes(self):
        """Rows per group, shape ``(G,)``."""
        if self.row_groups is None:
            return np.zeros(0, dtype=np.int64)
        return np.bincount(self.row_groups[self.row_groups >= 0], minlength=self.n_groups)


def all_shared(ndim):
    """The structure with every coordinate shared (a dense Hessian)."""
    return ParameterStructure(np.arange(ndim), np.empty((0, 0), dtype=np.int64), None, ())


class _Candidate(NamedTuple):
    """A variable and an axis of it whose entries along that axis may be groups."""

    name: str
    coordinates: np.ndarray
    """``(G, k)``: the variable's theta coordinates, group along the axis, slots across."""


def _candidates(minibatch_model):
    candidates, start = [], 0
    for name, shape, size, _ in minibatch_model.point_map_info:
        coordinates = np.arange(start, start + size).reshape(shape) if size else None
        start += size
        if size < 2:
            continue
        for axis, length in enumerate(shape):
            if length >= 2:
                grouped = np.moveaxis(coordinates, axis, 0).reshape(length, -1)
                candidates.append(_Candidate(name, grouped))
    return candidates


def _directions(candidates, ndim, rng):
    """Three directions per candidate (``u``, ``w``, ``q`` of the module docstring) and the
    random group weights of each ``q``."""
    directions, group_weights = [], []
    for candidate in candidates:
        n_groups, n_slots = candidate.coordinates.shape
        slot_weights = rng.uniform(1.0, 2.0, size=n_slots)
        weights = rng.uniform(1.0, 2.0, size=n_groups)
        base = np.zeros(ndim)
        u, w, q = base.copy(), base.copy(), base.copy()
        u[candidate.coordinates] = slot_weights
        w[candidate.coordinates] = slot_weights * np.arange(1, n_groups + 1)[:, None]
        q[candidate.coordinates] = slot_weights * weights[:, None]
        directions.extend([u, w, q])
        group_weights.append(weights)
    return np.array(directions), group_weights


def row_directional_derivatives(symbolic):
    """Graph of :meth:`MinibatchModel.graph_function`: each row's derivatives along the rows
    of ``directions`` (m x d), shape ``(m, B)``, by the double-backward trick
    ``J_i v = d/du_i [(sum_j u_j grad l_j) . v]``."""
    directions = pt.matrix("directions", dtype="float64")
    weights = symbolic.loglik.type("weights")
    weighted_gradient = pytensor.grad((symbolic.loglik * weights).sum(), symbolic.theta)
    along = pytensor.gradient.jacobian(directions @ weighted_gradient, weights, vectorize=True)
    (along,) = clone_replace([along], replace={weights: pt.ones_like(symbolic.loglik)})
    return [directions], along


class _GroupProbe:
    """A block of rows reduced to each candidate's groups (-1: untouched) and whether every
    row of the block touches one group of it at most. Picklable (a Dask task)."""

    def __init__(self, derivatives, directions, group_weights):
        self.derivatives = derivatives
        self.directions = directions
        self.group_weights = group_weights

    def __call__(self, theta, *rows):
        along = np.asarray(self.derivatives(theta, self.directions, *rows))
        results = []
        for c, weights in enumerate(self.group_weights):
            s, t, q = along[3 * c], along[3 * c + 1], along[3 * c + 2]
            results.append(_groups_of_rows(s, t, q, weights))
        return results


def _groups_of_rows(s, t, q, group_weights):
    """``(groups, valid)`` of rows from their derivatives along ``u``, ``w`` and ``q``."""
    touched = (s != 0.0) | (t != 0.0) | (q != 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(s != 0.0, t / s, np.nan)
    label = np.rint(ratio)
    n_groups = group_weights.size
    in_range = (label >= 1) & (label <= n_groups)
    groups = np.where(in_range, label - 1, 0).astype(np.int64)
    scale = np.abs(q) + np.abs(s) * group_weights[groups]
    valid = (
        in_range
        & (np.abs(ratio - label) <= IDENTITY_RTOL * label)
        & (np.abs(q - group_weights[groups] * s) <= IDENTITY_RTOL * scale)
    )
    ok = bool(np.all(valid | ~touched))
    return np.where(touched, groups, -1).astype(np.int32), ok


def detect_structure(minibatch_model, random_seed=20261202):
    """The :class:`ParameterStructure` of ``minibatch_model``'s rows (one pass over them,
    after a subsample; none when no variable can be local).

    Parameters
    ----------
    minibatch_model : MinibatchModel
    random_seed : int
        Seeds the probing point, the subsample and the random weights.

    Returns
    -------
    ParameterStructure
    """
    mm = minibatch_model
    rng = np.random.default_rng(random_seed)
    candidates = _candidates(mm)
    if not candidates:
        return all_shared(mm.ndim)
    theta = _probing_point(mm, rng)
    function = mm.graph_function("row_directional_derivatives", row_directional_derivatives)
    directions, weights = _directions(candidates, mm.ndim, rng)
    sample = rng.choice(mm.n_data, size=min(mm.n_data, SUBSAMPLE_ROWS), replace=False)
    probe = _GroupProbe(function, directions, weights)
    on_sample = probe(theta, *mm.gather_rows(sample))
    survivors = [c for c, (_, ok) in enumerate(on_sample) if ok]
    if not survivors:
        return all_shared(mm.ndim)
    candidates = [candidates[c] for c in survivors]
    directions = directions.reshape(-1, 3, mm.ndim)[survivors].reshape(-1, mm.ndim)
    probe = _GroupProbe(function, directions, [weights[c] for c in survivors])
    labels = [np.empty(mm.n_data, dtype=np.int32) for _ in candidates]
    valid = np.ones(len(candidates), dtype=bool)
    filled = 0

    def consume(block):
        nonlocal filled
        for c, (groups, ok) in enumerate(block):
            labels[c][filled : filled + groups.size] = groups
            valid[c] &= ok
        filled += block[0][0].size

    mm.over_all_rows(probe, theta, consume=consume)
    local = [(candidates[c], labels[c]) for c in np.flatnonzero(valid) if labels[c].max() >= 0]
    return _assemble(local, mm.ndim)


def _probing_point(minibatch_model, rng):
    """A point near the initial one where no derivative vanishes by symmetry (a zero
    coefficient, an intercept at 0), if its log-likelihood is finite there."""
    mm = minibatch_model
    start = mm.initial_theta()
    jittered = start + rng.uniform(-0.5, 0.5, size=start.shape)
    rows = rng.choice(mm.n_data, size=min(mm.n_data, 64), replace=False)
    values = mm.loglik(jittered, rows)
    return jittered if np.all(np.isfinite(values)) and np.isfinite(mm.logprior(jittered)) else start


def _assemble(local, ndim):
    """The structure from the local candidates and their rows' groups: the largest
    variable's grouping, and the others that agree with it; the rest is shared."""
    if not local:
        return all_shared(ndim)
    # one axis per variable: the one with the most groups
    best = {}
    for candidate, groups in local:
        kept = best.get(candidate.name)
        if kept is None or candidate.coordinates.shape[0] > kept[0].coordinates.shape[0]:
            best[candidate.name] = (candidate, groups)
    ordered = sorted(best.values(), key=lambda item: -item[0].coordinates.size)
    primary, row_groups = ordered[0]
    n_groups = primary.coordinates.shape[0]
    blocks, names = [primary.coordinates], [primary.name]
    row_groups = row_groups.copy()
    for candidate, groups in ordered[1:]:
        both = (groups >= 0) & (row_groups >= 0)
        if candidate.coordinates.shape[0] == n_groups and np.array_equal(
            groups[both], row_groups[both]
        ):
            blocks.append(candidate.coordinates)
            names.append(candidate.name)
            row_groups = np.maximum(row_groups, groups)
    local_coordinates = np.concatenate(blocks, axis=1)
    shared = np.setdiff1d(np.arange(ndim), local_coordinates.ravel())
    return ParameterStructure(shared, local_coordinates, row_groups, tuple(names))
