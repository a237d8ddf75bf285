"""Stratified batches: the layout, draws within their groups, unbiased sums."""

import numpy as np
import pytest

from pymc_minibatch.kernels.strata import draw, stratify

# groups of 1, 3, 0 (empty), 40 and 200 rows, plus 6 rows in no group, shuffled
SIZES = {0: 1, 1: 3, 3: 40, 4: 200, -1: 6}


@pytest.fixture(scope="module")
def row_groups():
    groups = np.concatenate([np.full(n, g) for g, n in SIZES.items()])
    return np.random.default_rng(0).permutation(groups)


def test_small_groups_are_whole_and_the_others_share_the_rest(row_groups):
    strata = stratify(row_groups, 30)
    # min(n_g, m) summed over 1, 3, 6, 40, 200: 1 + 3 + 6 + 2 m <= 30 for m <= 10
    assert strata.per_group == 10
    whole = np.flatnonzero(np.isin(row_groups, [0, 1, -1]))
    np.testing.assert_array_equal(strata.whole, whole)
    np.testing.assert_array_equal(np.sort(strata.sizes), [40, 200])
    assert strata.batch_size == 30
    assert strata.weights.sum() == pytest.approx(len(row_groups))


def test_draws_stay_in_their_groups(row_groups):
    strata = stratify(row_groups, 30)
    rows = draw(np.random.default_rng(1), strata)
    drawn = rows[strata.whole.size :].reshape(strata.sizes.size, strata.per_group)
    for group_rows, size in zip(drawn, strata.sizes, strict=True):
        (group,) = np.unique(row_groups[group_rows])
        assert np.sum(row_groups == group) == size


def test_weighted_sums_are_unbiased(row_groups):
    """The weighted sum of any row values over a batch has the full sum as mean; its
    spread over 4000 batches sets the tolerance (5 standard errors)."""
    strata = stratify(row_groups, 30)
    values = np.random.default_rng(2).exponential(size=row_groups.size)
    rng = np.random.default_rng(3)
    sums = np.array([strata.weights @ values[draw(rng, strata)] for _ in range(4000)])
    standard_error = sums.std() / np.sqrt(sums.size)
    assert abs(sums.mean() - values.sum()) < 5 * standard_error
    assert standard_error > 0  # the two large groups are sampled, not whole


def test_a_batch_that_covers_every_row_is_exact(row_groups):
    strata = stratify(row_groups, row_groups.size)
    assert strata.sizes.size == 0 and strata.whole.size == row_groups.size
    np.testing.assert_array_equal(draw(np.random.default_rng(0), strata), strata.whole)


def test_fewer_rows_than_groups_cannot_stratify(row_groups):
    assert stratify(row_groups, 4) is None  # five non-empty groups, counting the ungrouped
    assert stratify(row_groups, 5).per_group == 1
