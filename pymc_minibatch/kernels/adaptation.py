"""Step-size adaptation toward a target acceptance rate, as an (init, update) pair.

Dual averaging of Nesterov (2009) in the form of Hoffman & Gelman (2014), "The No-U-Turn
Sampler", JMLR 15, Algorithm 5 (equations (5)-(6)): the log step size follows
``x_t = mu - sqrt(t) / gamma * Hbar_t`` with ``Hbar_t`` the running mean of
``target - accept_t``, and the frozen value after tuning is the weighted average
``exp(xbar_t)``.
"""

from typing import NamedTuple

import numpy as np


class DualAveragingState(NamedTuple):
    log_step_size: float
    log_step_size_avg: float
    error_avg: float
    count: int
    mu: float


def dual_averaging_init(step_size: float) -> DualAveragingState:
    """Start adapting from ``step_size``; ``mu = log(10 step_size)`` as in the paper."""
    if not (np.isfinite(step_size) and step_size > 0):
        raise ValueError(f"step_size must be a positive finite number, got {step_size}")
    log_step = float(np.log(step_size))
    return DualAveragingState(log_step, log_step, 0.0, 0, float(np.log(10.0 * step_size)))


def dual_averaging_update(
    state: DualAveragingState,
    accept_prob: float,
    target: float,
    gamma: float = 0.05,
    t0: float = 10.0,
    kappa: float = 0.75,
) -> DualAveragingState:
    """One update after a step whose acceptance probability was ``accept_prob``."""
    count = state.count + 1
    weight = 1.0 / (count + t0)
    error_avg = (1.0 - weight) * state.error_avg + weight * (target - accept_prob)
    log_step = state.mu - np.sqrt(count) / gamma * error_avg
    avg_weight = count ** (-kappa)
    log_step_avg = avg_weight * log_step + (1.0 - avg_weight) * state.log_step_size_avg
    return DualAveragingState(
        float(log_step), float(log_step_avg), float(error_avg), count, state.mu
    )


def dual_averaging_final(state: DualAveragingState) -> float:
    """The step size to freeze after tuning."""
    return float(np.exp(state.log_step_size_avg))
