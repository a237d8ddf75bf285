"""Alias table: exact probabilities and draws matching the weights."""

import numpy as np
import pytest
from scipy import stats

from pymc_minibatch.kernels.alias import AliasTable


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_table_encodes_the_weights_exactly(seed):
    weights = np.random.default_rng(seed).gamma(0.5, size=257)
    weights[::17] = 0.0
    table = AliasTable(weights)
    # probability of i = (prob[i] + sum of (1 - prob[j]) over columns j aliased to i) / n
    implied = table.prob.copy()
    np.add.at(implied, table.alias, 1.0 - table.prob)
    np.testing.assert_allclose(implied / table.n, weights / weights.sum(), atol=1e-12)


def test_draws_match_weights_chi_square():
    weights = np.array([1.0, 2.0, 0.0, 5.0, 0.5])
    draws = AliasTable(weights).sample(np.random.default_rng(3), 200_000)
    counts = np.bincount(draws, minlength=5)
    assert counts[2] == 0
    expected = 200_000 * weights / weights.sum()
    mask = expected > 0
    assert stats.chisquare(counts[mask], expected[mask]).pvalue > 0.01


@pytest.mark.parametrize("bad", [[], [-1.0, 2.0], [0.0, 0.0], [np.nan, 1.0], [[1.0]]])
def test_invalid_weights_raise(bad):
    with pytest.raises(ValueError, match="weights"):
        AliasTable(bad)
