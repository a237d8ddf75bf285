"""The pCN proposal is reversible for its Gaussian; the rho search cycles and picks the most
squared jump per cost; the cubic metric is symmetric."""

import numpy as np
from scipy import stats

from pymc_minibatch.kernels.arrowhead import ArrowheadMatrix, cholesky
from pymc_minibatch.kernels.pcn import (
    OVERHEAD_ROWS,
    RHO_CANDIDATES,
    SEARCH_ROUNDS,
    TRIAL_STEPS,
    cubic_metric,
    group_conditional_means,
    pcn_propose,
    rho_search_best,
    rho_search_candidate,
    rho_search_init,
    rho_search_update,
    shared_block,
    shared_given_rest,
    stacked_pcn,
)

MEAN = np.array([1.0, -2.0])
CHOL = np.array([[0.5, 0.0], [0.3, 0.2]])
COV = CHOL @ CHOL.T


def _log_q(theta2, theta, rho):
    """log q(theta2 | theta) of the pCN move."""
    centre = MEAN + rho * (theta - MEAN)
    return stats.multivariate_normal.logpdf(theta2, centre, (1 - rho**2) * COV)


def _pcn_in_theta(rng, theta, rho):
    """The pCN move of ``theta``: in whitened coordinates ``z = CHOL^-1 (theta - MEAN)``."""
    z = np.linalg.solve(CHOL, theta - MEAN)
    return MEAN + CHOL @ pcn_propose(rng, z, rho)


def test_pcn_is_reversible_for_its_gaussian():
    rng = np.random.default_rng(0)
    gaussian = stats.multivariate_normal(MEAN, COV)
    for rho in (0.0, 0.5, 0.9):
        for _ in range(5):
            theta = rng.normal(size=2) * 3
            theta2 = _pcn_in_theta(rng, theta, rho)
            forward = gaussian.logpdf(theta) + _log_q(theta2, theta, rho)
            backward = gaussian.logpdf(theta2) + _log_q(theta, theta2, rho)
            assert np.isclose(forward, backward)


def test_pcn_leaves_its_gaussian_invariant():
    rng = np.random.default_rng(1)
    draws = MEAN + rng.standard_normal((20000, 2)) @ CHOL.T
    moved = np.array([_pcn_in_theta(rng, theta, 0.7) for theta in draws])
    assert np.allclose(moved.mean(0), MEAN, atol=0.02)
    assert np.allclose(np.cov(moved.T), COV, atol=0.01)


def test_cubic_metric_is_symmetric_and_matches_its_formula():
    z, z2 = np.array([1.0, 2.0]), np.array([-0.5, 0.5])
    a, a2 = np.linalg.norm(z), np.linalg.norm(z2)
    expected = np.linalg.norm(z2 - z) * (a * a + a * a2 + a2 * a2)
    assert np.isclose(cubic_metric(z, z2), expected)
    assert np.isclose(cubic_metric(z2, z), expected)


def test_rho_search_cycles_in_blocks_and_ends():
    search = rho_search_init()
    order = []
    while (index := rho_search_candidate(search)) is not None:
        order.append(index)
        search = rho_search_update(search, index, 1.0, 1.0, 0.0)
    assert len(order) == len(RHO_CANDIDATES) * TRIAL_STEPS * SEARCH_ROUNDS
    assert order[:TRIAL_STEPS] == [0] * TRIAL_STEPS
    assert order[TRIAL_STEPS : 2 * TRIAL_STEPS] == [1] * TRIAL_STEPS
    assert np.all(search.steps == TRIAL_STEPS * SEARCH_ROUNDS)


def test_rho_search_weighs_jumps_by_cost_and_ignores_untried_candidates():
    search = rho_search_init()
    # candidate 0: big jumps but OVERHEAD_ROWS * 9 rows per step (10 cost units)
    search = rho_search_update(search, 0, 1.0, 5.0, 9 * OVERHEAD_ROWS)
    # candidate 1: smaller jumps, no rows (1 cost unit)
    search = rho_search_update(search, 1, 1.0, 1.0, 0.0)
    assert rho_search_best(search) == 1
    assert rho_search_best(rho_search_update(rho_search_init(), 2, 0.0, 0.0, 0.0)) == 2


def test_rho_search_passes_over_candidates_accepted_rarely():
    search = rho_search_init()
    # candidate 0: one long jump in ten steps (the independence sampler in many dimensions)
    search = rho_search_update(search, 0, 1.0, 2000.0, 0.0)
    for _ in range(9):
        search = rho_search_update(search, 0, 0.0, 2000.0, 0.0)
    # candidate 1: short jumps, accepted half the time
    for _ in range(10):
        search = rho_search_update(search, 1, 0.5, 20.0, 0.0)
    assert search.jumps[0] > search.jumps[1]
    assert rho_search_best(search) == 1
    # when no candidate reaches the rate, the squared jump decides again
    rare = rho_search_update(rho_search_init(), 0, 0.1, 2000.0, 0.0)
    rare = rho_search_update(rare, 1, 0.1, 20.0, 0.0)
    assert rho_search_best(rare) == 0


def test_stacked_pcn_is_reversible_for_each_blocks_gaussian():
    rng = np.random.default_rng(5)
    n_blocks, k = 4, 2
    a = rng.normal(size=(n_blocks, k, k))
    precision = a @ np.transpose(a, (0, 2, 1)) + np.eye(k)
    chol = np.linalg.cholesky(precision)
    mean = rng.normal(size=(n_blocks, k))
    for rho in (0.0, 0.6):
        position = rng.normal(size=(n_blocks, k)) * 2
        proposal, log_ratio = stacked_pcn(rng, position, mean, chol, rho)
        for g in range(n_blocks):
            covariance = np.linalg.inv(precision[g])
            target = stats.multivariate_normal(mean[g], covariance)
            forward = stats.multivariate_normal(mean[g] + rho * (position[g] - mean[g]),
                                                (1 - rho**2) * covariance)  # fmt: skip
            backward = stats.multivariate_normal(mean[g] + rho * (proposal[g] - mean[g]),
                                                 (1 - rho**2) * covariance)  # fmt: skip
            assert np.isclose(target.logpdf(position[g]) + forward.logpdf(proposal[g]),
                              target.logpdf(proposal[g]) + backward.logpdf(position[g]))
            assert np.isclose(log_ratio[g], target.logpdf(position[g])
                              - target.logpdf(proposal[g]))  # fmt: skip


def test_conditional_moves_follow_the_dense_gaussians_conditionals():
    rng = np.random.default_rng(6)
    shared, local = np.array([6, 1]), np.array([[0, 3], [2, 5], [4, 7]])
    dense = rng.normal(size=(8, 8))
    dense = dense @ dense.T + 8 * np.eye(8)
    for g in range(3):
        for h in range(3):
            if g != h:
                dense[np.ix_(local[g], local[h])] = 0.0
    matrix = ArrowheadMatrix.from_dense(dense, shared, local)
    factor = cholesky(matrix)
    np.testing.assert_allclose(factor.matrix().to_dense(), dense, rtol=1e-12, atol=1e-12)
    delta = rng.normal(size=8)
    means = group_conditional_means(delta, factor)
    for g in range(3):  # -P_gg^-1 P_gS delta_S
        expected = -np.linalg.solve(dense[np.ix_(local[g], local[g])],
                                    dense[np.ix_(local[g], shared)] @ delta[shared])  # fmt: skip
        np.testing.assert_allclose(means[g], expected, rtol=1e-10)
    block = shared_block(matrix, shared[:1])
    rest = np.setdiff1d(np.arange(8), shared[:1])
    expected_mean = -np.linalg.solve(dense[np.ix_(shared[:1], shared[:1])],
                                     dense[np.ix_(shared[:1], rest)] @ delta[rest])  # fmt: skip
    draws = np.array([shared_given_rest(rng, delta, matrix, block, 0.0)[0][shared[0]]
                      for _ in range(4000)])  # fmt: skip
    moved, log_ratio = shared_given_rest(rng, delta, matrix, block, 0.3, shift=0.5)
    np.testing.assert_array_equal(moved[rest], delta[rest])
    conditional = stats.norm(expected_mean[0] + 0.5, np.sqrt(1.0 / dense[shared[0], shared[0]]))
    assert np.isclose(log_ratio, conditional.logpdf(delta[shared[0]])
                      - conditional.logpdf(moved[shared[0]]))  # fmt: skip
    sd = np.sqrt(1.0 / dense[shared[0], shared[0]])
    assert abs(draws.mean() - expected_mean[0]) < 4 * sd / np.sqrt(draws.size)
    assert abs(draws.std() / sd - 1.0) < 0.05
