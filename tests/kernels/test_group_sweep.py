"""The kernel of TunaMH's sweep of group moves, on a scripted hierarchical Gaussian model:
the sweep leaves its posterior invariant, with the noise removed it moves by its formulas,
its in-step tuning runs the pairs of :mod:`pymc_minibatch.kernels.exact_tuning`, and the
sweep's tuning pairs on scripted sequences."""

import numpy as np
import pytest

from pymc_minibatch.kernels import group_sweep
from pymc_minibatch.kernels.arrowhead import ArrowheadMatrix, cholesky
from pymc_minibatch.kernels.exact_mh import ExactModel, Params
from pymc_minibatch.kernels.exact_tuning import (
    EMPTY_FLOOR_CHI,
    METRIC_WEIGHT,
    group_chi_init,
    group_chi_update,
    scale_final,
    scale_init,
    scale_update,
    shift_init,
    shift_update,
    sweep_tuning_final,
    sweep_tuning_init,
    sweep_tuning_update,
)
from pymc_minibatch.kernels.group_tuna import GroupTunaInfo
from pymc_minibatch.kernels.pcn import RHO_CANDIDATES, SEARCH_ROUNDS, TRIAL_STEPS, shared_block
from pymc_minibatch.kernels.tuna import RowBounds, tuna_rule
from pymc_minibatch.kernels.weighted_rows import GroupedRows
from tests.support.mcse import mcse_mean, mcse_sd

#: Rows per group; coordinates ``a_0, a_1, a_2`` (one per group), ``mu`` (no row touches it)
#: and ``beta`` (every row).
SIZES = (5, 20, 2)
N_GROUPS = len(SIZES)
MU, BETA = N_GROUPS, N_GROUPS + 1
LOCAL = np.arange(N_GROUPS)[:, None]
SHARED = np.array([MU, BETA])
TAU = 0.7
#: The groups' proposal precisions, times the exact conditional ones.
GROUP_PRECISION = 2.0
GROUPS = np.repeat(np.arange(N_GROUPS), SIZES)
X = np.random.default_rng(4).normal(size=GROUPS.size)
Y = np.random.default_rng(5).normal(np.array([-0.5, 0.3, 1.0])[GROUPS] + 0.4 * X, 1.0)


def logprior(theta):
    """``mu ~ N(0, 1)``, ``a_g ~ N(mu, TAU)``, ``beta ~ N(0, 1)`` (up to a constant)."""
    a, mu, beta = theta[:N_GROUPS], theta[MU], theta[BETA]
    return float(-0.5 * mu**2 - 0.5 * np.sum((a - mu) ** 2) / TAU**2 - 0.5 * beta**2)


def split_prior(theta):
    return -0.5 * (theta[:N_GROUPS] - theta[MU]) ** 2 / TAU**2


def row_loglik(theta):
    """``log N(y_i | a_g + beta x_i, 1)`` of every row (up to a constant)."""
    return -0.5 * (Y - theta[GROUPS] - theta[BETA] * X) ** 2


def posterior():
    """The exact posterior ``N(mean, P^-1)``: ``(mean, P)``."""
    precision = np.zeros((N_GROUPS + 2, N_GROUPS + 2))
    precision[MU, MU] = 1.0 + N_GROUPS / TAU**2
    precision[BETA, BETA] = 1.0 + X @ X
    linear = np.zeros(N_GROUPS + 2)
    for g, size in enumerate(SIZES):
        in_group = GROUPS == g
        precision[g, g] = 1.0 / TAU**2 + size
        precision[g, MU] = precision[MU, g] = -1.0 / TAU**2
        precision[g, BETA] = precision[BETA, g] = X[in_group].sum()
        linear[g] = Y[in_group].sum()
    linear[BETA] = X @ Y
    return np.linalg.solve(precision, linear), precision


def tiny_sweep(c=0.0, residual=0.0, tune=False, search=False):
    """``(state, (model, params, rule))``: the sweep on the posterior above, its Gaussian
    approximation deliberately off (mode, precision, the groups' proposal precisions),
    times ``exp(residual * c * sum_i sin(a_g(i)))`` (row terms bounded by ``c`` times the
    metric ``|a_g' - a_g| + |beta' - beta|``; ``residual <= 1``)."""
    mean, exact = posterior()
    center = mean + 0.1
    approximate = ArrowheadMatrix.from_dense(exact + np.diag([0.3, 0.0, 0.5, 0.4, 2.0]),
                                             SHARED, LOCAL)  # fmt: skip
    groups_precision = GROUP_PRECISION * exact[LOCAL[:, :, None], LOCAL[:, None, :]]
    bounds = np.full(Y.size, c)

    def group_quadratics(delta, delta2):  # the rows' log-likelihood is its own expansion
        change = row_loglik(center + delta2) - row_loglik(center + delta)
        return np.bincount(GROUPS, change, minlength=N_GROUPS)

    def row_pair(theta, theta2, idx):
        return (residual * bounds[idx] * np.sin(theta[GROUPS[idx]]),
                residual * bounds[idx] * np.sin(theta2[GROUPS[idx]]))  # fmt: skip

    def metrics(theta, theta2, whitened=None):
        shared = abs(theta2[BETA] - theta[BETA])
        return np.append(np.abs(theta2[:N_GROUPS] - theta[:N_GROUPS]) + shared, shared)

    def full_loglik(theta):
        return float(row_loglik(theta).sum() + row_pair(theta, theta, np.arange(Y.size))[0].sum())

    shared_model = ExactModel(
        logprior, lambda t, t2: float(row_loglik(t2).sum() - row_loglik(t).sum()), row_pair,
        full_loglik=full_loglik, metrics=metrics,
    )  # fmt: skip
    model = group_sweep.SweepModel(
        logprior, split_prior, group_quadratics, lambda theta: groups_precision, metrics,
        lambda theta, theta2: np.zeros(N_GROUPS, dtype=bool), row_pair, shared_model, center,
        cholesky(approximate), approximate, shared_block(approximate, [MU]),
        shared_block(approximate, [BETA]),
    )  # fmt: skip
    rows = GroupedRows(bounds, GROUPS, N_GROUPS)
    row_bounds = RowBounds(bounds, float(rows.totals.sum()), rows.sample, rows.totals,
                           rows.sizes, rows.rows_of)  # fmt: skip
    params = group_sweep.Params(
        scale_init(1.5), 0.5, search, group_chi_init(1.0), np.array([0.1]), tune, 0.25,
        row_bounds, Params(rho=0.3, rows=row_bounds, n_data=Y.size, chi=1.0),
    )  # fmt: skip
    return group_sweep.init(mean, logprior), (model, params, tuna_rule)


class NoNoise:
    """A generator without noise: Gaussian draws are 0, Poisson counts 0, and a uniform
    draw is tiny (every proposal with a finite ratio is accepted)."""

    def standard_normal(self, size=None):
        return np.zeros(size)

    def uniform(self, size=None):
        return np.full(size, 1e-300) if size is not None else 1e-300

    def poisson(self, lam):
        return np.zeros(np.shape(lam), dtype=np.int64)


def test_the_sweep_leaves_its_posterior_invariant():
    state, args = tiny_sweep()
    rng = np.random.default_rng(0)
    draws, accepts = [], []
    for _ in range(4000):
        state, info = group_sweep.step(rng, state, *args)
        draws.append(state.position)
        accepts.append((info.population_accept, info.group.accept.mean(), info.shared.accept))
    draws = np.array(draws)[None]  # (chain, draw, coordinate)
    mean, precision = posterior()
    sd = np.sqrt(np.diag(np.linalg.inv(precision)))
    for j in range(mean.size):
        # halving the groups' Gaussian density ratio moves their sds by 20 standard errors
        # here; halving the shared move's, or leaving the shift out of it, beta's mean by 13
        assert abs(draws[..., j].mean() - mean[j]) < 4 * mcse_mean(draws[..., j]), j
        assert abs(draws[..., j].std() - sd[j]) < 4 * mcse_sd(draws[..., j]), j
    # every kind of move is tested: each is rejected at times, and accepted mostly
    assert np.all((np.mean(accepts, axis=0) > 0.3) & (np.mean(accepts, axis=0) < 0.99))


def test_population_moves_leave_the_prior_of_the_population_invariant():
    state, (model, params, _) = tiny_sweep()
    rng = np.random.default_rng(1)
    values = []
    for _ in range(3000):
        position, logprior, _, _ = group_sweep.population_moves(rng, state, model, params)
        state = group_sweep.State(position, logprior)
        values.append(position[MU])
    # given the groups, mu ~ N(sum a_g / (TAU^2 + G), (1 + G / TAU^2)^-1)
    a = state.position[:N_GROUPS]
    precision = 1.0 + N_GROUPS / TAU**2
    values = np.array(values)[None]
    assert abs(values.mean() - a.sum() / TAU**2 / precision) < 4 * mcse_mean(values)
    assert abs(values.std() - precision**-0.5) < 4 * mcse_sd(values)


def _conditional_mean(precision, delta, block):
    rest = np.setdiff1d(np.arange(delta.size), block)
    return -np.linalg.solve(precision[np.ix_(block, block)], precision[np.ix_(block, rest)]
                            @ delta[rest])  # fmt: skip


@pytest.mark.parametrize("rho", [0.0, 0.5])
def test_without_noise_the_sweep_moves_by_its_formulas(rho):
    state, (model, params, rule) = tiny_sweep(c=0.5)
    params = params._replace(rho=rho)
    new, info = group_sweep.step(NoNoise(), state, model, params, rule)
    dense = model.precision.to_dense()
    delta = state.position - model.center
    assert info.population_accept == 1.0  # a move of zero length
    group_mean = np.array([_conditional_mean(dense[np.ix_([g, MU, BETA], [g, MU, BETA])],
                                             delta[[g, MU, BETA]], [0])[0]
                           for g in range(N_GROUPS)])  # fmt: skip
    expected = delta.copy()
    expected[:N_GROUPS] = group_mean + rho * (delta[:N_GROUPS] - group_mean)
    assert info.group.accepted.all()
    shared_mean = _conditional_mean(dense, expected, [BETA])[0] + params.shift[0]
    expected[BETA] = shared_mean + params.shared.rho * (delta[BETA] - shared_mean)
    np.testing.assert_allclose(new.position, model.center + expected, rtol=1e-12)
    assert new.logdensity == logprior(new.position)
    assert np.isnan(info.squared_jump) and info.shared_gap is None  # neither searched nor tuned


def test_the_in_step_tuning_follows_the_pairs():
    state, (model, params, rule) = tiny_sweep(c=0.5, tune=True, search=True)
    new, info = group_sweep.step(NoNoise(), state, model, params, rule)
    scale = params.population
    for _ in range(group_sweep.POPULATION_MOVES):
        scale = scale_update(scale, 1.0, params.target_accept)
    assert info.population == scale
    # the group move's proposal moved the groups to where the sweep's point has them
    proposal = state.position.copy()
    proposal[:N_GROUPS] = new.position[:N_GROUPS]
    metrics = model.metrics(state.position, proposal)[:N_GROUPS]
    assert info.chi == group_chi_update(params.chi, metrics,
                                        params.rows.group_totals[:N_GROUPS])  # fmt: skip
    chol = np.linalg.cholesky(model.group_precisions(state.position))[:, 0, 0]
    jumps = (chol * (new.position[:N_GROUPS] - state.position[:N_GROUPS])) ** 2
    assert info.squared_jump == pytest.approx(info.group.accept @ jumps, rel=1e-12)
    delta = new.position - model.center
    gap = delta[BETA] - _conditional_mean(model.precision.to_dense(), delta, [BETA])[0]
    np.testing.assert_allclose(info.shared_gap, [gap], rtol=1e-12)


def test_the_sweep_draws_rows_of_the_groups_that_move():
    state, args = tiny_sweep(c=0.5, residual=0.5)
    rng = np.random.default_rng(2)
    rows = 0
    for _ in range(50):
        state, info = group_sweep.step(rng, state, *args)
        rows += info.group.batch_size
        # (a full-data decision has no ratio: NaN)
        assert info.group.bound_ratio <= 1.0 and not info.shared.bound_ratio > 1.0
    assert rows > 0


def test_the_scale_pair_is_dual_averaging_frozen_at_its_average():
    idle = scale_init(0.0)
    assert idle.scale == 0.0 and scale_final(idle) == idle  # a move that never runs
    state = scale_init(0.5)
    for accept in (0.9, 0.1, 0.4):
        state = scale_update(state, accept, 0.25)
        assert state.scale == np.exp(state.adaptation.log_step_size)
    assert scale_final(state).scale == pytest.approx(np.exp(state.adaptation.log_step_size_avg))


def test_the_group_chi_is_kappa_over_a_running_mean_of_the_metrics():
    state = group_chi_init(2.0)
    assert state.chi == EMPTY_FLOOR_CHI and state.mean_metric is None
    totals = np.array([1.0, 3.0])
    first = group_chi_update(state, np.array([0.2, 0.4]), totals)
    assert first.mean_metric == pytest.approx(0.35) and first.chi == pytest.approx(2.0 / 0.35)
    second = group_chi_update(first, np.array([1.0, 1.0]), totals)
    mean = (1.0 - METRIC_WEIGHT) * 0.35 + METRIC_WEIGHT * 1.0
    assert second.mean_metric == pytest.approx(mean) and second.chi == pytest.approx(2.0 / mean)
    assert group_chi_update(state, np.array([0.2, 0.4]), np.zeros(2)).chi == EMPTY_FLOOR_CHI


def test_the_shift_is_the_mean_of_the_gaps():
    gaps = np.random.default_rng(3).normal(size=(7, 2))
    state = shift_init(2)
    for gap in gaps:
        state = shift_update(state, gap)
    assert state.count == 7
    np.testing.assert_allclose(state.shift, gaps.mean(axis=0), rtol=1e-12)


def _info(tuning, accept=0.5, squared_jump=1.0, gap=None):
    """A scripted step's report: the population scale and chi as a step leaves them."""
    group = GroupTunaInfo(np.ones(2, dtype=bool), np.full(2, accept), 4, 1, 4.0, 0, 0.1)
    chi = tuning.chi._replace(chi=3.0, mean_metric=0.5)
    population = scale_update(tuning.population, 0.3, 0.25)
    return group_sweep.Info(0.3, population, group, chi, squared_jump, None, gap)


def test_the_sweep_tuning_searches_rho_and_restarts_chi_when_rho_changes():
    state = sweep_tuning_init(2, 1, 1.0)
    assert state.population.scale == 2.38 / np.sqrt(2) and state.rho.rho == RHO_CANDIDATES[0]
    rhos = []
    for t in range(len(RHO_CANDIDATES) * TRIAL_STEPS * SEARCH_ROUNDS):
        rhos.append(state.rho.rho)
        # candidate 0.8 jumps farthest at the same acceptance and cost
        info = _info(state, squared_jump=4.0 if state.rho.rho == 0.8 else 1.0,
                     gap=np.array([float(t)]))  # fmt: skip
        state = sweep_tuning_update(state, info, search=True)
        changed = state.rho.rho != rhos[-1]
        assert state.chi.mean_metric == (None if changed else 0.5)
    assert rhos[TRIAL_STEPS - 1] == RHO_CANDIDATES[0] and rhos[TRIAL_STEPS] == RHO_CANDIDATES[1]
    assert state.rho.rho == 0.8 and state.population.adaptation.count == len(rhos)
    assert state.shift.shift == pytest.approx((len(rhos) - 1) / 2.0)
    frozen = sweep_tuning_final(state, tunes_rho=True)
    assert frozen.rho.rho == 0.8
    assert frozen.population == scale_final(state.population)


def test_a_fixed_rho_and_a_sweep_without_shared_move_are_kept():
    state = sweep_tuning_init(0, 0, 1.0, rho=0.9)
    assert state.population.scale == 0.0 and state.shift.shift.size == 0
    updated = sweep_tuning_update(state, _info(state), search=False)
    assert updated.rho == state.rho and updated.shift == state.shift
    assert updated.chi.mean_metric == 0.5  # chi kept its running mean
    assert sweep_tuning_final(updated, tunes_rho=False).rho.rho == 0.9
