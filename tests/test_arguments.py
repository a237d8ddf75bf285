"""The shared argument checks: what passes, what is refused, with the argument's name."""

import numpy as np
import pytest

from pymc_minibatch.arguments import positive_float, positive_int


@pytest.mark.parametrize("value", [0.0, -1.0, np.inf, np.nan, "1", True, None])
def test_positive_float_refuses(value):
    with pytest.raises(ValueError, match="chi must be a positive finite number"):
        positive_float("chi", value)


def test_positive_float_accepts_numbers_and_optionally_none():
    assert positive_float("chi", np.float32(2.5)) == 2.5
    assert isinstance(positive_float("chi", 3), float)
    assert positive_float("chi", None, allow_none=True) is None


@pytest.mark.parametrize("value", [0, -3, 2.0, True, "2", None])
def test_positive_int_refuses(value):
    with pytest.raises(ValueError, match="n_rounds must be a positive integer"):
        positive_int("n_rounds", value)


def test_positive_int_accepts_numpy_integers():
    assert positive_int("n_rounds", np.int64(4)) == 4
