"""TunaMH on a hierarchical model by blocks: one step is a sweep of three kinds of move.

The groups given the shared parameters, each group accepted on its own rows; the shared
parameters that rows touch given the groups; the population parameters, which no row
touches, given everything else. Each move is exact for its conditional, so their
composition leaves the posterior invariant (the docs page "TunaMH on hierarchical models"
derives them):

1. ``POPULATION_MOVES`` random-walk Metropolis moves of the population parameters (a
   centred model's ``mu`` and ``tau``) with the Laplace approximation's conditional
   covariance (``model.population``) and a scale tuned toward a target acceptance rate. No
   row depends on them: the acceptance ratio is the prior's, and no row is read. (A pCN
   move would pull them toward the joint mode, which lies several of their sds below the
   posterior mean with a thousand groups.)
2. A pCN move of every group's local parameters on a Gaussian conditional given the shared
   ones (:func:`~pymc_minibatch.kernels.pcn.stacked_pcn`): the Laplace approximation's
   conditional mean, and a precision that follows the current shared parameters
   (``model.group_precisions``: a function of the shared parameters alone, so that the move
   stays reversible). It is accepted group by group
   (:mod:`pymc_minibatch.kernels.group_tuna`): given the shared parameters the groups are
   independent, and group ``g``'s ratio involves its prior terms, its rows' expansions and a
   Poisson minibatch of its own rows only.
3. A pCN move of the shared parameters that rows touch on the approximation's conditional
   given all the others, its mean shifted by a constant tuned while tuning
   (:func:`~pymc_minibatch.kernels.pcn.shared_given_rest`), decided by TunaMH over all rows
   as an unblocked step is: one call of :func:`pymc_minibatch.kernels.exact_mh.step` with
   the rule passed in.

The tuning is in :mod:`pymc_minibatch.kernels.exact_tuning`. Two updates read values known
only inside the step, and run there while ``params.tune`` (as TunaMH's ``chi`` does in
:mod:`pymc_minibatch.kernels.exact_mh`): the population scale after each population move
(the next move runs at the updated scale) and the group move's ``chi`` on the metrics of the
move it decides; :class:`Info` returns both. The others run between steps on what
:class:`Info` reports: the group move's squared jump for the ``rho`` search (with
``params.search``) and the shared parameters' gap to the approximation's conditional mean
for the shift (while ``params.tune``).
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels import exact_mh
from pymc_minibatch.kernels.arrowhead import ArrowheadFactor, ArrowheadMatrix
from pymc_minibatch.kernels.exact_tuning import (
    GroupChiTuning,
    ScaleTuning,
    group_chi_update,
    scale_update,
)
from pymc_minibatch.kernels.group_tuna import GroupTunaInfo, group_tuna_step
from pymc_minibatch.kernels.pcn import (
    SharedBlock,
    group_conditional_means,
    shared_conditional_mean,
    stacked_pcn,
)
from pymc_minibatch.kernels.tuna import RowBounds

#: Random-walk moves of the population parameters per step (they read no row).
POPULATION_MOVES = 10


class State(NamedTuple):
    position: np.ndarray
    logdensity: float
    """The log prior with the Jacobians at ``position`` (the exact part of every move's
    ratio), kept so that a rejection costs none."""


class SweepModel(NamedTuple):
    """The model, as the callables a sweep calls and the static structure of its blocks."""

    logprior: Callable[[np.ndarray], float]
    split_prior: Callable[[np.ndarray], np.ndarray]
    """The log prior's terms of each group's local parameters, shape ``(G,)``."""
    group_quadratics: Callable[[np.ndarray, np.ndarray], np.ndarray]
    """``(delta, delta')``: each group's share of the rows' expansions' change when only the
    groups' local coordinates move (offsets from ``center``), shape ``(G,)``."""
    group_precisions: Callable[[np.ndarray], np.ndarray]
    """Each group's proposal precision given the point's shared parameters, ``(G, k, k)``."""
    metrics: Callable[[np.ndarray, np.ndarray], np.ndarray]
    """``(theta, theta')``: ``m_g`` of each group of rows, shape ``(G + 1,)`` or more (the
    groups first)."""
    groups_outside: Callable[[np.ndarray, np.ndarray], np.ndarray]
    """``(theta, theta')``: whether either point leaves each group's trust region, ``(G,)``."""
    row_pair: Callable
    """``row_pair(theta, theta', idx)``: rows' terms at both points."""
    shared: exact_mh.ExactModel
    """The model of the shared move."""
    center: np.ndarray
    """The Laplace approximation's mode, the expansions' center."""
    factor: ArrowheadFactor
    """The factor of the approximation's precision (``factor.local``: each group's
    coordinates, shape ``(G, k)``)."""
    precision: ArrowheadMatrix
    """The approximation's precision."""
    population: SharedBlock | None
    """The population coordinates' block (None: no population move)."""
    shared_block: SharedBlock | None
    """The block of the shared coordinates that rows touch (None: no shared move)."""


class Params(NamedTuple):
    """A sweep's settings."""

    population: ScaleTuning
    """The population moves' scale (and, while tuning, its dual averaging)."""
    rho: float
    """The group move's pCN correlation."""
    search: bool
    """Report the group move's squared jump (the ``rho`` search)."""
    chi: GroupChiTuning
    """The group move's ``chi`` (and, while tuning, its running mean, updated first)."""
    shift: np.ndarray
    """The shared move's shift of its Gaussian's mean."""
    tune: bool
    target_accept: float
    """The population moves' target acceptance rate."""
    rows: RowBounds
    """The rows' bounds, a group of rows per group of parameters."""
    shared: exact_mh.Params
    """The shared move's settings; its proposal is set to the conditional pCN move."""


class Info(NamedTuple):
    population_accept: float
    """The population moves' mean acceptance probability (NaN without them)."""
    population: ScaleTuning
    """The population scale's tuning after the step."""
    group: GroupTunaInfo
    chi: GroupChiTuning
    """The group move's ``chi`` tuning after the step (``chi.chi`` decided it)."""
    squared_jump: float
    """``sum_g accept_g ||C_g^T (x'_g - x_g)||^2`` of the group move with ``params.search``
    (``C_g`` the Cholesky factor of group ``g``'s proposal precision), else NaN."""
    shared: exact_mh.Info | None
    """The shared move's report (None without it)."""
    shared_gap: np.ndarray | None
    """The new point's shared coordinates minus the approximation's conditional mean given
    the rest, as offsets from ``center`` (while ``params.tune``, with a shared move)."""


def init(position, logprior_fn: Callable[[np.ndarray], float]) -> State:
    """The state at ``position``."""
    return State(position, float(logprior_fn(position)))


def step(rng: np.random.Generator, state: State, model: SweepModel, params: Params,
         rule: exact_mh.Rule) -> tuple[State, Info]:  # fmt: skip
    """One sweep: the population moves, the group move, then the shared move decided by
    ``rule``."""
    position, logprior, population_accept, population = population_moves(rng, state, model,
                                                                         params)  # fmt: skip
    position, group, chi, squared_jump = group_move(rng, position, model, params)
    if group.accepted.any():  # the groups were decided on their terms of the prior
        logprior = model.logprior(position)
    shared_info = gap = None
    block = model.shared_block
    if block is not None:
        conditional = exact_mh.Conditional(model.center, model.precision, block, params.shift)
        shared_params = params.shared._replace(proposal="conditional", conditional=conditional)
        (position, logprior), shared_info = exact_mh.step(
            rng, exact_mh.State(position, logprior), model.shared, shared_params, rule
        )
        if params.tune:
            delta = position - model.center
            gap = delta[block.coordinates] - shared_conditional_mean(delta, model.precision,
                                                                     block)  # fmt: skip
    info = Info(population_accept, population, group, chi, squared_jump, shared_info, gap)
    return State(position, logprior), info


def population_moves(rng: np.random.Generator, state: State, model: SweepModel, params: Params):
    """``POPULATION_MOVES`` random-walk moves of the population coordinates, decided on the
    log prior: ``(position, logprior, mean acceptance probability, scale tuning)``."""
    theta, logprior = state
    tuning = params.population
    if model.population is None:
        return theta, logprior, np.nan, tuning
    coordinates, chol = model.population.coordinates, model.population.covariance_chol
    accepts = []
    for _ in range(POPULATION_MOVES):
        proposal = theta.copy()
        proposal[coordinates] += tuning.scale * (chol @ rng.standard_normal(coordinates.size))
        proposed = model.logprior(proposal)
        log_ratio = proposed - logprior
        accept = float(np.exp(min(log_ratio, 0.0))) if np.isfinite(log_ratio) else 0.0
        if np.log(rng.uniform()) < log_ratio:
            theta, logprior = proposal, proposed
        accepts.append(accept)
        if params.tune:
            tuning = scale_update(tuning, accept, params.target_accept)
    return theta, logprior, float(np.mean(accepts)), tuning


def group_move(rng: np.random.Generator, theta, model: SweepModel, params: Params):
    """The move of every group's local coordinates, each group accepted on its own rows:
    ``(position, GroupTunaInfo, chi tuning, squared jump)``."""
    center, local = model.center, model.factor.local
    delta = theta - center
    mean = group_conditional_means(delta, model.factor)
    precision_chol = np.linalg.cholesky(model.group_precisions(theta))
    moved_local, gaussian_ratio = stacked_pcn(rng, delta[local], mean, precision_chol,
                                              params.rho)  # fmt: skip
    delta2 = delta.copy()
    delta2[local] = moved_local
    proposal = center + delta2
    exact = (
        gaussian_ratio
        + model.split_prior(proposal) - model.split_prior(theta)
        + model.group_quadratics(delta, delta2)
    )
    n_groups = local.shape[0]
    metrics = model.metrics(theta, proposal)[:n_groups]
    chi = params.chi
    if params.tune:  # chi is tuned on the metrics of the move it decides
        chi = group_chi_update(chi, metrics, params.rows.group_totals[:n_groups])
    outside = model.groups_outside(theta, proposal)
    info = group_tuna_step(rng, exact, metrics, chi.chi, params.rows,
                           lambda idx: model.row_pair(theta, proposal, idx),
                           outside)  # fmt: skip
    moved = local[info.accepted].ravel()
    new = theta.copy()
    new[moved] = proposal[moved]
    squared_jump = np.nan
    if params.search:
        jumps = np.sum(np.einsum("gba,gb->ga", precision_chol, moved_local - delta[local]) ** 2,
                       axis=1)  # fmt: skip
        squared_jump = float(info.accept @ jumps)
    return new, info, chi, squared_jump
