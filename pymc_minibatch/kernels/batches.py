"""Row batches of a fixed size, drawn through epochs without replacement or stratified by
group (:mod:`pymc_minibatch.kernels.strata`)."""

import numpy as np

from pymc_minibatch.kernels import strata as stratified


def checked_batch_size(batch_size, n_data):
    """``batch_size`` as an int, refused unless it is an integer in ``[1, n_data]``."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
        raise TypeError(f"batch_size must be an integer, got {batch_size!r}")
    if not 1 <= batch_size <= n_data:
        raise ValueError(f"batch_size must lie in [1, {n_data}] (the rows), got {batch_size}")
    return int(batch_size)


def next_epoch_batch(rng, n_data, batch_size, permutation, cursor):
    """The indices of the next ``batch_size`` rows of the current epoch: ``(idx,
    permutation, cursor)``.

    An epoch is a fresh random permutation of the rows; the ``n_data mod batch_size`` rows
    left at its end are skipped. ``permutation=None`` starts the first epoch.
    """
    if permutation is None or cursor + batch_size > n_data:
        permutation, cursor = _permutation(rng, n_data), 0
    return permutation[cursor : cursor + batch_size], permutation, cursor + batch_size


def next_batch(rng, n_data, batch_size, strata, permutation, cursor):
    """The next batch's indices: ``(idx, permutation, cursor)``, from the epoch
    (:func:`next_epoch_batch`), or a stratified batch (:func:`strata.draw`) when ``strata``
    is set (the epoch's ``permutation`` and ``cursor`` then returned as they are)."""
    if strata is not None:
        return stratified.draw(rng, strata), permutation, cursor
    return next_epoch_batch(rng, n_data, batch_size, permutation, cursor)


def _permutation(rng, n_data):
    """``rng.permutation(n_data)`` (the same draws), in 32-bit integers where they suffice:
    shuffling half the bytes takes about half the time at 10^6 rows."""
    dtype = np.int32 if n_data <= np.iinfo(np.int32).max else np.int64
    permutation = np.arange(n_data, dtype=dtype)
    rng.shuffle(permutation)
    return permutation
