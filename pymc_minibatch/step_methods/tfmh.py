"""TFMH (truncated factorised MH) as a PyMC step method: an exact baseline for TunaMH."""

from pymc_minibatch.kernels.tfmh import tfmh_rule
from pymc_minibatch.step_methods.bounded import BoundedMinibatchStep


class TFMH(BoundedMinibatchStep):
    """Truncated factorised Metropolis–Hastings with Poisson minibatches (exact).

    Accepts with the factorised rule ``prod_i min(1, exp(-Delta_i))`` times the prior
    factor, evaluating rows by Poisson thinning with the same bounds as
    :class:`~pymc_minibatch.TunaMH` (Zhang, Cooper & De Sa 2020, Section 3; kernel in
    :mod:`pymc_minibatch.kernels.tfmh`). Exact but mixes more slowly than TunaMH: the
    factorised acceptance is smaller than MH's. Expected batch ``C M(theta, theta')``.

    Parameters
    ----------
    vars : list of variables, optional
    bounds : "auto" or Bounds
        As for :class:`~pymc_minibatch.TunaMH`.
    expansion_order : {"auto", 0, 1, 2}, default "auto"
        With ``bounds="auto"``: run on the residuals of a Taylor expansion of this order of
        each row around the posterior mode (the control variates; 0: none), which makes this
        SMH-1 (order 1) or SMH-2 (order 2) of Cornish et al. 2019 ("Scalable
        Metropolis-Hastings for exact Bayesian inference with large datasets", ICML); order 1
        needs bounded second derivatives, order 2 bounded third ones. ``"auto"`` takes the
        highest available, as :class:`~pymc_minibatch.TunaMH`: with plain bounds the
        factorised acceptance collapses on tall data (on the zoo's logistic regression with
        10^5 rows, 2000 draws had not converged). Formerly ``control_variates``, still
        accepted with a ``FutureWarning``.
    proposal, rho, trust_region
        As for :class:`~pymc_minibatch.TunaMH` (pCN with order 2 by default; a step with a
        point outside the trust region is a full-data step).
    proposal_scale, proposal_cov, target_accept, model
        As for :class:`~pymc_minibatch.FullMH`.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(0).laplace(1.0, 1.0, size=2000)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Laplace("y", mu, 1.0, observed=y)
    ...     step = pmm.TFMH()
    >>> idata = pm.sample(step=step, draws=2000, chains=2, model=model)  # doctest: +SKIP

    Plain bounds, without control variates (here Laplace rows have no second derivative,
    so ``"auto"`` already uses plain bounds):

    >>> step = pmm.TFMH(expansion_order=0, model=model)  # doctest: +SKIP
    """

    name = "tfmh"
    rule = staticmethod(tfmh_rule)
