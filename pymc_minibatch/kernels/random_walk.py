"""The Gaussian random-walk proposal and the Metropolis–Hastings acceptance probability.

Metropolis et al. (1953); Hastings (1970). The proposal is ``theta + scale * L z`` with
``z ~ N(0, I)`` and ``L`` a fixed Cholesky factor (identity by default); it is symmetric,
so the acceptance ratio is the ratio of target densities. The full-data random-walk MH step
is :mod:`pymc_minibatch.kernels.exact_mh` with its ``metropolis_rule``.
"""

import numpy as np

from pymc_minibatch.kernels.noise import standard_normal


def propose(rng: np.random.Generator, position, scale: float, chol=None):
    """A Gaussian random-walk proposal ``position + scale * chol @ z``."""
    noise = standard_normal(rng, position.shape)
    if chol is not None:
        noise = chol @ noise
    return position + scale * noise


def log_accept_to_prob(log_ratio: float) -> float:
    """``min(1, exp(log_ratio))``, with NaN treated as a certain rejection."""
    if np.isnan(log_ratio):
        return 0.0
    return float(np.exp(min(log_ratio, 0.0)))
