"""Random-walk MH kernel: hand-computed steps, rejection of non-finite proposals, exactness."""

import numpy as np
import pytest
from scipy import stats

from pymc_minibatch.kernels.random_walk import RWState, log_accept_to_prob, propose, rw_step


def test_proposal_uses_scale_and_cholesky():
    chol = np.array([[2.0, 0.0], [1.0, 1.0]])
    position = np.array([1.0, -1.0])
    z = np.random.default_rng(4).standard_normal(2)
    expected = position + 0.3 * chol @ z
    np.testing.assert_allclose(propose(np.random.default_rng(4), position, 0.3, chol), expected)


def test_accept_decision_matches_hand_computation():
    logdensity = lambda x: -0.5 * float(x @ x)  # noqa: E731
    state = RWState(np.array([0.2]), logdensity(np.array([0.2])))
    rng = np.random.default_rng(9)
    new, info = rw_step(rng, state, logdensity, 0.5)
    replay = np.random.default_rng(9)
    proposal = 0.2 + 0.5 * replay.standard_normal(1)
    log_ratio = logdensity(proposal) - state.logdensity
    assert info.accept == pytest.approx(min(1.0, np.exp(log_ratio)))
    assert info.accepted == bool(np.log(replay.uniform()) < log_ratio)
    np.testing.assert_array_equal(new.position, proposal if info.accepted else state.position)


@pytest.mark.parametrize("bad", [np.nan, -np.inf, np.inf])
def test_nonfinite_proposal_is_rejected_and_flagged(bad):
    state = RWState(np.zeros(2), 0.0)
    new, info = rw_step(np.random.default_rng(0), state, lambda x: bad, 1.0)
    assert info.nonfinite and not info.accepted and info.accept == 0.0
    assert new is state


def test_log_accept_to_prob():
    assert log_accept_to_prob(0.5) == 1.0
    assert log_accept_to_prob(np.log(0.3)) == pytest.approx(0.3)
    assert log_accept_to_prob(np.nan) == 0.0


def test_chain_targets_a_standard_normal():
    rng = np.random.default_rng(123)
    logdensity = lambda x: -0.5 * float(x @ x)  # noqa: E731
    state = RWState(np.zeros(1), 0.0)
    draws = np.empty(40_000)
    for i in range(draws.size):
        state, _ = rw_step(rng, state, logdensity, 2.4)
        draws[i] = state.position[0]
    thinned = draws[::20]  # integrated autocorrelation time is ~5-8 at this scale
    assert stats.kstest(thinned, "norm").pvalue > 0.01
