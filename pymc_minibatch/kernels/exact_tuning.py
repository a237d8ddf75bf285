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
  :mod:`pymc_minibatch.kernels.adaptation` (Hoffman & Gelman 2014).
"""

from typing import NamedTuple

import numpy as np

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
