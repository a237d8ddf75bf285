"""Row sources: the data arrays that share the row axis, gathered in NumPy.

Rows are gathered outside the compiled PyTensor graph (``array[idx]``) and passed in as
inputs, so large data is never baked into a compiled function and ``np.memmap`` arrays
are read only at the rows a sampler touches.
"""

import numpy as np
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant
from pytensor.tensor.type import TensorType


def is_data_root(var) -> bool:
    """Whether ``var`` is a tensor constant or shared variable (a place data can live)."""
    return isinstance(var.type, TensorType) and isinstance(var, Constant | SharedVariable)


def root_value(var):
    """The array held by a data root (no copy)."""
    if isinstance(var, Constant):
        return var.data
    return var.get_value(borrow=True)


def leading_length(var) -> int | None:
    """Length of the leading axis of a data root, or None for scalars and non-roots."""
    if not is_data_root(var) or var.type.ndim == 0:
        return None
    return int(np.shape(root_value(var))[0])


class RowSource:
    """The data arrays on the row axis of a model, read at any index set.

    Parameters
    ----------
    roots : list of TensorVariable
        Constants or shared variables (``pm.Data``) whose leading axis is the row axis.
    n_data : int
        Number of rows N.
    """

    def __init__(self, roots, n_data):
        self.roots = list(roots)
        self.n_data = int(n_data)
        # constants never change: keep their arrays; pm.Data values are re-read per call
        self._constant_arrays = (
            [r.data for r in self.roots]
            if all(isinstance(r, Constant) for r in self.roots)
            else None
        )

    def arrays(self):
        """The current full arrays (``pm.set_data`` changes are seen), without copying."""
        if self._constant_arrays is not None:
            return self._constant_arrays
        arrays = [root_value(r) for r in self.roots]
        for root, arr in zip(self.roots, arrays, strict=True):
            if arr.shape[0] != self.n_data:
                raise ValueError(
                    f"data '{root.name}' now has {arr.shape[0]} rows, but the model was "
                    f"adapted with {self.n_data}; build a new MinibatchModel after pm.set_data "
                    "changes the number of rows"
                )
        return arrays

    def gather(self, idx):
        """Rows ``idx`` (any int array, repeats allowed) of every array, as plain in-memory
        ndarrays (also from ``np.memmap``).

        ``np.take`` rather than ``a[idx]``: on random rows of a large array it is about 2.5
        times faster (33 against 82 us for 1000 of 10^6 rows of 10 floats).
        """
        return [np.asarray(np.take(a, idx, axis=0)) for a in self.arrays()]

    def chunks(self, chunk_rows):
        """All rows in contiguous slices of at most ``chunk_rows`` (views, no copies)."""
        arrays = self.arrays()
        for start in range(0, self.n_data, chunk_rows):
            yield [np.asarray(a[start : start + chunk_rows]) for a in arrays]
