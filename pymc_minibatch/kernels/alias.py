"""Walker's alias method: O(1) draws of indices with probability proportional to weights.

Walker (1977), "An efficient method for generating discrete random variables with general
distributions", ACM TOMS 3(3); construction after Vose (1991), IEEE TSE 17(9). Building the
table is O(N) once; ``rng.choice(p=...)`` would instead cost O(N) on every call.
"""

import numpy as np


class AliasTable:
    """Sample indices ``i`` with probability ``weights[i] / sum(weights)``.

    Parameters
    ----------
    weights : array_like, shape (N,)
        Non-negative, finite, with a positive sum.
    """

    def __init__(self, weights):
        weights = np.asarray(weights, dtype=np.float64)
        if weights.ndim != 1 or weights.size == 0:
            raise ValueError("weights must be a non-empty 1-D array")
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
            raise ValueError("weights must be finite, non-negative and not all zero")
        n = weights.size
        scaled = weights * (n / weights.sum())
        self.prob = np.ones(n)
        self.alias = np.arange(n)
        small = list(np.flatnonzero(scaled < 1.0))
        large = list(np.flatnonzero(scaled >= 1.0))
        scaled = scaled.tolist()  # Python floats: the loop below is scalar work
        prob, alias = self.prob, self.alias
        while small and large:
            s, g = small.pop(), large.pop()
            prob[s] = scaled[s]
            alias[s] = g
            scaled[g] -= 1.0 - scaled[s]
            (small if scaled[g] < 1.0 else large).append(g)
        # leftovers have probability 1 up to rounding
        for i in small + large:
            prob[i] = 1.0
        self.n = n

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent indices (with replacement)."""
        columns = rng.integers(0, self.n, size=size)
        keep_column = rng.random(size) < self.prob[columns]
        return np.where(keep_column, columns, self.alias[columns])
