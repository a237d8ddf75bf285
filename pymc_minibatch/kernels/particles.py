"""The kernel of the interacting-particle samplers: one step of all particles (NumPy).

Chen, Zhang, Wang, Li & Chen (2018), "A unified particle-optimization framework for scalable
Bayesian sampling", UAI (the docs page "Particle methods"): every method moves all ``M``
particles at once by ``step_size`` times a velocity field of
:mod:`pymc_minibatch.kernels.particle_velocities` (SVGD, w-SGLD, w-SGLD-B, pi-SGLD).

The move is the kernel :func:`init` / :func:`step` on a :class:`ParticleState`
(exported as ``State``, ``Info``, ``init`` and ``step``): one step draws the next batch of
an epoch without replacement (:func:`~pymc_minibatch.kernels.batches.next_epoch_batch`) or
a batch stratified by group (:mod:`pymc_minibatch.kernels.strata`), estimates the
gradients at every particle, and moves them all by ``step_size`` times the method's
velocity field, with AdaGrad and heavy-ball momentum if set; a particle that runs away is
found by the SG-MCMC chain's check
(:func:`~pymc_minibatch.kernels.sg_chain.runaway_distance`).
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import numba
import numpy as np

from pymc_minibatch.kernels import strata as stratified
from pymc_minibatch.kernels.batches import next_batch
from pymc_minibatch.kernels.particle_velocities import (
    blob_velocity,
    coordinate_bandwidths,
    coordinate_svgd_velocity,
    group_spread_velocity,
    linear_svgd_velocity,
    median_bandwidth,
    pisgld_velocity,
    squared_distances,
    svgd_velocity,
    wasserstein_velocity,
)
from pymc_minibatch.kernels.sg_chain import runaway_distance

METHODS = ("svgd", "wsgld", "wsgld_blob", "pisgld")

ADAGRAD_DECAY, ADAGRAD_FUDGE = 0.9, 1e-6
"""AdaGrad's exponential average of the squared velocities and the constant added to its
root, as in Liu & Wang's (2016) SVGD code."""

COORDINATE_BANDWIDTH_EVERY = 10
"""Steps between updates of the per-coordinate kernel's bandwidths (``kernel="coordinates"``):
their medians over the ``M (M - 1) / 2`` pairs in every coordinate cost more than the
velocity itself, while the particles' spread, which they follow, changes little in ten
steps. The joint kernel's single median is updated every step."""

Estimate = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""``estimate(thetas, idx) -> (log densities (M,), gradients (M, d))`` in ``theta``: an
unbiased minibatch estimate at every particle on the batch of rows of indices ``idx``."""


class ParticleSettings(NamedTuple):
    """What stays fixed along a run (``method`` is one of ``METHODS``)."""

    method: str
    kernel: str
    """``"joint"`` (the RBF on the whole vector) or ``"coordinates"`` (SVGD only)."""
    bandwidth_scale: float
    """Multiple of the median heuristic."""
    schedule: Callable[[int], float]
    """Step size at step ``t = 0, 1, ...``."""
    preconditioner: object
    """``theta = L z`` (:mod:`~pymc_minibatch.kernels.preconditioning`); particles move in ``z``."""
    n_data: int
    batch_size: int
    """Rows per step (``n_data``: every row, not shuffled)."""
    wasserstein_weight: float = 0.0
    """``gamma`` of the Wasserstein term (w-SGLD, pi-SGLD)."""
    entropic_reg: float | None = None
    """``lambda`` of the Wasserstein term (``None``: the bandwidth)."""
    adagrad: bool = False
    momentum: float = 0.0
    """The heavy ball's ``beta``, over the first ``momentum_steps`` steps."""
    momentum_steps: int = 0
    groups: tuple[np.ndarray, np.ndarray] | None = None
    """``(shared, local)`` coordinates of a hierarchical model, ``local`` of shape ``(G,
    k)`` with a group's coordinates in a row (``kernel="coordinates"``: the groups' spread
    follows the shared coordinates, :func:`group_spread_velocity`, and the linear part
    matches the covariances within each group, :func:`linear_svgd_velocity`), or
    ``None``."""
    strata: stratified.Strata | None = None
    """Batches stratified by group (:mod:`pymc_minibatch.kernels.strata`; the estimate
    weighs their rows by ``strata.weights``), or ``None`` for epochs of uniform batches."""


class ParticleState(NamedTuple):
    """The particles and what their next step needs."""

    position: np.ndarray
    """``z``, shape ``(M, d)``."""
    previous: np.ndarray
    """``z`` one step earlier (the start at first): the Wasserstein term's previous iterate."""
    momentum: np.ndarray
    """The heavy ball's ``m_t = beta m_(t-1) + v_t`` (zero without momentum)."""
    squares: np.ndarray | None
    """AdaGrad's exponential average of the squared velocities (``None`` before the first)."""
    bandwidths: np.ndarray | None
    """The per-coordinate kernel's bandwidths, carried between their updates (``None`` for
    the joint kernel, whose bandwidth is recomputed every step)."""
    anchor: np.ndarray
    """``z`` at the start, from which a runaway is measured."""
    steps: int = 0
    permutation: np.ndarray | None = None
    """The current epoch's order of the rows (``None``: no epoch started)."""
    cursor: int = 0
    """Rows of the epoch used so far."""


class ParticleDivergence(NamedTuple):
    """Why a step stopped the run: ``"non-finite"`` (a log density or gradient, before the
    move) at ``particles`` particles, or ``"ran away"``: ``distance`` preconditioned units
    from the start, the furthest in ``theta``'s ``coordinate``, ``sds`` of its own sds."""

    reason: str
    particles: int
    distance: float
    coordinate: int | None
    sds: float


class ParticleInfo(NamedTuple):
    """What a step reports."""

    step_size: float
    bandwidth: float
    """The kernel's bandwidth (median over coordinates for the per-coordinate kernel)."""
    log_density: np.ndarray
    """The minibatch estimates of the log density at the particles, before the move."""
    mean_grad_norm: float
    """Mean over particles of the gradient's norm in ``theta``'s units."""
    mean_velocity_norm: float
    spread: float
    """Root mean variance of the particles before the move, in ``z``."""
    drift: np.ndarray
    """The particles' mean velocity, shape ``(d,)``."""
    spread_rate: float
    """``d log(rms distance to the particles' mean) / dt`` under the velocity."""
    divergence: ParticleDivergence | None


def init(thetas, preconditioner) -> ParticleState:
    """The state of particles at their start.

    Parameters
    ----------
    thetas : ndarray, shape (M, d)
        The particles in ``theta``.
    preconditioner
        ``theta = L z`` (:mod:`pymc_minibatch.kernels.preconditioning`), as in the settings.

    Returns
    -------
    ParticleState
        In ``z``, with no momentum, AdaGrad average, bandwidths or epoch yet.
    """
    z = preconditioner.to_z(thetas)
    return ParticleState(position=z, previous=z.copy(), momentum=np.zeros_like(z),
                         squares=None, bandwidths=None, anchor=z.copy())  # fmt: skip


def next_idx(rng, state: ParticleState, settings: ParticleSettings):
    """``(idx, state)``: the indices of the next batch of the epoch, or of a stratified batch
    (``settings.strata``), or of every row when a batch holds them all (then without
    drawing from ``rng``)."""
    if settings.strata is None and settings.batch_size == settings.n_data:
        return np.arange(settings.n_data), state
    idx, permutation, cursor = next_batch(
        rng, settings.n_data, settings.batch_size, settings.strata, state.permutation,
        state.cursor,
    )
    return idx, state._replace(permutation=permutation, cursor=cursor)


def step(rng, state: ParticleState, estimate: Estimate, settings: ParticleSettings):
    """One step of all particles.

    The velocity ``v`` of ``settings.method`` (:func:`svgd_velocity` with Liu & Wang's
    2016 kernel, or :func:`coordinate_svgd_velocity` plus :func:`linear_svgd_velocity`,
    with each group's coordinates as a block and :func:`group_spread_velocity` when
    ``settings.groups`` is set;
    :func:`wasserstein_velocity`, :func:`blob_velocity` or :func:`pisgld_velocity` of Chen
    et al. 2018), divided by AdaGrad's root mean square if set, moves the particles by
    ``step_size * v``, or during the first ``momentum_steps`` by ``step_size * m`` with
    ``m = beta m + v``. The linear and group-spread parts of the per-coordinate kernel are
    added outside the heavy ball. When the log density or a gradient is not finite, the
    particles are not moved; when they move more than ``sg_chain.RUNAWAY_DISTANCE``
    preconditioned units from the start, the state is the one reached. Either is reported
    in ``divergence``.

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws the epochs' permutations of the rows or the stratified batches (nothing when
        a batch holds every row).
    state : ParticleState
    estimate : callable
        ``estimate(thetas, idx) -> (log densities (M,), gradients (M, d))`` in ``theta``.
    settings : ParticleSettings

    Returns
    -------
    state : ParticleState
    info : ParticleInfo
    """
    step_size = float(settings.schedule(state.steps))
    idx, state = next_idx(rng, state, settings)
    preconditioner, z = settings.preconditioner, state.position
    logp, grads = estimate(preconditioner.to_theta(z), idx)
    # each gradient's squared norm, in one pass: not finite where an entry is not (or where
    # they overflow, which the entries themselves then decide)
    grad_squares = np.einsum("ij,ij->i", grads, grads)
    bad = ~np.isfinite(logp)
    if not np.all(np.isfinite(grad_squares)):
        bad |= ~np.all(np.isfinite(grads), axis=1)
    if bad.any():
        divergence = ParticleDivergence("non-finite", int(bad.sum()), np.nan, None, np.nan)
        return state, _stopped(step_size, logp, divergence)
    grads_z = preconditioner.gradient_to_z(grads)
    bandwidths, sq_dists = state.bandwidths, None
    if settings.kernel == "joint":
        sq_dists = squared_distances(z, z)  # for the bandwidth and the velocity
        bandwidth = settings.bandwidth_scale * median_bandwidth(sq_dists)
    else:
        if state.steps % COORDINATE_BANDWIDTH_EVERY == 0:
            bandwidths = settings.bandwidth_scale * coordinate_bandwidths(z)
        bandwidth = bandwidths
    velocity = _velocity(settings, z, state.previous, grads_z, bandwidth, sq_dists)
    squares = state.squares
    if settings.adagrad:
        squares = velocity**2 if squares is None else (
            ADAGRAD_DECAY * squares + (1 - ADAGRAD_DECAY) * velocity**2
        )  # fmt: skip
        velocity = velocity / (ADAGRAD_FUDGE + np.sqrt(squares))
    move, carried = velocity, state.momentum
    if state.steps < settings.momentum_steps:
        carried = settings.momentum * carried + velocity
        move = carried
    if settings.kernel == "coordinates":
        # the moment-matching parts, outside the heavy ball, which would amplify their pull on
        # a coordinate whose particles are close together
        if settings.groups is None:
            linear = linear_svgd_velocity(z, grads_z)
        else:
            shared, local = settings.groups
            linear = linear_svgd_velocity(z, grads_z, blocks=local)
            linear = linear + group_spread_velocity(z, grads_z, shared, local)
        move, velocity = move + linear, velocity + linear
    moved = z + step_size * move
    state = state._replace(position=moved, previous=z, momentum=carried, squares=squares,
                           bandwidths=bandwidths, steps=state.steps + 1)  # fmt: skip
    drift, spread, rate, velocity_norms = _velocity_moments(z, velocity)
    info = ParticleInfo(
        step_size=step_size,
        bandwidth=np.median(bandwidth),
        log_density=logp,
        mean_grad_norm=np.mean(np.sqrt(grad_squares)),
        mean_velocity_norm=np.mean(velocity_norms),
        spread=spread,
        drift=drift,
        spread_rate=rate,
        divergence=_runaway(moved, state.anchor, preconditioner),
    )
    return state, info


def _velocity(settings, z, previous, grads, bandwidth, sq_dists):
    lam = bandwidth if settings.entropic_reg is None else settings.entropic_reg
    gamma = settings.wasserstein_weight
    if settings.kernel == "coordinates":
        return coordinate_svgd_velocity(z, grads, bandwidth)
    if settings.method == "svgd":
        return svgd_velocity(z, grads, bandwidth, sq_dists)
    if settings.method == "wsgld_blob":
        return blob_velocity(z, grads, bandwidth, sq_dists)
    if settings.method == "wsgld":
        return wasserstein_velocity(z, previous, grads, lam, gamma)
    return pisgld_velocity(z, previous, grads, bandwidth, lam, gamma, sq_dists)


def _stopped(step_size, logp, divergence):
    """The info of a step that did not move the particles."""
    return ParticleInfo(step_size, math.nan, logp, math.nan, math.nan, math.nan,
                        None, math.nan, divergence)  # fmt: skip


def _runaway(z, anchor, preconditioner):
    """A :class:`ParticleDivergence` naming the coordinate of ``theta`` that moved furthest,
    in its own sds, when the particles ran away; else ``None``."""
    distance = runaway_distance(z, anchor)
    if distance is None:
        return None
    scale = np.sqrt(preconditioner.covariance_diagonal())
    moves = np.max(np.abs(preconditioner.to_theta(z - anchor)), axis=0) / scale
    worst = int(np.argmax(np.where(np.isnan(moves), np.inf, moves)))
    return ParticleDivergence("ran away", 0, distance, worst, float(moves[worst]))


def _velocity_moments(z, velocity):
    """The particles' mean velocity, their root mean variance, the relative rate at which
    it changes, ``d log(rms distance to their mean) / dt``, and the velocities' norms."""
    drift, squares, products, velocity_squares = _centred_moments(
        np.ascontiguousarray(z), np.ascontiguousarray(velocity))  # fmt: skip
    rate = products / squares if squares > 0 else 0.0
    return drift, math.sqrt(squares / z.size), rate, np.sqrt(velocity_squares)


MOMENT_BLOCK = 1024
"""Columns per block of :func:`_centred_moments`, whose particles' values stay in cache
between the block's two passes (its means, then the centred sums)."""


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _centred_moments(z, velocity):
    """``(mean velocity, sum (z - mean)^2, sum (z - mean)(velocity - its mean), each
    velocity's squared norm)`` over the particles (rows), reading each array once from
    memory (NumPy would make about ten passes over the ``(M, d)`` arrays)."""
    n, d = z.shape
    drift, means, velocity_squares = np.zeros(d), np.zeros(d), np.zeros(n)
    squares = products = 0.0
    for start in range(0, d, MOMENT_BLOCK):
        stop = min(start + MOMENT_BLOCK, d)
        mean, mean_velocity = means[start:stop], drift[start:stop]
        for i in range(n):
            row, row_velocity = z[i, start:stop], velocity[i, start:stop]
            for k in range(row.size):
                mean[k] += row[k]
                mean_velocity[k] += row_velocity[k]
        mean /= n
        mean_velocity /= n
        for i in range(n):
            row, row_velocity, row_squares = z[i, start:stop], velocity[i, start:stop], 0.0
            for k in range(row.size):
                centred = row[k] - mean[k]
                squares += centred * centred
                products += centred * (row_velocity[k] - mean_velocity[k])
                row_squares += row_velocity[k] * row_velocity[k]
            velocity_squares[i] += row_squares
    return drift, squares, products, velocity_squares


State, Info = ParticleState, ParticleInfo
