"""Monte Carlo standard errors of (chain, draw) arrays, the same in both ArviZ versions."""

import arviz as az
import numpy as np


def ess(draws):
    """Bulk effective sample size of a (chain, draw) array."""
    return float(az.ess(np.asarray(draws, dtype=float)))


def mcse_mean(draws, effective_size=None):
    """Monte Carlo standard error of the posterior mean estimate; ``effective_size``, if
    given, is ``ess(draws)``, computed by the caller (the ESS is most of the cost)."""
    draws = np.asarray(draws, dtype=float)
    if effective_size is None:
        effective_size = ess(draws)
    return float(draws.std() / np.sqrt(effective_size))


def mcse_sd(draws):
    """Monte Carlo standard error of the posterior sd estimate (delta method on the variance)."""
    draws = np.asarray(draws, dtype=float)
    squared = (draws - draws.mean()) ** 2
    mcse_var = squared.std() / np.sqrt(ess(squared))
    return float(mcse_var / (2.0 * draws.std()))
