"""Dual-averaging step-size adaptation (Hoffman & Gelman 2014, Algorithm 5)."""

import numpy as np
import pytest

from pymc_minibatch.kernels.adaptation import (
    dual_averaging_final,
    dual_averaging_init,
    dual_averaging_update,
)


def test_first_update_matches_hand_computation():
    state = dual_averaging_init(0.5)
    new = dual_averaging_update(state, accept_prob=0.1, target=0.25)
    error_avg = (0.25 - 0.1) / 11.0  # weight 1 / (1 + t0)
    log_step = np.log(5.0) - 1.0 / 0.05 * error_avg
    assert new.count == 1
    assert new.error_avg == pytest.approx(error_avg)
    assert new.log_step_size == pytest.approx(log_step)
    assert new.log_step_size_avg == pytest.approx(log_step)  # weight 1**-kappa = 1


def test_converges_to_the_step_size_that_hits_the_target():
    # acceptance falls with the step size: accept(s) = exp(-s); target 0.25 at s = log 4
    state = dual_averaging_init(10.0)
    for _ in range(3000):
        state = dual_averaging_update(state, np.exp(-np.exp(state.log_step_size)), target=0.25)
    assert dual_averaging_final(state) == pytest.approx(np.log(4.0), rel=0.02)


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, np.inf])
def test_rejects_invalid_initial_step_size(bad):
    with pytest.raises(ValueError, match="step_size"):
        dual_averaging_init(bad)
