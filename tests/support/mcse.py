"""Monte Carlo standard errors of (chain, draw) arrays, the same in both ArviZ versions."""

import arviz as az
import numpy as np


def ess(draws):
    """Bulk effective sample size of a (chain, draw) array."""
    return float(az.ess(np.asarray(draws, dtype=float)))


def mcse_mean(draws):
    """Monte Carlo standard error of the posterior mean estimate."""
    draws = np.asarray(draws, dtype=float)
    return float(draws.std() / np.sqrt(ess(draws)))


def mcse_sd(draws):
    """Monte Carlo standard error of the posterior sd estimate (delta method on the variance)."""
    draws = np.asarray(draws, dtype=float)
    squared = (draws - draws.mean()) ** 2
    mcse_var = squared.std() / np.sqrt(ess(squared))
    return float(mcse_var / (2.0 * draws.std()))
