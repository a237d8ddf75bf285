"""The stochastic-gradient chain kernel without PyMC: updates, epochs, checks, noise."""

import numpy as np
import pytest

from pymc_minibatch.kernels import sg_chain
from pymc_minibatch.kernels.preconditioning import DiagonalPreconditioner, identity_preconditioner
from pymc_minibatch.kernels.sgmgt import SGMGTConfig

SGLD = SGMGTConfig.sgld()
SGNHT = SGMGTConfig.sgnht(1.0)
SGMGT = SGMGTConfig.sgmgt(1, 10.0, sigma_p=1.0, gamma=1.0)


def gaussian_estimate(theta, rows):
    """``log N(theta; 0, I)`` and its gradient, the same whatever the rows."""
    return -0.5 * float(theta @ theta), -theta


def _chain(config, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    preconditioner = DiagonalPreconditioner(np.full(2, scale))
    return rng, sg_chain.init(rng, np.array([0.5, -0.3]), np.zeros(2), preconditioner,
                              config)  # fmt: skip


def _settings(config, step_size=0.1, n_data=100, batch_size=10, period=None):
    return sg_chain.SGSettings(config, lambda t: step_size, n_data, batch_size, period, period)


@pytest.mark.parametrize("config", [SGLD, SGNHT, SGMGT], ids=["SGLD", "SGNHT", "SGMGT"])
def test_k_updates_are_k_single_updates(config):
    settings = _settings(config, period=7)
    rng_k, state_k = _chain(config)
    rng_1, state_1 = _chain(config)
    for _ in range(4):
        state_k, info_k = sg_chain.step(rng_k, state_k, gaussian_estimate, settings, 5)
        resampled = False
        for _ in range(5):
            state_1, info_1 = sg_chain.step(rng_1, state_1, gaussian_estimate, settings, 1)
            resampled |= info_1.resampled
        np.testing.assert_array_equal(state_k.position, state_1.position)
        assert info_k.updates == info_1.updates == state_k.updates
        assert info_k.resampled == resampled
    assert state_k.updates == 20


def test_epochs_use_every_row_once_and_skip_the_remainder():
    seen = []

    def recording(theta, rows):
        seen.append(rows.copy())
        return gaussian_estimate(theta, rows)

    rng, state = _chain(SGLD)
    sg_chain.step(rng, state, recording, _settings(SGLD, n_data=35, batch_size=10), 6)
    first, second = np.concatenate(seen[:3]), np.concatenate(seen[3:])
    assert np.unique(first).size == 30 and np.unique(second).size == 30  # 5 skipped
    assert not np.array_equal(np.sort(first), np.sort(second))


def test_sgld_samples_the_gaussian_in_preconditioned_coordinates():
    """With theta = 2 z, SGLD samples N(0, I) in theta up to its Euler bias."""
    settings = _settings(SGLD, step_size=0.1)
    rng, state = _chain(SGLD, scale=2.0)
    draws = []
    for _ in range(20_000):
        state, _ = sg_chain.step(rng, state, gaussian_estimate, settings, 1)
        draws.append(state.preconditioner.to_theta(state.position))
    draws = np.array(draws)
    # curvature 4 in z: z <- (1 - 2h) z + sqrt(h) noise has variance 1 / (4 (1 - h)); ESS
    # about 2200, so 10% is 3 standard errors of a variance and 0.1 is 4.5 of a mean
    z_variance = 1.0 / (4.0 * (1.0 - 0.1))
    np.testing.assert_allclose(draws.var(axis=0), 4.0 * z_variance, rtol=0.1)
    assert np.all(np.abs(draws.mean(axis=0)) < 0.1)


@pytest.mark.parametrize(
    ("config", "step_size", "sd", "tolerance"),
    [
        (SGLD, 0.2, np.sqrt(1 / (1 - 0.2 / 4)), 0.02),  # the Euler bias, 2.6% in sd
        (SGMGTConfig.sghmc(1.0), 0.2, 1.0, 0.03),
        (SGNHT, 0.1, 1.0, 0.05),
        (SGMGT, 0.1, 1.0, 0.05),
    ],
    ids=["SGLD", "SGHMC", "SGNHT", "SGMGT"],
)
def test_largest_default_steps_keep_a_unit_gaussians_sd(config, step_size, sd, tolerance):
    """The caps of the default step-size rules, without gradient noise (control variates
    on tall data): 10 coordinates of N(0, 1), 40,000 updates, resampling every 10 time
    units; the sd averaged over coordinates. SGLD's draws are 4 / h updates apart."""
    period = None if config.kinetics is None else round(10 / step_size)
    settings = sg_chain.SGSettings(config, lambda t: step_size, 1000, 10, period, period)
    rng = np.random.default_rng(0)
    state = sg_chain.init(rng, np.zeros(10), np.zeros(10), identity_preconditioner(10),
                                 config)  # fmt: skip
    draws = np.empty((40_000, 10))
    for t in range(draws.shape[0]):
        state, _ = sg_chain.step(rng, state, gaussian_estimate, settings, 1)
        draws[t] = state.position
    draws = draws[2000:]
    assert abs(draws.std(axis=0).mean() / sd - 1) < tolerance
    if config is SGLD:
        lag = draws[1:] * draws[:-1]
        autocorrelation = lag.mean() / draws.var()
        assert autocorrelation == pytest.approx(1 - step_size / 2, abs=0.02)


def test_a_gradient_alone_serves_every_update_but_the_last():
    calls = []

    def estimate(theta, rows):
        calls.append("estimate")
        return gaussian_estimate(theta, rows)

    def gradient(theta, rows):
        calls.append("gradient")
        return gaussian_estimate(theta, rows)[1]

    settings = _settings(SGNHT)
    rng_both, state_both = _chain(SGNHT)
    rng_one, state_one = _chain(SGNHT)
    state_both, info_both = sg_chain.step(rng_both, state_both, estimate, settings, 4, gradient)
    assert calls == ["gradient"] * 3 + ["estimate"]
    state_one, info_one = sg_chain.step(rng_one, state_one, gaussian_estimate, settings, 4)
    np.testing.assert_array_equal(state_both.position, state_one.position)
    assert info_both.log_density == info_one.log_density


def test_a_divergence_on_an_update_without_log_density_is_still_caught():
    def gradient(theta, rows):
        return np.array([np.inf, 0.0])

    rng, state = _chain(SGNHT)
    state, info = sg_chain.step(rng, state, gaussian_estimate, _settings(SGNHT), 10, gradient)
    assert info.updates == 1 and info.divergence.reason.startswith("non-finite gradient")
    assert np.isnan(info.log_density)


def test_statistics_describe_the_last_update():
    settings = _settings(SGNHT)
    rng, state = _chain(SGNHT)
    state, _ = sg_chain.step(rng, state, gaussian_estimate, settings, 2)
    theta_before = state.preconditioner.to_theta(state.position)
    state, info = sg_chain.step(rng, state, gaussian_estimate, settings, 1)
    assert info.updates == 3 and info.step_size == 0.1 and info.divergence is None
    # the gradient -theta was taken at the point the last update started from
    assert info.grad_norm == pytest.approx(np.linalg.norm(theta_before))
    assert info.log_density == pytest.approx(-0.5 * theta_before @ theta_before)
    assert info.kinetic_energy == pytest.approx(0.5 * np.sum(state.momentum**2))
    assert info.thermostat_mean == pytest.approx(np.mean(state.thermostat))
    assert np.isnan(info.resample_accept_rate) and not info.resampled


def test_resampling_happens_every_period_and_reports_its_acceptance():
    settings = _settings(SGMGT, period=3)
    rng, state = _chain(SGMGT)
    flags, rates = [], []
    for _ in range(9):
        state, info = sg_chain.step(rng, state, gaussian_estimate, settings, 1)
        flags.append(info.resampled)
        rates.append(info.resample_accept_rate)
    assert flags == [False, False, True] * 3
    rates = np.array(rates)
    assert np.all(np.isnan(rates[~np.array(flags)]))
    assert np.all((rates[flags] > 0) & (rates[flags] <= 1))


@pytest.mark.parametrize("bad", ["log density", "gradient"])
def test_a_non_finite_estimate_stops_the_run_and_names_it(bad):
    def broken(theta, rows):
        value, grad = gaussian_estimate(theta, rows)
        if bad == "log density":
            return np.nan, grad
        return value, np.array([np.inf, 0.0])

    rng, state = _chain(SGNHT)
    state, info = sg_chain.step(rng, state, broken, _settings(SGNHT), 10)
    assert info.updates == 1  # stopped at the first update
    assert info.divergence.reason.startswith("non-finite")
    assert bad in info.divergence.reason


def test_a_chain_that_runs_away_is_stopped_with_the_coordinate_that_moved():
    def pushing(theta, rows):  # a constant force along the second coordinate
        return 0.0, np.array([0.0, 1e3])

    rng, state = _chain(SGLD)
    state, info = sg_chain.step(rng, state, pushing, _settings(SGLD, step_size=1.0), 100)
    divergence = info.divergence
    assert divergence.reason == "ran away" and divergence.coordinate == 1
    assert divergence.distance > sg_chain.RUNAWAY_DISTANCE
    assert info.updates < 100


@pytest.mark.parametrize("size", [5, sg_chain.COMPILED_MIN_SIZE])
def test_runaway_distance_is_the_largest_move_beyond_the_limit(size):
    """The compiled pass on big models measures what NumPy does, NaN included."""
    anchor = np.zeros(size)
    position = np.full(size, 0.5)
    assert sg_chain.runaway_distance(position, anchor) is None
    position[size // 2] = -2 * sg_chain.RUNAWAY_DISTANCE
    assert sg_chain.runaway_distance(position, anchor) == 2 * sg_chain.RUNAWAY_DISTANCE
    position[-1] = np.nan
    assert np.isnan(sg_chain.runaway_distance(position, anchor))
    particles = np.zeros((3, size)) + 2e4  # particles against one anchor: broadcast
    assert sg_chain.runaway_distance(particles, anchor) == 2e4


def test_find_divergence_is_none_for_a_healthy_state():
    _, state = _chain(SGNHT)
    assert sg_chain.find_divergence(state, -1.0, 2.0) is None


@pytest.mark.parametrize("size", [5, sg_chain.COMPILED_MIN_SIZE])
@pytest.mark.parametrize("config", [SGLD, SGNHT], ids=["SGLD", "SGNHT"])
def test_find_divergence_names_what_went_wrong_at_every_size(size, config):
    """Big states are scanned in one compiled pass: the same verdicts as NumPy's."""
    rng = np.random.default_rng(0)
    state = sg_chain.init(rng, np.full(size, 0.5), np.zeros(size),
                          identity_preconditioner(size), config)  # fmt: skip
    assert sg_chain.find_divergence(state, None, 2.0) is None
    far = state.position.copy()
    far[1] = 2 * sg_chain.RUNAWAY_DISTANCE
    assert sg_chain.find_divergence(state._replace(position=far), -1.0, 2.0).reason == "ran away"
    for field in ("position", "momentum", "thermostat"):
        if getattr(state, field) is None:
            continue
        broken = getattr(state, field).copy()
        broken[-1] = np.nan
        divergence = sg_chain.find_divergence(state._replace(**{field: broken}), -1.0, 2.0)
        assert divergence.reason == f"non-finite {field}"


@pytest.mark.parametrize("size", [5, sg_chain.COMPILED_MIN_SIZE])
def test_find_divergence_tells_infinities_from_finite_values_whose_sum_overflows(size):
    rng = np.random.default_rng(0)
    state = sg_chain.init(rng, np.full(size, 0.5), np.zeros(size),
                          identity_preconditioner(size), SGNHT)  # fmt: skip
    huge = state.thermostat.copy()
    huge[:2] = 1e308
    assert sg_chain.find_divergence(state._replace(thermostat=huge), -1.0, 2.0) is None
    for value in (np.inf, -np.inf):
        broken = state.momentum.copy()
        broken[0] = value
        divergence = sg_chain.find_divergence(state._replace(momentum=broken), -1.0, 2.0)
        assert divergence.reason == "non-finite momentum"


def test_gradient_noise_is_the_variance_per_preconditioned_coordinate():
    """Estimates with noise of sd (1, 3) in theta and theta = L z with L = diag(2, 0.5):
    in z the noise sds are (2, 1.5), the largest variance 4."""

    def noisy(theta, rows):
        noise = np.random.default_rng(int(rows[0])).normal(size=2) * np.array([1.0, 3.0])
        return 0.0, -theta + noise

    preconditioner = DiagonalPreconditioner(np.array([2.0, 0.5]))
    points = np.zeros((40, 2))
    rng = np.random.default_rng(3)
    measured = sg_chain.gradient_noise(rng, noisy, preconditioner, points, 10**6, 5)
    assert measured == pytest.approx(4.0, rel=0.15)


def test_gradient_noise_skips_points_where_the_estimate_is_not_finite():
    def half_broken(theta, rows):
        return (np.nan if theta[0] > 0 else 0.0), -theta

    points = np.array([[1.0, 0.0], [-1.0, 0.0]])
    rng = np.random.default_rng(0)
    identity = identity_preconditioner(2)
    assert sg_chain.gradient_noise(rng, half_broken, identity, points, 100, 10) == 0.0
    assert np.isnan(sg_chain.gradient_noise(rng, half_broken, identity, points[:1], 100, 10))
