"""The running moments and limits of :mod:`pymc_minibatch.kernels.laplace_check`."""

import numpy as np

from pymc_minibatch.kernels import laplace_check


def test_moments_in_batches_equal_numpys():
    draws = np.random.default_rng(0).normal(2.0, 3.0, size=(101, 4))
    state = laplace_check.init(4)
    for part in (draws[:1], draws[1:40], np.empty((0, 4)), draws[40:]):
        state = laplace_check.update(state, part)
    assert state.count == 101
    np.testing.assert_allclose(state.mean, draws.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(state.squares / 100, draws.var(axis=0, ddof=1), rtol=1e-12)


def test_draws_of_the_laplace_approximation_pass():
    draws = np.random.default_rng(1).normal(size=(200, 1000))
    state = laplace_check.update(laplace_check.init(1000), draws)
    assert laplace_check.disagreement(state) is None
    assert laplace_check.disagreement(laplace_check.init(1000)) is None  # nothing seen


def test_a_shifted_or_wrongly_spread_coordinate_is_named():
    draws = np.random.default_rng(2).normal(size=(300, 5))
    shifted = draws + np.array([0.0, 0.0, -6.0, 0.0, 0.0])
    found = laplace_check.disagreement(laplace_check.update(laplace_check.init(5), shifted))
    assert (found.coordinate, found.kind, found.count) == (2, "mean", 300)
    assert abs(found.value + 6.0) < 0.3
    for factor in (4.0, 0.2):
        spread = draws * np.array([1.0, factor, 1.0, 1.0, 1.0])
        found = laplace_check.disagreement(laplace_check.update(laplace_check.init(5), spread))
        assert (found.coordinate, found.kind) == (1, "spread")
        assert abs(found.value / factor - 1.0) < 0.15
    nan = laplace_check.update(laplace_check.init(5), np.full((3, 5), np.nan))
    assert laplace_check.disagreement(nan).kind == "mean"
