"""``data=`` from Zarr, Dask and xarray arrays: rows read through a chunk cache, full-data
passes as Dask tasks (threads, or a local ``dask.distributed`` cluster of processes)."""

import pickle

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior, sample_stats
from pymc_minibatch.model import full_data
from pymc_minibatch.model.expansions import second_order_bounds
from pymc_minibatch.model.lipschitz import derive_bounds
from tests.support.logistic_rows import N_ROWS, X, Y, logistic, placeholder

zarr = pytest.importorskip("zarr")
da = pytest.importorskip("dask.array")
xr = pytest.importorskip("xarray")

CHUNK_ROWS = 256
RNG = np.random.default_rng(23)
THETA = np.array([1.2, 0.7, -0.4])


@pytest.fixture(autouse=True)
def three_blocks_per_pass(monkeypatch):
    """Full-data passes in blocks of 1024 rows: three Dask tasks per pass, added in order."""
    monkeypatch.setattr(full_data, "FULL_DATA_CHUNK_ROWS", 1024)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``{"X": zarr.Array, "y": zarr.Array}`` on disk, in chunks of 256 rows."""
    root = tmp_path_factory.mktemp("zarr")
    arrays = {}
    for name, values in (("X", X), ("y", Y)):
        array = zarr.create_array(root / f"{name}.zarr", shape=values.shape, dtype=values.dtype,
                                  chunks=(CHUNK_ROWS, *values.shape[1:]))  # fmt: skip
        array[:] = values
        arrays[name] = array
    return arrays


def sources(kind, stores, x_memmap):
    """The same rows as ``data=`` of each kind."""
    if kind == "numpy":
        return {"X": X.copy(), "y": Y.copy()}
    if kind == "memmap":
        return {"X": x_memmap, "y": Y}
    if kind == "zarr":
        return dict(stores)
    if kind == "dask":  # chunks unlike the Zarr store's and unlike each other's
        return {"X": da.from_array(X, chunks=(500, 1)), "y": da.from_array(Y, chunks=700)}
    return {"X": xr.DataArray(da.from_array(X, chunks=400), dims=("row", "column")),
            "y": xr.DataArray(Y, dims="row")}  # fmt: skip


def test_take_reads_rows_in_any_order_through_a_bounded_cache(stores):
    rows = pmm.ChunkedRows(stores["X"], cache_bytes=2 * CHUNK_ROWS * X.itemsize * 2)
    idx = np.array([2999, 0, 5, 5, 1000, 257, 0, 2999])
    np.testing.assert_array_equal(rows.take(idx), X[idx])
    # chunks 11, 0, 3, 1 were read (a chunk is looked up once per batch); two fit: 3 and 1
    assert (rows.hits, rows.misses) == (0, 4)
    np.testing.assert_array_equal(rows.take(np.array([1000, 300])), X[[1000, 300]])
    assert (rows.hits, rows.misses) == (2, 4)
    np.testing.assert_array_equal(rows.take(np.array([5])), X[[5]])
    assert (rows.hits, rows.misses) == (2, 5)
    assert list(rows._cache) == [1, 0]  # 3, the least recently used, was dropped


def test_large_batches_are_read_chunk_by_chunk(stores):
    rows = pmm.ChunkedRows(stores["X"])
    idx = RNG.permutation(N_ROWS)[:500]  # beyond the row-by-row size: grouped by chunk
    np.testing.assert_array_equal(rows.take(idx), X[idx])
    assert (rows.hits, rows.misses) == (0, 12)
    np.testing.assert_array_equal(rows.take(idx[::-1]), X[idx[::-1]])
    assert (rows.hits, rows.misses) == (12, 12)


def test_a_chunk_larger_than_the_cache_is_still_kept(stores):
    rows = pmm.ChunkedRows(stores["X"], cache_bytes=0)
    np.testing.assert_array_equal(rows.take(np.array([3, 4])), X[[3, 4]])
    np.testing.assert_array_equal(rows.take(np.array([7])), X[[7]])
    assert (rows.hits, rows.misses) == (1, 1)


def test_chunked_rows_pickle_without_their_cache(stores):
    assert pmm.ChunkedRows(stores["X"]).cache_bytes == 2**27  # the documented 128 MiB
    rows = pmm.ChunkedRows(stores["X"], cache_bytes=10**6)
    rows.take(np.arange(10))
    restored = pickle.loads(pickle.dumps(rows))
    assert (restored.hits, restored.misses, len(restored._cache)) == (0, 0, 0)
    assert restored.cache_bytes == 10**6
    np.testing.assert_array_equal(restored.take(np.array([2, 1])), X[[2, 1]])


@pytest.mark.parametrize(
    ("array", "cache_bytes", "error", "message"),
    [(X, 0, TypeError, "takes a zarr.Array"), (None, -1, ValueError, "non-negative integer")],
    ids=["numpy-array", "negative-cache"],
)
def test_bad_chunked_rows_are_refused(stores, array, cache_bytes, error, message):
    with pytest.raises(error, match=message):
        pmm.ChunkedRows(stores["X"] if array is None else array, cache_bytes=cache_bytes)


@pytest.mark.parametrize("kind", ["zarr", "dask", "xarray"])
def test_full_data_passes_through_dask_equal_the_in_memory_ones(kind, stores, x_memmap,
                                                                 in_memory):  # fmt: skip
    mm = pmm.MinibatchModel(placeholder(), data=sources(kind, stores, x_memmap))
    assert mm.reads_chunks and mm.n_data == N_ROWS
    idx = RNG.integers(0, N_ROWS, size=40)
    np.testing.assert_array_equal(mm.loglik(THETA, idx), in_memory.loglik(THETA, idx))
    # same blocks, summed in the same order: equal to the last bit
    assert mm.logp_and_grad(THETA)[0] == in_memory.logp_and_grad(THETA)[0]
    np.testing.assert_array_equal(mm.full_loglik_rows(THETA), in_memory.full_loglik_rows(THETA))
    mode = mm.find_map()
    np.testing.assert_array_equal(mode, in_memory.find_map())
    np.testing.assert_array_equal(derive_bounds(mm, 2, center=mode).c,
                                  derive_bounds(in_memory, 2, center=mode).c)  # fmt: skip
    # the second-order bounds and expansion sums: one pass, handed over block by block
    laplace = in_memory.laplace()
    chunked_bounds, chunked_expansion = second_order_bounds(mm, laplace)
    bounds, expansion = second_order_bounds(in_memory, laplace)
    np.testing.assert_array_equal(chunked_bounds.c, bounds.c)
    np.testing.assert_array_equal(chunked_expansion.hessian.to_dense(),
                                  expansion.hessian.to_dense())  # fmt: skip
    np.testing.assert_array_equal(chunked_expansion.gradient, expansion.gradient)
    assert len(mm.pass_seconds) == mm.full_data_passes > 0
    assert all(seconds > 0 for seconds in mm.pass_seconds)


def test_non_finite_rows_in_a_zarr_store_are_refused(tmp_path):
    bad = X.copy()
    bad[2345, 0] = np.inf
    store = zarr.create_array(tmp_path / "X.zarr", shape=X.shape, dtype=X.dtype, chunks=(256, 2))
    store[:] = bad
    with pytest.raises(pmm.DataValidationError, match="row 2345"):
        pmm.MinibatchModel(placeholder(), data={"X": store, "y": Y})


def test_same_seed_same_draws_from_every_kind_of_source(stores, x_memmap):
    runs = {}
    for kind in ("in-model", "numpy", "memmap", "zarr", "dask"):
        model, data = (
            (logistic(X, Y), None) if kind == "in-model"
            else (placeholder(), sources(kind, stores, x_memmap))
        )  # fmt: skip
        with model:
            idata = pm.sample(
                step=pmm.TunaMH(data=data), draws=150, tune=150, chains=1, cores=1,
                random_seed=7, progressbar=False, compute_convergence_checks=False,
            )  # fmt: skip
        runs[kind] = posterior(idata)["beta"].values
        stats = sample_stats(idata)
        assert ("chunk_cache_hit_rate" in stats) == (kind in ("zarr", "dask"))
        if kind == "zarr":
            hit_rate = stats["chunk_cache_hit_rate"].values
            # 12 chunks of X and of y fit in the default cache: after the first reads, hits
            assert np.nanmean(hit_rate) > 0.9 and np.all((hit_rate >= 0) | np.isnan(hit_rate))
    for kind, draws in runs.items():
        np.testing.assert_array_equal(draws, runs["in-model"], err_msg=kind)


def test_full_data_passes_run_on_a_distributed_cluster(stores, in_memory):
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                 dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):  # fmt: skip
        mm = pmm.MinibatchModel(placeholder(), data=dict(stores))
        mode = mm.find_map()
        bounds = derive_bounds(mm, 2, center=mode)
        compiled_on_workers = client.run(_functions_restored_here)
    assert sum(compiled_on_workers.values()) > 0  # the blocks were evaluated by the workers
    np.testing.assert_array_equal(mode, in_memory.find_map())
    np.testing.assert_array_equal(bounds.c, derive_bounds(in_memory, 2, center=mode).c)


def _functions_restored_here():
    from pymc_minibatch.model import dask_passes

    return len(dask_passes._RESTORED)


def test_prefetched_rows_are_served_without_reading_their_chunks(stores):
    rows = pmm.ChunkedRows(stores["X"], cache_bytes=0)
    ahead = np.array([2999, 5, 5, 1000, 257, 2998])
    rows.prefetch(ahead)
    assert (rows.hits, rows.misses) == (0, 4)  # chunks 0, 1, 3 and 11, each read once
    assert rows._cache == {}  # the pass leaves the cache alone
    np.testing.assert_array_equal(rows.take(ahead[::-1]), X[ahead[::-1]])
    assert (rows.hits, rows.misses) == (4, 4)  # a look-up per chunk, found in memory
    # a row outside the prefetched set is read through the cache
    np.testing.assert_array_equal(rows.take(np.array([5, 6])), X[[5, 6]])
    assert (rows.hits, rows.misses) == (5, 5)
    rows.prefetch(np.array([7]))  # replaces the previous set
    np.testing.assert_array_equal(rows._prefetched_rows, [7])
    restored = pickle.loads(pickle.dumps(rows))
    assert restored._prefetched_rows.size == 0  # never shipped


def test_tuna_mh_prefetches_the_rows_it_draws_and_reads_no_other(stores, monkeypatch):
    prefetched, taken = [], []
    prefetch, take = pmm.ChunkedRows.prefetch, pmm.ChunkedRows.take

    def spy_prefetch(self, idx):
        prefetched.append(np.unique(idx))
        return prefetch(self, idx)

    def spy_take(self, idx):
        taken.append((len(prefetched), np.asarray(idx).copy()))
        return take(self, idx)

    monkeypatch.setattr(pmm.ChunkedRows, "prefetch", spy_prefetch)
    monkeypatch.setattr(pmm.ChunkedRows, "take", spy_take)
    with placeholder():
        step = pmm.TunaMH(data=dict(stores))
        taken.clear()  # the reads of the construction (Laplace fit, bounds) are passes
        pm.sample(step=step, draws=100, tune=100, chains=1, cores=1, random_seed=3,
                  progressbar=False, compute_convergence_checks=False)  # fmt: skip
    assert prefetched and taken
    for calls, idx in taken:  # every batch lies in the rows of the last prefetch
        assert calls > 0 and np.isin(idx, prefetched[calls - 1]).all()
