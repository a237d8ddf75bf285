"""Row sources: the data arrays that share the row axis, gathered in NumPy.

Rows are gathered outside the compiled PyTensor graph (``array[idx]``) and passed in as
inputs, so large data is never baked into a compiled function, ``np.memmap`` arrays are
read only at the rows a sampler touches, and Zarr, Dask and xarray arrays only at the
chunks holding them (:mod:`pymc_minibatch.model.chunked`).
"""

import logging
import mmap
import warnings
from typing import NamedTuple

import numpy as np
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant
from pytensor.tensor.type import TensorType

from pymc_minibatch.model.chunked import ChunkedRows, chunked_kind

_log = logging.getLogger("pymc_minibatch")


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
    sources : dict, optional
        Arrays that replace some roots' values (``{root: array}``, see
        :func:`resolve_data_sources`): the model holds a placeholder there, and rows are
        read from the array.

    Notes
    -----
    A step gathers random rows, which in a column-major (Fortran-ordered) array lie
    scattered across memory: ``pd.DataFrame.to_numpy()`` and ``np.column_stack`` give such
    arrays, and a gather from one costs orders of magnitude more than from a row-major copy
    (``benchmarks/row_layout.py`` in the repository measures both). In-memory arrays
    that are not row-major are therefore copied to row-major order once, when first read
    (the copy is logged); a memory-mapped one cannot be, and gets a warning.
    """

    def __init__(self, roots, n_data, sources=None):
        self.roots = list(roots)
        self.n_data = int(n_data)
        self.sources = dict(sources or {})
        self._dtypes = [r.type.dtype for r in self.roots]
        self._row_major = {}  # root -> (its array as given, that array laid out by rows)
        # constants and sources never change: keep their arrays; pm.Data values are
        # re-read per call
        fixed = all(isinstance(r, Constant) or r in self.sources for r in self.roots)
        self._fixed_arrays = [self._array(r) for r in self.roots] if fixed else None
        self.chunked = [s for s in self.sources.values() if isinstance(s, ChunkedRows)]
        """The sources read chunk by chunk (Zarr, Dask, xarray)."""

    def _array(self, root):
        """The rows of ``root``, laid out by rows (see the class notes)."""
        given = self.sources[root] if root in self.sources else root_value(root)
        cached = self._row_major.get(root)
        if cached is not None and cached[0] is given:
            return cached[1]
        laid_out = row_major(given, root.name or f"of shape {np.shape(given)}")
        self._row_major[root] = (given, laid_out)  # copied, or warned about, once
        return laid_out

    def arrays(self):
        """The current full arrays (``pm.set_data`` changes are seen), without copying."""
        if self._fixed_arrays is not None:
            return self._fixed_arrays
        arrays = [self._array(r) for r in self.roots]
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
        return [
            np.asarray(_take(a, idx), dtype=dtype)
            for a, dtype in zip(self.arrays(), self._dtypes, strict=True)
        ]

    def chunks(self, chunk_rows):
        """All rows in contiguous slices of at most ``chunk_rows`` (views, no copies, except
        of a ``data=`` array whose dtype is cast to the model's)."""
        arrays = self.arrays()
        for start in range(0, self.n_data, chunk_rows):
            yield [
                np.asarray(a[start : start + chunk_rows], dtype=dtype)
                for a, dtype in zip(arrays, self._dtypes, strict=True)
            ]

    def map_chunks(self, function, theta, chunk_rows, consume=None, advance=None):
        """``[function(theta, *rows) for rows in self.chunks(chunk_rows)]``: in this process,
        or as Dask tasks when some rows are in Zarr, Dask or xarray arrays (see
        :mod:`pymc_minibatch.model.dask_passes`; ``function`` must then pickle).

        With ``consume``, each result is handed to ``consume(result)``, in order, as soon as
        its turn comes, and not kept (returns None): per-row results then never all sit in
        memory besides what ``consume`` keeps of them. ``advance(rows)`` is told the rows of
        each block as its result arrives (a progress bar).
        """
        if not self.chunked:
            results = (function(theta, *rows) for rows in self.chunks(chunk_rows))
        else:
            from pymc_minibatch.model.dask_passes import map_row_blocks

            results = map_row_blocks(function, theta, self.arrays(), self._dtypes, self.n_data,
                                     chunk_rows, in_waves=consume is not None)  # fmt: skip
        kept = []
        for start, result in zip(range(0, self.n_data, chunk_rows), results, strict=True):
            (kept.append if consume is None else consume)(result)
            if advance is not None:
                advance(min(chunk_rows, self.n_data - start))
        return kept if consume is None else None

    def prefetch(self, idx):
        """Tell the chunked sources that rows ``idx`` will be gathered next (see
        :meth:`ChunkedRows.prefetch`); in-memory and memory-mapped arrays need no notice."""
        for source in self.chunked:
            source.prefetch(idx)

    def cache_counts(self):
        """``(hits, misses)`` of the chunk caches of the chunked sources so far."""
        return (sum(s.hits for s in self.chunked), sum(s.misses for s in self.chunked))


def row_major(array, name):
    """``array``, or a row-major copy of it when it is an in-memory ndarray whose rows are
    not contiguous; a memory-mapped array in column order gets a warning instead."""
    if not isinstance(array, np.ndarray) or array.ndim < 2 or array.flags.c_contiguous:
        return array
    if isinstance(array, np.memmap):
        warnings.warn(
            f"data '{name}' is memory-mapped in column-major order: each step reads its rows "
            "from scattered places of the file, which can make steps orders of magnitude "
            "slower; store it in row-major (C) order",
            UserWarning,
            stacklevel=4,
        )
        return array
    _log.info("data '%s' (%.1f MB) copied to row-major order for fast row gathers", name,
              array.nbytes / 1e6)  # fmt: skip
    return np.ascontiguousarray(array)


def _take(array, idx):
    if isinstance(array, ChunkedRows):
        return array.take(idx)
    return np.take(array, idx, axis=0)


def resolve_data_sources(model, roots, placeholder_rows, data):
    """Match the arrays of ``data=`` to the model's row-axis data; return them and N.

    Parameters
    ----------
    model : pm.Model
    roots : list of TensorVariable
        The model's data on the row axis (``RowGraph.roots``).
    placeholder_rows : int
        Their common leading length in the model.
    data : dict or None
        ``{name: array}``, ``name`` a ``pm.Data`` variable or an observed variable (its
        observed values) of ``model``; ``array`` an ``np.ndarray``, ``np.memmap``,
        ``zarr.Array``, ``dask.array.Array``, ``xarray.DataArray`` or
        :class:`~pymc_minibatch.ChunkedRows`, whose leading axis holds the rows and whose
        other axes match the model's array. The chunked ones are wrapped in
        :class:`~pymc_minibatch.ChunkedRows` (its default cache) unless they are already.

    Returns
    -------
    (dict, int)
        ``{root: array or ChunkedRows}`` and the number of rows N (``placeholder_rows``
        without ``data``).

    Raises
    ------
    ValueError
        Naming an entry that is not on the row axis, has other trailing axes or another
        row count than the rest, or a row-axis array left out while N changes.
    TypeError
        If an array is none of these.
    """
    if not data:
        return {}, placeholder_rows
    by_name = _roots_by_name(model, roots)
    sources = {}
    for name, array in data.items():
        if name not in by_name:
            raise ValueError(
                f"data={{{name!r}: ...}}: '{name}' is not data on the row axis of the "
                f"likelihood; the row-axis data are {sorted(by_name)}"
            )
        if chunked_kind(array) is not None:
            array = array if isinstance(array, ChunkedRows) else ChunkedRows(array)
        elif not isinstance(array, np.ndarray):
            raise TypeError(
                f"data['{name}'] must be an np.ndarray, np.memmap, zarr.Array, "
                f"dask.array.Array or xarray.DataArray, got {type(array).__name__}"
            )
        root = by_name[name]
        if not np.can_cast(array.dtype, root.type.dtype, casting="same_kind"):
            raise TypeError(
                f"data['{name}'] has dtype {array.dtype}; the model's '{name}' is "
                f"{root.type.dtype}, which it cannot be cast to"
            )
        expected = root_value(root).shape[1:]
        if array.ndim < 1 or array.shape[1:] != expected:
            raise ValueError(
                f"data['{name}'] has shape {array.shape}; the model's '{name}' has "
                f"{root_value(root).shape}: the shapes must agree beyond the leading (row) axis"
            )
        sources[root] = array
    lengths = {name: int(array.shape[0]) for name, array in data.items()}
    n_data = next(iter(lengths.values()))
    if len(set(lengths.values())) > 1:
        raise ValueError(f"the arrays of data= have different row counts: {lengths}")
    left_out = [name for name, root in by_name.items() if root not in sources]
    if n_data != placeholder_rows and left_out:
        raise ValueError(
            f"data= gives {n_data} rows, but {left_out} keep the model's {placeholder_rows}: "
            "pass every row-axis array in data="
        )
    return sources, n_data


def _roots_by_name(model, roots):
    """``{name: root}``: each root under its own name and the observed variables' names."""
    by_name = {root.name: root for root in roots if root.name}
    for rv in model.observed_RVs:
        value = model.rvs_to_values[rv]
        if value in roots:
            by_name[rv.name] = value
    return by_name


class MemmapFile(NamedTuple):
    """How to reopen a read-only ``np.memmap`` (what a pickled adapter carries)."""

    filename: str
    dtype: np.dtype
    shape: tuple
    offset: int
    order: str


def picklable_rows(array):
    """``array``, or a :class:`MemmapFile` for a file-backed ``np.memmap``: pickling a memmap
    copies every row into the pickle (and into each process ``pm.sample`` starts)."""
    if isinstance(array, np.memmap) and isinstance(array.base, mmap.mmap) and array.filename:
        order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"
        return MemmapFile(array.filename, array.dtype, array.shape, array.offset, order)
    return array


def unpickled_rows(value):
    """The array :func:`picklable_rows` stood for (a memmap is reopened read-only)."""
    if isinstance(value, MemmapFile):
        return np.memmap(value.filename, dtype=value.dtype, mode="r", shape=value.shape,
                         offset=value.offset, order=value.order)  # fmt: skip
    return value
