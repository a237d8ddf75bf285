"""One chain of a stochastic-gradient sampler: batches, dynamics in ``z``, resampling, checks.

Pure functions on :class:`~pymc_minibatch.kernels.sgmgt.SGState`. The dynamics of
:func:`~pymc_minibatch.kernels.sgmgt.euler_step` run in preconditioned coordinates ``z``
with ``theta = L z``; the log density is seen only through
``estimate(theta, idx) -> (log density, gradient)`` in ``theta``, an unbiased minibatch
estimate (plain or with control variates).

- :func:`init`: the state at a chain's start (a :class:`State`, the dynamics' state).
- :func:`gradient_noise`: the estimate's noise variance per coordinate of ``z`` (it sets the
  default step sizes).
- :func:`step`: ``n`` updates (next batch of the epoch, or a stratified batch; one Euler
  step, resampling when due, divergence check), stopping at the first divergence; its
  :class:`Info` holds every statistic of the last update.
- :func:`find_divergence`: a non-finite value, or a chain that ran away from its anchor
  (:func:`runaway_distance`, which the particle methods' kernel shares).
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import numba
import numpy as np

from pymc_minibatch.kernels import strata as stratified
from pymc_minibatch.kernels.batches import next_batch
from pymc_minibatch.kernels.noise import COMPILED_MIN_SIZE
from pymc_minibatch.kernels.sgmgt import (
    SGMGTConfig,
    SGState,
    euler_step,
    init_state,
    kinetic_energy,
    resample_momentum,
    resample_thermostat,
)

RUNAWAY_DISTANCE = 1e4
"""Preconditioned units from the anchor beyond which a chain has diverged."""

NOISE_BATCHES = 8
"""Batches per point when :func:`gradient_noise` measures the estimate's variance."""

Estimate = Callable[[np.ndarray, np.ndarray], tuple[float, np.ndarray]]

#: A chain's state is the dynamics' (position, momentum, thermostats, batch cursor, ...).
State = SGState


class SGSettings(NamedTuple):
    """What stays fixed along a chain."""

    config: SGMGTConfig
    schedule: Callable[[int], float]
    """Step size ``h`` at update ``t = 0, 1, ...``."""
    n_data: int
    batch_size: int
    momentum_resample_every: int | None = None
    thermostat_resample_every: int | None = None
    strata: stratified.Strata | None = None
    """Batches stratified by group (:mod:`pymc_minibatch.kernels.strata`; the estimate
    weighs their rows), else ``batch_size`` rows of an epoch."""


class Divergence(NamedTuple):
    """Why a chain stopped."""

    reason: str
    """``"non-finite <parts>"`` or ``"ran away"``."""
    coordinate: int | None
    """The coordinate of ``theta`` that moved furthest from the anchor (``None`` if none
    is finite)."""
    distance: float
    """Its move, in its own preconditioned sds."""


class Info(NamedTuple):
    """Statistics of the last update of :func:`step` (``resampled``: of any of them)."""

    updates: int
    """The chain's update count after it."""
    step_size: float
    log_density: float
    """The estimate of the log density at the point the gradient was taken (NaN when the
    chain diverged on an update that took the gradient alone)."""
    grad_norm: float
    """Euclidean norm of the gradient estimate in ``theta``'s units."""
    kinetic_energy: float
    thermostat_mean: float
    resampled: bool
    resample_accept_rate: float
    """Mean acceptance of the momentum resamplings made (NaN if none)."""
    divergence: Divergence | None
    start_gradient: np.ndarray
    """The estimate's gradient (in ``theta``) at the position the updates started from,
    an unbiased estimate of the score there (for the answer check)."""


def init(rng, start, anchor, preconditioner, config: SGMGTConfig) -> State:
    """The state of a new chain at ``theta = start``, measuring divergence from ``anchor``
    (a ``theta``; the state holds it in ``z``)."""
    to_z = preconditioner.to_z
    return init_state(rng, to_z(start), config, preconditioner=preconditioner, anchor=to_z(anchor))


def step(rng, state: State, estimate: Estimate, settings: SGSettings, n_updates: int = 1,
         gradient: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None):  # fmt: skip
    """``n_updates`` updates; returns ``(state, Info)``, stopping early at a divergence.

    ``gradient(theta, idx)``, if given, is ``estimate``'s gradient alone: every update but
    the last (whose log density :class:`Info` reports) calls it instead of ``estimate``.
    """
    accept_rates, resampled, start_gradient = [], False, None
    for remaining in range(n_updates - 1, -1, -1):
        gradient_only = None if remaining == 0 else gradient
        state, update, accept_rate = _update(rng, state, estimate, settings, gradient_only)
        if start_gradient is None:
            start_gradient = update["gradient"]
        resampled |= update["resampled"]
        accept_rates.extend(accept_rate)
        if update["divergence"] is not None:
            break
    info = Info(  # the per-update values of the last update; the rest from its state
        updates=state.updates,
        step_size=update["step_size"],
        log_density=np.nan if update["log_density"] is None else float(update["log_density"]),
        grad_norm=update["grad_norm"],
        kinetic_energy=kinetic_energy(state, settings.config),
        thermostat_mean=_thermostat_mean(state, settings.config),
        resampled=resampled,
        resample_accept_rate=float(np.mean(accept_rates)) if accept_rates else np.nan,
        divergence=update["divergence"],
        start_gradient=start_gradient,
    )
    return state, info


def _update(rng, state, estimate, settings, gradient=None):
    """One update: ``(state, values of the update, momentum acceptance rates)``; with
    ``gradient`` (the estimate's gradient alone) no log density (``None``)."""
    to_theta, to_z = state.preconditioner.to_theta, state.preconditioner.gradient_to_z
    idx, permutation, cursor = next_batch(
        rng, settings.n_data, settings.batch_size, settings.strata, state.permutation,
        state.cursor,
    )
    state = state._replace(permutation=permutation, cursor=cursor)
    update = {"step_size": float(settings.schedule(state.updates))}

    def gradient_in_z(z):
        if gradient is None:
            update["log_density"], grad = estimate(to_theta(z), idx)
        else:
            update["log_density"], grad = None, gradient(to_theta(z), idx)
        update["gradient"] = grad
        update["grad_norm"] = math.sqrt(grad @ grad)
        return to_z(grad)

    with np.errstate(over="ignore", invalid="ignore"):  # reported by find_divergence
        state, _ = euler_step(rng, state, gradient_in_z, update["step_size"], settings.config)
        state = state._replace(updates=state.updates + 1)
        update["divergence"] = find_divergence(state, update["log_density"], update["grad_norm"])
    update["resampled"], accept_rates = False, []
    if update["divergence"] is None:
        state, update["resampled"], accept_rates = _resample(rng, state, settings)
    return state, update, accept_rates


def _resample(rng, state, settings):
    """Redraw the momentum and the thermostats when their periods come round."""
    if settings.config.kinetics is None:
        return state, False, []
    resampled, accept_rates = False, []
    period = settings.momentum_resample_every
    if period is not None and state.updates % period == 0:
        state, accept_rate = resample_momentum(rng, state, settings.config)
        resampled = True
        accept_rates.append(accept_rate)
    period = settings.thermostat_resample_every
    if period is not None and state.updates % period == 0:
        state = resample_thermostat(rng, state)
        resampled = True
    return state, resampled, accept_rates


def _thermostat_mean(state, config):
    if config.kinetics is None or config.gamma == 0:
        return np.nan
    return float(np.mean(state.thermostat))


def find_divergence(state: SGState, log_density, grad_norm) -> Divergence | None:
    """A non-finite log density (unless ``None``: not computed), gradient or state, or a
    position more than ``RUNAWAY_DISTANCE`` preconditioned units from the anchor (an
    unstable step can grow without ever overflowing); ``None`` if the chain is fine."""
    # one pass answers for a chain that is fine; the parts are checked one by one only when
    # it is not, which keeps the check at a few microseconds per update
    log_density = 0.0 if log_density is None else log_density
    with np.errstate(invalid="ignore", over="ignore"):
        if math.isfinite(log_density + grad_norm) and _finite_and_near(state):
            return None
        parts = {"log density": log_density, "gradient": grad_norm, "position": state.position}
        if state.momentum is not None:
            parts.update(momentum=state.momentum, thermostat=state.thermostat)
        bad = [name for name, value in parts.items() if not np.all(np.isfinite(value))]
        if bad:
            return Divergence(f"non-finite {', '.join(bad)}", *largest_move(state))
        if np.abs(state.position - state.anchor).max() > RUNAWAY_DISTANCE:
            return Divergence("ran away", *largest_move(state))
    return None  # (a sum that overflowed)


def _finite_and_near(state: SGState) -> bool:
    """Whether the position, momentum and thermostats are finite and the position within
    ``RUNAWAY_DISTANCE`` of the anchor: one compiled pass on big models."""
    position, anchor = state.position, state.anchor
    momentum, thermostat = (state.momentum, state.thermostat) if state.momentum is not None else (
        _NOTHING, _NOTHING)  # fmt: skip
    if position.size >= COMPILED_MIN_SIZE and position.shape == np.shape(anchor):
        return _compiled_finite_and_near(position, anchor, momentum, thermostat, RUNAWAY_DISTANCE)
    # NaN fails the comparison; a sum is finite only if every term is (inf - inf is NaN)
    near = np.abs(position - anchor).max() <= RUNAWAY_DISTANCE
    return bool(near and math.isfinite(momentum.sum() + thermostat.sum()))


_NOTHING = np.empty(0)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _compiled_finite_and_near(position, anchor, momentum, thermostat, limit):
    # `&` on comparisons, not a sum or a max: a reduction LLVM vectorises in IEEE arithmetic
    fine = True
    for i in range(position.size):
        fine &= abs(position[i] - anchor[i]) <= limit  # False for NaN and inf too
    for i in range(momentum.size):
        fine &= (abs(momentum[i]) < math.inf) & (abs(thermostat[i]) < math.inf)
    return fine


def runaway_distance(position, anchor):
    """The largest distance of ``position`` from ``anchor`` (both in ``z``; any shape, e.g.
    one chain's ``(d,)`` or particles' ``(M, d)``) when it is beyond ``RUNAWAY_DISTANCE`` or
    not finite, else ``None``."""
    if position.size >= COMPILED_MIN_SIZE and position.shape == np.shape(anchor):
        distance = _max_abs_difference(position.reshape(-1), np.reshape(anchor, -1))
    else:
        distance = float(np.abs(position - anchor).max())
    return None if distance <= RUNAWAY_DISTANCE else distance


@numba.njit(cache=True, nogil=True)
def _max_abs_difference(a, b):
    """``np.abs(a - b).max()`` in one pass (NaN if any difference is NaN)."""
    largest = 0.0
    for i in range(a.size):
        difference = abs(a[i] - b[i])
        if difference != difference:
            return difference
        largest = max(largest, difference)
    return largest


def largest_move(state: SGState):
    """``(coordinate, distance)``: the coordinate of ``theta`` furthest from the anchor, in
    its own preconditioned sds (``(None, nan)`` if no move is finite)."""
    to_theta = state.preconditioner.to_theta
    move = to_theta(state.position - state.anchor)
    scale = np.sqrt(np.sum(to_theta(np.eye(move.size)) ** 2, axis=1))  # sd of each theta_d
    moves = np.abs(move) / scale
    if not np.any(np.isfinite(moves)):
        return None, np.nan
    index = int(np.nanargmax(np.where(np.isfinite(moves), moves, -np.inf)))
    return index, float(moves[index])


def gradient_noise(rng, estimate: Estimate, preconditioner, points, n_data, batch_size,
                   strata=None):  # fmt: skip
    """The estimate's noise variance per coordinate of ``z``, largest over coordinates.

    At each of ``points`` (rows of ``theta``), ``NOISE_BATCHES`` batches of ``batch_size``
    distinct rows (or stratified batches, with ``strata``) give gradient estimates; their
    sample variance in ``z`` is averaged over the points. Points where an estimate is not
    finite are skipped; returns NaN if none is left. With plain minibatch gradients in
    whitened coordinates this is about ``N / batch_size - 1``; with control variates it is
    O(1) or smaller.
    """
    variances = []
    for theta in points:
        values, grads = [], []
        for _ in range(NOISE_BATCHES):
            idx = (
                rng.choice(n_data, size=batch_size, replace=False)
                if strata is None
                else stratified.draw(rng, strata)
            )
            value, grad = estimate(theta, idx)
            values.append(value)
            grads.append(preconditioner.gradient_to_z(grad))
        if np.all(np.isfinite(values)) and np.all(np.isfinite(grads)):
            variances.append(np.var(grads, axis=0, ddof=1))
    if not variances:
        return np.nan
    return float(np.max(np.mean(variances, axis=0)))
