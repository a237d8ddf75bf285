"""Small normal draws are NumPy's; big ones (the compiled ziggurat) are standard normal,
deterministic under the seed and not NumPy's values.

The distribution checks run on 10^6 draws with fixed seeds; each has a negative control: the
same check rejects the same code run on a wrong ziggurat (strips off by one, no tail)."""

import math

import numpy as np
import pytest
from scipy import stats

from pymc_minibatch.kernels import noise
from pymc_minibatch.kernels.noise import COMPILED_MIN_SIZE, standard_normal

N_DRAWS = 10**6
R_256 = 3.6541528853610088  # Marsaglia & Tsang (2000): the base strip's edge for 256 strips
R_128 = 3.442619855899  # and for 128
TAILS = (3.44, R_256, 4.0)


def _ks_pvalue(sample):
    return stats.kstest(sample, "norm", method="asymp").pvalue  # (exact: seconds at 10^6)


def _tail_z(sample, t):
    """Draws beyond ``|t|`` against the normal's count, in its standard deviations."""
    expected = 2 * stats.norm.sf(t) * sample.size
    return (np.count_nonzero(np.abs(sample) > t) - expected) / math.sqrt(expected)


def _moments_ok(sample):
    """Mean, variance, skewness and excess kurtosis of N(0, 1), within 4 standard errors."""
    n = sample.size
    return (abs(sample.mean()) < 4 / math.sqrt(n) and abs(sample.var() - 1) < 4 * math.sqrt(2 / n)
            and abs(stats.skew(sample)) < 4 * math.sqrt(6 / n)
            and abs(stats.kurtosis(sample)) < 4 * math.sqrt(24 / n))  # fmt: skip


@pytest.fixture(scope="module")
def draws():
    """10^6 draws in ten calls from one generator, as the samplers draw them."""
    rng = np.random.default_rng(20)
    return np.concatenate([standard_normal(rng, N_DRAWS // 10) for _ in range(10)])


def _wrong_ziggurat(edit):
    """10^6 draws of the compiled loop over the edges as ``edit`` changes them."""
    x = noise.ziggurat_edges().copy()
    edit(x)
    out = np.empty(N_DRAWS)
    key = np.random.default_rng(20).integers(0, 2**64, size=3, dtype=np.uint64)
    noise._fill(out, key, noise._tables(x))
    return out


def _strips_off_by_one(x):
    x[1:-2] = x[2:-1].copy()  # strips 1 to 254 drawn with the width of the one above


def _no_tail(x):
    x[0] = x[1]  # the base strip without the tail beyond r


@pytest.mark.parametrize("bit_generator", [np.random.PCG64, np.random.SFC64, np.random.MT19937])
@pytest.mark.parametrize("shape", [3, (COMPILED_MIN_SIZE - 1,), (2, 5), ()])
def test_small_draws_are_numpys(bit_generator, shape):
    ours, numpys = np.random.Generator(bit_generator(7)), np.random.Generator(bit_generator(7))
    for _ in range(2):
        drawn = standard_normal(ours, shape)
        expected = numpys.standard_normal(shape)
        assert drawn.shape == expected.shape and drawn.dtype == np.float64
        np.testing.assert_array_equal(drawn, expected)
    np.testing.assert_array_equal(ours.random(5), numpys.random(5))


def test_a_generator_that_is_not_a_numpy_generator_draws_its_own():
    size = COMPILED_MIN_SIZE
    drawn = standard_normal(np.random.RandomState(3), size)
    np.testing.assert_array_equal(drawn, np.random.RandomState(3).standard_normal(size))


@pytest.mark.parametrize("shape", [COMPILED_MIN_SIZE, np.int64(COMPILED_MIN_SIZE), (4, 1024)])
def test_big_draws_have_the_shape_and_are_not_numpys(shape):
    drawn = standard_normal(np.random.default_rng(7), shape)
    numpys = np.random.default_rng(7).standard_normal(shape)
    assert drawn.shape == numpys.shape and drawn.dtype == np.float64
    assert np.all(np.isfinite(drawn)) and not np.any(drawn == numpys)


def test_the_strips_have_equal_areas_and_close_the_ziggurat():
    x = noise.ziggurat_edges()
    fx = np.exp(-0.5 * x**2)
    area = x[1] * fx[1] + math.sqrt(math.pi / 2) * math.erfc(x[1] / math.sqrt(2))
    assert len(x) == 257 and x[-1] == 0.0 and np.all(np.diff(x) < 0)
    np.testing.assert_allclose(x[0] * fx[1], area, rtol=1e-14)  # the base, tail included
    np.testing.assert_allclose(x[1:-1] * (fx[2:] - fx[1:-1]), area, rtol=1e-11)
    assert x[1] == pytest.approx(R_256, rel=1e-13)
    assert noise.ziggurat_edges(128)[1] == pytest.approx(R_128, rel=1e-11)


def test_the_stream_is_numpys_sfc64():
    a, b, c = np.random.default_rng(1).integers(0, 2**64, size=3, dtype=np.uint64)
    numpys = np.random.SFC64()
    numpys.state = {"bit_generator": "SFC64", "has_uint32": 0, "uinteger": 0,
                    "state": {"state": np.array([a, b, c, 1], dtype=np.uint64)}}  # fmt: skip
    state, words = (a, b, c, np.uint64(1)), []
    for _ in range(50):
        word, *state = noise._sfc64(*state)
        state = [np.uint64(value) for value in state]
        words.append(np.uint64(word))
    np.testing.assert_array_equal(np.array(words, dtype=np.uint64), numpys.random_raw(50))


def test_big_draws_are_standard_normal(draws):
    assert _ks_pvalue(draws) > 0.01
    assert _moments_ok(draws)
    for t in TAILS:
        assert abs(_tail_z(draws, t)) < 4, t


def test_the_checks_reject_a_ziggurat_with_its_strips_off_by_one():
    wrong = _wrong_ziggurat(_strips_off_by_one)
    assert _ks_pvalue(wrong) < 1e-4
    assert not _moments_ok(wrong)


def test_the_checks_reject_a_ziggurat_without_its_tail():
    wrong = _wrong_ziggurat(_no_tail)
    for t in TAILS:
        assert _tail_z(wrong, t) < -4, t


@pytest.mark.parametrize("bit_generator", [np.random.PCG64, np.random.MT19937])
def test_big_draws_are_reproducible_and_advance_the_generator_by_three_words(bit_generator):
    first, second = np.random.Generator(bit_generator(5)), np.random.Generator(bit_generator(5))
    np.testing.assert_array_equal(standard_normal(first, 5000), standard_normal(second, 5000))
    skipped = np.random.Generator(bit_generator(5))
    skipped.integers(0, 2**64, size=3, dtype=np.uint64)
    later = first.random(5)
    np.testing.assert_array_equal(later, skipped.random(5))
    assert not np.any(later == np.random.Generator(bit_generator(5)).random(5))


def test_successive_big_draws_differ():
    rng = np.random.default_rng(9)
    first, second = standard_normal(rng, 10**5), standard_normal(rng, 10**5)
    assert not np.any(first == second)
    assert abs(np.corrcoef(first, second)[0, 1]) < 4 / math.sqrt(first.size)
