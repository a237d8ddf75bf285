"""TunaMH decisions group by group: exactness on a posterior known by quadrature, and the
cases the kernel decides without subsampling."""

import numpy as np
import pytest

from pymc_minibatch.kernels.group_tuna import group_tuna_step
from pymc_minibatch.kernels.tuna import RowBounds
from pymc_minibatch.kernels.weighted_rows import GroupedRows
from tests.support.mcse import mcse_sd
from tests.support.quadrature import GridMarginal, agreement

SIZES = (3, 40, 400)
RNG = np.random.default_rng(3)
GROUPS = np.repeat(np.arange(len(SIZES)), SIZES)
Y = RNG.normal(np.repeat([-1.0, 0.5, 2.0], SIZES), 1.0)


def _row_bounds(c):
    """Rows drawn within their group by ``c`` (every row in a group)."""
    rows = GroupedRows(c, GROUPS, len(SIZES))
    return RowBounds(c, float(rows.totals.sum()), rows.sample, rows.totals, rows.sizes,
                     rows.rows_of)  # fmt: skip


def _loglik_pair(theta, theta2):
    """Laplace rows ``-|theta_g - y_i|``: ``|Delta_i| <= |theta_g' - theta_g|`` (``c_i = 1``)."""
    def pair(idx):
        g = GROUPS[idx]
        return -np.abs(theta[g] - Y[idx]), -np.abs(theta2[g] - Y[idx])

    return pair


def _chain(n_steps, rng, chi=0.5, scale=0.4):
    bounds = _row_bounds(np.ones(Y.size))
    theta = np.zeros(len(SIZES))
    draws, rows = np.empty((n_steps, theta.size)), 0
    for t in range(n_steps):
        proposal = theta + scale * rng.standard_normal(theta.size) / np.sqrt(SIZES)
        exact = 0.5 * (theta**2 - proposal**2)  # N(0, 1) priors, a symmetric proposal
        info = group_tuna_step(rng, exact, np.abs(proposal - theta), chi, bounds,
                               _loglik_pair(theta, proposal))  # fmt: skip
        theta = np.where(info.accepted, proposal, theta)
        draws[t] = theta
        rows += info.batch_size
    return draws, rows / n_steps


def _marginal(g):
    grid = np.linspace(-6.0, 6.0, 6001)
    y = Y[GROUPS == g]
    return GridMarginal(grid, -0.5 * grid**2 - np.abs(grid[:, None] - y).sum(axis=1))


@pytest.mark.slow
def test_each_groups_draws_follow_its_posterior():
    rng = np.random.default_rng(0)
    runs = [_chain(20_000, rng) for _ in range(2)]
    draws = np.stack([d[2000:] for d, _ in runs])  # (chain, draw, group)
    assert np.mean([r for _, r in runs]) < 0.5 * Y.size  # a minibatch, not every row
    for g in range(len(SIZES)):
        marginal = _marginal(g)
        pvalue, mean_error = agreement(draws[:, :, g], marginal)
        sd_error = abs(draws[:, :, g].std() - marginal.sd) / mcse_sd(draws[:, :, g])
        # halving the kept rows' terms (a deliberately broken kernel) widens group 1 by
        # 10%, about 6 standard errors of its sd here
        assert pvalue > 1e-3 and mean_error < 4.0 and sd_error < 4.0, (g, pvalue, mean_error,
                                                                        sd_error)


def test_groups_evaluated_whole_are_exact_metropolis_hastings():
    rng = np.random.default_rng(1)
    theta, proposal = np.array([-1.0, 0.4, 2.1]), np.array([-0.7, 0.5, 2.0])
    exact = np.array([0.1, -0.2, 0.0])
    pair = _loglik_pair(theta, proposal)
    info = group_tuna_step(rng, exact, np.abs(proposal - theta), 0.5,
                           _row_bounds(np.ones(Y.size)), pair,
                           outside=np.ones(3, dtype=bool))  # fmt: skip
    current, proposed = pair(np.arange(Y.size))
    log_ratio = exact + np.bincount(GROUPS, proposed - current)
    np.testing.assert_allclose(info.accept, np.exp(np.minimum(log_ratio, 0.0)), rtol=1e-12)
    assert info.batch_size == Y.size and info.bound_ratio == 0.0


def test_a_group_that_does_not_move_reads_no_row_and_a_nonfinite_row_rejects_its_group():
    rng = np.random.default_rng(2)
    theta, proposal = np.array([-1.0, 0.4, 2.1]), np.array([-1.0, 0.5, 2.0])

    def pair(idx):
        current, proposed = _loglik_pair(theta, proposal)(idx)
        assert not np.any(GROUPS[idx] == 0)  # group 0 does not move
        return current, np.where(GROUPS[idx] == 2, np.nan, proposed)

    info = group_tuna_step(rng, np.array([0.3, 0.0, 0.0]), np.abs(proposal - theta), 0.5,
                           _row_bounds(np.ones(Y.size)), pair,
                           outside=np.array([False, False, True]))  # fmt: skip
    assert info.accept[0] == 1.0 and info.accepted[0]  # on its exact part: log ratio 0.3
    assert info.accept[2] == 0.0 and not info.accepted[2] and info.nonfinite == 1


def test_a_row_beyond_its_bound_is_reported():
    rng = np.random.default_rng(4)
    theta, proposal = np.zeros(3), np.full(3, 0.5)
    info = group_tuna_step(rng, np.zeros(3), np.full(3, 0.5), 0.1,
                           _row_bounds(np.full(Y.size, 0.1)),  # bounds 10 times too small
                           _loglik_pair(theta, proposal))  # fmt: skip
    assert info.bound_ratio > 1.0

