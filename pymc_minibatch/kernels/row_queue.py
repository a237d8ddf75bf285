"""A queue of row indices drawn ahead, handed out in the order they were drawn.

TunaMH, TFMH and PoissonMH draw the rows of a step independently with probability
``c_i / C`` (Zhang, Cooper & De Sa 2020, "Asymptotically Optimal Exact Minibatch
Metropolis-Hastings", NeurIPS, Algorithm 2; Zhang & De Sa 2019, "Poisson-Minibatching for
Gibbs Sampling with Convergence Rate Guarantees", NeurIPS): only how many rows a step
draws depends on the chain's state, not which. An i.i.d. sequence of indices can therefore
be drawn ahead from the step's own generator and consumed in order: the indices a step
receives are the next ones of a sequence drawn independently of everything the chain has
done, so they have the distribution the algorithm asks for, and the chain stays exact and
reproducible under a seed.

Drawing ahead lets the rows' source read the rows of the whole queue at once
(:meth:`pymc_minibatch.ChunkedRows.prefetch`): one pass over the chunks they touch, in
chunk order, instead of one chunk read per row at the cost of ~1-5 ms each in Zarr.
"""

from collections.abc import Callable

import numpy as np

#: Bounds of the queue length (see :func:`queue_length`).
MIN_QUEUE = 1024
MAX_QUEUE = 2**17
#: The queue holds at most this fraction of the rows (before the bounds above).
QUEUE_FRACTION = 1 / 64


def queue_length(n_data: int) -> int:
    """Indices drawn per refill for data of ``n_data`` rows: ``N / 64`` within ``[1024, 2^17]``.

    A refill of ``K`` indices costs a read of the chunks they touch, at most all ``N / R`` of
    a store in chunks of ``R`` rows, and lasts ``K / b`` steps of ``b`` rows each. With
    ``K = N / 64`` and ``R >= 2^14`` rows per chunk, a refill reads at most
    ``N / 2^14 = K / 256`` chunks: a quarter of a chunk read per 64 indices, far less than a
    read per row. The rows of the queue are kept in memory: ``N / 64`` rows are 1.6% of the
    data, and ``2^17`` rows of 10 float64 columns are 10 MiB. ``K`` depends on ``N`` alone,
    so every source of the same rows gets the same indices from the same seed.
    """
    return int(np.clip(int(n_data * QUEUE_FRACTION), MIN_QUEUE, MAX_QUEUE))


class RowQueue:
    """Indices drawn ``length`` at a time, handed out in order across refills.

    It holds only the indices not yet handed out (it pickles with them); the sampler and
    the prefetch hint are passed at each :meth:`take`, so that the queue carries no
    reference to the weights or the data.

    Parameters
    ----------
    length : int
        Indices drawn per refill (:func:`queue_length`).

    Examples
    --------
    >>> import numpy as np
    >>> queue = RowQueue(4)
    >>> draw = lambda rng, size: rng.integers(0, 100, size)
    >>> first = queue.take(np.random.default_rng(0), 3, draw)
    >>> second = queue.take(np.random.default_rng(1), 3, draw)  # one left, then a refill
    >>> ahead = np.random.default_rng(0).integers(0, 100, 4)
    >>> bool(np.array_equal(np.concatenate([first, second[:1]]), ahead))
    True
    """

    def __init__(self, length: int):
        if int(length) != length or length < 1:
            raise ValueError(f"length must be a positive integer, got {length!r}")
        self.length = int(length)
        self._pending = np.empty(0, dtype=np.intp)
        self._next = 0

    @property
    def pending(self) -> np.ndarray:
        """The indices drawn and not yet handed out, in the order they will be."""
        return self._pending[self._next :]

    def take(
        self,
        rng: np.random.Generator,
        size: int,
        draw: Callable[[np.random.Generator, int], np.ndarray],
        prefetch: Callable[[np.ndarray], None] | None = None,
    ) -> np.ndarray:
        """The next ``size`` indices.

        Parameters
        ----------
        rng : numpy.random.Generator
            Drawn from only when the queue runs short.
        size : int
        draw : callable
            ``draw(rng, n)``: ``n`` independent indices (e.g.
            :meth:`~pymc_minibatch.kernels.weighted_rows.WeightedRows.sample`).
        prefetch : callable, optional
            Called with every index the queue holds after a refill (the ones left over
            first, then the new ones), before any of them is handed out: the rows' source
            may read them at once.
        """
        size = int(size)
        if size < 0:
            raise ValueError(f"size must be non-negative, got {size}")
        if self._next + size > self._pending.size:
            # draw enough new blocks for this request, keeping the leftovers in front
            blocks = -(-(size - self.pending.size) // self.length)
            fresh = [draw(rng, self.length) for _ in range(blocks)]
            self._pending = np.concatenate([self.pending, *fresh]).astype(np.intp, copy=False)
            self._next = 0
            if prefetch is not None:
                prefetch(self._pending)
        out = self._pending[self._next : self._next + size]
        self._next += size
        return out

    def clear(self):
        """Forget the indices not yet handed out (a new chain draws its own)."""
        self._pending = np.empty(0, dtype=np.intp)
        self._next = 0

    def __eq__(self, other):
        # a step's sampling state is compared by value (PyMC's equal_dataclass_values)
        if not isinstance(other, RowQueue):
            return NotImplemented
        return self.length == other.length and np.array_equal(self.pending, other.pending)

    __hash__ = None

    def __getstate__(self):
        # only what is left to hand out: a pickle does not carry the spent part
        return {"length": self.length, "_pending": self.pending.copy(), "_next": 0}
