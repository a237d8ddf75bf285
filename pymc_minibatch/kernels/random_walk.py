"""Gaussian random-walk Metropolis–Hastings on the full data (the exact reference).

Metropolis et al. (1953); Hastings (1970). The proposal is ``theta + scale * L z`` with
``z ~ N(0, I)`` and ``L`` a fixed Cholesky factor (identity by default); it is symmetric,
so the acceptance ratio is the ratio of target densities.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np


class RWState(NamedTuple):
    position: np.ndarray
    logdensity: float


class RWInfo(NamedTuple):
    accept: float
    """Acceptance probability min(1, r) of the proposal (0 for a non-finite proposal)."""
    accepted: bool
    nonfinite: bool
    """The proposal's log-density was NaN or infinite; it was rejected."""


def propose(rng: np.random.Generator, position, scale: float, chol=None):
    """A Gaussian random-walk proposal ``position + scale * chol @ z``."""
    noise = rng.standard_normal(position.shape)
    if chol is not None:
        noise = chol @ noise
    return position + scale * noise


def log_accept_to_prob(log_ratio: float) -> float:
    """``min(1, exp(log_ratio))``, with NaN treated as a certain rejection."""
    if np.isnan(log_ratio):
        return 0.0
    return float(np.exp(min(log_ratio, 0.0)))


def rw_step(
    rng: np.random.Generator,
    state: RWState,
    logdensity_fn: Callable[[np.ndarray], float],
    scale: float,
    chol=None,
) -> tuple[RWState, RWInfo]:
    """One random-walk MH step. A NaN/inf proposal log-density is rejected and flagged."""
    proposal = propose(rng, state.position, scale, chol)
    proposal_logdensity = float(logdensity_fn(proposal))
    if not np.isfinite(proposal_logdensity):
        return state, RWInfo(accept=0.0, accepted=False, nonfinite=True)
    log_ratio = proposal_logdensity - state.logdensity
    accepted = bool(np.log(rng.uniform()) < log_ratio)
    info = RWInfo(accept=log_accept_to_prob(log_ratio), accepted=accepted, nonfinite=False)
    return (RWState(proposal, proposal_logdensity) if accepted else state), info
