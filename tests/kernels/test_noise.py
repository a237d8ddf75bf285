"""The compiled normal draws are NumPy's: the same values and the same generator state after
them, below and above the size where the compiled loop takes over."""

import numpy as np
import pytest

from pymc_minibatch.kernels.noise import COMPILED_MIN_SIZE, standard_normal


@pytest.mark.parametrize("bit_generator", [np.random.PCG64, np.random.SFC64, np.random.MT19937])
@pytest.mark.parametrize("shape", [3, (COMPILED_MIN_SIZE + 1,), (4, COMPILED_MIN_SIZE), ()])
def test_standard_normal_draws_numpys_stream(bit_generator, shape):
    ours, numpys = np.random.Generator(bit_generator(7)), np.random.Generator(bit_generator(7))
    for _ in range(2):
        drawn = standard_normal(ours, shape)
        expected = numpys.standard_normal(shape)
        assert drawn.shape == expected.shape and drawn.dtype == np.float64
        np.testing.assert_array_equal(drawn, expected)
    np.testing.assert_array_equal(ours.random(5), numpys.random(5))
