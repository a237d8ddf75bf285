"""Rows held as users hold them (a pandas DataFrame, a column-major array, ``pm.Data``) are
laid out by rows once, so that a step's row gathers do not stride across memory."""

import numpy as np
import pandas as pd
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch.model.rows import row_major
from tests.support.logistic_rows import N_ROWS, X, Y, logistic, placeholder, read_only_memmap


def _frame_columns():
    """``X`` as ``DataFrame.to_numpy()`` gives it: column-major."""
    columns = pd.DataFrame(X, columns=["x1", "x2"]).to_numpy()
    assert columns.flags.f_contiguous and not columns.flags.c_contiguous
    return columns


def _constant_logistic(X_values, y):
    """``logistic`` with the design as a constant in the graph instead of ``pm.Data``."""
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 5.0)
        beta = pm.Normal("beta", 0.0, 1.0, shape=2)
        pm.Bernoulli("y", logit_p=alpha + X_values @ beta, observed=y)
    return model


@pytest.mark.parametrize(
    "build",
    [
        lambda: pmm.MinibatchModel(_constant_logistic(_frame_columns(), Y)),
        lambda: pmm.MinibatchModel(logistic(_frame_columns(), Y)),
        lambda: pmm.MinibatchModel(placeholder(), data={"X": _frame_columns(), "y": Y}),
    ],
    ids=["constant", "pm.Data", "data="],
)
def test_column_major_rows_are_read_from_a_row_major_copy(build, caplog):
    with caplog.at_level("INFO", logger="pymc_minibatch"):
        mm = build()
    arrays = mm.row_source.arrays()
    assert all(a.flags.c_contiguous for a in arrays)
    assert "copied to row-major order" in caplog.text
    reference = pmm.MinibatchModel(_constant_logistic(np.ascontiguousarray(X), Y))
    theta = np.array([1.2, 0.7, -0.4])
    idx = np.random.default_rng(3).integers(0, N_ROWS, size=50)
    np.testing.assert_array_equal(mm.loglik(theta, idx), reference.loglik(theta, idx))
    assert mm.row_source.arrays()[0] is arrays[0]  # copied once, not per read


def test_a_new_pm_data_value_is_laid_out_again():
    model = logistic(np.ascontiguousarray(X), Y)
    mm = pmm.MinibatchModel(model)
    with model:
        pm.set_data({"X": np.asfortranarray(2.0 * X)})
    assert all(a.flags.c_contiguous for a in mm.row_source.arrays())
    reference = pmm.MinibatchModel(logistic(2.0 * X, Y))
    theta = np.array([0.3, -0.2, 0.9])
    idx = np.arange(0, N_ROWS, 7)
    np.testing.assert_array_equal(mm.loglik(theta, idx), reference.loglik(theta, idx))


def test_a_column_major_memmap_is_left_in_place_with_a_warning(tmp_path):
    columns = read_only_memmap(tmp_path / "X.dat", np.ascontiguousarray(X.T)).T
    assert isinstance(columns, np.memmap) and not columns.flags.c_contiguous
    with pytest.warns(UserWarning, match="memory-mapped in column-major order"):
        assert row_major(columns, "X") is columns


def test_row_major_and_one_dimensional_arrays_are_not_copied():
    assert row_major(X, "X") is X
    column = X[:, 1]
    assert not column.flags.c_contiguous and row_major(column, "x") is column
