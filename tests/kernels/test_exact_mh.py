"""The exact MH kernel: the transition around a rule (proposal, exact part, metric, trust
region, cached state), full-data MH with the Metropolis rule, and the tuning pairs."""

import numpy as np
import pytest
from scipy import stats

from pymc_minibatch.kernels import exact_mh
from pymc_minibatch.kernels.adaptation import dual_averaging_init, dual_averaging_update
from pymc_minibatch.kernels.exact_mh import (
    Decision,
    ExactModel,
    Params,
    State,
    metropolis_rule,
    step,
)
from pymc_minibatch.kernels.exact_tuning import (
    MIN_KAPPA,
    chi_init,
    chi_update,
    rho_final,
    rho_init,
    rho_searching,
    rho_update,
)
from pymc_minibatch.kernels.pcn import RHO_CANDIDATES, SEARCH_ROUNDS, TRIAL_STEPS
from pymc_minibatch.kernels.tuna import single_group, tuna_rule


def standard_normal(x):
    return -0.5 * float(x @ x)


def scripted(accepted, seen):
    """A rule that accepts as told and records what it was given."""

    def rule(rng, exact_log_ratio, move, params):
        seen.append((exact_log_ratio, move, params))
        return Decision(0.5, accepted, 3, 1, 2.0, False, False, 0.25)

    return rule


@pytest.mark.parametrize("accepted", [True, False])
def test_the_kernel_moves_as_the_rule_says_and_carries_the_cached_density(accepted):
    calls = []

    def logdensity(x):
        calls.append(x.copy())
        return standard_normal(x)

    state = exact_mh.init(np.array([0.3, -0.2]), logdensity)
    seen = []
    model = ExactModel(logdensity, remainder=lambda a, b: 0.125)
    new, info = step(np.random.default_rng(5), state, model, Params(scale=0.4),
                     scripted(accepted, seen))  # fmt: skip
    proposal = state.position + 0.4 * np.random.default_rng(5).standard_normal(2)
    exact, move, _ = seen[0]
    np.testing.assert_allclose(move.proposal, proposal)
    assert exact == pytest.approx(standard_normal(proposal) - state.logdensity + 0.125)
    assert len(calls) == 2  # the start, then the proposal only: the current point is cached
    assert (info.accepted, info.accept, info.batch_size, info.kept) == (accepted, 0.5, 3, 1)
    assert not info.outside_region and np.isnan(info.squared_jump)
    if accepted:
        np.testing.assert_allclose(new.position, proposal)
        assert new.logdensity == pytest.approx(standard_normal(proposal))
    else:
        assert new is state


def test_the_step_is_a_function_of_the_generator_state():
    state = State(np.zeros(3), 0.0)
    model = ExactModel(standard_normal)
    runs = [step(np.random.default_rng(11), state, model, Params(scale=1.3), metropolis_rule)
            for _ in range(2)]  # fmt: skip
    np.testing.assert_array_equal(runs[0][0].position, runs[1][0].position)
    assert runs[0][1] == runs[1][1]


def test_full_data_mh_matches_a_hand_computed_step():
    state = State(np.array([0.2]), standard_normal(np.array([0.2])))
    new, info = step(np.random.default_rng(9), state, ExactModel(standard_normal),
                     Params(scale=0.5, n_data=7), metropolis_rule)  # fmt: skip
    replay = np.random.default_rng(9)
    proposal = 0.2 + 0.5 * replay.standard_normal(1)
    log_ratio = standard_normal(proposal) - state.logdensity
    assert info.accept == pytest.approx(min(1.0, np.exp(log_ratio)))
    assert info.accepted == bool(np.log(replay.uniform()) < log_ratio)
    assert info.batch_size == 7
    np.testing.assert_array_equal(new.position, proposal if info.accepted else state.position)


@pytest.mark.parametrize("bad", [np.nan, -np.inf, np.inf])
def test_a_nonfinite_proposal_is_rejected_and_counted(bad):
    state = State(np.zeros(2), 0.0)
    for rule, params in [(metropolis_rule, Params()),
                         (tuna_rule, Params(rows=_bounds(), n_data=10, chi=1.0))]:  # fmt: skip
        model = ExactModel(lambda x: bad, row_pair=_no_rows, metrics=lambda a, b, w: [0.1])
        new, info = step(np.random.default_rng(0), state, model, params, rule)
        assert info.nonfinite and not info.accepted and info.accept == 0.0
        assert new is state


def test_the_full_data_mh_chain_targets_a_standard_normal():
    rng = np.random.default_rng(123)
    state, model, params = State(np.zeros(1), 0.0), ExactModel(standard_normal), Params(scale=2.4)
    draws = np.empty(20_000)
    for i in range(draws.size):
        state, _ = step(rng, state, model, params, metropolis_rule)
        draws[i] = state.position[0]
    thinned = draws[::20]  # integrated autocorrelation time is ~5-8 at this scale
    assert stats.kstest(thinned, "norm").pvalue > 0.01


def test_the_pcn_proposal_brings_the_density_ratio_of_its_gaussian():
    center = np.array([1.0, -2.0])
    chol = np.array([[2.0, 0.0], [0.5, 0.3]])

    def whitened(theta, z=None):
        return np.linalg.solve(chol, theta - center)

    model = ExactModel(lambda x: 0.0, whitened=whitened,
                       from_whitened=lambda z: center + chol @ z)  # fmt: skip
    seen = []
    theta = np.array([1.7, -1.1])
    _, info = step(np.random.default_rng(3), State(theta, 0.0), model,
                   Params(proposal="pcn", rho=0.6), scripted(False, seen))  # fmt: skip
    exact, move, _ = seen[0]
    gaussian = stats.multivariate_normal(center, chol @ chol.T)
    assert exact == pytest.approx(gaussian.logpdf(theta) - gaussian.logpdf(move.proposal))
    jump = whitened(move.proposal) - whitened(theta)
    assert info.squared_jump == pytest.approx(jump @ jump)
    z = whitened(theta)
    expected = 0.6 * z + 0.8 * np.random.default_rng(3).standard_normal(2)
    np.testing.assert_allclose(whitened(move.proposal), expected)


def _bounds():
    return single_group(np.ones(10), 10.0, lambda rng, size: np.zeros(size, dtype=int))


def _no_rows(theta, theta2, idx):
    raise AssertionError("a full-data step drew rows")


def test_a_point_outside_the_trust_region_takes_the_full_data_rule():
    model = ExactModel(lambda x: 0.0, row_pair=_no_rows, full_loglik=lambda x: -float(x @ x),
                       metrics=lambda a, b, w: np.array([1e-3]),
                       inside_region=lambda x: abs(x[0]) < 1.0)  # fmt: skip
    params = Params(scale=1e-3, rows=_bounds(), n_data=10, chi=1.0)
    _, info = step(np.random.default_rng(0), State(np.array([2.0]), 0.0), model, params,
                   tuna_rule)  # fmt: skip
    assert info.outside_region and info.fallback and info.batch_size == 10
    _, inside = step(np.random.default_rng(0), State(np.array([0.0]), 0.0),
                     model._replace(row_pair=lambda a, b, idx: (np.zeros(idx.size),) * 2),
                     params, tuna_rule)  # fmt: skip
    assert not inside.outside_region and not inside.fallback


def test_chi_follows_the_running_mean_of_the_metric():
    state = chi_init(None, 5.0, 0.1)
    first = chi_update(state, np.array([0.2]), np.array([10.0]), 10.0, 10_000)
    assert first.mean_metric == pytest.approx(0.2) and first.chi == pytest.approx(5.0 / 2.0)
    second = chi_update(first, np.array([0.4]), np.array([10.0]), 10.0, 10_000)
    mean = 0.95 * 0.2 + 0.05 * 0.4
    assert second.mean_metric == pytest.approx(mean)
    assert second.chi == pytest.approx(5.0 / (10.0 * mean))
    # a batch cap of N / 10 = 3 rows lowers kappa to 3 / (C Mbar) - 1 = 0.5, not below
    # MIN_KAPPA (N = 20)
    capped = chi_update(state, np.array([0.2]), np.array([10.0]), 10.0, 30)
    assert capped.chi == pytest.approx(0.5 / 2.0)
    floor = chi_update(state, np.array([0.2]), np.array([10.0]), 10.0, 20)
    assert floor.chi == pytest.approx(MIN_KAPPA / 2.0)
    assert chi_update(state, np.array([0.0]), np.array([10.0]), 10.0, 30).chi == 1.0


def test_the_chi_update_runs_in_the_step_it_tunes():
    seen = []
    params = Params(scale=0.1, rows=_bounds(), n_data=1000, chi_tuning=chi_init(None, 5.0, 0.1))
    model = ExactModel(lambda x: 0.0, metrics=lambda a, b, w: np.array([0.5]))
    _, info = step(np.random.default_rng(0), State(np.zeros(1), 0.0), model, params,
                   scripted(False, seen))  # fmt: skip
    assert info.chi_tuning.chi == pytest.approx(5.0 / (10.0 * 0.5))
    assert seen[0][2].chi == info.chi_tuning.chi


def test_the_rho_search_runs_every_candidate_then_keeps_the_best():
    state = rho_init()
    rhos = []
    while rho_searching(state):
        rhos.append(state.rho)
        # candidate 0.8 jumps farthest at the same acceptance and cost
        jump = 4.0 if state.rho == 0.8 else 1.0
        state = rho_update(state, 0.5, jump, 10.0)
    assert len(rhos) == len(RHO_CANDIDATES) * TRIAL_STEPS * SEARCH_ROUNDS
    assert rhos[:TRIAL_STEPS] == [RHO_CANDIDATES[0]] * TRIAL_STEPS
    assert rhos[TRIAL_STEPS] == RHO_CANDIDATES[1]
    assert state.rho == 0.8 and rho_final(state) == 0.8
    assert rho_update(state, 1.0, 100.0, 0.0) is state  # over: nothing more is recorded


def test_the_proposal_scale_follows_dual_averaging():
    state = dual_averaging_init(0.5)
    updated = dual_averaging_update(state, 0.9, 0.25)
    error = (1.0 / 11.0) * (0.25 - 0.9)
    assert updated.error_avg == pytest.approx(error)
    assert updated.log_step_size == pytest.approx(np.log(5.0) - 1.0 / 0.05 * error)
