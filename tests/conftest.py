"""Fixtures that several test modules share; the helpers behind them are in
:mod:`tests.support`."""

import pytest

import pymc_minibatch as pmm
from tests.support.logistic_rows import X, Y, logistic, read_only_memmap


@pytest.fixture(scope="module")
def in_memory():
    """The logistic regression of :mod:`tests.support.logistic_rows` with its rows in the
    model: what the models reading the same rows from ``data=`` must equal."""
    return pmm.MinibatchModel(logistic(X, Y))


@pytest.fixture(scope="module")
def x_memmap(tmp_path_factory):
    """The rows ``X`` of :mod:`tests.support.logistic_rows` as a read-only ``np.memmap``."""
    return read_only_memmap(tmp_path_factory.mktemp("rows") / "X.dat", X)
