"""Full-data random-walk Metropolis–Hastings: the exact reference for minibatch samplers."""

import numpy as np

from pymc_minibatch.kernels.exact_mh import ExactModel
from pymc_minibatch.step_methods.base import MetropolisStep
from pymc_minibatch.step_methods.exact import ExactMHStep


class FullMH(ExactMHStep):
    """Random-walk Metropolis–Hastings on all N rows at every step.

    The exact baseline that minibatch samplers are measured against: same Gaussian
    random-walk proposal and step-size tuning as :class:`MetropolisStep`, but every step
    evaluates the full log posterior. A proposal whose log posterior is NaN or infinite is
    rejected and flagged in the ``nonfinite`` statistic.

    Parameters
    ----------
    vars : list of variables, optional
        Continuous free variables to sample (default: all continuous ones).
    proposal_scale : float, optional
        Initial random-walk scale; default ``2.38 / sqrt(ndim)`` with the Laplace proposal
        (``2.38 / sqrt(ndim * N)`` otherwise), then tuned. Formerly ``step_size``, still
        accepted with a ``FutureWarning``.
    proposal_cov : "laplace", None or array, default "laplace"
        Proposal covariance (or its diagonal) in the transformed space. ``"laplace"``: the
        covariance of the posterior's Laplace approximation (fitted on the full data at
        construction), with each chain starting from a draw of it; ``None``: identity. See
        :class:`~pymc_minibatch.step_methods.base.MetropolisStep`.
    target_accept : float, default 0.25
        Acceptance rate the proposal scale is tuned toward.
    model : pymc.Model, optional
    data : dict, optional
        Arrays to read the rows from instead of the model's data (``{name: array}``, by
        ``pm.Data`` or observed-variable name; N comes from the arrays): see
        :class:`~pymc_minibatch.MinibatchModel`.
    progressbar : bool, default True
        On data of at least a million rows, show each full-data pass of the construction
        (the Laplace fit, the bounds) in a progress bar; ``step.setup_report`` gives the
        passes and seconds of each stage either way.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(1).normal(1.0, 1.0, size=500)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    ...     idata = pm.sample(step=pmm.FullMH(), draws=200, tune=200, chains=1,
    ...                       progressbar=False, random_seed=1)
    >>> int(idata["sample_stats"]["batch_size"].max())
    500
    """

    name = "full_mh"
    stats_dtypes_shapes = {**MetropolisStep.stats_dtypes_shapes, "batch_size": (np.int64, [])}

    def make_exact_model(self):
        """The kernel's model: its exact part is the whole log posterior."""
        return ExactModel(self.minibatch_model.logp)
