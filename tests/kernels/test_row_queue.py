"""Row indices drawn ahead: handed out in order across refills, prefetched, pickled."""

import pickle

import numpy as np
import pytest

from pymc_minibatch.kernels.row_queue import MAX_QUEUE, MIN_QUEUE, RowQueue, queue_length
from pymc_minibatch.kernels.weighted_rows import WeightedRows


def _draw(rng, size):
    return rng.integers(0, 10**6, size)


def test_indices_are_handed_out_in_the_order_drawn_across_refills():
    queue, rng = RowQueue(5), np.random.default_rng(0)
    sizes = [3, 0, 4, 1, 12, 2, 5]  # one request larger than two refills
    handed = np.concatenate([queue.take(rng, size, _draw) for size in sizes])
    # refills of 5 drawn one after another from the same generator
    expected = np.concatenate([_draw(r, 5) for r in [np.random.default_rng(0)] * 6])
    np.testing.assert_array_equal(handed, expected[: sum(sizes)])
    assert queue.pending.size == 30 - sum(sizes)


def test_the_generator_is_used_only_when_the_queue_runs_short():
    queue, rng = RowQueue(8), np.random.default_rng(1)
    queue.take(rng, 3, _draw)
    state = rng.bit_generator.state
    queue.take(rng, 5, _draw)
    assert rng.bit_generator.state == state


def test_the_prefetch_hint_gets_every_index_before_it_is_handed_out():
    hints = []
    queue, rng = RowQueue(4), np.random.default_rng(2)
    first = queue.take(rng, 3, _draw, hints.append)
    second = queue.take(rng, 3, _draw, hints.append)  # one left over, then a refill
    assert len(hints) == 2
    np.testing.assert_array_equal(hints[0][:3], first)
    np.testing.assert_array_equal(hints[1][:3], second)  # the leftover comes first
    assert hints[1].size == 5


def test_a_pickled_queue_continues_with_the_same_indices():
    queue, rng = RowQueue(6), np.random.default_rng(3)
    queue.take(rng, 4, _draw)
    restored = pickle.loads(pickle.dumps(queue))
    rng_copy = pickle.loads(pickle.dumps(rng))
    for size in (1, 2, 7, 3):
        np.testing.assert_array_equal(restored.take(rng_copy, size, _draw),
                                      queue.take(rng, size, _draw))  # fmt: skip


def test_queues_compare_by_length_and_pending_indices():
    queue = RowQueue(4)
    queue.take(np.random.default_rng(4), 1, _draw)
    copy = pickle.loads(pickle.dumps(queue))
    assert copy == queue and copy != RowQueue(4)
    copy.take(np.random.default_rng(4), 1, _draw)
    assert copy != queue


def test_clear_forgets_the_pending_indices():
    queue = RowQueue(4)
    queue.take(np.random.default_rng(4), 1, _draw)
    queue.clear()
    assert queue.pending.size == 0


def test_weighted_draws_through_the_queue_equal_one_draw_of_the_same_size():
    sampler = WeightedRows(np.random.default_rng(5).gamma(1.0, size=5000), block_rows=64)
    queue, rng = RowQueue(1000), np.random.default_rng(6)
    handed = np.concatenate([queue.take(rng, 4, sampler.sample) for _ in range(250)])
    np.testing.assert_array_equal(handed, sampler.sample(np.random.default_rng(6), 1000))


@pytest.mark.parametrize(
    ("n_data", "length"),
    [(10, MIN_QUEUE), (10**5, MIN_QUEUE + 538), (10**6, 15625), (10**7, MAX_QUEUE)],
)
def test_queue_length_grows_with_the_rows_within_bounds(n_data, length):
    assert queue_length(n_data) == length


@pytest.mark.parametrize(("length", "size"), [(0, 1), (2.5, 1), (3, -1)])
def test_bad_lengths_and_sizes_are_refused(length, size):
    with pytest.raises(ValueError, match="length|size"):
        RowQueue(length).take(np.random.default_rng(0), size, _draw)
