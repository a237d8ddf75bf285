"""Tuning of the exact minibatch MH samplers, as ``(init, update)`` pairs.

- TunaMH's ``chi`` (Zhang, Cooper & De Sa 2020, "Asymptotically Optimal Exact Minibatch
  Metropolis-Hastings", NeurIPS): the expected batch is ``lambda = (1 + kappa) C M`` with
  ``kappa = chi C M``; acceptance collapses for ``kappa << 1`` while the batch grows like
  ``1 + kappa``, so ``chi = kappa / (C Mbar)`` with ``Mbar`` a running mean of the metric
  ``M`` over the tuning steps (:func:`chi_init`, :func:`chi_update`). The update reads the
  metric of the step it tunes ``chi`` for, so the kernel of
  :mod:`pymc_minibatch.kernels.exact_mh` runs it inside the step.
- pCN's correlation ``rho``: the search of :mod:`pymc_minibatch.kernels.pcn` (Pasarica &
  Gelman 2010), as the ``rho`` to run at the next step (:func:`rho_init`,
  :func:`rho_update`, :func:`rho_final`).
- The random walk's proposal scale: dual averaging toward a target acceptance rate,
  :mod:`pymc_minibatch.kernels.adaptation` (Hoffman & Gelman 2014); for the population
  moves of TunaMH's sweep (:mod:`pymc_minibatch.kernels.group_sweep`), :func:`scale_init`,
  :func:`scale_update`, :func:`scale_final`. Each of the sweep's moves runs at the scale the
  previous move's acceptance left, so the sweep's kernel runs the update inside the step.

The rest of the sweep's tuning, gathered in :class:`SweepTuning` (:func:`sweep_tuning_init`,
:func:`sweep_tuning_update`, :func:`sweep_tuning_final`): the group move's ``rho`` by the
search above; its ``chi`` from a running mean of the groups' metrics (:func:`group_chi_init`,
:func:`group_chi_update`), which, as TunaMH's, reads the metric of the move it decides, so
the kernel runs it inside the step; and the shared move's shift, a running mean of the
draws' gap to the approximation's conditional mean (:func:`shift_init`,
:func:`shift_update`), which the kernel reports.
"""

from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.adaptation import (
    DualAveragingState,
    dual_averaging_final,
    dual_averaging_init,
    dual_averaging_update,
)
from pymc_minibatch.kernels.pcn import (
    RHO_CANDIDATES,
    RhoSearch,
    rho_search_best,
    rho_search_candidate,
    rho_search_init,
    rho_search_update,
)

#: Weight of the newest metric in the running mean ``Mbar``.
METRIC_WEIGHT = 0.05
#: ``chi`` when the batch at ``chi = 0`` is empty (no move yet, or exactly quadratic rows).
EMPTY_FLOOR_CHI = 1.0
#: Smallest ``kappa`` a cap on the batch may lower it to.
MIN_KAPPA = 0.1


class ChiTuning(NamedTuple):
    """TunaMH's ``chi`` and what it is tuned from."""

    chi: float | None
    """The value for the step (None before the first update when tuned)."""
    mean_metric: float | None
    """``Mbar``, weighted over the groups of rows by their bounds (None: no step yet)."""
    target_kappa: float
    max_batch_fraction: float
    """The expected batch ``(1 + kappa) C Mbar`` is kept below this fraction of N."""


def chi_init(chi, target_kappa: float, max_batch_fraction: float) -> ChiTuning:
    """Start from ``chi`` (None: tuned from the first step's metric)."""
    return ChiTuning(chi, None, float(target_kappa), float(max_batch_fraction))


def chi_update(state: ChiTuning, metrics, group_totals, total: float, n_data: int) -> ChiTuning:
    """Add a step's metrics (one per group of rows, whose bounds sum to ``group_totals``, out
    of ``total``) to ``Mbar`` and set ``chi = kappa / (C Mbar)``, ``kappa`` the target unless
    the batch would pass ``max_batch_fraction * n_data``."""
    # with a metric per group, their mean weighted by the groups' bounds, so that C Mbar is
    # the expected batch at chi = 0
    m = float(metrics @ group_totals) / total if total else 0.0
    previous = state.mean_metric
    mean = m if previous is None else (1.0 - METRIC_WEIGHT) * previous + METRIC_WEIGHT * m
    floor = total * mean
    if floor == 0.0:
        return state._replace(chi=EMPTY_FLOOR_CHI, mean_metric=mean)
    kappa = min(state.target_kappa, state.max_batch_fraction * n_data / floor - 1.0)
    return state._replace(chi=max(kappa, MIN_KAPPA) / floor, mean_metric=mean)


class RhoTuning(NamedTuple):
    """The pCN correlation to run at the next step and the search behind it."""

    rho: float
    search: RhoSearch


def rho_init() -> RhoTuning:
    """The first candidate, with an empty search."""
    search = rho_search_init()
    return RhoTuning(RHO_CANDIDATES[rho_search_candidate(search)], search)


def rho_update(state: RhoTuning, accept: float, squared_jump: float, n_rows: float) -> RhoTuning:
    """Record a step of the candidate being run (its acceptance probability, whitened
    squared jump and rows evaluated) and move to the next one; once the search is over, to
    the best (kept for the rest of the tuning, so that ``chi`` is tuned for it)."""
    index = rho_search_candidate(state.search)
    if index is None:
        return state
    search = rho_search_update(state.search, index, accept, squared_jump, n_rows)
    following = rho_search_candidate(search)
    if following is None:
        following = rho_search_best(search)
    return RhoTuning(RHO_CANDIDATES[following], search)


def rho_final(state: RhoTuning) -> float:
    """The correlation to freeze when tuning stops: the best candidate so far."""
    return RHO_CANDIDATES[rho_search_best(state.search)]


def pcn_noise_scale(rho: float) -> float:
    """``sqrt(1 - rho^2)``, pCN's innovation scale in Laplace sds: the analogue of a random
    walk's proposal scale."""
    return float(np.sqrt(1.0 - rho * rho))


def rho_searching(state: RhoTuning) -> bool:
    """Whether the search still runs (its steps then report their whitened squared jump)."""
    return rho_search_candidate(state.search) is not None


class ScaleTuning(NamedTuple):
    """A random walk's scale and its dual averaging toward a target acceptance rate."""

    scale: float
    adaptation: DualAveragingState


def scale_init(scale: float) -> ScaleTuning:
    """Start from ``scale``; 0 for a move that never runs (its dual averaging then starts
    from ``1e-3``, as it must start from a positive value)."""
    return ScaleTuning(scale, dual_averaging_init(max(scale, 1e-3)))


def scale_update(state: ScaleTuning, accept: float, target: float) -> ScaleTuning:
    """Add a move's acceptance probability; the next move runs at the returned scale."""
    adaptation = dual_averaging_update(state.adaptation, accept, target)
    return ScaleTuning(float(np.exp(adaptation.log_step_size)), adaptation)


def scale_final(state: ScaleTuning) -> ScaleTuning:
    """The scale to freeze when tuning stops: dual averaging's average, once it has had a
    move (as :class:`~pymc_minibatch.step_methods.base.MetropolisStep` freezes its own)."""
    if not state.adaptation.count:
        return state
    return state._replace(scale=dual_averaging_final(state.adaptation))


class GroupChiTuning(NamedTuple):
    """``chi`` of TunaMH's group move (:mod:`pymc_minibatch.kernels.group_tuna`) and what it
    is tuned from: ``chi = kappa / mbar``, ``mbar`` a running mean of the groups' metrics.
    Each group's noise involves only its own bounds (``a_i = chi c_i m_g^2``), so there is no
    cap on the batch as in :class:`ChiTuning`."""

    chi: float
    mean_metric: float | None
    """``mbar``, weighted over the groups by their bounds (None: no step yet, or ``rho``
    changed, which changes the metrics' scale)."""
    kappa: float


def group_chi_init(kappa: float) -> GroupChiTuning:
    """``chi = EMPTY_FLOOR_CHI`` until the first update."""
    return GroupChiTuning(EMPTY_FLOOR_CHI, None, float(kappa))


def group_chi_update(state: GroupChiTuning, metrics, group_totals) -> GroupChiTuning:
    """Add a step's metrics ``m_g`` (one per group, whose bounds sum to ``group_totals``) to
    ``mbar`` and set ``chi = kappa / mbar`` (``EMPTY_FLOOR_CHI`` while ``mbar`` is 0)."""
    weight = float(group_totals.sum())
    m = float(metrics @ group_totals) / weight if weight else 0.0
    previous = state.mean_metric
    mean = m if previous is None else (1.0 - METRIC_WEIGHT) * previous + METRIC_WEIGHT * m
    return GroupChiTuning(state.kappa / mean if mean else EMPTY_FLOOR_CHI, mean, state.kappa)


class ShiftTuning(NamedTuple):
    """A running mean over the tuning steps: the shift of the mean of TunaMH's shared move
    (:mod:`pymc_minibatch.kernels.group_sweep`), the shared parameters' gap to the Laplace
    approximation's conditional mean given the rest.

    That mean is linear in the other parameters; a noise scale's conditional mean is not (it
    follows the residuals' sum of squares), and the second-order terms of a thousand groups
    add up to a gap of several of its conditional sds that is nearly constant along the
    chain. Frozen after tuning, the shift is a constant of the proposal, which stays
    reversible for its Gaussian."""

    shift: np.ndarray
    count: int


def shift_init(size: int) -> ShiftTuning:
    """A zero shift of ``size`` coordinates."""
    return ShiftTuning(np.zeros(size), 0)


def shift_update(state: ShiftTuning, gap) -> ShiftTuning:
    """Add a step's ``gap``."""
    count = state.count + 1
    return ShiftTuning(state.shift + (gap - state.shift) / count, count)


class SweepTuning(NamedTuple):
    """The tuning of TunaMH's sweep of group moves (:mod:`pymc_minibatch.kernels.group_sweep`)."""

    population: ScaleTuning
    rho: RhoTuning
    """The group move's ``rho``."""
    chi: GroupChiTuning
    shift: ShiftTuning
    """The shared move's shift."""


def sweep_tuning_init(n_population: int, n_shared: int, kappa: float,
                      rho: float | None = None) -> SweepTuning:  # fmt: skip
    """The population scale ``2.38 / sqrt(n_population)`` (Roberts, Gelman & Gilks 1997;
    0 without population coordinates), ``rho`` (None: searched), ``chi`` for ``kappa`` and a
    zero shift of ``n_shared`` coordinates."""
    scale = 2.38 / np.sqrt(n_population) if n_population else 0.0
    tuning = rho_init() if rho is None else RhoTuning(rho, rho_search_init())
    return SweepTuning(scale_init(scale), tuning, group_chi_init(kappa), shift_init(n_shared))


def sweep_tuning_update(state: SweepTuning, info, search: bool) -> SweepTuning:
    """After a tuning step whose :class:`~pymc_minibatch.kernels.group_sweep.Info` is
    ``info``: the population scale and ``chi`` as the step left them; with ``search``, the
    step of the ``rho`` search (``chi`` anew when ``rho`` changes, as the metrics' scale
    does); the shift with the step's gap (when the sweep has a shared move)."""
    rho, chi = state.rho, info.chi
    if search:
        group = info.group
        rho = rho_update(rho, float(group.accept.mean()), info.squared_jump, group.batch_size)
        if rho.rho != state.rho.rho:
            chi = chi._replace(mean_metric=None)
    shift = state.shift if info.shared_gap is None else shift_update(state.shift, info.shared_gap)
    return SweepTuning(info.population, rho, chi, shift)


def sweep_tuning_final(state: SweepTuning, tunes_rho: bool) -> SweepTuning:
    """The tuning frozen when tuning stops: the population scale's average and, when
    ``tunes_rho``, the best ``rho`` of the search."""
    rho = state.rho
    if tunes_rho:
        rho = rho._replace(rho=rho_final(rho))
    return state._replace(population=scale_final(state.population), rho=rho)
