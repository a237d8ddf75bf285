"""FlyMC kernel: the quadratic bounds, their collapsed sum, the row subsets, the transition."""

import numpy as np
import pytest
from scipy import special, stats

from pymc_minibatch.kernels import flymc
from pymc_minibatch.kernels.flymc import (
    FlyMCTarget,
    collapse,
    draw_brightness,
    geometric_subset,
    jaakkola_jordan,
    laplace_bound,
    log_bound,
    theta_log_ratio,
    update_brightness,
)

RNG = np.random.default_rng(0)
ETA = np.linspace(-8, 8, 401)


@pytest.mark.parametrize("y", [0, 1])
@pytest.mark.parametrize("xi", [0.2, 1.5, 4.0])
def test_jaakkola_jordan_is_a_lower_bound_tight_at_xi(y, xi):
    rows = np.zeros(ETA.size, dtype=int)
    bound = jaakkola_jordan(np.array([xi]), np.array([y]))
    loglik = y * ETA - np.logaddexp(0.0, ETA)
    assert np.all(log_bound(bound, ETA, rows) < loglik)
    for touching in (xi, -xi):
        exact = y * touching - np.logaddexp(0.0, touching)
        assert log_bound(bound, np.array([touching]), [0])[0] == pytest.approx(exact, abs=2e-6)


@pytest.mark.parametrize("xi", [0.1, 1.0, 3.0])
def test_laplace_bound_is_a_lower_bound_tight_at_xi(xi):
    y, scale = np.array([0.7]), 1.3
    rows = np.zeros(ETA.size, dtype=int)
    bound = laplace_bound(np.array([xi]), y, scale)
    loglik = stats.laplace.logpdf(y, ETA, scale)
    assert np.all(log_bound(bound, ETA, rows) < loglik)
    touching = y - xi
    assert log_bound(bound, touching, [0])[0] == pytest.approx(
        stats.laplace.logpdf(y, touching, scale)[0], abs=2e-6
    )


def test_collapsed_sum_equals_the_sum_over_rows():
    X, offset = RNG.normal(size=(500, 3)), RNG.normal(size=500)
    y = (RNG.random(500) < special.expit(offset)).astype(float)
    bound = jaakkola_jordan(RNG.gamma(2.0, size=500), y)
    collapsed = collapse(bound, offset, X, chunk_rows=128)
    for theta in RNG.normal(size=(5, 3)):
        direct = np.sum(log_bound(bound, offset + X @ theta, np.arange(500)))
        assert collapsed(theta) == pytest.approx(direct, rel=1e-12)


def test_geometric_subset_includes_each_row_with_probability_q():
    counts = np.zeros(50)
    for _ in range(4000):
        subset = geometric_subset(RNG, 50, 0.2)
        assert np.all(np.diff(subset) > 0) and subset.max(initial=0) < 50
        counts[subset] += 1
    # each count ~ Binomial(4000, 0.2): sd 25
    assert np.all(np.abs(counts - 800) < 5 * 25)
    np.testing.assert_array_equal(geometric_subset(RNG, 7, 1.0), np.arange(7))


def tiny_logistic(n_data=8, xi=5.0, reads=None):
    """A one-coefficient logistic regression with N(0, 1) prior and loose bounds (``xi`` far
    from the mode), so that many rows are bright; ``reads`` collects the rows evaluated."""
    rng = np.random.default_rng(1)
    x = rng.normal(scale=1.5, size=n_data)
    y = (rng.random(n_data) < 0.5).astype(float)
    bound = jaakkola_jordan(np.full(n_data, xi), y)

    def loglik(theta, rows):
        if reads is not None:
            reads.append(("loglik", rows.copy()))
        eta = x[rows] * theta[0]
        return y[rows] * eta - np.logaddexp(0.0, eta)

    def loglik_pair(theta, theta2, rows):
        if reads is not None:
            reads.append(("loglik_pair", rows.copy()))
        eta, eta2 = x[rows] * theta[0], x[rows] * theta2[0]
        return y[rows] * eta - np.logaddexp(0.0, eta), y[rows] * eta2 - np.logaddexp(0.0, eta2)

    return FlyMCTarget(
        loglik,
        loglik_pair,
        lambda theta, rows: log_bound(bound, x[rows] * theta[0], rows),
        collapse(bound, np.zeros(n_data), x[:, None]),
        lambda theta: float(-0.5 * theta @ theta),
    )


def posterior_on_grid(target, n_data):
    grid = np.linspace(-6.0, 6.0, 4001)
    rows = np.arange(n_data)
    log_post = np.array([target.logprior(t) + target.loglik(t, rows).sum() for t in grid[:, None]])
    density = np.exp(log_post - log_post.max())
    cdf = np.concatenate([[0.0], np.cumsum((density[1:] + density[:-1]) / 2)])
    return grid, density / cdf[-1] / (grid[1] - grid[0]), cdf / cdf[-1]


def test_transition_leaves_the_joint_target_invariant():
    """Chains started from p(theta, z) (theta from the posterior, z from its conditional) stay
    distributed as p(theta, z) after a few transitions: theta follows the posterior and
    P(z_n = 1) = E[1 - B_n / L_n]."""
    n_data, chains = 8, 2000
    target = tiny_logistic(n_data)
    grid, density, cdf = posterior_on_grid(target, n_data)
    rows = np.arange(n_data)
    bright_prob = np.array(
        [-np.expm1(target.log_bound(t, rows) - target.loglik(t, rows)) for t in grid[:, None]]
    )
    expected_bright = np.trapezoid(bright_prob * density[:, None], grid, axis=0)
    rng = np.random.default_rng(2)
    final, bright_counts, accepted = np.empty(chains), np.zeros(n_data), 0
    for chain, theta in enumerate(np.interp(rng.random(chains), cdf, grid)):
        position = np.array([theta])
        state = flymc.init(rng, target, position, n_data)
        for _ in range(4):
            state, info = flymc.step(rng, state, target, 0.2, proposal_scale=1.5)
            accepted += info.accepted
        final[chain] = state.position[0]
        bright_counts += state.bright
    assert 0.2 < accepted / (4 * chains) < 0.9  # the chains do move
    assert stats.kstest(final, lambda t: np.interp(t, grid, cdf)).pvalue > 0.01
    assert 0.1 < expected_bright.min() and expected_bright.max() < 0.9  # z is not degenerate
    standard_error = np.sqrt(expected_bright * (1 - expected_bright) / chains)
    deviation = np.abs(bright_counts / chains - expected_bright)
    np.testing.assert_array_less(deviation, 4 * standard_error)


def test_log_ratio_is_the_joint_density_ratio_over_all_rows():
    """The collapsed ratio equals ``p(theta', z) / p(theta, z)`` summed row by row."""
    n_data = 8
    target = tiny_logistic(n_data)
    rows = np.arange(n_data)
    bright = np.zeros(n_data, dtype=bool)
    bright[[1, 4, 5]] = True

    def log_joint(theta):
        loglik, logbound = target.loglik(theta, rows), target.log_bound(theta, rows)
        bright_terms = np.log(np.exp(loglik) - np.exp(logbound))[bright]
        return target.logprior(theta) + logbound[~bright].sum() + bright_terms.sum()

    position, proposal = np.array([0.3]), np.array([-0.7])
    log_ratio, nonfinite, violated = theta_log_ratio(
        target, position, proposal, np.flatnonzero(bright)
    )
    assert not nonfinite and not violated
    assert log_ratio == pytest.approx(log_joint(proposal) - log_joint(position), abs=1e-9)


def test_rows_evaluated_are_the_candidates_and_bright_rows_then_the_bright_rows():
    n_data, reads = 200, []
    target = tiny_logistic(n_data, reads=reads)
    rng = np.random.default_rng(3)
    position = np.array([0.2])
    state = flymc.init(rng, target, position, n_data)
    for _ in range(20):
        reads.clear()
        previous = state.bright
        state, info = flymc.step(rng, state, target, 0.1, proposal_scale=0.5)
        (_, z_rows), (_, theta_rows) = reads  # one read per update
        dark_candidates = z_rows[~previous[z_rows]]
        assert set(z_rows[previous[z_rows]]) == set(np.flatnonzero(previous))
        assert np.unique(z_rows).size == z_rows.size and dark_candidates.size < n_data / 2
        assert set(np.flatnonzero(state.bright & ~previous)) <= set(dark_candidates)
        np.testing.assert_array_equal(theta_rows, np.flatnonzero(state.bright))
        assert info.n_bright == theta_rows.size
        assert info.batch_size == z_rows.size + theta_rows.size
        assert not info.nonfinite and not info.bound_violated
        assert 0.0 <= info.accept <= 1.0
        assert info.accepted == (state.position[0] != position[0])
        position = state.position


def test_a_proposal_outside_the_prior_support_is_rejected_before_reading_rows():
    n_data, reads = 50, []
    target = tiny_logistic(n_data, reads=reads)._replace(
        logprior=lambda theta: 0.0 if theta[0] == 0.2 else -np.inf
    )
    rng = np.random.default_rng(4)
    position = np.array([0.2])
    state = flymc.init(rng, target, position, n_data)
    reads.clear()
    new, info = flymc.step(rng, state, target, 0.2, proposal_scale=1.0)
    assert [name for name, _ in reads] == ["loglik"]  # the z-update's read only
    assert info.nonfinite and not info.accepted and info.accept == 0.0
    assert new.position is position
    assert info.batch_size == reads[0][1].size + info.n_bright


def test_a_bound_above_the_likelihood_stops_the_transition():
    n_data = 20
    target = tiny_logistic(n_data)
    position = np.array([0.2])
    bright = np.zeros(n_data, dtype=bool)
    raised = target._replace(log_bound=lambda theta, rows: target.loglik(theta, rows) + 1.0)
    state = flymc.State(position, bright)
    new, info = flymc.step(np.random.default_rng(5), state, raised, 1.0, proposal_scale=1.0)
    assert info.bound_violated and not info.accepted and new.bright is bright

    # violated only away from theta, so at the proposal: z is updated, theta is kept
    bright[:10] = True
    above_at_proposal = target._replace(
        log_bound=lambda theta, rows: target.log_bound(theta, rows) + 10.0 * (theta != position)
    )
    state = flymc.State(position, bright)
    new, info = flymc.step(
        np.random.default_rng(6), state, above_at_proposal, 0.5, proposal_scale=1.0
    )
    assert info.bound_violated and not info.accepted and new.position is position
    assert info.n_bright > 0
    expected_bright, _ = update_brightness(np.random.default_rng(6), target, state, 0.5)
    np.testing.assert_array_equal(new.bright, expected_bright)
    assert not np.array_equal(new.bright, bright)


def test_brightness_is_drawn_with_probability_one_minus_bound_over_likelihood():
    n_data, draws = 8, 20000
    target = tiny_logistic(n_data)
    position, rows = np.array([0.4]), np.arange(n_data)
    rng = np.random.default_rng(7)
    frequency = np.mean([draw_brightness(rng, target, position, n_data) for _ in range(draws)], 0)
    expected = -np.expm1(target.log_bound(position, rows) - target.loglik(position, rows))
    standard_error = np.sqrt(expected * (1 - expected) / draws)
    np.testing.assert_array_less(np.abs(frequency - expected), 4 * standard_error + 1e-12)
    assert expected.min() > 0.05  # the check is not vacuous
