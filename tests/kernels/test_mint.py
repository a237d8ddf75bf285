"""MINT kernel: tempering constants, the transition, SGLD densities, CMINT's schedule."""

import numpy as np
import pytest
from scipy import stats

from pymc_minibatch.kernels import mint
from pymc_minibatch.kernels.mint import (
    MintConfig,
    MintTarget,
    TemperingSettings,
    cyclic_draw,
    cyclic_step_sizes,
    mint_decide,
    mint_evaluate,
    sgld_log_density,
    sgld_proposal,
    tempering_settings,
)
from pymc_minibatch.kernels.preconditioning import DiagonalPreconditioner


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
    return mint.State(np.zeros(1), estimate, prior, None)


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


def test_preconditioned_sgld_proposal_is_the_gaussian_of_its_stated_mean_and_covariance():
    """``theta + (h/2) D g + sqrt(h) L xi`` with ``D = L L^T`` diagonal: 20,000 draws match
    its mean and variance (4 standard errors), and ``sgld_log_density`` is that Gaussian's
    log density up to one constant for every pair of points."""
    scale, h = np.array([0.5, 2.0, 0.1]), 0.3
    preconditioner = DiagonalPreconditioner(scale)
    start, grad = np.array([0.5, -1.0, 3.0]), np.array([2.0, 1.0, -4.0])
    rng = np.random.default_rng(3)
    draws = np.array([sgld_proposal(rng, start, grad, h, preconditioner) for _ in range(20_000)])
    mean, variance = start + 0.5 * h * scale**2 * grad, h * scale**2
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 4 * np.sqrt(variance / 20_000))
    tolerance = 4 * np.sqrt(2 / 20_000)  # 4 standard errors of a sample variance: 4%
    np.testing.assert_allclose(draws.var(axis=0), variance, rtol=tolerance)
    # a proposal that ignored the preconditioner (variance h) misses by far more than that
    assert np.all(np.abs(h / draws.var(axis=0) - 1) > 10 * tolerance)
    gaussian = [stats.norm.logpdf(to, mean, np.sqrt(variance)).sum() for to in draws[:5]]
    ours = [sgld_log_density(to, start, grad, h, preconditioner) for to in draws[:5]]
    np.testing.assert_allclose(np.subtract(ours, gaussian), ours[0] - gaussian[0])


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


# a linear-Gaussian model: rows y_i ~ N(x_i . theta, 1), prior N(0, 3^2 I)
N_ROWS = 40
X = np.random.default_rng(7).normal(size=(N_ROWS, 2))
Y = X @ np.array([0.5, -1.0]) + np.random.default_rng(8).normal(size=N_ROWS)
PRIOR_SD = 3.0


def _loglik(theta, rows):
    resid = Y[rows] - X[rows] @ theta
    return -0.5 * resid**2, X[rows].T @ resid


def _logprior(theta):
    return float(-0.5 * theta @ theta / PRIOR_SD**2), -theta / PRIOR_SD**2


def _log_posterior(theta):
    return float(np.sum(_loglik(theta, np.arange(N_ROWS))[0])) + _logprior(theta)[0]


def _full_gradient(theta):
    return _loglik(theta, np.arange(N_ROWS))[1] + _logprior(theta)[1]


# every row in the batch and lambda = 1: n^lambda mu_S is the full log-likelihood, T = 1
UNTEMPERED = TemperingSettings(
    tau=0.5, tempering_exponent=1.0, scale=float(N_ROWS), temperature=1.0,
    epsilon=np.sqrt(N_ROWS),
)  # fmt: skip


def _recording_target(proposals, logprior=_logprior, log_jacobian=None):
    """The model, recording each point whose log-likelihood is evaluated."""

    def loglik(theta, rows):
        proposals.append(np.array(theta))
        return _loglik(theta, rows)

    return MintTarget(loglik, logprior, log_jacobian)


def test_with_the_full_batch_at_temperature_one_a_random_walk_step_is_plain_mh():
    config = MintConfig(UNTEMPERED, N_ROWS, N_ROWS, "rw", temper_prior=False)
    outcomes = set()
    for seed in range(30):
        proposals = []
        rng = np.random.default_rng(seed)
        target = _recording_target(proposals)
        state = mint_evaluate(rng, np.array([0.4, -0.8]), target, config)
        new, info = mint.step(rng, state, target, config, 0.3)
        # the same draws by hand: the start's batch, the noise, the proposal's batch, u
        by_hand = np.random.default_rng(seed)
        by_hand.choice(N_ROWS, size=N_ROWS, replace=False)
        proposal = state.position + 0.3 * by_hand.standard_normal(2)
        by_hand.choice(N_ROWS, size=N_ROWS, replace=False)
        log_ratio = _log_posterior(proposal) - _log_posterior(state.position)
        np.testing.assert_allclose(proposals[-1], proposal)
        assert info.accept == pytest.approx(min(1.0, np.exp(log_ratio)), rel=1e-9)
        assert info.accepted == (np.log(by_hand.uniform()) < log_ratio)
        assert not info.nonfinite
        expected = proposal if info.accepted else state.position
        np.testing.assert_allclose(new.position, expected)
        outcomes.add(info.accepted)
    assert outcomes == {True, False}


def test_with_the_full_batch_at_temperature_one_an_sgld_step_is_mala():
    config = MintConfig(UNTEMPERED, N_ROWS, N_ROWS, "sgld", temper_prior=False)
    scale, accepts = 0.1, []
    h = scale**2  # the Langevin time step of a proposal with noise sd ``scale``
    for seed in range(30):
        proposals = []
        rng = np.random.default_rng(seed)
        target = _recording_target(proposals)
        state = mint_evaluate(rng, np.array([0.4, -0.8]), target, config)
        np.testing.assert_allclose(state.gradient, _full_gradient(state.position))
        _, info = mint.step(rng, state, target, config, scale)
        start, proposal = state.position, proposals[-1]

        def log_q(to, frm):
            diff = to - frm - 0.5 * h * _full_gradient(frm)
            return -(diff @ diff) / (2 * h)

        log_ratio = (
            _log_posterior(proposal) - _log_posterior(start)
            + log_q(start, proposal) - log_q(proposal, start)
        )  # fmt: skip
        assert info.accept == pytest.approx(min(1.0, np.exp(log_ratio)), rel=1e-9)
        accepts.append(info.accept)
    assert min(accepts) < 1.0  # the reverse density matters on some of these steps


def test_the_prior_is_tempered_except_its_jacobian_and_the_gradient_is_scaled():
    settings = tempering_settings(N_ROWS, 10, 0.9)
    rows_seen = []

    def loglik(theta, rows):
        rows_seen.append(rows)
        return _loglik(theta, rows)

    def log_jacobian(theta):
        return 0.3 * float(theta[0]), np.array([0.3, 0.0])

    theta = np.array([0.4, -0.8])
    logprior, prior_grad = _logprior(theta)
    config = MintConfig(settings, N_ROWS, 10, "sgld")
    state = mint_evaluate(
        np.random.default_rng(0), theta, MintTarget(loglik, _logprior, log_jacobian), config
    )
    (rows,) = rows_seen
    assert len(np.unique(rows)) == 10  # without replacement
    inverse_t = 1.0 / settings.temperature
    assert state.prior_term == pytest.approx(
        (logprior - 0.3 * theta[0]) * inverse_t + 0.3 * theta[0]
    )
    assert state.estimate == pytest.approx(np.mean(_loglik(theta, rows)[0]))
    tempered_grad = (prior_grad - [0.3, 0.0]) * inverse_t + [0.3, 0.0]
    np.testing.assert_allclose(
        state.gradient, settings.scale * _loglik(theta, rows)[1] / 10 + tempered_grad
    )
    # untempered: the log prior as given, and the Jacobian is never asked for
    untempered = mint_evaluate(
        np.random.default_rng(0), theta, MintTarget(loglik, _logprior),
        config._replace(temper_prior=False),
    )  # fmt: skip
    assert untempered.prior_term == logprior


def test_a_proposal_outside_the_prior_support_is_rejected_and_flagged():
    def logprior(theta):
        return (-np.inf if theta[0] > 0.1 else 0.0), None

    def log_jacobian(theta):
        return 0.0, np.zeros(2)

    config = MintConfig(tempering_settings(N_ROWS, 10, 0.99), N_ROWS, 10, "rw")
    flagged = 0
    for seed in range(40):
        proposals = []
        rng = np.random.default_rng(seed)
        target = _recording_target(proposals, logprior, log_jacobian)
        state = mint_evaluate(rng, np.zeros(2), target, config)
        new, info = mint.step(rng, state, target, config, 0.5)
        outside = proposals[-1][0] > 0.1
        assert info.nonfinite == outside
        if outside:
            flagged += 1
            assert new is state and not info.accepted and info.accept == 0.0
    assert 5 < flagged < 35


def test_cyclic_draw_marks_the_last_draw_of_each_snapshot_epoch():
    schedule = cyclic_step_sizes(
        1.0, 7, decay=0.5, decay_every=2, raise_factor=4.0, round_epochs=3, n_rounds=2
    )
    draws = [cyclic_draw(schedule, 4, draw) for draw in range(40)]
    # epochs 3 and 6 end in a snapshot: their last draws (0-based) are 11 and 23
    assert [d for d, info in enumerate(draws) if info.snapshot] == [11, 23]
    assert [info.epoch for info in draws] == [d // 4 + 1 for d in range(40)]
    # epoch e uses step_sizes[e - 1]; past the 7 scheduled epochs the last size stays
    expected = np.concatenate([np.repeat(schedule.step_sizes, 4), np.full(12, 0.5)])
    np.testing.assert_array_equal([info.step_size for info in draws], expected)
