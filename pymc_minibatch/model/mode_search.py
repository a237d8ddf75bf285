"""The search for the mode of a model's posterior, by Newton's method with the exact Hessian.

It serves the Laplace fit (:mod:`pymc_minibatch.model.laplace`), which starts it again from
jittered points when it does not end at a mode. One search, :func:`newton`:

1. Newton's method with the exact full-data Hessian (:mod:`pymc_minibatch.model.curvature`,
   one pass per Hessian) and a backtracking line search on the log posterior, damped
   (``P + lambda I``, :func:`~pymc_minibatch.kernels.arrowhead.damped_cholesky`) where the
   Hessian is not negative definite. A full Newton step is tried with the Hessian's own
   pass (its value decides the step), so an iteration costs one pass where Newton's method
   converges and one more per halving elsewhere;
2. with local parameters (a hierarchical model), the groups' own coordinates move first,
   the shared ones held, before the joint iterations: from an initial point where every
   group effect sits at its population mean, a joint step shrinks the population scale
   towards zero, where a centred hierarchical density is unbounded;
3. without groups and on more than ``SUBSAMPLE_MIN_ROWS`` rows in memory, the search starts
   from the mode of a random subsample of ``SUBSAMPLE_ROWS`` rows, each counted ``N / n``
   times (found without a pass over the data, :func:`subsample_start`): a few sds from the
   full-data mode, which Newton's method then reaches in two or three passes.

**When it ends at a mode.** The search has found a mode when Newton's decrement
``g^T P^-1 g`` is below ``FINAL_STEP_DECREMENT`` with ``P`` positive definite: it then takes
that last Newton step without a pass to check it. Otherwise it stops, and says why
(:attr:`Search.reason`), at a saddle or a flat direction (a decrement below
``DECREMENT_TOLERANCE`` where ``P`` is not positive definite), a line search that finds no
increase, a parameter running off to infinity in the transformed space (a scale collapsing
to zero), a curvature or gradient that is not finite, or after ``MAX_ITERATIONS``
iterations.
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.arrowhead import ArrowheadMatrix, damped_cholesky
from pymc_minibatch.model.curvature import (
    Curvature,
    StructureMismatchError,
    full_data_curvature,
    subsample_curvature,
)
from pymc_minibatch.model.structure import all_shared

#: Newton's decrement ``g^T P^-1 g`` (twice the log-density still to gain, to second order)
#: below which a point where ``P`` is not positive definite is a saddle or a flat direction.
DECREMENT_TOLERANCE = 1e-9
#: Newton's decrement below which, with ``P`` positive definite, the last Newton step is
#: taken without a pass to check it and the search ends: near a mode Newton's method
#: converges quadratically (for a self-concordant log posterior the decrement after the
#: step is at most ``lambda^2 / (1 - sqrt(lambda))^4``, Boyd & Vandenberghe 2004, "Convex
#: Optimization", section 9.6.4: about 1e-12 here).
FINAL_STEP_DECREMENT = 1e-6
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
#: Armijo constant of the line search, and the smallest step fraction tried.
ARMIJO = 1e-4
MIN_STEP_FRACTION = 1e-10
#: Coordinates beyond this size in the transformed space: the search is running away.
RUNAWAY = 1e6


class Posterior(NamedTuple):
    """What a search evaluates: the full-data posterior or a subsample's."""

    curvature: Callable
    """``(theta, structure) -> (Curvature, structure)``."""
    logp: Callable
    """``theta -> float``."""


def full_data_posterior(minibatch_model):
    """The :class:`Posterior` on all rows of ``minibatch_model``."""
    return Posterior(functools.partial(_curvature, minibatch_model), minibatch_model.logp)


class Subsample(NamedTuple):
    """``SUBSAMPLE_ROWS`` random rows (sorted), read once, each counted ``scale = N / n``
    times."""

    idx: np.ndarray
    rows: list
    scale: float


def draw_subsample(minibatch_model, structure):
    """A :class:`Subsample`, or None when the model has groups (a subsample misses small
    ones), fewer than ``SUBSAMPLE_MIN_ROWS`` rows, or rows not in memory."""
    mm = minibatch_model
    if structure.local.size or mm.n_data < SUBSAMPLE_MIN_ROWS or mm.reads_chunks:
        return None
    rng = np.random.default_rng(SUBSAMPLE_SEED)
    idx = np.sort(rng.choice(mm.n_data, size=SUBSAMPLE_ROWS, replace=False))
    return Subsample(idx, mm.gather_rows(idx), mm.n_data / SUBSAMPLE_ROWS)


def _subsample_posterior(minibatch_model, subsample):
    mm = minibatch_model

    def curvature(theta, structure):
        return subsample_curvature(mm, theta, subsample.rows, subsample.scale, structure), structure

    def logp(theta):
        return mm.logprior(theta) + subsample.scale * float(np.sum(mm.loglik(theta, subsample.idx)))

    return Posterior(curvature, logp)


def subsample_start(minibatch_model, initial, structure, subsample):
    """The mode of the subsample's posterior (see the module docstring), or ``initial``
    without a subsample or when that search fails."""
    if subsample is None:
        return initial
    search, _ = newton(_subsample_posterior(minibatch_model, subsample), initial, structure)
    return search.theta if search is not None and search.converged else initial


class Search(NamedTuple):
    """Where a search ended and the curvature there."""

    theta: np.ndarray
    value: float
    gradient: np.ndarray
    precision: ArrowheadMatrix
    converged: bool
    """Whether it ended at a mode (see the module docstring)."""
    reason: str
    """Why it ended elsewhere than at a mode (empty at a mode)."""
    decrement: float
    """Newton's decrement at the last point where the curvature was computed."""


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


def newton(posterior, theta, structure):
    """A damped Newton search on ``posterior`` (a :class:`Posterior`) from ``theta``:
    ``(Search or None, structure)``, None when the log posterior or its gradient is not
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
    coordinates alone or on all: ``(Search, structure)``."""
    iterations, tolerance = (
        (LOCAL_ITERATIONS, LOCAL_TOLERANCE) if local_only
        else (MAX_ITERATIONS, DECREMENT_TOLERANCE)
    )  # fmt: skip
    decrement = np.inf

    def stop(reason, converged=False):
        value, gradient, precision = curvature
        return Search(theta, value, gradient, precision, converged, reason, decrement), structure

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
