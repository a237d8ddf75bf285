"""The Laplace approximation of a model's posterior: its mode and the exact curvature there.

Several samplers start from it and whiten the posterior with it: TunaMH and TFMH (the pCN
proposal, second-order control variates, the trust region), the stochastic-gradient samplers
(start and preconditioner) and the particle methods (start and preconditioner). It is
computed on all rows, once per :class:`MinibatchModel`:

1. which parameters each row touches (:mod:`pymc_minibatch.model.structure`): a block-arrowhead
   Hessian in hierarchical models, dense otherwise;
2. the mode ``theta_hat`` by Newton's method with the exact full-data Hessian
   (:mod:`pymc_minibatch.model.curvature`, one pass per Hessian) and a backtracking line
   search on the log posterior, damped (``P + lambda I``,
   :func:`~pymc_minibatch.kernels.arrowhead.damped_cholesky`) where the Hessian is not
   negative definite. A full Newton step is tried with the Hessian's own pass (its value
   decides the step), so an iteration costs one pass where Newton's method converges
   and one more per halving elsewhere. Without groups and on more than
   ``SUBSAMPLE_MIN_ROWS`` rows in memory, the search starts from the mode of a random
   subsample of ``SUBSAMPLE_ROWS`` rows, each counted ``N / n`` times (found without a
   pass over the data): a few sds from the full-data mode, which Newton's method then
   reaches in two or three passes. Where the decrement is below ``FINAL_STEP_DECREMENT``,
   the last Newton step is taken without a pass to check it;
3. the precision ``P``, minus the Hessian at the mode, factorised as ``P = R R^T``
   (:mod:`pymc_minibatch.kernels.arrowhead`): the preconditioner ``theta = L z``, ``L = R^-T``;
4. without groups, a check of ``P`` at the posterior's scale: a secant of the gradient along
   a random direction, one Laplace sd each way (two passes, or none on the subsample of
   step 2). A likelihood with kinks (Laplace rows) has a zero Hessian almost everywhere, so
   the exact ``P`` is the prior's; there the secants along every axis of ``L``, on all
   rows, replace it (see :func:`_secant_curvature`).

**A mode, or a warning.** The search has found a mode when Newton's decrement ``g^T P^-1 g``
is below ``FINAL_STEP_DECREMENT`` with ``P`` positive definite (it then takes that last
step). Where it has not (a saddle, a scale running off to zero in a hierarchical model, a
flat direction, an iteration limit), it starts again from ``RETRIES`` jittered initial
points. If none ends at a mode, the fit
keeps the best point found, makes its curvature positive definite (damping, reported as
``repaired``) and warns with :class:`LaplaceFitWarning`: a sampler that starts from it and is
preconditioned by it then runs on a poor approximation, which its user must know.

Every row contributes to the curvature, whatever the number of parameters: a curvature
estimated on a subsample misses the rows of rare categories and small groups, which leaves
their coefficients with the prior's scale and throws samplers thousands of posterior sds
out.
"""

import functools
import time
import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.arrowhead import ArrowheadFactor, ArrowheadMatrix, damped_cholesky
from pymc_minibatch.model.curvature import (
    Curvature,
    StructureMismatchError,
    full_data_curvature,
    subsample_curvature,
)
from pymc_minibatch.model.structure import ParameterStructure, all_shared

#: Newton's decrement ``g^T P^-1 g`` (twice the log-density still to gain, to second order)
#: below which a point where ``P`` is not positive definite is a saddle or a flat direction.
DECREMENT_TOLERANCE = 1e-9
#: Newton's decrement below which, with ``P`` positive definite, the last Newton step is
#: taken without a pass to check it and the search ends: near a mode Newton's method
#: converges quadratically (for a self-concordant log posterior the decrement after the
#: step is at most ``lambda^2 / (1 - sqrt(lambda))^4``, Boyd & Vandenberghe 2004, "Convex
#: Optimization", section 9.6.4: about 1e-12 here).
FINAL_STEP_DECREMENT = 1e-6
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
#: Rows of the subsample whose mode starts the search, and the fewest rows in memory for
#: which it is used (below, the passes are cheap), and its seed.
SUBSAMPLE_ROWS = 2**14
SUBSAMPLE_MIN_ROWS = 2**16
SUBSAMPLE_SEED = 20261205
#: Newton iterations per start.
MAX_ITERATIONS = 60
#: Iterations on the local coordinates alone before the joint ones, and their tolerance
#: (a start for the joint search, not a mode).
LOCAL_ITERATIONS = 20
LOCAL_TOLERANCE = 1e-3
#: Other starts tried (jittered initial points) when a search does not end at a mode.
RETRIES = 3
#: Jitter of those starts: uniform in ``[-JITTER, JITTER]`` around the initial point in the
#: transformed space (as PyMC's ``jitter+adapt_diag`` initialisation).
JITTER = 1.0
#: Armijo constant of the line search, and the smallest step fraction tried.
ARMIJO = 1e-4
MIN_STEP_FRACTION = 1e-10
#: Coordinates beyond this size in the transformed space: the search is running away.
RUNAWAY = 1e6


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
    """Whether the search ended at a mode (see the module docstring)."""
    decrement: float
    """Newton's decrement ``g^T P^-1 g`` at the last point where the curvature was
    computed (``mode``, or one Newton step before it, see ``FINAL_STEP_DECREMENT``)."""
    starts: int
    """Searches run (1 when the first ended at a mode)."""
    passes: int
    """Full-data passes spent (structure, Hessians and line-search evaluations)."""
    seconds: float

    def draw(self, rng, size=None):
        """Draws from the Laplace approximation ``N(theta_hat, L L^T)``, shape ``size + (d,)``."""
        shape = (self.mode.size,) if size is None else (size, self.mode.size)
        return self.mode + self.preconditioner.to_theta(rng.standard_normal(shape))

    def covariance_diagonal(self):
        """The variances of the Laplace approximation."""
        return self.preconditioner.covariance_diagonal()


class ModeNotFoundError(ValueError):
    """The search found no point where the log posterior and its gradient are finite."""


class _Posterior(NamedTuple):
    """What a search evaluates: the full-data posterior or a subsample's."""

    curvature: Callable
    """``(theta, structure) -> (Curvature, structure)``."""
    logp: Callable
    """``theta -> float``."""


def _full_data_posterior(minibatch_model):
    return _Posterior(functools.partial(_curvature, minibatch_model), minibatch_model.logp)


class _Subsample(NamedTuple):
    """``SUBSAMPLE_ROWS`` random rows (sorted), read once, each counted ``scale = N / n``
    times."""

    idx: np.ndarray
    rows: list
    scale: float


def _subsample(minibatch_model, structure):
    """A :class:`_Subsample`, or None when the model has groups (a subsample misses small
    ones), fewer than ``SUBSAMPLE_MIN_ROWS`` rows, or rows not in memory."""
    mm = minibatch_model
    if structure.local.size or mm.n_data < SUBSAMPLE_MIN_ROWS or mm.reads_chunks:
        return None
    rng = np.random.default_rng(SUBSAMPLE_SEED)
    idx = np.sort(rng.choice(mm.n_data, size=SUBSAMPLE_ROWS, replace=False))
    return _Subsample(idx, mm.gather_rows(idx), mm.n_data / SUBSAMPLE_ROWS)


def _subsample_posterior(minibatch_model, subsample):
    mm = minibatch_model

    def curvature(theta, structure):
        return subsample_curvature(mm, theta, subsample.rows, subsample.scale, structure), structure

    def logp(theta):
        return mm.logprior(theta) + subsample.scale * float(np.sum(mm.loglik(theta, subsample.idx)))

    return _Posterior(curvature, logp)


def _subsample_start(minibatch_model, initial, structure, subsample):
    """The mode of the subsample's posterior (see the module docstring), or ``initial``
    without a subsample or when that search fails."""
    if subsample is None:
        return initial
    search, _ = _newton(_subsample_posterior(minibatch_model, subsample), initial, structure)
    return search.theta if search is not None and search.converged else initial


class _Search(NamedTuple):
    theta: np.ndarray
    value: float
    gradient: np.ndarray
    precision: ArrowheadMatrix
    converged: bool
    reason: str
    decrement: float


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
    LaplaceFit

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
    rng = np.random.default_rng(RETRY_SEED) if rng is None else rng
    structure = mm.structure() if structure is None else structure
    initial = mm.initial_theta() if start is None else np.asarray(start, dtype=np.float64)
    searches = []
    posterior, subsample = _full_data_posterior(mm), _subsample(mm, structure)
    for attempt in range(1 + RETRIES):
        if attempt == 0:
            point = _subsample_start(mm, initial, structure, subsample)
        else:
            point = initial + rng.uniform(-JITTER, JITTER, initial.size)
        search, structure = _newton(posterior, point, structure)
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


def _curvature(minibatch_model, theta, structure):
    """:func:`full_data_curvature`, falling back to a dense structure when the prior ties
    groups together."""
    try:
        return full_data_curvature(minibatch_model, theta, structure), structure
    except StructureMismatchError:
        dense = all_shared(minibatch_model.ndim)
        return full_data_curvature(minibatch_model, theta, dense), dense


def _finite(curvature):
    return np.isfinite(curvature.value) and np.all(np.isfinite(curvature.gradient))


def _newton(posterior, theta, structure):
    """A damped Newton search on ``posterior`` (a :class:`_Posterior`) from ``theta``:
    ``(_Search or None, structure)``, None when the log posterior or its gradient is not
    finite at ``theta``.

    With local parameters, the groups' own ones move first, the shared ones held: from an
    initial point where every group effect sits at its population mean, a joint step
    shrinks the population scale towards zero, where a centred hierarchical density is
    unbounded, and the search runs there instead of to the mode."""
    curvature, structure = posterior.curvature(theta, structure)
    if not _finite(curvature):
        return None, structure
    if structure.local.size:
        search, structure = _iterate(posterior, theta, curvature, structure, local_only=True)
        if not np.isfinite(search.value):
            return search, structure
        theta = search.theta
        curvature = Curvature(search.value, search.gradient, search.precision)
    return _iterate(posterior, theta, curvature, structure, local_only=False)


def _iterate(posterior, theta, curvature, structure, local_only):
    """Newton iterations from ``theta`` (where ``curvature`` was computed), on the local
    coordinates alone or on all: ``(_Search, structure)``."""
    iterations, tolerance = (
        (LOCAL_ITERATIONS, LOCAL_TOLERANCE) if local_only
        else (MAX_ITERATIONS, DECREMENT_TOLERANCE)
    )  # fmt: skip
    decrement = np.inf

    def stop(reason, converged=False):
        value, gradient, precision = curvature
        return _Search(theta, value, gradient, precision, converged, reason, decrement), structure

    for _ in range(iterations):
        value, gradient, precision = curvature
        if not np.all(np.isfinite(precision.diagonal())):
            return stop("a curvature that is not finite")
        if local_only:
            gradient = gradient.copy()
            gradient[precision.shared] = 0.0
            precision = precision._replace(coupling=np.zeros_like(precision.coupling),
                                           shared_block=np.eye(precision.shared.size))  # fmt: skip
        factor, damped = damped_cholesky(precision)
        step = factor.solve(gradient)
        decrement = float(gradient @ step)
        if decrement <= tolerance and damped:
            return stop("a point where the Hessian is not negative definite (a saddle or a "
                        "flat direction)")  # fmt: skip
        if local_only and decrement <= tolerance:
            return stop("", converged=True)
        if not local_only and not damped and decrement <= max(tolerance, FINAL_STEP_DECREMENT):
            theta = theta + step  # its error is of the order of the decrement squared
            return stop("", converged=True)
        # the full step with its curvature (one pass); halvings by the log posterior alone
        candidate = theta + step
        at_candidate, structure = posterior.curvature(candidate, structure)
        fraction, candidate_value = 1.0, at_candidate.value
        while not candidate_value >= value + ARMIJO * fraction * decrement:  # True for NaN
            fraction *= 0.5
            if fraction < MIN_STEP_FRACTION:
                # no increase along a Newton direction: the gradient is at rounding level
                converged = not damped and decrement <= 1e3 * tolerance
                return stop("" if converged else "a line search that found no increase",
                            converged)  # fmt: skip
            candidate = theta + fraction * step
            candidate_value = posterior.logp(candidate)
        theta = candidate
        if np.max(np.abs(theta)) > RUNAWAY:
            return stop("a parameter running off to infinity in the transformed space (a "
                        "scale collapsing to zero or growing without bound)")  # fmt: skip
        if fraction < 1.0:
            at_candidate, structure = posterior.curvature(theta, structure)
        curvature = at_candidate
        if not _finite(curvature):
            return stop("a point where the gradient is not finite")
    return stop(f"no convergence in {iterations} Newton iterations")


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

    With a :class:`_Subsample`, the first check reads its rows only: a kink shows there as
    on all rows (the check is against a factor ``SECANT_RATIO``, far above the
    subsample's noise), and the replacement reads all rows."""
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
        secants = np.array([
            mm.logp_and_grad(mode + column)[1] - mm.logp_and_grad(mode - column)[1]
            for column in columns
        ])  # row j: 2 H L e_j, to first order
        hessian = np.linalg.solve(columns, secants) / 2.0  # secants = 2 L^T H
        dense = -0.5 * (hessian + hessian.T)
        precision = ArrowheadMatrix.from_dense(dense, precision.shared, precision.local)
        factor, _ = damped_cholesky(precision)
    return precision, factor
