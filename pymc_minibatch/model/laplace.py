"""The Laplace approximation of a model's posterior: its mode and the exact curvature there.

Several samplers start from it and whiten the posterior with it: TunaMH and TFMH (the pCN
proposal, second-order control variates, the trust region), the stochastic-gradient samplers
(start and preconditioner) and the particle methods (start and preconditioner). It is
computed on all rows, once per :class:`MinibatchModel`:

1. which parameters each row touches (:mod:`pymc_minibatch.model.structure`): a block-arrowhead
   Hessian in hierarchical models, dense otherwise;
2. the mode ``theta_hat`` by Newton's method with the exact full-data Hessian, a
   backtracking line search and damping where the Hessian is not negative definite
   (:mod:`pymc_minibatch.model.mode_search`: an iteration costs one pass where Newton's
   method converges, and on many rows in memory without groups the search starts from a
   subsample's mode, a few passes from the full-data one);
3. the precision ``P``, minus the Hessian at the mode, factorised as ``P = R R^T``
   (:mod:`pymc_minibatch.kernels.arrowhead`): the preconditioner ``theta = L z``, ``L = R^-T``;
4. without groups, a check of ``P`` at the posterior's scale: a secant of the gradient along
   a random direction, one Laplace sd each way (two passes, or none on the subsample of
   step 2). A likelihood with kinks (Laplace rows) has a zero Hessian almost everywhere, so
   the exact ``P`` is the prior's; there the secants along every axis of ``L``, on all
   rows, replace it (see :func:`_secant_curvature`).

**A mode, or a warning.** Where the search does not end at a mode (a saddle, a scale
running off to zero in a hierarchical model, a flat direction, an iteration limit; see
:mod:`~pymc_minibatch.model.mode_search`), it starts again from ``RETRIES`` jittered initial
points. If none ends at a mode, the fit keeps the best point found, makes its curvature
positive definite (damping, reported as ``repaired``) and warns with
:class:`LaplaceFitWarning`: a sampler that starts from it and is preconditioned by it then
runs on a poor approximation, which its user must know.

Every row contributes to the curvature, whatever the number of parameters: a curvature
estimated on a subsample misses the rows of rare categories and small groups, which leaves
their coefficients with the prior's scale and throws samplers thousands of posterior sds
out.
"""

import time
import warnings
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.arrowhead import ArrowheadFactor, ArrowheadMatrix, damped_cholesky
from pymc_minibatch.model.diagonal_fit import fit_diagonal, needs_diagonal_fit
from pymc_minibatch.model.mode_search import (
    draw_subsample,
    full_data_posterior,
    newton,
    subsample_start,
)
from pymc_minibatch.model.structure import ParameterStructure

#: Largest factor between the curvature along a random direction measured by a secant at
#: one Laplace sd and the exact one, beyond which the secants replace it.
SECANT_RATIO = 3.0
#: Rounds of secant curvature at most (each at the scale the previous one gave).
SECANT_ROUNDS = 4
#: Seed of the secants' random directions.
SECANT_SEED = 20261203
#: Seed of the retries' jitter when no generator is given: the fit is then a function of the
#: model alone, so draws under ``pm.sample(random_seed=...)`` repeat (steps are built, and
#: fit, before PyMC seeds them).
RETRY_SEED = 20261204
#: Other starts tried (jittered initial points) when a search does not end at a mode.
RETRIES = 3
#: Jitter of those starts: uniform in ``[-JITTER, JITTER]`` around the initial point in the
#: transformed space (as PyMC's ``jitter+adapt_diag`` initialisation).
JITTER = 1.0


class LaplaceFitWarning(UserWarning):
    """The Laplace fit's search did not end at a mode of the posterior.

    Examples
    --------
    A flat prior on a parameter no row informs has no mode:

    >>> import warnings, numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     free = pm.Flat("free")
    ...     y = pm.Normal("y", mu, 1.0, observed=np.zeros(100))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     fit = pmm.MinibatchModel(model).laplace()
    >>> any(issubclass(w.category, pmm.LaplaceFitWarning) for w in caught), fit.is_mode
    (True, False)
    """


class LaplaceFit(NamedTuple):
    """The mode of the posterior and the exact, positive definite curvature there."""

    mode: np.ndarray
    """``theta_hat``, flat transformed values."""
    preconditioner: ArrowheadFactor
    """``theta - theta_hat = L z`` with ``L^T P L = I``: for ``z ~ N(0, I)``, ``L z`` has the
    Laplace covariance."""
    precision: ArrowheadMatrix
    """``P``: minus the Hessian of the log posterior at the mode (before any repair)."""
    structure: ParameterStructure
    """Which parameters each row touches."""
    repaired: bool
    """Whether ``P`` had to be damped to be positive definite (the search ended elsewhere
    than at a mode)."""
    is_mode: bool
    """Whether the search ended at a mode (see :mod:`~pymc_minibatch.model.mode_search`)."""
    decrement: float
    """Newton's decrement ``g^T P^-1 g`` at the last point where the curvature was
    computed (``mode``, or one Newton step before it, see
    :data:`~pymc_minibatch.model.mode_search.FINAL_STEP_DECREMENT`)."""
    starts: int
    """Searches run (1 when the first ended at a mode)."""
    passes: int
    """Full-data passes spent (structure, Hessians and line-search evaluations)."""
    seconds: float

    exact = True
    """The exact curvature (as opposed to a
    :class:`~pymc_minibatch.model.diagonal_fit.DiagonalFit`)."""

    def draw(self, rng, size=None):
        """Draws from the Laplace approximation ``N(theta_hat, L L^T)``, shape ``size + (d,)``."""
        shape = (self.mode.size,) if size is None else (size, self.mode.size)
        return self.mode + self.preconditioner.to_theta(rng.standard_normal(shape))

    def start(self, rng):
        """Where a chain starts: a draw of the approximation, in the bulk of the posterior."""
        return self.draw(rng)

    def bulk_draws(self, rng, size):
        """``size`` points in the bulk of the posterior, where particles start and the
        gradient noise is measured: draws of the approximation."""
        return self.draw(rng, size)

    def covariance_diagonal(self):
        """The variances of the Laplace approximation."""
        return self.preconditioner.covariance_diagonal()


class ModeNotFoundError(ValueError):
    """The search found no point where the log posterior and its gradient are finite."""


def fit_laplace(minibatch_model, start=None, rng=None, structure=None):
    """The Laplace approximation of ``minibatch_model``'s full-data posterior.

    Parameters
    ----------
    minibatch_model : MinibatchModel
    start : ndarray, optional
        Where the first search starts (default: the model's initial point).
    rng : numpy.random.Generator, optional
        Jitters the starts of the retries (default: one seeded with ``RETRY_SEED``).
    structure : ParameterStructure, optional
        Default: :meth:`MinibatchModel.structure`.

    Returns
    -------
    LaplaceFit or DiagonalFit
        The latter where the exact curvature is out of reach (more than
        :data:`~pymc_minibatch.model.curvature.MAX_SHARED` coordinates touched by rows of
        more than one group, as the weights of a network):
        :mod:`pymc_minibatch.model.diagonal_fit`.

    Raises
    ------
    ModeNotFoundError
        If the log posterior or its gradient is not finite where the searches start (an
        improper posterior, or a start outside the support).

    Warns
    -----
    LaplaceFitWarning
        If no search ended at a mode.
    """
    mm = minibatch_model
    started, passes_before = time.perf_counter(), mm.full_data_passes
    structure = mm.structure() if structure is None else structure
    if needs_diagonal_fit(structure):
        return fit_diagonal(mm, structure, rng)
    rng = np.random.default_rng(RETRY_SEED) if rng is None else rng
    initial = mm.initial_theta() if start is None else np.asarray(start, dtype=np.float64)
    searches = []
    posterior, subsample = full_data_posterior(mm), draw_subsample(mm, structure)
    for attempt in range(1 + RETRIES):
        if attempt == 0:
            point = subsample_start(mm, initial, structure, subsample)
        else:
            point = initial + rng.uniform(-JITTER, JITTER, initial.size)
        search, structure = newton(posterior, point, structure)
        if search is not None:
            searches.append(search)
            if search.converged:
                break
    searches = [s for s in searches if np.isfinite(s.value)]
    if not searches:
        raise ModeNotFoundError(
            "the search for the posterior mode (Newton's method on the full data) found no "
            "point where the log posterior and its gradient are finite: the posterior may be "
            "improper or the initial point outside the support; give proper priors or "
            "initial values (initval=...) inside the support"
        )
    best = next((s for s in searches if s.converged), None)
    if best is None:
        best = max(searches, key=lambda s: s.value)
        warnings.warn(
            f"the Laplace fit found no mode of the posterior in {attempt + 1} searches "
            f"(the best ended with: {best.reason}); the samplers that start from it and are "
            "preconditioned by it (TunaMH, TFMH, the SG-MCMC presets, the particle methods) "
            "work from a poor approximation there: look at the model (an improper or "
            "multimodal posterior, a scale that collapses to zero), give initial values "
            "(initval=...), or compare against NUTS",
            LaplaceFitWarning,
            stacklevel=3,
        )
    factor, repaired = damped_cholesky(best.precision)
    precision = best.precision
    if not structure.local.size:  # a dense Hessian: check it at the posterior's scale
        precision, factor = _secant_curvature(mm, best.theta, precision, factor, subsample)
    return LaplaceFit(
        mode=best.theta,
        preconditioner=factor,
        precision=precision,
        structure=structure,
        repaired=repaired,
        is_mode=best.converged,
        decrement=best.decrement,
        starts=len(searches),
        passes=mm.full_data_passes - passes_before,
        seconds=time.perf_counter() - started,
    )


def _secant_curvature(minibatch_model, mode, precision, factor, subsample=None):
    """The curvature at the scale of the posterior, where the exact Hessian misses it.

    A likelihood with a kink (Laplace rows, ``|y - mu|``) has a Hessian that is zero almost
    everywhere: the exact curvature at the mode is the prior's alone, and the Laplace sds
    come out as the prior's, many times the posterior's. Secants of the full-data gradient
    see the kinks: along a random direction ``u`` of ``z``, ``-u' L' (g(mode + L u) -
    g(mode - L u)) / (2 |u|^2)`` is 1 for a Gaussian posterior and close to it for a smooth
    one. Where it is off by more than ``SECANT_RATIO``, the curvature is replaced by the
    secants of the gradient along each column of ``L`` (``2 d`` passes), symmetrised, and
    measured again at the new scale, up to ``SECANT_ROUNDS`` times.

    With a :class:`~pymc_minibatch.model.mode_search.Subsample`, the first check reads its
    rows only: a kink shows there as on all rows (the check is against a factor
    ``SECANT_RATIO``, far above the subsample's noise), and the replacement reads all rows."""
    mm = minibatch_model
    rng = np.random.default_rng(SECANT_SEED)  # the caller's stream is left as it was
    for round_ in range(SECANT_ROUNDS):
        direction = rng.standard_normal(mode.size)
        step = factor.to_theta(direction)
        if round_ == 0 and subsample is not None:
            change = (mm.grad_estimate(mode + step, subsample.idx)[1]
                      - mm.grad_estimate(mode - step, subsample.idx)[1])  # fmt: skip
        else:
            change = mm.logp_and_grad(mode + step)[1] - mm.logp_and_grad(mode - step)[1]
        ratio = -float(step @ change) / (2.0 * float(direction @ direction))
        if 1.0 / SECANT_RATIO <= ratio <= SECANT_RATIO or not np.isfinite(ratio):
            break
        columns = factor.to_theta(np.eye(mode.size))  # row j: L e_j
        secants = np.array(
            [
                mm.logp_and_grad(mode + column)[1] - mm.logp_and_grad(mode - column)[1]
                for column in columns
            ]
        )  # row j: 2 H L e_j, to first order
        hessian = np.linalg.solve(columns, secants) / 2.0  # secants = 2 L^T H
        dense = -0.5 * (hessian + hessian.T)
        precision = ArrowheadMatrix.from_dense(dense, precision.shared, precision.local)
        factor, _ = damped_cholesky(precision)
    return precision, factor
