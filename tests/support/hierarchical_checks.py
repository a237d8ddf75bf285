"""Runs of a sampler on a hierarchical zoo model and their check against NUTS's reference.

Every scalar, the group effects included, is held to the exact samplers' tolerance: its
mean within ``Z`` combined Monte Carlo standard errors of NUTS's (``Z`` = 4, or the
two-sided Bonferroni quantile for a family-wise error of 0.001 over the scalars if larger:
4.4 for 106), its sd within 10% of NUTS's plus ``Z`` standard errors of the sd.

Approximate samplers are held to their stated bias instead (:data:`APPROXIMATE`): a mean
within 0.1 posterior sd of NUTS's plus ``Z`` combined standard errors, an sd within 15%
plus ``Z`` standard errors; a bias beyond those is then detected at the same family-wise
error.
"""

import warnings

import numpy as np
import pymc as pm
from scipy import stats

from tests.support.mcse import ess, mcse_mean, mcse_sd
from tests.support.zoo import scalar_draws
from tests.support.zoo_hierarchical import HIERARCHICAL_ZOO, hierarchical_reference

FAMILY_ERROR = 0.001
#: Bias allowed to an exact sampler: none in a mean, 10% in an sd (NUTS's reference for
#: an sd has a bias of its own at a few thousand draws).
EXACT = (0.0, 0.10)
#: Bias allowed to an approximate sampler: 0.1 posterior sd in a mean, 15% in an sd.
APPROXIMATE = (0.1, 0.15)


def z_limit(n_scalars):
    """The tolerance in combined standard errors for ``n_scalars`` scalars."""
    return max(4.0, float(stats.norm.isf(FAMILY_ERROR / (2 * n_scalars))))


def run_sampler(step_factory, seed, name, draws=5000, model=None):
    """``(step, idata)``: 2 chains of ``draws`` draws after 1000 tuning steps of the step
    ``step_factory()`` builds on zoo model ``name`` (or on ``model``, another form of it)."""
    model = HIERARCHICAL_ZOO[name].build() if model is None else model
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter; judged below
        step = step_factory()
        idata = pm.sample(step=step, draws=draws, tune=1000, chains=2, cores=1,
                          random_seed=seed, progressbar=False,
                          compute_convergence_checks=False)  # fmt: skip
    return step, idata


def assert_matches_reference(idata, name, allowed_bias=EXACT):
    """Every scalar of zoo model ``name`` within the tolerance of the module docstring.

    ``allowed_bias`` is ``(in a mean, in posterior sds; in an sd, relative)``:
    :data:`EXACT` or :data:`APPROXIMATE`.
    """
    mean_bias, sd_bias = allowed_bias
    reference = hierarchical_reference(name)
    draws = scalar_draws(idata)
    limit = z_limit(len(reference))
    mean_errors, sd_errors, effective_sizes = {}, {}, {}
    for label, ref in reference.items():
        values = draws[label]
        effective_sizes[label] = ess(values)
        mean_excess = max(abs(values.mean() - ref["mean"]) - mean_bias * ref["sd"], 0.0)
        mcse = mcse_mean(values, effective_sizes[label])
        mean_errors[label] = mean_excess / np.hypot(mcse, ref["mcse_mean"])
        excess = max(abs(values.std() - ref["sd"]) - sd_bias * ref["sd"], 0.0)
        sd_errors[label] = excess / np.hypot(mcse_sd(values), ref["mcse_sd"])
    # a chain that barely moves would pass on its large standard errors: with 100 effective
    # draws or more, the mean's window is at most 0.44 posterior sd
    assert min(effective_sizes.values()) >= 100
    worst_mean = max(mean_errors, key=mean_errors.get)
    worst_sd = max(sd_errors, key=sd_errors.get)
    assert mean_errors[worst_mean] < limit, (worst_mean, mean_errors[worst_mean])
    assert sd_errors[worst_sd] < limit, (worst_sd, sd_errors[worst_sd])
