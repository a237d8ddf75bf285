"""TunaMH on a hierarchical model by blocks: the groups given the shared parameters, each
group accepted on its own rows; the shared parameters that rows touch given the groups;
the population parameters, which no row touches, given everything else.

One step of :class:`~pymc_minibatch.TunaMH` with group moves is a sweep of three kinds of
move, each exact for its conditional, so their composition leaves the posterior invariant
(the docs page "TunaMH on hierarchical models" derives them):

1. ``POPULATION_MOVES`` random-walk Metropolis moves of the population parameters (a
   centred model's ``mu`` and ``tau``, read from the graph:
   :meth:`~pymc_minibatch.MinibatchModel.row_free_indices`) with the Laplace
   approximation's conditional covariance and a scale tuned toward ``target_accept``. No
   row depends on them: the acceptance ratio is the prior's, and no row is read. (A pCN
   move would pull them toward the joint mode, which lies several of their sds below the
   posterior mean with a thousand groups.)
2. A pCN move of every group's local parameters on a Gaussian conditional given the shared
   ones (:func:`~pymc_minibatch.kernels.pcn.stacked_pcn`): the Laplace approximation's
   conditional mean, and a precision that follows the current shared parameters (the
   rows' curvature at the mode plus the prior's at the current population scale, so that
   a group its prior alone informs is proposed at the population's current spread, not at
   the joint mode's narrower one). It is accepted group by group
   (:mod:`pymc_minibatch.kernels.group_tuna`): given the shared parameters the groups are
   independent, and group ``g``'s ratio involves its prior terms
   (:mod:`pymc_minibatch.model.group_prior`), its rows' expansions and a Poisson minibatch
   of its own rows only.
3. A pCN move of the shared parameters that rows touch on the approximation's conditional
   given all the others, its mean shifted by a constant tuned while tuning
   (:meth:`GroupMoves.adapt_shift`; :func:`~pymc_minibatch.kernels.pcn.shared_given_rest`),
   decided by TunaMH over all rows as an unblocked step is.

The correlations of moves 2 and 3 are tuned as the unblocked pCN's is
(:mod:`pymc_minibatch.kernels.pcn`); ``chi`` of the group move is ``GROUP_KAPPA`` over the
running mean of the groups' metrics (each group's noise involves its own bounds only).
"""

from typing import NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt

from pymc_minibatch.kernels.adaptation import (
    DualAveragingState,
    dual_averaging_final,
    dual_averaging_init,
    dual_averaging_update,
)
from pymc_minibatch.kernels.exact_mh import Conditional
from pymc_minibatch.kernels.group_tuna import group_tuna_step
from pymc_minibatch.kernels.pcn import (
    RHO_CANDIDATES,
    RhoSearch,
    group_conditional_means,
    rho_search_best,
    rho_search_candidate,
    rho_search_init,
    rho_search_update,
    shared_block,
    shared_conditional_mean,
    stacked_pcn,
)

#: Random-walk moves of the population parameters per step (they read no row).
POPULATION_MOVES = 10
#: ``chi`` of the group move times the mean of the groups' metrics.
GROUP_KAPPA = 1.0
#: ``kappa`` of the shared move's ``chi`` (:data:`pymc_minibatch.step_methods.tuna.
#: TARGET_KAPPA` for an unblocked step): its proposal moves a few coordinates, and on a
#: 1000-group model its acceptance stayed above 0.8 at a fifth of the unblocked value.
SHARED_KAPPA = 1.0


def prior_hessian_vector(symbolic):
    """``(v) -> H v``, ``H`` the Hessian of the log prior (a graph for
    :meth:`~pymc_minibatch.MinibatchModel.prior_function`): with ``v`` the indicator of one
    local slot of every group, each group's column of that slot at once, as no prior term
    ties two groups."""
    direction = pt.vector("direction")
    gradient = pytensor.grad(symbolic.logprior, symbolic.theta)
    return [direction], pytensor.grad(pt.sum(gradient * direction), symbolic.theta)


class GroupMovesState(NamedTuple):
    """Per-chain tuning of the group and population moves."""

    rho: float
    rho_search: RhoSearch
    chi: float
    mean_metric: float | None
    population_scale: float
    population_adaptation: DualAveragingState
    shift: np.ndarray
    """The shared move's shift of its Gaussian's mean (see :meth:`GroupMoves.adapt_shift`)."""
    shift_count: int


class GroupMoves:
    """The blocks of a hierarchical model and the moves of the module docstring.

    Parameters
    ----------
    step : TunaMH
        With second-order control variates, the pCN proposal and a metric per group.
    split_prior : GroupPrior
        The model's log prior by group (:func:`~pymc_minibatch.model.group_prior.group_prior`).
    """

    def __init__(self, step, split_prior):
        mm = step.minibatch_model
        self.fixed_rho = step.fixed_rho
        self.expansion = step.residuals.expansion
        self.factor = self.expansion.factor
        self.precision = precision = self.factor.matrix()
        population = np.intersect1d(mm.row_free_indices(), self.factor.shared)
        touched = np.setdiff1d(self.factor.shared, population)
        self.population = shared_block(precision, population) if population.size else None
        self.shared = shared_block(precision, touched) if touched.size else None
        self.split_prior = split_prior
        self.target_accept = step.target_accept
        self.likelihood_precision = -self.expansion.hessian.local_blocks
        self.minibatch_model = mm
        local = self.factor.local
        self.slot_directions = np.zeros((local.shape[1], mm.ndim))
        for j in range(local.shape[1]):
            self.slot_directions[j, local[:, j]] = 1.0

    def init(self):
        scale = 0.0 if self.population is None else 2.38 / np.sqrt(self.population.coordinates.size)
        rho = RHO_CANDIDATES[0] if self.fixed_rho is None else self.fixed_rho
        shift = np.zeros(0 if self.shared is None else self.shared.coordinates.size)
        return GroupMovesState(rho, rho_search_init(), 1.0, None, scale,
                               dual_averaging_init(max(scale, 1e-3)), shift, 0)  # fmt: skip

    def stop_tuning(self, state):
        """The state with the tuned values frozen."""
        best = state.rho
        if self.fixed_rho is None:
            best = RHO_CANDIDATES[rho_search_best(state.rho_search)]
        scale = state.population_scale
        if self.population is not None:
            scale = dual_averaging_final(state.population_adaptation)
        return state._replace(rho=best, population_scale=scale)

    def population_moves(self, rng, theta, logprior, logprior_function, state, tune):
        """``POPULATION_MOVES`` random-walk moves: ``(theta, logprior, mean acceptance,
        state)``."""
        if self.population is None:
            return theta, logprior, np.nan, state
        coordinates, chol = self.population.coordinates, self.population.covariance_chol
        accepts = []
        for _ in range(POPULATION_MOVES):
            proposal = theta.copy()
            proposal[coordinates] += state.population_scale * (
                chol @ rng.standard_normal(coordinates.size)
            )
            proposed = logprior_function(proposal)
            log_ratio = proposed - logprior
            accept = float(np.exp(min(log_ratio, 0.0))) if np.isfinite(log_ratio) else 0.0
            if np.log(rng.uniform()) < log_ratio:
                theta, logprior = proposal, proposed
            accepts.append(accept)
            if tune:
                adaptation = dual_averaging_update(state.population_adaptation, accept,
                                                   self.target_accept)  # fmt: skip
                state = state._replace(population_adaptation=adaptation,
                                       population_scale=float(np.exp(adaptation.log_step_size)))
        return theta, logprior, float(np.mean(accepts)), state

    def group_precisions(self, theta):
        """Each group's precision given the current shared parameters, shape ``(G, k, k)``:
        its rows' curvature at the mode (from the expansion) plus its prior's curvature at
        the mode's local values and the current shared ones; a group where that sum is not
        positive definite keeps the Laplace fit's block. A function of the shared
        parameters alone, so that the group's move stays reversible."""
        point = self.expansion.center.copy()
        shared = self.factor.shared
        point[shared] = theta[shared]
        local = self.factor.local
        # compiled once by the adapter (again after unpickling, with the adapter)
        hessian_vector = self.minibatch_model.prior_function("prior_hessian_vector",
                                                             prior_hessian_vector)  # fmt: skip
        prior = np.stack([-hessian_vector(point, direction)[local]
                          for direction in self.slot_directions], axis=-1)  # fmt: skip
        blocks = self.likelihood_precision + 0.5 * (prior + np.transpose(prior, (0, 2, 1)))
        positive = np.all(np.linalg.eigvalsh(blocks) > 0.0, axis=1) & np.all(
            np.isfinite(blocks), axis=(1, 2)
        )
        return np.where(positive[:, None, None], blocks, self.precision.local_blocks)

    def group_move(self, rng, theta, bounds, row_bounds, row_pair, state, tune):
        """The move of every group: ``(theta, info, state)`` with a
        :class:`~pymc_minibatch.kernels.group_tuna.GroupTunaInfo`."""
        tune_rho = tune and self.fixed_rho is None
        searching = rho_search_candidate(state.rho_search) if tune_rho else None
        if tune_rho:
            index = rho_search_best(state.rho_search) if searching is None else searching
            if RHO_CANDIDATES[index] != state.rho:  # the metrics' scale changes: chi anew
                state = state._replace(rho=RHO_CANDIDATES[index], mean_metric=None)
        center, local = self.expansion.center, self.factor.local
        delta = theta - center
        mean = group_conditional_means(delta, self.factor)
        precision_chol = np.linalg.cholesky(self.group_precisions(theta))
        moved_local, gaussian_ratio = stacked_pcn(rng, delta[local], mean, precision_chol,
                                                  state.rho)  # fmt: skip
        delta2 = delta.copy()
        delta2[local] = moved_local
        proposal = center + delta2
        exact = (
            gaussian_ratio
            + self.split_prior(proposal) - self.split_prior(theta)
            + self.expansion.group_quadratics(delta, delta2)
        )
        n_groups = local.shape[0]
        metrics = bounds.metrics(theta, proposal)[:n_groups]
        if tune:
            totals = row_bounds.group_totals[:n_groups]
            weight = float(totals.sum())
            m = float(metrics @ totals) / weight if weight else 0.0
            mean_metric = m if state.mean_metric is None else 0.95 * state.mean_metric + 0.05 * m
            state = state._replace(mean_metric=mean_metric,
                                   chi=GROUP_KAPPA / mean_metric if mean_metric else 1.0)
        outside = bounds.groups_outside_region(theta, proposal)
        info = group_tuna_step(rng, exact, metrics, state.chi, row_bounds,
                               lambda idx: row_pair(theta, proposal, idx),
                               outside)  # fmt: skip
        moved = local[info.accepted].ravel()
        new = theta.copy()
        new[moved] = proposal[moved]
        if searching is not None:
            jumps = np.sum(np.einsum("gba,gb->ga", precision_chol, moved_local - delta[local]) ** 2,
                           axis=1)  # fmt: skip
            state = state._replace(rho_search=rho_search_update(
                state.rho_search, searching, float(info.accept.mean()),
                float(info.accept @ jumps), info.batch_size,
            ))  # fmt: skip
        return new, info, state

    def adapt_shift(self, theta, state):
        """The running mean, over the tuning steps, of the shared parameters' gap to the
        Laplace approximation's conditional mean given the rest.

        That mean is linear in the other parameters; a noise scale's conditional mean is
        not (it follows the residuals' sum of squares), and the second-order terms of a
        thousand groups add up to a gap of several of its conditional sds that is nearly
        constant along the chain. Frozen after tuning, the shift is a constant of the
        proposal, which stays reversible for its Gaussian."""
        if self.shared is None:
            return state
        delta = theta - self.expansion.center
        gap = delta[self.shared.coordinates] - shared_conditional_mean(delta, self.precision,
                                                                      self.shared)  # fmt: skip
        count = state.shift_count + 1
        return state._replace(shift=state.shift + (gap - state.shift) / count, shift_count=count)

    def shared_conditional(self, state):
        """The move of the shared parameters that rows touch, as the exact MH kernel's
        :class:`~pymc_minibatch.kernels.exact_mh.Conditional` proposal (pCN on the
        approximation's conditional given the rest, its mean shifted by ``state.shift``), or
        None without them."""
        if self.shared is None:
            return None
        return Conditional(self.expansion.center, self.precision, self.shared, state.shift)
