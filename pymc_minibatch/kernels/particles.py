"""Velocity fields of the interacting-particle samplers (pure NumPy, vectorised over particles).

Chen, Zhang, Wang, Li & Chen (2018), "A unified particle-optimization framework for scalable
Bayesian sampling", UAI (the docs page "Particle methods"). Every method moves
all ``M`` particles ``theta`` (shape ``(M, d)``) at once by ``theta += step_size * velocity``,
where ``grads`` holds (minibatch estimates of) ``grad log p`` at each particle.

The kernel is the RBF ``k(a, b) = exp(-|a - b|^2 / h)``; :func:`median_bandwidth` gives the
median heuristic ``h = med(|theta_i - theta_j|^2) / log(M + 1)`` of Liu & Wang (2016), "Stein
variational gradient descent: a general purpose Bayesian inference algorithm", NeurIPS (their
code uses ``log(M + 1)``, which keeps ``h`` finite for two particles).

:func:`coordinate_svgd_velocity` is SVGD with one RBF kernel per coordinate (a diagonal
matrix-valued kernel), for dimensions above the particle count, where the joint kernel's
repulsion fades and the particles collapse towards the mode.

The move itself is the kernel :func:`init` / :func:`step` on a :class:`ParticleState`
(exported as ``State``, ``Info``, ``init`` and ``step``): one step draws the next batch of
an epoch without replacement (:func:`~pymc_minibatch.kernels.batches.next_epoch_batch`),
estimates the gradients at every particle, and moves them all by ``step_size`` times a
velocity field above, with AdaGrad and heavy-ball momentum if set; a particle that runs
away is found by the SG-MCMC chain's check
(:func:`~pymc_minibatch.kernels.sg_chain.runaway_distance`).
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.batches import next_epoch_batch
from pymc_minibatch.kernels.sg_chain import runaway_distance


def squared_distances(a, b):
    """``|a_i - b_j|^2`` for every pair of rows, shape ``(len(a), len(b))``."""
    difference = a[:, None, :] - b[None, :, :]
    return np.einsum("ijk,ijk->ij", difference, difference)


def median_bandwidth(sq_dists):
    """The median heuristic ``med(|theta_i - theta_j|^2, i < j) / log(M + 1)``.

    Falls back to 1 when all particles coincide (the median is 0), so that the kernel
    stays defined and the repulsion can separate them.
    """
    n = sq_dists.shape[0]
    pairs = sq_dists[np.triu_indices(n, k=1)]
    median = np.median(pairs) if pairs.size else 0.0
    return float(median / np.log(n + 1)) if median > 0 else 1.0


def _kernel_repulsion(theta, weights, bandwidth):
    """``(2 / h) sum_j w_ij (theta_i - theta_j)``: minus the kernel gradients, weighted."""
    return (2.0 / bandwidth) * (theta * weights.sum(axis=1, keepdims=True) - weights @ theta)


def svgd_velocity(theta, grads, bandwidth):
    """Stein variational gradient ``phi(theta_i)`` (Liu & Wang 2016, eq. 8).

    ``phi_i = (1/M) sum_j [k(theta_j, theta_i) grad_j + grad_{theta_j} k(theta_j, theta_i)]``:
    a kernel-smoothed gradient plus a repulsion between particles.
    """
    kernel = np.exp(-squared_distances(theta, theta) / bandwidth)
    return (kernel @ grads + _kernel_repulsion(theta, kernel, bandwidth)) / theta.shape[0]


COORDINATE_CHUNK = 2**21
"""Pair-coordinate entries (``M^2`` times coordinates) handled at once by
:func:`coordinate_svgd_velocity` (16 MB per float64 array)."""


def coordinate_bandwidths(theta):
    """The median heuristic per coordinate: ``med((theta_ij - theta_lj)^2, i < l) /
    log(M + 1)`` for each ``j`` (1 where the particles coincide in ``j``), shape ``(d,)``."""
    n, d = theta.shape
    upper = np.triu_indices(n, k=1)
    medians = np.empty(d)
    for cols in _column_chunks(n, d):
        difference = theta[:, None, cols] - theta[None, :, cols]
        medians[cols] = np.median(difference[upper] ** 2, axis=0) if n > 1 else 0.0
    return np.where(medians > 0, medians, np.log(n + 1)) / np.log(n + 1)


def coordinate_svgd_velocity(theta, grads, bandwidths):
    """SVGD with the kernel ``K(a, b) = diag_j exp(-(a_j - b_j)^2 / h_j)``.

    ``phi_j(theta_i) = (1/M) sum_l k_j(theta_lj, theta_ij) [grad_lj + 2 (theta_ij -
    theta_lj) / h_j]``: Liu & Wang's (2016) velocity with a matrix-valued kernel (Wang,
    Tang, Bajaj & Liu 2019, "Stein variational gradient descent with matrix-valued
    kernels", NeurIPS), here the sliced kernel of Gong, Li & Hernandez-Lobato (2021,
    "Sliced kernelized Stein discrepancy", ICLR) with the coordinate axes as slices. Each
    coordinate's repulsion acts in one dimension, so it does not fade as ``d`` grows past
    ``M``, the collapse of the joint kernel (Ba et al. 2021, "Understanding the variance
    collapse of SVGD in high dimensions", ICLR). Its fixed points match each coordinate's
    marginal score, which suits preconditioned coordinates, where the posterior is close
    to independent. With ``M`` particles they are narrower than the target in every
    coordinate; :func:`linear_svgd_velocity` adds the correction.
    """
    n, d = theta.shape
    velocity = np.empty_like(theta)
    # Single precision halves the cost of the M^2 d exponentials; its rounding (1e-7
    # relative) is far below the minibatch gradients' noise.
    theta32, grads32 = theta.astype(np.float32), grads.astype(np.float32)
    bandwidths32 = bandwidths.astype(np.float32)
    for cols in _column_chunks(n, d):
        difference = theta32[:, None, cols] - theta32[None, :, cols]  # (i, l, j): theta_i - theta_l
        weights = np.exp(-(difference**2) / bandwidths32[cols])
        drive = np.einsum("ilj,lj->ij", weights, grads32[:, cols])
        repulsion = np.einsum("ilj,ilj->ij", weights, difference) * (2.0 / bandwidths32[cols])
        velocity[:, cols] = (drive + repulsion) / n
    return velocity


LINEAR_WEIGHT = 0.25
"""Weight ``w`` of :func:`linear_svgd_velocity` beside :func:`coordinate_svgd_velocity`.

On N(0, I_50) with 100 particles (1500 steps of 0.05 from exact draws, exact gradients)
the particles' variance is 0.962 of the target's with the RBF kernel alone and 0.994 with
this weight (``tests/kernels/test_particles.py`` asserts both); weight 1 brings it to
0.998 on that target, but its term, an average over the particles in each coordinate,
carries the minibatch gradients' noise into every particle's spread, which a smaller
weight damps while keeping most of the correction."""


def linear_svgd_velocity(theta, grads, weight=None):
    """SVGD's velocity for the kernel ``K(a, b) = diag_j w (1 + (a_j - m_j)(b_j - m_j) /
    s_j^2)``, ``m_j`` and ``s_j^2`` the particles' mean and variance in coordinate ``j``
    and ``w = weight`` (default ``LINEAR_WEIGHT``, read at each call):

    ``phi_j(theta_i) = w mean_l(grad_lj) + w (theta_ij - m_j) / s_j^2 [mean_l((theta_lj -
    m_j) grad_lj) + 1]``.

    Added to :func:`coordinate_svgd_velocity`, it is SVGD with the sum of the two kernels.
    It vanishes where the particles satisfy Stein's identities ``mean(grad_j) = 0`` and
    ``mean((theta_j - m_j) grad_j) = -1``, as the posterior does, and drives them there
    otherwise: linear features in the kernel make SVGD match first and second moments (Liu
    & Wang 2018, "Stein variational gradient descent as moment matching", NeurIPS). Without
    it a hierarchical model's group scale, set by the spread of many groups' effects, adds
    up their shortfalls: on the 1000-group model of ``benchmarks/particle_momentum.py`` it
    settled 0.3 posterior sd low.
    """
    weight = LINEAR_WEIGHT if weight is None else weight
    centred = theta - theta.mean(axis=0)
    variances = np.mean(centred**2, axis=0)
    variances = np.where(variances > 0, variances, 1.0)
    return weight * (
        grads.mean(axis=0) + centred / variances * (np.mean(centred * grads, axis=0) + 1.0)
    )


def _column_chunks(n, d):
    width = max(1, COORDINATE_CHUNK // (n * n))
    return [slice(start, min(start + width, d)) for start in range(0, d, width)]


def blob_velocity(theta, grads, bandwidth):
    """w-SGLD-B: ``grad_i`` plus the blob approximation of ``-grad log mu`` (paper eq. 22).

    With ``E_2 = int mu log(mu * K)`` (Carrillo, Craig & Patacchini 2019), the entropy
    force on particle ``i`` is
    ``-sum_j grad_i K_ij / sum_l K_jl - sum_j grad_i K_ij / sum_l K_il``.
    """
    kernel = np.exp(-squared_distances(theta, theta) / bandwidth)
    density = kernel.sum(axis=1)  # > 0: each particle's own term is 1
    by_neighbour = kernel / density[None, :]
    by_self = kernel / density[:, None]
    return (
        grads
        + _kernel_repulsion(theta, by_neighbour, bandwidth)
        + _kernel_repulsion(theta, by_self, bandwidth)
    )


def wasserstein_term(theta, previous, lam):
    """The entropy-regularised W2 term of paper eq. (21), without its weight ``gamma``.

    ``sum_j (d_ij / lam - 1) exp(-d_ij / lam) (previous_j - theta_i)`` with
    ``d_ij = |theta_i - previous_j|^2`` to the particles of the previous iterate (the
    paper's fixed ``gamma`` replaces the Sinkhorn scalings ``u_i v_j``). A particle is
    pulled towards previous particles farther than ``sqrt(lam)`` and pushed away from nearer
    ones (its own previous position among them, which acts as momentum).
    """
    sq_dists = squared_distances(theta, previous)
    weights = (sq_dists / lam - 1.0) * np.exp(-sq_dists / lam)
    return weights @ previous - weights.sum(axis=1, keepdims=True) * theta


def wasserstein_velocity(theta, previous, grads, lam, gamma):
    """w-SGLD (paper eqs. 19 and 21): ``grad_i + gamma * wasserstein_term``."""
    return grads + gamma * wasserstein_term(theta, previous, lam)


def pisgld_velocity(theta, previous, grads, bandwidth, lam, gamma):
    """pi-SGLD: the average of the SVGD velocity and a w-SGLD velocity.

    The w-SGLD part is the blob velocity plus ``gamma`` times the W2 term of eq. (21). With
    ``gamma = 0`` this is the pi-SGLD of the public implementation by one of the paper's
    authors (Liu et al. 2019, github.com/thu-ml/fpovi, ``ffn/svgd.py``: the mean of the SVGD
    and blob velocities); ``gamma`` weights the Wasserstein term whose scale the paper
    studies for pi-SGLD (its Figure 3).
    """
    wsgld = blob_velocity(theta, grads, bandwidth)
    if gamma:
        wsgld = wsgld + gamma * wasserstein_term(theta, previous, lam)
    return 0.5 * (svgd_velocity(theta, grads, bandwidth) + wsgld)


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
    """``(idx, state)``: the indices of the next batch of the epoch, or of every row when a
    batch holds them all (then without drawing from ``rng``)."""
    if settings.batch_size == settings.n_data:
        return np.arange(settings.n_data), state
    idx, permutation, cursor = next_epoch_batch(
        rng, settings.n_data, settings.batch_size, state.permutation, state.cursor
    )
    return idx, state._replace(permutation=permutation, cursor=cursor)


def step(rng, state: ParticleState, estimate: Estimate, settings: ParticleSettings):
    """One step of all particles.

    The velocity ``v`` of ``settings.method`` (:func:`svgd_velocity` with Liu & Wang's
    2016 kernel, or :func:`coordinate_svgd_velocity` plus :func:`linear_svgd_velocity`;
    :func:`wasserstein_velocity`, :func:`blob_velocity` or :func:`pisgld_velocity` of Chen
    et al. 2018), divided by AdaGrad's root mean square if set, moves the particles by
    ``step_size * v``, or during the first ``momentum_steps`` by ``step_size * m`` with
    ``m = beta m + v``. The linear part of the per-coordinate kernel is added outside the
    heavy ball. When the log density or a gradient is not finite, the particles are not
    moved; when they move more than ``sg_chain.RUNAWAY_DISTANCE`` preconditioned units from the
    start, the state is the one reached. Either is reported in ``divergence``.

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws the epochs' permutations of the rows (nothing when a batch holds every row).
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
    bad = ~(np.isfinite(logp) & np.all(np.isfinite(grads), axis=1))
    if bad.any():
        divergence = ParticleDivergence("non-finite", int(bad.sum()), np.nan, None, np.nan)
        return state, _stopped(step_size, logp, divergence)
    grads_z = preconditioner.gradient_to_z(grads)
    bandwidths = state.bandwidths
    if settings.kernel == "joint":
        bandwidth = settings.bandwidth_scale * median_bandwidth(squared_distances(z, z))
    else:
        if state.steps % COORDINATE_BANDWIDTH_EVERY == 0:
            bandwidths = settings.bandwidth_scale * coordinate_bandwidths(z)
        bandwidth = bandwidths
    velocity = _velocity(settings, z, state.previous, grads_z, bandwidth)
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
        # the moment-matching part, outside the heavy ball, which would amplify its pull on
        # a coordinate whose particles are close together
        linear = linear_svgd_velocity(z, grads_z)
        move, velocity = move + linear, velocity + linear
    moved = z + step_size * move
    state = state._replace(position=moved, previous=z, momentum=carried, squares=squares,
                           bandwidths=bandwidths, steps=state.steps + 1)  # fmt: skip
    drift, rate = _drift_and_spread_rate(z, velocity)
    info = ParticleInfo(
        step_size=step_size,
        bandwidth=np.median(bandwidth),
        log_density=logp,
        mean_grad_norm=np.mean(np.linalg.norm(grads, axis=1)),
        mean_velocity_norm=np.mean(np.linalg.norm(velocity, axis=1)),
        spread=np.sqrt(np.mean(np.var(z, axis=0))),
        drift=drift,
        spread_rate=rate,
        divergence=_runaway(moved, state.anchor, preconditioner),
    )
    return state, info


def _velocity(settings, z, previous, grads, bandwidth):
    lam = bandwidth if settings.entropic_reg is None else settings.entropic_reg
    gamma = settings.wasserstein_weight
    if settings.kernel == "coordinates":
        return coordinate_svgd_velocity(z, grads, bandwidth)
    if settings.method == "svgd":
        return svgd_velocity(z, grads, bandwidth)
    if settings.method == "wsgld_blob":
        return blob_velocity(z, grads, bandwidth)
    if settings.method == "wsgld":
        return wasserstein_velocity(z, previous, grads, lam, gamma)
    return pisgld_velocity(z, previous, grads, bandwidth, lam, gamma)


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


def _drift_and_spread_rate(z, velocity):
    """The particles' mean velocity and the relative rate at which their spread changes,
    ``d log(rms distance to their mean) / dt``."""
    centred, centred_velocity = z - z.mean(axis=0), velocity - velocity.mean(axis=0)
    spread = np.sum(centred**2)
    rate = np.sum(centred * centred_velocity) / spread if spread > 0 else 0.0
    return velocity.mean(axis=0), rate


State, Info = ParticleState, ParticleInfo
