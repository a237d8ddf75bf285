"""The approximate samplers' check of their draws against the Laplace approximation.

Stochastic-gradient chains and particle methods return biased draws when a step size or a
preconditioner does not suit the model, and nothing in the draws themselves says so. Every
such run is compared with the Laplace approximation the sampler was built from (the mode
and the full-data curvature, :meth:`~pymc_minibatch.MinibatchModel.laplace`): a coordinate
whose draws sit far from the mode, or spread far wider or narrower than the curvature
allows, is named in a warning (see :mod:`pymc_minibatch.kernels.laplace_check` for the
limits). A chain inside ``pm.sample`` reports it as PyMC's samplers report divergences, in
the ``"warning"`` sampler statistic that ``pm.sample`` logs; ``sample_particles`` warns
with :class:`AnswerCheckWarning`.
"""

from typing import NamedTuple

import numpy as np
from pymc.stats.convergence import SamplerWarning, WarningType

from pymc_minibatch.kernels import laplace_check

FIRST_CHECK = 200
"""Draws of a chain after tuning before its first check; it is repeated at every doubling."""


class AnswerCheckWarning(UserWarning):
    """An approximate sampler's draws are far from what the model's posterior supports.

    Examples
    --------
    Turn it into an error:

    >>> import warnings, pymc_minibatch as pmm
    >>> warnings.simplefilter("error", pmm.AnswerCheckWarning)
    >>> warnings.resetwarnings()
    """


class CheckState(NamedTuple):
    """A chain's check: the moments so far, the draw count of the next check, and whether
    it has warned (once per chain)."""

    moments: laplace_check.MomentsState
    next_check: int
    warned: bool


class LaplaceCheck:
    """Draws in the Laplace fit's units, and the warning they call for.

    Parameters
    ----------
    laplace : LaplaceFit
        The fit the sampler was built from.
    names : list of str
        A name per coordinate of ``theta`` (``MinibatchModel.coordinate_names()``).
    sampler : str
        The sampler's name, for the message.
    advice : str
        What to change, for the message.
    spread_range : tuple of float, optional
        The accepted ratios of the draws' sds to the Laplace sds (default: a factor of
        :data:`~pymc_minibatch.kernels.laplace_check.SPREAD_LIMIT` either way; a lower end
        of 0 for a method documented to narrow the posterior).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> from pymc_minibatch.answer_check import LaplaceCheck
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     y = pm.Normal("y", mu, 1.0, observed=np.random.default_rng(0).normal(size=1000))
    >>> fit = pmm.MinibatchModel(model).laplace()
    >>> check = LaplaceCheck(fit, ["mu"], "MySampler", "Fix it.")
    >>> far = fit.mode + 10 * np.sqrt(fit.covariance_diagonal()) + np.zeros((50, 1))
    >>> message = check.check_all(far, "(a test)")
    >>> message.startswith("MySampler's draws are far from the posterior: over 50 draws")
    True
    >>> "the mean of 'mu' is 10 sds" in message
    True
    """

    def __init__(self, laplace, names, sampler, advice, spread_range=None):
        limit = laplace_check.SPREAD_LIMIT
        self.spread_range = (1.0 / limit, limit) if spread_range is None else spread_range
        self.mode = laplace.mode
        self.scale = np.sqrt(laplace.covariance_diagonal())
        self.names = names
        self.sampler = sampler
        self.advice = advice

    def start(self):
        """The state of a new chain."""
        return CheckState(laplace_check.init(self.mode.size), FIRST_CHECK, False)

    def units(self, theta):
        """``(theta - mode) / sqrt(Sigma_jj)``."""
        return (np.asarray(theta) - self.mode) / self.scale

    def observe(self, state, theta):
        """Add one draw: the new state, and a :class:`~pymc.stats.convergence.SamplerWarning`
        the first time a check (after :data:`FIRST_CHECK` draws, then at every doubling)
        finds a coordinate beyond the limits, else None."""
        moments = laplace_check.update(state.moments, self.units(theta))
        state = state._replace(moments=moments)
        if state.warned or moments.count < state.next_check:
            return state, None
        state = state._replace(next_check=2 * state.next_check)
        message = self.message(self._worst(moments), "of this chain")
        if message is None:
            return state, None
        return state._replace(warned=True), SamplerWarning(WarningType.BAD_PARAMS, message, "warn")

    def check_all(self, thetas, what):
        """The message for draws ``thetas`` (shape (n, d)) seen at once, or None."""
        state = laplace_check.update(laplace_check.init(self.mode.size), self.units(thetas))
        return self.message(self._worst(state), what)

    def _worst(self, moments):
        """The coordinate beyond the limits, or None."""
        return laplace_check.disagreement(moments, spread_range=self.spread_range)

    def message(self, found, what):
        """The warning's text for ``found`` (a
        :class:`~pymc_minibatch.kernels.laplace_check.Disagreement`, or None: no text), the
        draws described by ``what``."""
        if found is None:
            return None
        name = self.names[found.coordinate]
        if found.kind == "mean":
            finding = (f"the mean of '{name}' is {abs(found.value):.3g} sds of the Laplace "
                       f"approximation from the posterior mode")  # fmt: skip
        else:
            finding = (f"the sd of '{name}' is {found.value:.3g} times that of the Laplace "
                       f"approximation at the posterior mode")  # fmt: skip
        return (
            f"{self.sampler}'s draws are far from the posterior: over {found.count} draws "
            f"{what}, {finding} (the transformed space; the check warns beyond "
            f"{laplace_check.MEAN_LIMIT:g} sds or a factor of {laplace_check.SPREAD_LIMIT:g}). "
            f"The result is biased. {self.advice}"
        )
