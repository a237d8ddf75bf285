"""Batches stratified by group: small groups whole, a fixed number of rows from each other.

In a hierarchical model each group's own parameters are seen only through its rows. A
uniform batch of ``B`` of ``N`` rows holds about ``B n_g / N`` rows of a group of ``n_g``,
none at all of most small groups, so the control-variate gradient of a group's
coordinates is noisy in proportion to ``N / (B n_g)`` in whitened units (its rows' part
of the curvature is ``n_g`` rows' worth): the smallest groups that are not empty set the
noise, and the noise sets the step size of every coordinate.

Stratified sampling (Zhao & Zhang 2014, "Accelerating minibatch stochastic gradient
descent using stratified sampling", arXiv:1405.3080) draws from each group separately.
Here every group of at most ``m`` rows is taken whole (no noise), and ``m`` rows are drawn
with replacement from each larger group, weighted by ``n_g / m``, so that the estimate of
a sum over all rows stays unbiased. ``m`` is the largest count with ``sum_g min(n_g, m)
<= B`` (water filling): the noise of each group's coordinates is about ``1 / m`` in
whitened units (times the spread of its rows' curvatures), the least the worst group can
have for ``B`` rows. Rows that touch no group's coordinates are one more group.
"""

from typing import NamedTuple

import numpy as np


class Strata(NamedTuple):
    """A fixed layout of stratified batches: ``whole`` rows, then ``per_group`` rows drawn
    from each sampled group, in that order, with ``weights`` for that layout."""

    whole: np.ndarray
    """Rows in every batch (the groups of at most ``per_group`` rows)."""
    ordered: np.ndarray
    """The rows of the sampled groups, group after group."""
    starts: np.ndarray
    """``(S,)`` where each sampled group begins in ``ordered``."""
    sizes: np.ndarray
    """``(S,)`` rows of each sampled group."""
    per_group: int
    weights: np.ndarray
    """``(batch_size,)`` each row's weight in a sum over all rows: 1 for the whole groups'
    rows, ``n_g / per_group`` for the drawn ones."""

    @property
    def batch_size(self):
        return int(self.weights.size)


def stratify(row_groups, batch_size):
    """The strata of at most ``batch_size`` rows per batch, or None when ``batch_size`` is
    smaller than the number of non-empty groups (a batch cannot then hold a row of each).

    Parameters
    ----------
    row_groups : ndarray of int, shape (N,)
        Each row's group, ``-1`` for a row in none (those rows form a group of their own).
    batch_size : int

    Examples
    --------
    >>> strata = stratify(np.array([0, 0, 0, 0, 0, 0, 1, 2, 2]), 5)
    >>> strata.whole.tolist(), strata.per_group, strata.weights.tolist()
    ([6, 7, 8], 2, [1.0, 1.0, 1.0, 3.0, 3.0])
    """
    row_groups = np.asarray(row_groups)
    labels = np.where(row_groups < 0, row_groups.max(initial=-1) + 1, row_groups)
    order = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels)
    sizes_present = sizes[sizes > 0]
    if batch_size < sizes_present.size:
        return None
    per_group = _water_level(sizes_present, batch_size)
    drawn = sizes > per_group  # per group; the others are whole
    drawn_sizes = sizes[drawn]
    weights = np.concatenate([np.ones(np.sum(sizes[~drawn])),
                              np.repeat(drawn_sizes / per_group, per_group)])  # fmt: skip
    index = np.int32 if row_groups.size <= np.iinfo(np.int32).max else np.int64  # half the bytes
    return Strata(
        np.flatnonzero(~drawn[labels]).astype(index),
        order[drawn[labels[order]]].astype(index),  # ``order`` runs group after group
        np.concatenate([[0], np.cumsum(drawn_sizes)[:-1]]).astype(index),
        drawn_sizes,
        per_group,
        weights,
    )


def _water_level(sizes, batch_size):
    """The largest ``m >= 1`` with ``sum(min(sizes, m)) <= batch_size`` (``sizes`` > 0)."""
    low, high = 1, int(sizes.max())
    if np.minimum(sizes, high).sum() <= batch_size:
        return high
    while high - low > 1:  # invariant: low fits, high does not
        middle = (low + high) // 2
        if np.minimum(sizes, middle).sum() <= batch_size:
            low = middle
        else:
            high = middle
    return low


def draw(rng, strata):
    """One batch: the whole groups' rows, then ``per_group`` rows of each sampled group
    drawn uniformly with replacement (weights: ``strata.weights``)."""
    offsets = np.floor(rng.random((strata.sizes.size, strata.per_group))
                       * strata.sizes[:, None]).astype(strata.starts.dtype)  # fmt: skip
    drawn = strata.ordered[strata.starts[:, None] + offsets]
    return np.concatenate([strata.whole, drawn.ravel()])
