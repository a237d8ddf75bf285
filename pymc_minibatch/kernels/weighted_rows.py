"""Draws of row indices with probability proportional to per-row weights.

A draw is an inverse-CDF lookup of a uniform variate scaled to the weights' total. Up to
:data:`ROW_CUMSUM_MAX_ROWS` rows the sampler keeps the cumulative sum over all rows
(``8 N`` bytes) and a draw is one binary search in it. Above, it keeps one float per block
of :data:`BLOCK_ROWS` rows besides the weights themselves (``N / 1024`` floats, where Walker's
alias table (Walker 1977, ACM TOMS 3(3)) would take ``2 N`` with a sequential construction
(Vose 1991, IEEE TSE 17(9)) that took 13.6 s in Python at 10^7 rows), and the lookup is
split in two: a binary search over the blocks' cumulative sums finds the block, and a
binary search over the cumulative sum of that block's weights, computed when the block is
drawn, finds the row (the two-level table lookup of Knuth 1998, *The Art of Computer
Programming* Vol. 2, 3rd ed., Section 3.4.1, applied to a cumulative distribution). Draws
are then grouped by block and handled a group of blocks at a time, so drawing many indices
at once (a queue of them, :mod:`pymc_minibatch.kernels.row_queue`) costs one cumulative sum
per block drawn and never allocates arrays of ``N`` elements.
"""

import numpy as np

#: Rows per block. Per index drawn, the cumulative sum of one block is computed (at worst
#: 1024 additions, a few microseconds: far below the cost of reading the row from disk),
#: while the block sums cost ``8 / 1024`` bytes per row.
BLOCK_ROWS = 1024
#: Up to this many rows the sampler keeps the cumulative sum of every row's weight (``8 N``
#: bytes) and a draw is one binary search: a step that draws rows from most blocks (tens of
#: thousands of rows of 10^6) would otherwise sum as many weights as a pass over the data.
ROW_CUMSUM_MAX_ROWS = 2**24
#: Blocks whose weights are summed cumulatively in one vectorised pass (256 blocks of 1024
#: rows: 2 MiB per temporary array).
BLOCKS_PER_PASS = 256


class WeightedRows:
    """Sample indices ``i`` with probability ``weights[i] / sum(weights)``.

    Parameters
    ----------
    weights : array_like, shape (N,)
        Non-negative, finite, with a positive sum. Kept by reference (not copied) when
        already a float64 or float32 array: the sampler reads it at every draw.
    block_rows : int, default BLOCK_ROWS
        Rows per block of the first level.

    Notes
    -----
    Row ``i`` is drawn with probability ``c_i / C`` up to the rounding of the cumulative sums
    (a relative error of order ``2^-53 * N`` on ``C``). A row of zero weight is never
    drawn: both searches return the first position whose cumulative sum exceeds the
    variate, which lies on a positive weight, and a variate that rounding puts at or past the
    end of a block (or of the data) is moved to the last row of positive weight there.

    Examples
    --------
    >>> import numpy as np
    >>> sampler = WeightedRows(np.array([0.0, 1.0, 0.0, 3.0]))
    >>> rows = sampler.sample(np.random.default_rng(0), 10000)
    >>> sorted(set(rows.tolist()))
    [1, 3]
    """

    def __init__(self, weights, block_rows=BLOCK_ROWS):
        weights = np.asarray(weights)
        if weights.dtype != np.float32:  # float32 weights are kept as they are (no N copy)
            weights = weights.astype(np.float64, copy=False)
        if weights.ndim != 1 or weights.size == 0:
            raise ValueError("weights must be a non-empty 1-D array")
        if int(block_rows) != block_rows or block_rows < 1:
            raise ValueError(f"block_rows must be a positive integer, got {block_rows!r}")
        self.weights = weights
        self.n = weights.size
        self.block_rows = int(block_rows)
        n_blocks = -(-self.n // self.block_rows)
        block_sums = np.empty(n_blocks)
        # blockwise, so that no temporary has N elements (np.isfinite(weights) would)
        step = self.block_rows * BLOCKS_PER_PASS
        for start in range(0, self.n, step):
            chunk = weights[start : start + step]
            if not np.all(np.isfinite(chunk)) or np.any(chunk < 0):
                raise ValueError("weights must be finite, non-negative and not all zero")
            first = start // self.block_rows
            block_sums[first : first + -(-chunk.size // self.block_rows)] = np.add.reduceat(
                chunk, np.arange(0, chunk.size, self.block_rows), dtype=np.float64
            )
        self.cumulative = np.cumsum(block_sums)
        """Cumulative sums of the blocks' weights, shape ``(ceil(N / block_rows),)``."""
        self.total = float(self.cumulative[-1])
        if not self.total > 0:
            raise ValueError("weights must be finite, non-negative and not all zero")
        # a variate rounded up to the total would land past the last block of positive weight
        self._last_block = int(np.flatnonzero(block_sums)[-1])
        self._row_cumulative = None
        if self.n <= ROW_CUMSUM_MAX_ROWS:
            self._row_cumulative = np.cumsum(weights, dtype=np.float64)
            self.total = float(self._row_cumulative[-1])
            # a variate rounded up to the total would land past the last row of positive weight
            self._last_row = int(np.flatnonzero(weights)[-1])

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent indices (with replacement), in the order drawn."""
        return self.rows_at(rng.random(size) * self.total)

    def prefix(self, positions):
        """The cumulative weight before each of ``positions`` (0 to N), as the draws add it
        up: a variate in ``[prefix(a), prefix(b))`` lands on a row in ``[a, b)`` up to
        rounding."""
        positions = np.asarray(positions, dtype=np.int64)
        if self._row_cumulative is not None:
            return np.where(positions > 0, self._row_cumulative[np.maximum(positions - 1, 0)], 0.0)
        blocks = positions // self.block_rows
        before = np.where(blocks > 0, self.cumulative[np.maximum(blocks - 1, 0)], 0.0)
        within = np.zeros(positions.size)
        for k, (block, position) in enumerate(zip(blocks, positions, strict=True)):
            start = block * self.block_rows
            if position > start:
                within[k] = np.cumsum(self.weights[start:position], dtype=np.float64)[-1]
        return before + within

    def rows_at(self, scaled):
        """The rows of variates ``scaled`` in ``[0, total)`` (the inverse of the cumulative
        weights)."""
        if self._row_cumulative is not None:
            # the first row whose cumulative weight exceeds the variate: never a row of zero
            # weight, whose cumulative weight equals the row's before
            rows = np.searchsorted(self._row_cumulative, scaled, side="right")
            return np.minimum(rows, self._last_row, out=rows)
        size = scaled.size
        blocks = np.searchsorted(self.cumulative, scaled, side="right")
        np.minimum(blocks, self._last_block, out=blocks)
        # the variate's offset within its block
        before = np.where(blocks > 0, self.cumulative[np.maximum(blocks - 1, 0)], 0.0)
        residual = scaled - before
        rows = np.empty(size, dtype=np.intp)
        order = np.argsort(blocks, kind="stable")
        touched, starts, counts = np.unique(blocks[order], return_index=True, return_counts=True)
        for first in range(0, touched.size, BLOCKS_PER_PASS):
            group = slice(first, first + BLOCKS_PER_PASS)
            positions = order[starts[group][0] : starts[group][-1] + counts[group][-1]]
            local = np.repeat(np.arange(touched[group].size), counts[group])
            rows[positions] = self._rows_in_blocks(touched[group], local, residual[positions])
        return rows

    def _rows_in_blocks(self, blocks, local, residual):
        """Rows of the variates ``residual`` (offsets within block ``blocks[local]``)."""
        width = self.block_rows
        # whole blocks are rows of a (view) matrix, copied row by row (a fancy index of each
        # element took 3 times as long); only the last block may be partial: padded with zeros
        full = self.n // width
        weights = np.zeros((blocks.size, width))
        whole = blocks.size - int(blocks[-1] == full)  # blocks are sorted
        matrix = self.weights[: full * width].reshape(full, width)
        weights[:whole] = matrix[blocks[:whole]]
        if whole < blocks.size:
            weights[whole, : self.n - full * width] = self.weights[full * width :]
        within = np.cumsum(weights, axis=1)
        # vectorised binary search of the first column whose cumulative sum exceeds the
        # variate (np.searchsorted searches one sorted array, not one row per variate)
        low = np.zeros(local.size, dtype=np.intp)
        high = np.full(local.size, width, dtype=np.intp)
        for _ in range(width.bit_length()):
            middle = (low + high) // 2
            open_ = low < high
            right = open_ & (within[local, np.minimum(middle, width - 1)] <= residual)
            low = np.where(right, middle + 1, low)
            high = np.where(open_ & ~right, middle, high)
        # the column lies on a positive weight, unless rounding put the variate at or past
        # the block's sum: then the block's last row of positive weight (a drawn block has one)
        past = np.flatnonzero(low == width)
        if past.size:
            low[past] = width - 1 - np.argmax(weights[local[past], ::-1] > 0, axis=1)
        return blocks[local] * width + low


class GroupedRows:
    """Rows drawn with probability proportional to their weights within given groups.

    The rows are ordered by group once (a permutation kept as int32 or int64, and the
    weights in that order); a draw in group ``g`` is a variate between the cumulative
    weights at the group's first and past its last row, inverted by :class:`WeightedRows`
    on the ordered weights. So ``counts[g]`` rows of group ``g`` cost what as many draws of
    :meth:`WeightedRows.sample` cost, whatever the number of groups.

    Parameters
    ----------
    weights : array_like, shape (N,)
        Non-negative and finite; all zero when no row is ever to be drawn (the bounds of
        a likelihood that its expansion matches exactly), and then only counts of zero.
    groups : array of int, shape (N,)
        Each row's group in ``0 .. n_groups - 1``, or -1 for a row in no group (the last
        bucket, ``n_groups``).
    n_groups : int

    Examples
    --------
    >>> import numpy as np
    >>> rows = GroupedRows(np.array([1.0, 0.0, 2.0, 5.0]), np.array([1, 0, 1, -1]), 2)
    >>> rows.totals, rows.sizes
    (array([0., 3., 5.]), array([1, 2, 1]))
    >>> idx, groups = rows.sample(np.random.default_rng(0), np.array([0, 3, 1]))
    >>> sorted(set(idx[groups == 1].tolist())), idx[groups == 2].tolist()
    ([0, 2], [3])
    """

    def __init__(self, weights, groups, n_groups):
        groups = np.asarray(groups)
        n_groups = int(n_groups)
        bucket = np.where(groups < 0, n_groups, groups)
        index_type = np.int32 if bucket.size < 2**31 else np.int64
        self.order = np.argsort(bucket, kind="stable").astype(index_type)
        """Row indices sorted by group (rows in no group last)."""
        self.starts = np.searchsorted(bucket[self.order], np.arange(n_groups + 2))
        """Position in ``order`` of each group's first row, and N at the end."""
        self.sizes = np.diff(self.starts)
        """Rows per group, shape ``(n_groups + 1,)`` (the last: rows in no group)."""
        self.weights = np.asarray(weights)[self.order]
        self.sampler = None
        if np.any(self.weights):
            self.sampler = WeightedRows(self.weights)
            self._prefix = self.sampler.prefix(self.starts)
        else:  # rows that are never drawn, such as the zero bounds of a quadratic likelihood
            self._prefix = np.zeros(self.starts.size)
        self.totals = np.diff(self._prefix)
        """The weight of each group, shape ``(n_groups + 1,)``."""

    def sample(self, rng: np.random.Generator, counts):
        """``counts[g]`` rows of each group ``g`` (with replacement, by weight): ``(rows,
        groups)``, the rows grouped in group order."""
        counts = np.asarray(counts)
        groups = np.repeat(np.arange(counts.size), counts)
        if groups.size == 0:
            return np.empty(0, dtype=np.intp), groups
        low, width = self._prefix[groups], self.totals[groups]
        positions = self.sampler.rows_at(low + rng.random(groups.size) * width)
        # rounding may put a variate at a neighbouring group's edge: draw those again
        stray = np.flatnonzero((positions < self.starts[groups])
                               | (positions >= self.starts[groups + 1]))  # fmt: skip
        while stray.size:
            g = groups[stray]
            positions[stray] = self.sampler.rows_at(low[stray] + rng.random(stray.size)
                                                    * width[stray])  # fmt: skip
            bad = (positions[stray] < self.starts[g]) | (positions[stray] >= self.starts[g + 1])
            stray = stray[bad]
        return self.order[positions].astype(np.intp), groups

    def rows_of(self, groups):
        """Every row of ``groups``: ``(rows, their groups)``."""
        groups = np.asarray(groups)
        rows = [self.order[self.starts[g] : self.starts[g + 1]] for g in groups]
        labels = np.repeat(groups, self.sizes[groups])
        return (np.concatenate(rows).astype(np.intp) if rows else np.empty(0, np.intp)), labels
