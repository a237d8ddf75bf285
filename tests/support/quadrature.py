"""Reference posteriors by grid quadrature, and tests of draws against them."""

import numpy as np
from scipy import stats

from tests.support.mcse import ess, mcse_mean


class GridMarginal:
    """A 1-D marginal posterior tabulated on a fine grid."""

    def __init__(self, grid, log_density):
        weights = np.exp(log_density - log_density.max())
        self.grid = grid
        self.pdf = weights / np.trapezoid(weights, grid)
        steps = 0.5 * (self.pdf[1:] + self.pdf[:-1]) * np.diff(grid)
        cdf = np.concatenate([[0.0], np.cumsum(steps)])
        self.cdf_values = cdf / cdf[-1]
        self.mean = float(np.trapezoid(grid * self.pdf, grid))
        self.sd = float(np.sqrt(np.trapezoid((grid - self.mean) ** 2 * self.pdf, grid)))

    def cdf(self, x):
        return np.interp(x, self.grid, self.cdf_values)


def grid_marginals_2d(grid0, grid1, log_density_2d):
    """Both marginals of a 2-D log-density tabulated on ``grid0 x grid1`` (indexing 'ij')."""
    weights = np.exp(log_density_2d - log_density_2d.max())
    marginal0 = np.log(np.trapezoid(weights, grid1, axis=1))
    marginal1 = np.log(np.trapezoid(weights, grid0, axis=0))
    return GridMarginal(grid0, marginal0), GridMarginal(grid1, marginal1)


def agreement(draws, marginal):
    """``(ks_pvalue, |mean error| / MCSE)`` of (chain, draw) draws against a grid marginal.

    Draws are thinned to roughly their effective sample size before the KS test, so that
    they are close to independent.
    """
    draws = np.asarray(draws, dtype=float)
    thin = max(1, int(np.ceil(draws.size / ess(draws))))
    thinned = draws[:, ::thin].ravel()
    pvalue = stats.kstest(thinned, marginal.cdf).pvalue
    return float(pvalue), abs(draws.mean() - marginal.mean) / mcse_mean(draws)
