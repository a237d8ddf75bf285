"""Rows drawn with probability proportional to their weights: exact encoding, draws, refusals."""

import numpy as np
import pytest
from scipy import stats

from pymc_minibatch.kernels.weighted_rows import WeightedRows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cumulative_sums_encode_the_weights(seed):
    weights = np.random.default_rng(seed).gamma(0.5, size=257)
    weights[::17] = 0.0
    sampler = WeightedRows(weights)
    np.testing.assert_allclose(np.diff(sampler.cumulative, prepend=0.0), weights, atol=1e-12)
    assert sampler.total == pytest.approx(weights.sum(), rel=1e-14)


def test_draws_match_weights_chi_square():
    weights = np.array([1.0, 2.0, 0.0, 5.0, 0.5, 0.0])
    draws = WeightedRows(weights).sample(np.random.default_rng(3), 200_000)
    counts = np.bincount(draws, minlength=6)
    assert counts[2] == 0 and counts[5] == 0
    expected = 200_000 * weights / weights.sum()
    mask = expected > 0
    assert stats.chisquare(counts[mask], expected[mask]).pvalue > 0.01


def test_a_variate_at_the_total_stays_on_a_row_of_positive_weight():
    class Top:  # the largest double below 1, which may round up to the total when scaled
        def random(self, size):
            return np.full(size, np.nextafter(1.0, 0.0))

    weights = np.array([0.1, 0.7, 0.2 + 1e-17, 0.0, 0.0])
    assert WeightedRows(weights).sample(Top(), 3).tolist() == [2, 2, 2]


@pytest.mark.parametrize("bad", [[], [-1.0, 2.0], [0.0, 0.0], [np.nan, 1.0], [[1.0]]])
def test_invalid_weights_raise(bad):
    with pytest.raises(ValueError, match="weights"):
        WeightedRows(bad)
