"""``data=``: rows read from arrays outside the model (a placeholder model, N from the arrays)."""

import cloudpickle
import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior
from pymc_minibatch.model.rows import MemmapFile
from tests.support.logistic_rows import N_ROWS, X, Y, logistic, placeholder

RNG = np.random.default_rng(19)


@pytest.mark.parametrize("source", ["ndarray", "memmap"])
def test_rows_from_data_equal_the_in_memory_model(source, x_memmap, in_memory):
    x_rows = X.copy() if source == "ndarray" else x_memmap
    mm = pmm.MinibatchModel(placeholder(), data={"X": x_rows, "y": Y})
    assert mm.n_data == N_ROWS
    theta = np.array([1.2, 0.7, -0.4])
    idx = RNG.integers(0, N_ROWS, size=40)
    np.testing.assert_array_equal(mm.loglik(theta, idx), in_memory.loglik(theta, idx))
    assert mm.logp(theta) == in_memory.logp(theta)
    np.testing.assert_array_equal(mm.find_map(), in_memory.find_map())


@pytest.mark.parametrize("step_class", [pmm.TunaMH, pmm.SGLD])
def test_same_seed_same_draws_from_memory_and_memmap(step_class, x_memmap):
    options = {"batch_size": 100} if step_class is pmm.SGLD else {}
    runs = []
    for model, data in ((logistic(X, Y), None), (placeholder(), {"X": x_memmap, "y": Y})):
        with model:
            idata = pm.sample(
                step=step_class(data=data, **options), draws=200, tune=200, chains=1,
                cores=1, random_seed=5, progressbar=False, compute_convergence_checks=False,
            )  # fmt: skip
        runs.append(posterior(idata)["beta"].values)
    np.testing.assert_array_equal(*runs)


def test_particles_read_rows_from_data(x_memmap):
    runs = []
    for model, data in ((logistic(X, Y), None), (placeholder(), {"X": x_memmap, "y": Y})):
        with model:
            idata = pmm.sample_particles(
                n_particles=10, n_steps=20, data=data, random_seed=6, progressbar=False
            )
        runs.append(posterior(idata)["beta"].values)
    np.testing.assert_array_equal(*runs)


def test_pickled_adapter_reopens_a_memmap_instead_of_copying_it(x_memmap):
    mm = pmm.MinibatchModel(placeholder(), data={"X": x_memmap, "y": Y}, check=False)
    state = mm.__getstate__()
    assert isinstance(state["data"]["X"], MemmapFile)
    restored = cloudpickle.loads(cloudpickle.dumps(mm))
    assert isinstance(restored.data["X"], np.memmap) and restored.data["X"].mode == "r"
    theta = np.array([1.0, 0.5, -0.5])
    assert restored.logp(theta) == mm.logp(theta)


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        ({"Z": X, "y": Y}, ValueError, "'Z' is not data on the row axis"),
        ({"X": X}, ValueError, r"\['y'\] keep the model's 50"),
        ({"X": X[:, :1], "y": Y}, ValueError, "must agree beyond the leading"),
        ({"X": X.tolist(), "y": Y}, TypeError, "must be an np.ndarray"),
        ({"X": X, "y": Y[:-1]}, ValueError, "different row counts"),
        ({"X": X, "y": Y.astype("float64")}, TypeError, "cannot be cast"),
    ],
    ids=["unknown-name", "array-left-out", "trailing-shape", "not-an-array", "row-counts",
         "dtype"],
)  # fmt: skip
def test_bad_data_is_refused_with_its_name(data, error, message):
    with pytest.raises(error, match=message):
        pmm.MinibatchModel(placeholder(), data=data, check=False)


def test_data_is_validated_like_the_models_own():
    bad = X.copy()
    bad[1234, 1] = np.nan
    with pytest.raises(pmm.DataValidationError, match="row 1234"):
        pmm.MinibatchModel(placeholder(), data={"X": bad, "y": Y})
