"""The batch sums and limits of :mod:`pymc_minibatch.kernels.stein_check`."""

import numpy as np
import pytest

from pymc_minibatch.kernels import stein_check


def _checked(draws, scores):
    state = stein_check.init(draws.shape[1])
    return stein_check.update(state, draws, scores)


def test_batches_merge_into_sums_of_consecutive_draws():
    draws = np.random.default_rng(0).normal(size=(100, 3))
    scores = -draws
    state = stein_check.init(3)
    for part in (slice(0, 1), slice(1, 40), slice(40, 40), slice(40, 100)):
        state = stein_check.update(state, draws[part], scores[part])
    assert (state.count, state.batch_length) == (100, 4)  # 32, then 64 draws fill 32 batches
    np.testing.assert_allclose(state.sums[:25, 0], draws.reshape(25, 4, 3).sum(axis=1))
    np.testing.assert_allclose(state.sums[:25, 2], (draws * scores).reshape(25, 4, 3).sum(axis=1))
    assert not state.sums[25:].any()


def test_statistics_need_sixteen_complete_batches():
    draws = np.random.default_rng(1).normal(size=(15, 2))
    assert stein_check.statistics(_checked(draws, -draws)) is None
    assert stein_check.disagreement(stein_check.init(2)) is None


def test_exact_draws_of_a_correlated_posterior_far_from_the_laplace_mode_pass():
    # the units put the draws 8 "Laplace sds" from the mode, as a hierarchical scale's
    # joint mode does: the identities, which use the score only, do not care
    rng = np.random.default_rng(2)
    draws = rng.normal(size=(4000, 300))
    chain = np.empty_like(draws)  # AR(1) draws: the batch means see the correlation
    chain[0] = draws[0]
    for i in range(1, len(draws)):
        chain[i] = 0.9 * chain[i - 1] + np.sqrt(1 - 0.81) * draws[i]
    noise = 3.0 * rng.normal(size=chain.shape)  # an unbiased minibatch estimate's noise
    state = _checked(chain + 8.0, -chain + noise)
    assert stein_check.disagreement(state) is None


def _ar1(rng, n_draws, ndim, rho):
    """A stationary AR(1) chain with standard normal margins."""
    innovations = rng.normal(size=(n_draws, ndim))
    chain = np.empty_like(innovations)
    chain[0] = innovations[0]
    for i in range(1, n_draws):
        chain[i] = rho * chain[i - 1] + np.sqrt(1 - rho**2) * innovations[i]
    return chain


def test_a_slowly_mixing_exact_chain_is_not_accused_after_200_draws():
    # an autocorrelation time of about 200 draws against batches of 8: taken as
    # independent, the batch means understate the standard errors about 5-fold and some
    # of the 2000 coordinates (a chain that has not yet spread) are reported
    chain = _ar1(np.random.default_rng(5), 200, 2000, rho=0.99)
    state = _checked(chain, -chain)
    assert state.batch_length == 8
    assert stein_check.disagreement(state) is None
    _, offset_se, _, spread_se, *_ = stein_check.statistics(state)
    assert np.mean(np.isinf(offset_se)) > 0.9  # most wait: their batches are too short


def test_a_slowly_mixing_chain_off_by_three_sds_is_still_reported_once_it_is_long():
    chain = _ar1(np.random.default_rng(6), 20_000, 3, rho=0.99)
    chain[:, 2] += 3.0
    found = stein_check.disagreement(_checked(chain, -chain))  # the posterior: N(0, 1)
    assert (found.coordinate, found.kind) == (2, "mean")
    assert abs(found.value - 3.0) < 0.5


@pytest.mark.parametrize(
    ("shift", "factor", "kind", "value"),
    [(1.8, 1.0, "mean", 1.8), (0.0, 4.5, "spread", 4.5), (0.0, 0.2, "spread", 0.2)],
)
def test_a_shifted_or_wrongly_spread_coordinate_is_named(shift, factor, kind, value):
    rng = np.random.default_rng(3)
    draws = rng.normal(size=(400, 5))
    draws[:, 1] = shift + factor * draws[:, 1]  # the posterior is standard normal
    found = stein_check.disagreement(_checked(draws, -draws))
    assert (found.coordinate, found.kind, found.count) == (1, kind, 400)
    assert abs(found.value / value - 1.0) < 0.15


def test_a_narrowing_shared_by_every_coordinate_is_reported_overall():
    draws = 0.6 * np.random.default_rng(4).normal(size=(100, 1000))
    found = stein_check.disagreement(_checked(draws, -draws))
    assert (found.coordinate, found.kind) == (None, "overall spread")
    assert abs(found.value - 0.6) < 0.05
    # no coordinate alone is significant; a documented narrowing passes
    wide_open = stein_check.disagreement(_checked(draws, -draws), spread_range=(0.0, 3.0),
                                         overall_range=(0.0, 2.0))  # fmt: skip
    assert wide_open is None


def test_a_non_finite_score_is_reported():
    draws = np.random.default_rng(5).normal(size=(40, 3))
    scores = -draws
    scores[7, 2] = np.nan
    assert stein_check.disagreement(_checked(draws, scores))[:2] == (2, "mean")
