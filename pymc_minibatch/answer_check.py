"""The approximate samplers' check of their draws against Stein's identities.

Stochastic-gradient chains and particle methods return biased draws when a step size or a
preconditioner does not suit the model, and nothing in the draws alone says so. Every such
run checks its draws with the model's score at them (see
:mod:`pymc_minibatch.kernels.stein_check`): a coordinate whose draws sit about a posterior
sd or more from where the score puts the posterior, or spread far wider or narrower, or
draws narrowed together, are named in a warning. The Laplace fit the sampler was built from
gives the units only (its mode and sds), so a mode far from the posterior mean, as for the
scales of hierarchical models, raises nothing. A chain inside ``pm.sample`` reports it as
PyMC's samplers report divergences, in the ``"warning"`` sampler statistic that
``pm.sample`` logs; ``sample_particles`` warns with :class:`AnswerCheckWarning`.
"""

from typing import NamedTuple

import numpy as np
from pymc.stats.convergence import SamplerWarning, WarningType

from pymc_minibatch.kernels import stein_check

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
    """A chain's check: the batch sums so far, the draw count of the next check, and whether
    it has warned (once per chain)."""

    sums: stein_check.SteinState
    next_check: int
    warned: bool


class SteinCheck:
    """Draws and scores in the Laplace fit's units, and the warning they call for.

    Parameters
    ----------
    laplace : LaplaceFit
        The fit the sampler was built from (its mode and sds set the units).
    names : list of str
        A name per coordinate of ``theta`` (``MinibatchModel.coordinate_names()``).
    sampler : str
        The sampler's name, for the message.
    advice : str
        What to change, for the message.
    spread_range : tuple of float, optional
        The accepted ratios of a coordinate's sd to the posterior's (default: a factor of
        :data:`~pymc_minibatch.kernels.stein_check.SPREAD_LIMIT` either way; a lower end
        of 0, which also accepts any overall narrowing, for a method documented to narrow
        the posterior).

    Examples
    --------
    Draws of a normal posterior (its Laplace approximation is exact), then the same draws
    moved by 3 sds:

    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> from pymc_minibatch.answer_check import SteinCheck
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     y = pm.Normal("y", mu, 1.0, observed=np.random.default_rng(0).normal(size=100))
    >>> fit = pmm.MinibatchModel(model).laplace()
    >>> check = SteinCheck(fit, ["mu"], "MySampler", "Fix it.")
    >>> draws = fit.draw(np.random.default_rng(1), 100)
    >>> def score(theta):
    ...     return -(theta - fit.mode) / fit.covariance_diagonal()
    >>> print(check.check_all(draws, score(draws), "(a test)"))
    None
    >>> moved = draws + 3 * np.sqrt(fit.covariance_diagonal())
    >>> message = check.check_all(moved, score(moved), "(a test)")
    >>> message.startswith("MySampler's draws are far from the posterior: over 100 draws")
    True
    >>> "the mean of 'mu' is 2.9 posterior sds" in message
    True
    """

    def __init__(self, laplace, names, sampler, advice, spread_range=None):
        limit = stein_check.SPREAD_LIMIT
        self.spread_range = (1.0 / limit, limit) if spread_range is None else spread_range
        self.mode = laplace.mode
        self.scale = np.sqrt(laplace.covariance_diagonal())
        self.names = names
        self.sampler = sampler
        self.advice = advice

    def start(self):
        """The state of a new chain."""
        return CheckState(stein_check.init(self.mode.size), FIRST_CHECK, False)

    def _update(self, sums, theta, gradient):
        units = (np.asarray(theta) - self.mode) / self.scale
        return stein_check.update(sums, units, np.asarray(gradient) * self.scale)

    def observe(self, state, theta, gradient):
        """Add one draw ``theta`` and its score ``gradient`` (exact or an unbiased
        estimate): the new state, and a :class:`~pymc.stats.convergence.SamplerWarning`
        the first time a check (after :data:`FIRST_CHECK` draws, then at every doubling)
        finds a statistic beyond its limits, else None."""
        state = state._replace(sums=self._update(state.sums, theta, gradient))
        if state.warned or state.sums.count < state.next_check:
            return state, None
        state = state._replace(next_check=2 * state.next_check)
        message = self.message(self._worst(state.sums), "of this chain")
        if message is None:
            return state, None
        return state._replace(warned=True), SamplerWarning(WarningType.BAD_PARAMS, message, "warn")

    def check_all(self, thetas, gradients, what):
        """The message for draws ``thetas`` (shape (n, d)) with their scores ``gradients``,
        seen at once, or None."""
        sums = self._update(stein_check.init(self.mode.size), thetas, gradients)
        return self.message(self._worst(sums), what)

    def _worst(self, sums):
        overall_range = stein_check.OVERALL_SPREAD_RANGE
        if self.spread_range[0] == 0:  # a documented narrowing, overall too
            overall_range = (0.0, overall_range[1])
        return stein_check.disagreement(
            sums, spread_range=self.spread_range, overall_range=overall_range
        )

    def message(self, found, what):
        """The warning's text for ``found`` (a
        :class:`~pymc_minibatch.kernels.stein_check.Disagreement`, or None: no text), the
        draws described by ``what``."""
        if found is None:
            return None
        if found.kind == "overall spread":
            finding = (f"their sds are together about {found.value:.2g} times the "
                       f"posterior's")  # fmt: skip
        elif found.kind == "mean":
            name = self.names[found.coordinate]
            finding = (f"the mean of '{name}' is {abs(found.value):.2g} posterior sds from "
                       f"the posterior's")  # fmt: skip
        else:
            name = self.names[found.coordinate]
            finding = f"the sd of '{name}' is {found.value:.2g} times the posterior's"
        low, high = stein_check.OVERALL_SPREAD_RANGE
        return (
            f"{self.sampler}'s draws are far from the posterior: over {found.count} draws "
            f"{what}, {finding} (measured with the model's gradient at the draws, Stein's "
            f"identities, in the transformed space; the check warns beyond "
            f"{stein_check.MEAN_LIMIT:g} sd in a mean, a factor of "
            f"{stein_check.SPREAD_LIMIT:g} in an sd, or {np.sqrt(low):.2g}-"
            f"{np.sqrt(high):.2g} in the sds together). The result is biased. {self.advice}"
        )
