"""MINT kernel: tempering constants, the decision rule, SGLD densities, CMINT's schedule."""

import numpy as np
import pytest

from pymc_minibatch.kernels.mint import (
    MintState,
    cyclic_step_sizes,
    mint_decide,
    sgld_log_density,
    tempering_settings,
)


def test_tempering_settings_match_the_paper_definitions():
    settings = tempering_settings(10_000, 500, 0.99)
    tau = np.log(500) / (2 * np.log(10_000))
    assert settings.tau == pytest.approx(tau)
    assert settings.tempering_exponent == pytest.approx(0.99 * tau)
    assert settings.scale == pytest.approx(10_000 ** (0.99 * tau))
    assert settings.temperature == pytest.approx(10_000 ** (1 - 0.99 * tau))
    # T = n / m^(alpha / 2); eps^2 = n^(2 lambda) / m
    assert settings.temperature == pytest.approx(10_000 / 500**0.495)
    assert settings.epsilon**2 == pytest.approx(settings.scale**2 / 500)
    assert settings.temperature == pytest.approx(461.33, abs=0.01)
    assert settings.epsilon**2 == pytest.approx(0.94, abs=0.005)


@pytest.mark.parametrize(
    "n, m, alpha, message",
    [(100, 0, 0.99, "batch_size"), (100, 101, 0.99, "batch_size"), (100, 10, 1.0, "alpha"),
     (100, 10, 0.0, "alpha"), (1, 1, 0.5, "two rows")],
)  # fmt: skip
def test_invalid_tempering_settings_raise(n, m, alpha, message):
    with pytest.raises(ValueError, match=message):
        tempering_settings(n, m, alpha)


def _state(estimate, prior=0.0):
    return MintState(np.zeros(1), estimate, prior, None)


def test_decision_uses_the_scaled_estimates_and_the_prior_term():
    rng = np.random.default_rng(0)
    state, proposal = _state(-1.0, 0.5), _state(-1.1, 0.2)
    log_ratio = 20.0 * (-1.1 + 1.0) + (0.2 - 0.5) + 0.4
    accepted = [mint_decide(rng, state, proposal, 20.0, 0.4)[1] for _ in range(4000)]
    assert accepted[0].accept == pytest.approx(np.exp(log_ratio))
    rate = np.mean([info.accepted for info in accepted])
    assert abs(rate - np.exp(log_ratio)) < 4 * np.sqrt(np.exp(log_ratio) / 4000)


def test_rejection_keeps_the_stored_estimate_and_nonfinite_is_flagged():
    rng = np.random.default_rng(1)
    state = _state(0.0)
    new, info = mint_decide(rng, state, _state(-1e6), 1.0)
    assert new is state and not info.accepted and not info.nonfinite
    new, info = mint_decide(rng, state, _state(2.0), 1.0)
    assert new.estimate == 2.0 and info.accepted
    for bad in (_state(np.nan), _state(0.0, -np.inf)):
        new, info = mint_decide(rng, state, bad, 1.0)
        assert new is state and info.nonfinite and info.accept == 0.0
    assert mint_decide(rng, state, _state(1.0), 1.0, np.nan)[1].nonfinite


def test_sgld_log_density_is_the_gaussian_kernel():
    start, to, grad = np.array([0.5, -1.0]), np.array([0.7, -0.6]), np.array([2.0, 1.0])
    mean = start + 0.5 * 0.1 * grad
    expected = -np.sum((to - mean) ** 2) / (2 * 0.1)
    assert sgld_log_density(to, start, grad, 0.1) == pytest.approx(expected)


def test_cyclic_schedule_matches_a_hand_computed_one():
    sizes, snapshots = cyclic_step_sizes(
        1.0, 8, decay=0.5, decay_every=2, raise_factor=4.0, round_epochs=3, n_rounds=2
    )
    # epoch:    1    2    3     4     5      6      7      8
    # decays after 2, 4, 6; snapshot after 3 (then x4) and 6 (last round: no raise)
    expected = [1.0, 1.0, 0.5, 2.0, 1.0, 1.0, 0.5, 0.5]
    np.testing.assert_allclose(sizes, expected)
    assert snapshots == [3, 6]


def test_cyclic_schedule_with_the_paper_defaults():
    sizes, snapshots = cyclic_step_sizes(
        1.0, 501, decay=0.9, decay_every=5, raise_factor=2.0, round_epochs=50, n_rounds=10
    )
    assert snapshots == list(range(50, 501, 50))
    # each round: 10 decays, then a doubling (except after the last)
    assert sizes[50] == pytest.approx(2.0 * 0.9**10)
    assert sizes[500] == pytest.approx(2.0**9 * 0.9**100)
