"""Passes over all rows as Dask computations: one task per block of rows.

When the rows live in Zarr, Dask or xarray arrays, a full-data pass (the mode search's
objective and gradient, the curvature, per-row bounds, control-variate sums, a fallback
step) evaluates one of the adapter's compiled functions on each block of rows as a Dask
task, on Dask's current scheduler: its threads by default, or the workers of a
``dask.distributed.Client`` when one is active. Each task reads its own block of rows, so
no more than a few blocks are in memory at once, and on a cluster the rows never pass
through this process (only the compiled model, once per worker). The blocks and the order
in which their results are added are those of the in-memory pass, so the results are the
same to the last bit.
"""

import ctypes
import ctypes.util
import functools
import threading
import uuid

import numpy as np

from pymc_minibatch.model.chunked import ChunkedRows

#: Functions restored in this process from a pickled :class:`BlockFunction`, by token: a
#: worker compiles each once, not once per task.
_RESTORED = {}
_RESTORED_LOCK = threading.Lock()


class BlockFunction:
    """One compiled function of a :class:`~pymc_minibatch.MinibatchModel`, callable on a
    block of rows in this process or, pickled, in a Dask worker's.

    Parameters
    ----------
    minibatch_model : MinibatchModel
    build : callable
        ``build(minibatch_model)`` returns the compiled function ``f(theta, *rows)``; it is
        pickled with the adapter, so in another process it compiles there.
    """

    def __init__(self, minibatch_model, build):
        self.minibatch_model = minibatch_model
        self.build = build
        self.token = uuid.uuid4().hex
        self._function = None
        self._payload = None
        # a compiled PyTensor function keeps its inputs and outputs in its own storage: one
        # call at a time (Dask's threaded scheduler runs several tasks at once)
        self._lock = threading.Lock()

    def __call__(self, theta, *rows):
        with self._lock:
            if self._function is None:
                self._function = self.build(self.minibatch_model)
            return self._function(theta, *rows)

    def __dask_tokenize__(self):
        return self.token

    def __getstate__(self):
        # pickled once: each pass sends it again, a worker compiles only the first time
        if self._payload is None:
            import cloudpickle

            self._payload = cloudpickle.dumps((self.minibatch_model, self.build))
        return {"token": self.token, "payload": self._payload}

    def __setstate__(self, state):
        with _RESTORED_LOCK:
            restored = _RESTORED.get(state["token"])
            if restored is None:
                restored = BlockFunction(*_loads(state["payload"]))
                restored.token = state["token"]
                _RESTORED[state["token"]] = restored
        self.__dict__.update(restored.__dict__)


class SummedFirstOutput:
    """A block function whose first output, one value per row, is summed where the block is
    evaluated: a pass that needs only the total (the log-likelihood and its gradient, in
    the mode search and the curvature) then holds one number per block, not one per row.

    Parameters
    ----------
    block_function : BlockFunction
    """

    def __init__(self, block_function):
        self.block_function = block_function

    def __call__(self, theta, *rows):
        outputs = self.block_function(theta, *rows)
        if isinstance(outputs, list):
            return [float(np.sum(outputs[0])), *outputs[1:]]
        return float(np.sum(outputs))

    def __dask_tokenize__(self):
        return ("SummedFirstOutput", self.block_function.token)


def _loads(payload):
    import cloudpickle

    return cloudpickle.loads(payload)


#: Blocks computed at once when a pass hands its results over as they come (``in_waves``):
#: enough for every thread of a machine, while at most this many per-row results wait.
WAVE_BLOCKS = 8


def map_row_blocks(function, theta, arrays, dtypes, n_data, block_rows, in_waves=False):
    """``[function(theta, *rows of block b) for each block b]`` as Dask tasks.

    ``arrays`` are the row-axis arrays (NumPy, or :class:`ChunkedRows` whose arrays are
    Zarr, Dask or xarray); each is split into blocks of ``block_rows`` rows and cast to
    its entry of ``dtypes`` inside the task. With ``in_waves``, an iterator over the
    results that computes :data:`WAVE_BLOCKS` blocks at a time, so that per-row results
    can be used and released before the next ones are computed.
    """
    import dask

    n_blocks = -(-n_data // block_rows)
    sources = [_block_sources(array, block_rows, n_blocks) for array in arrays]
    evaluate = dask.delayed(_evaluate_block, pure=True)
    shared_function = dask.delayed(function, pure=True)
    tasks = [
        evaluate(shared_function, theta, dtypes,
                 slice(i * block_rows, min((i + 1) * block_rows, n_data)),
                 *(source[i] for source in sources))  # fmt: skip
        for i in range(n_blocks)
    ]
    if not in_waves:
        results = list(dask.compute(*tasks))
        release_freed_memory()
        return results
    return (result for wave in _waves(tasks) for result in wave)


def _block_sources(array, block_rows, n_blocks):
    """What each of the ``n_blocks`` tasks reads its block of ``array`` from: the block's
    own Dask task for a Dask array, else the array itself, sliced inside the task."""
    import dask

    if isinstance(array, ChunkedRows) and array.kind == "dask":
        rows = array.array
        rows = rows.rechunk({0: block_rows, **{axis: -1 for axis in range(1, rows.ndim)}})
        return list(rows.to_delayed().ravel())
    # Zarr, xarray and NumPy: each task reads its block with one slice (Zarr reads the
    # stored chunks under it concurrently) when it runs, so a block is in memory only
    # while it is evaluated; one task per stored chunk would cost a task's overhead per
    # small chunk (4.9 against 2.1 s per pass over 10^6 rows in 1024-row chunks). A
    # fixed name: Dask would otherwise hash an in-memory array's data to name it.
    shared = dask.delayed(_Sliced(array), name=f"rows-{uuid.uuid4().hex}", traverse=False)
    return [shared] * n_blocks


class _Sliced:
    """An array read by row slices inside a task (marks it apart from a block's rows)."""

    def __init__(self, array):
        self.array = array

    def read(self, idx):
        return self.array[idx]


def _waves(tasks):
    import dask

    for first in range(0, len(tasks), WAVE_BLOCKS):
        wave = dask.compute(*tasks[first : first + WAVE_BLOCKS])
        release_freed_memory()
        yield wave


def release_freed_memory():
    """Give memory freed by a pass back to the operating system (glibc's ``malloc_trim``).

    Each of Dask's threads allocates its blocks in a malloc arena of its own, and glibc
    keeps what they free for later: without this, over the passes of a TunaMH
    construction on Zarr rows, the process grew pass after pass by memory that was free
    but still held (``benchmarks/chunked_rows.py`` prints the peak). ``dask.distributed``
    trims its workers in the same way. Elsewhere than glibc, nothing.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    library = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(library).malloc_trim if library else None
    except (OSError, AttributeError):  # not glibc (macOS, musl): no malloc_trim
        return None


def _evaluate_block(function, theta, dtypes, rows, *blocks):
    blocks = [b.read(rows) if isinstance(b, _Sliced) else b for b in blocks]
    # arrays unpickled from a message may be unaligned, which compiled C code refuses
    theta = np.require(theta, dtype=np.float64, requirements="A")
    blocks = (np.require(b, dtype=d, requirements="A")
              for b, d in zip(blocks, dtypes, strict=True))  # fmt: skip
    return function(theta, *blocks)
