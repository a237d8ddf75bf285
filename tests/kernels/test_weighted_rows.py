"""Rows drawn with probability proportional to their weights: from the cumulative sum over
all rows, or (above ``ROW_CUMSUM_MAX_ROWS``, which the ``lookup`` fixture sets to 0 for a
second run of the tests that use it) in two levels, block sums then the block's cumulative
sum; exact probabilities, zero weights, refusals."""

import numpy as np
import pytest
from scipy import stats

from pymc_minibatch.kernels import weighted_rows
from pymc_minibatch.kernels.weighted_rows import WeightedRows

DRAWS = 400_000


@pytest.fixture(params=["row_cumsum", "two_levels"])
def lookup(request, monkeypatch):
    """The test once with each lookup."""
    if request.param == "two_levels":
        monkeypatch.setattr(weighted_rows, "ROW_CUMSUM_MAX_ROWS", 0)
    return request.param


def _weights(n, seed):
    """Gamma weights with scattered zeros, a whole zero block of 16 and zeros at the end."""
    weights = np.random.default_rng(seed).gamma(0.5, size=n)
    weights[::7] = 0.0
    weights[32:48] = 0.0
    weights[-3:] = 0.0
    return weights


def _chi_square_pvalue(counts, weights):
    expected = counts.sum() * weights / weights.sum()
    positive = expected > 0
    return stats.chisquare(counts[positive], expected[positive]).pvalue


@pytest.mark.usefixtures("lookup")
@pytest.mark.parametrize("n", [1000, 1024, 37])
def test_block_sums_encode_the_weights(n):
    weights = _weights(n, 0)
    sampler = WeightedRows(weights, block_rows=16)
    padded = np.zeros(-(-n // 16) * 16)
    padded[:n] = weights
    np.testing.assert_allclose(np.diff(sampler.cumulative, prepend=0.0),
                               padded.reshape(-1, 16).sum(1), atol=1e-12)  # fmt: skip
    assert sampler.total == pytest.approx(weights.sum(), rel=1e-13)
    assert sampler.cumulative.size == -(-n // 16)  # one float per block beyond the weights


@pytest.mark.usefixtures("lookup")
@pytest.mark.parametrize(("n", "block_rows"), [(1000, 16), (1000, 1024), (5000, 64), (37, 5)])
def test_draws_match_the_weights_chi_square(n, block_rows):
    # 400,000 draws over up to 5000 rows: the chi-square statistic's null distribution is
    # exact enough (>= 80 expected draws per positive row on average); p > 1e-3 fails a
    # correct sampler once in a thousand seeds, a wrong block edge by far more
    weights = _weights(n, 1)
    rows = WeightedRows(weights, block_rows).sample(np.random.default_rng(2), DRAWS)
    counts = np.bincount(rows, minlength=n)
    assert counts.size == n
    assert counts[weights == 0].sum() == 0
    assert _chi_square_pvalue(counts, weights) > 1e-3


@pytest.mark.usefixtures("lookup")
def test_many_blocks_are_drawn_a_group_at_a_time(monkeypatch):
    # more blocks drawn than are summed in one pass: the groups must join up exactly
    monkeypatch.setattr(weighted_rows, "BLOCKS_PER_PASS", 3)
    weights = _weights(1000, 3)
    sampler = WeightedRows(weights, block_rows=8)
    rows = sampler.sample(np.random.default_rng(4), DRAWS)
    counts = np.bincount(rows, minlength=1000)
    assert counts[weights == 0].sum() == 0
    assert _chi_square_pvalue(counts, weights) > 1e-3
    # the same draws as in one pass: grouping changes nothing but the temporaries' size
    monkeypatch.setattr(weighted_rows, "BLOCKS_PER_PASS", 256)
    np.testing.assert_array_equal(sampler.sample(np.random.default_rng(4), DRAWS), rows)


@pytest.mark.usefixtures("lookup")
def test_draws_are_the_inverse_cdf_of_the_variates():
    """Row ``i`` for the variates ``u`` with ``cumsum[i-1] <= u C < cumsum[i]``: the same rows
    as a binary search of the full cumulative sum, in the order drawn."""
    weights = _weights(3000, 5)
    rows = WeightedRows(weights, block_rows=32).sample(np.random.default_rng(6), 20_000)
    variates = np.random.default_rng(6).random(20_000) * weights.sum()
    expected = np.searchsorted(np.cumsum(weights), variates, side="right")
    # the two sums round differently: only variates within rounding of a row's edge differ
    assert np.mean(rows == expected) > 0.9999


class _Top:
    """A generator whose variates are the largest double below 1 (rounding up to the total)."""

    def random(self, size):
        return np.full(size, np.nextafter(1.0, 0.0))


@pytest.mark.usefixtures("lookup")
def test_a_variate_at_the_total_stays_on_a_row_of_positive_weight():
    weights = np.array([0.1, 0.7, 0.0, 0.2 + 1e-17, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert WeightedRows(weights, block_rows=2).sample(_Top(), 3).tolist() == [3, 3, 3]


def test_a_variate_past_its_block_sum_stays_in_the_block_on_a_positive_weight():
    # the block's sum (reduceat) and its cumulative sum at draw time round differently: a
    # variate at the block's upper edge must still land on a positive weight of that block
    weights = np.array([0.1, 0.2, 0.0, 1e-300, 0.0, 0.3])
    sampler = WeightedRows(weights, block_rows=3)
    rows = sampler._rows_in_blocks(np.array([0, 1]), np.array([0, 1]), np.array([1.0, 1.0]))
    assert rows.tolist() == [1, 5]


@pytest.mark.usefixtures("lookup")
def test_zero_draws():
    assert WeightedRows([1.0, 2.0]).sample(np.random.default_rng(0), 0).shape == (0,)


@pytest.mark.usefixtures("lookup")
@pytest.mark.usefixtures("lookup")
@pytest.mark.parametrize(
    "bad", [[], [-1.0, 2.0], [0.0, 0.0], [np.nan, 1.0], [1.0, np.inf], [[1.0]]]
)
def test_invalid_weights_raise(bad):
    with pytest.raises(ValueError, match="weights"):
        WeightedRows(bad)


@pytest.mark.parametrize("block_rows", [0, 2.5, -3])
def test_invalid_block_rows_raise(block_rows):
    with pytest.raises(ValueError, match="block_rows"):
        WeightedRows([1.0, 2.0], block_rows=block_rows)


def test_above_row_cumsum_max_rows_the_sampler_keeps_no_row_sized_array_of_its_own(monkeypatch):
    monkeypatch.setattr(weighted_rows, "ROW_CUMSUM_MAX_ROWS", 99_999)
    weights = _weights(100_000, 7)
    sampler = WeightedRows(weights)
    assert sampler.weights is weights  # the weights by reference, not a copy
    own = [v for v in vars(sampler).values() if isinstance(v, np.ndarray) and v is not weights]
    assert sum(v.nbytes for v in own) <= 8 * (100_000 // 1024 + 1)


@pytest.mark.usefixtures("lookup")
def test_float32_weights_are_kept_and_drawn_as_their_float64_values():
    """Bounds rounded up to float32 (second-order control variates keep them so): no copy
    in float64, and the draws of the same values held in float64."""
    weights = _weights(5000, 8).astype(np.float32)
    sampler = WeightedRows(weights, block_rows=64)
    assert sampler.weights is weights
    rows = sampler.sample(np.random.default_rng(9), 20_000)
    as_float64 = WeightedRows(weights.astype(np.float64), block_rows=64)
    np.testing.assert_array_equal(as_float64.sample(np.random.default_rng(9), 20_000), rows)


def test_grouped_rows_of_zero_weight_give_no_rows():
    """A likelihood that its quadratic expansion matches exactly (a Normal with a known
    scale) bounds every row by 0: the groups exist, with no weight, and none is drawn."""
    rows = weighted_rows.GroupedRows(np.zeros(5), np.array([0, 1, 1, -1, 0]), 2)
    np.testing.assert_array_equal(rows.totals, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(rows.sizes, [2, 2, 1])
    idx, groups = rows.sample(np.random.default_rng(0), np.zeros(3, dtype=int))
    assert idx.size == 0 and groups.size == 0
    np.testing.assert_array_equal(np.sort(rows.rows_of(np.array([1]))[0]), [1, 2])
