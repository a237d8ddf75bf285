"""The random-walk proposal and the MH acceptance probability."""

import numpy as np
import pytest

from pymc_minibatch.kernels.random_walk import log_accept_to_prob, propose


def test_proposal_uses_scale_and_cholesky():
    chol = np.array([[2.0, 0.0], [1.0, 1.0]])
    position = np.array([1.0, -1.0])
    z = np.random.default_rng(4).standard_normal(2)
    expected = position + 0.3 * chol @ z
    np.testing.assert_allclose(propose(np.random.default_rng(4), position, 0.3, chol), expected)


def test_log_accept_to_prob():
    assert log_accept_to_prob(0.5) == 1.0
    assert log_accept_to_prob(np.log(0.3)) == pytest.approx(0.3)
    assert log_accept_to_prob(np.nan) == 0.0
