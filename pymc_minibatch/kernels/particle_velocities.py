"""Velocity fields of the interacting-particle samplers (NumPy, vectorised over particles).

Chen, Zhang, Wang, Li & Chen (2018), "A unified particle-optimization framework for scalable
Bayesian sampling", UAI (the docs page "Particle methods"). Every method moves
all ``M`` particles ``theta`` (shape ``(M, d)``) at once by ``theta += step_size * velocity``,
where ``grads`` holds (minibatch estimates of) ``grad log p`` at each particle; the move
itself is the kernel of :mod:`pymc_minibatch.kernels.particles`.

The kernel is the RBF ``k(a, b) = exp(-|a - b|^2 / h)``; :func:`median_bandwidth` gives the
median heuristic ``h = med(|theta_i - theta_j|^2) / log(M + 1)`` of Liu & Wang (2016), "Stein
variational gradient descent: a general purpose Bayesian inference algorithm", NeurIPS (their
code uses ``log(M + 1)``, which keeps ``h`` finite for two particles).

:func:`coordinate_svgd_velocity` is SVGD with one RBF kernel per coordinate (a diagonal
matrix-valued kernel), for dimensions above the particle count, where the joint kernel's
repulsion fades and the particles collapse towards the mode.

With the joint kernel every velocity is ``A grads + B theta + C previous`` for ``M x M``
coefficients built from the pairs' distances: its ``O(M^2 d)`` work is the distances
(compiled loops) and a few matrix products (BLAS), without the ``(M, d)`` temporaries whose
every pass costs about as much as a product on a network's 10^5 weights.
"""

import numba
import numpy as np
from scipy.linalg import blas


def squared_distances(a, b):
    """``|a_i - b_j|^2`` for every pair of rows, shape ``(len(a), len(b))`` (``b`` is ``a``:
    each pair once).

    From the differences themselves, in compiled loops over blocks of
    :data:`DISTANCE_BLOCK` columns that stay in cache: no ``(M, M, d)`` array (8 GB for 100
    particles of a network of 10^5 weights), and exact where ``|a|^2 + |b|^2 - 2 a.b``
    would cancel (particles a few rounding errors apart, as w-SGLD's at the mode, or a
    particle next to its previous position in the Wasserstein term)."""
    same = b is a
    a = np.ascontiguousarray(a, dtype=np.float64)
    return _squared_distances(a, a if same else np.ascontiguousarray(b, dtype=np.float64), same)


DISTANCE_BLOCK = 1024
"""Columns per block of :func:`squared_distances`: 8 KB a row, so that the rows of a
hundred particles stay in a core's cache while every pair is summed."""


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _squared_distances(a, b, symmetric):
    total = np.zeros((a.shape[0], b.shape[0]))
    for start in range(0, a.shape[1], DISTANCE_BLOCK):
        stop = min(start + DISTANCE_BLOCK, a.shape[1])
        for i in range(a.shape[0]):
            row = a[i, start:stop]
            for j in range(i + 1 if symmetric else 0, b.shape[0]):
                other, block = b[j, start:stop], 0.0
                for k in range(row.size):  # reassociated: summed in SIMD lanes
                    difference = row[k] - other[k]
                    block += difference * difference
                total[i, j] += block
    return total + total.T if symmetric else total


def median_bandwidth(sq_dists):
    """The median heuristic ``med(|theta_i - theta_j|^2, i < j) / log(M + 1)``.

    Falls back to 1 when all particles coincide (the median is 0), so that the kernel
    stays defined and the repulsion can separate them.
    """
    n = sq_dists.shape[0]
    pairs = sq_dists[np.triu_indices(n, k=1)]
    median = np.median(pairs) if pairs.size else 0.0
    return float(median / np.log(n + 1)) if median > 0 else 1.0


def _repulsion(weights, bandwidth):
    """The coefficients ``R`` of ``(R theta)_i = (2 / h) sum_j w_ij (theta_i - theta_j)``:
    minus the kernel gradients, weighted."""
    return (2.0 / bandwidth) * (np.diag(weights.sum(axis=1)) - weights)


def _combination(terms, base=None):
    """``base + sum_k C_k @ X_k`` over ``terms`` of ``(M, M)`` coefficients ``C_k`` and
    ``(M, d)`` arrays ``X_k``, each product added into the result in place (BLAS ``gemm``
    with ``beta = 1``) rather than through an ``(M, d)`` temporary; ``base`` (a float64
    array of the caller's making) is overwritten."""
    total = base
    if total is None:
        (coefficients, array), *terms = terms
        total = coefficients @ array
    for coefficients, array in terms:
        if total.size:  # gemm refuses empty arrays
            # total.T += array.T @ coefficients.T in column-major order: the returned array
            # is total.T itself when total is C-contiguous (else gemm's copy)
            total = blas.dgemm(1.0, array.T, coefficients.T, beta=1.0, c=total.T,
                               overwrite_c=True).T  # fmt: skip
    return total


def _rbf(theta, bandwidth, sq_dists):
    """The RBF kernel matrix, from the squared distances if given."""
    return np.exp(-(squared_distances(theta, theta) if sq_dists is None else sq_dists) / bandwidth)


def _svgd_coefficients(kernel, bandwidth):
    """SVGD's ``(A, B)`` of ``v = A grads + B theta``."""
    n = kernel.shape[0]
    return kernel / n, _repulsion(kernel, bandwidth) / n


def svgd_velocity(theta, grads, bandwidth, sq_dists=None):
    """Stein variational gradient ``phi(theta_i)`` (Liu & Wang 2016, eq. 8).

    ``phi_i = (1/M) sum_j [k(theta_j, theta_i) grad_j + grad_{theta_j} k(theta_j, theta_i)]``:
    a kernel-smoothed gradient plus a repulsion between particles. ``sq_dists``:
    :func:`squared_distances` of ``theta`` to itself, if already computed.
    """
    drive, repulsion = _svgd_coefficients(_rbf(theta, bandwidth, sq_dists), bandwidth)
    return _combination(((drive, grads), (repulsion, theta)))


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
this weight (``tests/kernels/test_particle_velocities.py`` asserts both); weight 1 brings
it to 0.998 on that target, but its term, an average over the particles in each
coordinate, carries the minibatch gradients' noise into every particle's spread, which a
smaller weight damps while keeping most of the correction."""


def linear_svgd_velocity(theta, grads, weight=None, blocks=None):
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

    With ``blocks``, each block's coordinates share their features: on a coordinate ``j``
    of a block ``B``, ``K_j(a, b) = w (1 + sum_{k in B} (a_k - m_k)(b_k - m_k) / s_k^2)``,
    so that

    ``phi_j(theta_i) = w mean_l(grad_lj) + w sum_{k in B} (theta_ik - m_k) / s_k^2
    [mean_l((theta_lk - m_k) grad_lj) + delta_kj]``,

    whose fixed points also satisfy ``mean((theta_k - m_k) grad_j) = 0`` for ``k != j`` in
    the block: the covariances within a block. Neither the per-coordinate RBF kernel nor
    the diagonal features can build a correlation the particles lack. Started independent
    on a Normal target of correlation 0.6 within pairs, they keep a correlation near 0 and
    settle at the conditional variance ``1 - 0.6^2`` instead of 1; with the pairs as blocks
    they reach both (``tests/kernels/test_particle_velocities.py``). In a hierarchical
    model whitened at the mode, a group's intercept and slope are uncorrelated at the mode
    but not across the posterior's range of group scales; on the varying-slopes model of
    ``benchmarks/particle_defaults.py`` the intercepts' scale settled about 0.1 posterior
    sd low without the blocks, whatever the particles, batches or steps.

    Parameters
    ----------
    theta, grads : ndarray, shape (M, d)
        The particles and their gradients, in the same coordinates.
    weight : float, optional
        ``LINEAR_WEIGHT`` (read at each call) by default.
    blocks : ndarray of int, shape (G, k), optional
        Blocks of ``k`` coordinates each (a hierarchical model's groups); blocks of one
        coordinate (``k = 1``) change nothing.
    """
    weight = LINEAR_WEIGHT if weight is None else weight
    centred, variances = _centred(theta)
    velocity = weight * (
        grads.mean(axis=0) + centred / variances * (np.mean(centred * grads, axis=0) + 1.0)
    )
    if blocks is None or np.ndim(blocks) < 2 or np.shape(blocks)[1] < 2:
        return velocity
    blocks = np.asarray(blocks)
    block_centred, block_grads = centred[:, blocks], grads[:, blocks]  # (M, G, k)
    # mean_l((theta_lk - m_k) grad_lj) per block, (G, k, j), without an (M, G, k, j) array
    moments = np.matmul(block_centred.transpose(1, 2, 0), block_grads.transpose(1, 0, 2))
    moments = moments / theta.shape[0] + np.eye(blocks.shape[1])
    features = block_centred / variances[blocks]  # (M, G, k)
    velocity[:, blocks] = weight * (
        block_grads.mean(axis=0) + np.einsum("mgk,gkj->mgj", features, moments)
    )
    return velocity


GROUP_SPREAD_WEIGHT = LINEAR_WEIGHT
"""Weight ``w`` of :func:`group_spread_velocity`: that of the linear part, whose moments it
extends."""


def group_spread_velocity(theta, grads, shared, local, weight=None):
    """SVGD's velocity for the kernel that lets the groups' spread follow the shared
    coordinates: on each local coordinate ``j``, ``K_j(a, b) = w (a_j - m_j)(b_j - m_j) /
    s_j^2 sum_s u_s(a) u_s(b)``, with ``u_s = (theta_s - m_s) / s_s`` a shared coordinate
    standardised over the particles and ``w = weight``:

    ``phi_j(theta_i) = w (theta_ij - m_j) / s_j^2 sum_s u_s(theta_i) mean_l(u_s(theta_l)
    [(theta_lj - m_j) grad_lj + 1])``, zero on the shared coordinates.

    Its fixed points satisfy Stein's identities ``E[u_s ((theta_j - m_j) d_j log p + 1)] =
    0``, which the posterior does: a group effect whose spread grows with the group scale
    (the funnel of Neal 2003, "Slice sampling", Annals of Statistics) must spread wider in
    the particles whose scale is larger. The per-coordinate RBF kernel cannot see this, as
    each coordinate's kernel looks at that coordinate alone (its fixed points match
    ``E[d_j log p | theta_j]``); without this term the particles' group effects spread
    alike whatever their scale, and every group then informs the scale as if its effect
    were observed: on the 1000-group models of ``benchmarks/particle_defaults.py`` (uniform
    batches) the group scales' sds came out 0.83-0.94 of the posterior's. It is a low-rank
    polynomial kernel (the features of Liu & Wang 2018, "Stein variational gradient descent
    as moment matching", NeurIPS, multiplied by the shared coordinates), so it costs
    ``O(M d S)`` for ``S`` shared coordinates. Its repulsion, the ``+ 1``, averages to zero
    against the centred ``u_s``; the identities hold all the same, as ``E[u_s] = 0``.

    Parameters
    ----------
    theta, grads : ndarray, shape (M, d)
        The particles and their gradients, in the same coordinates.
    shared : ndarray of int
        The shared coordinates.
    local : ndarray of int
        The local coordinates (any shape; flattened).
    weight : float, optional
        ``GROUP_SPREAD_WEIGHT`` (read at each call) by default.
    """
    weight = GROUP_SPREAD_WEIGHT if weight is None else weight
    shared, local = np.asarray(shared), np.ravel(local)
    velocity = np.zeros_like(theta)
    if not (shared.size and local.size):
        return velocity
    shared_centred, shared_variances = _centred(theta[:, shared])
    standardised = shared_centred / np.sqrt(shared_variances)
    centred, variances = _centred(theta[:, local])
    moments = standardised.T @ (centred * grads[:, local] + 1.0) / theta.shape[0]  # (S, local)
    velocity[:, local] = weight * centred / variances * (standardised @ moments)
    return velocity


def _centred(values):
    """``values`` less their mean over the particles, and their variance per column (1 where
    the particles coincide, so that dividing by it is safe)."""
    centred = values - values.mean(axis=0)
    variances = np.mean(centred**2, axis=0)
    return centred, np.where(variances > 0, variances, 1.0)


def _column_chunks(n, d):
    width = max(1, COORDINATE_CHUNK // (n * n))
    return [slice(start, min(start + width, d)) for start in range(0, d, width)]


def _blob_repulsion(kernel, bandwidth):
    """The blob's ``B`` of ``v = grads + B theta`` (paper eq. 22)."""
    density = kernel.sum(axis=1)  # > 0: each particle's own term is 1
    return _repulsion(kernel / density[None, :] + kernel / density[:, None], bandwidth)


def blob_velocity(theta, grads, bandwidth, sq_dists=None):
    """w-SGLD-B: ``grad_i`` plus the blob approximation of ``-grad log mu`` (paper eq. 22).

    With ``E_2 = int mu log(mu * K)`` (Carrillo, Craig & Patacchini 2019), the entropy
    force on particle ``i`` is
    ``-sum_j grad_i K_ij / sum_l K_jl - sum_j grad_i K_ij / sum_l K_il``. ``sq_dists`` as
    in :func:`svgd_velocity`.
    """
    repulsion = _blob_repulsion(_rbf(theta, bandwidth, sq_dists), bandwidth)
    return _combination(((repulsion, theta),), base=np.array(grads, dtype=np.float64))


def _wasserstein_weights(theta, previous, lam):
    """The eq. (21) term's ``C`` of ``C previous - diag(C 1) theta``."""
    sq_dists = squared_distances(theta, previous)
    return (sq_dists / lam - 1.0) * np.exp(-sq_dists / lam)


def wasserstein_velocity(theta, previous, grads, lam, gamma):
    """w-SGLD (paper eqs. 19 and 21): ``grad_i`` plus ``gamma`` times the
    entropy-regularised W2 term of eq. (21).

    The term is ``sum_j (d_ij / lam - 1) exp(-d_ij / lam) (previous_j - theta_i)`` with
    ``d_ij = |theta_i - previous_j|^2`` to the particles of the previous iterate (the
    paper's fixed ``gamma`` replaces the Sinkhorn scalings ``u_i v_j``). A particle is
    pulled towards previous particles farther than ``sqrt(lam)`` and pushed away from nearer
    ones (its own previous position among them, which acts as momentum).
    """
    weights = gamma * _wasserstein_weights(theta, previous, lam)
    # the diagonal term elementwise: as a matrix product it would cost as much as the other
    return _combination(((weights, previous),), base=grads - weights.sum(axis=1)[:, None] * theta)


def pisgld_velocity(theta, previous, grads, bandwidth, lam, gamma, sq_dists=None):
    """pi-SGLD: the average of the SVGD velocity and a w-SGLD velocity.

    The w-SGLD part is the blob velocity plus ``gamma`` times the W2 term of eq. (21). With
    ``gamma = 0`` this is the pi-SGLD of the public implementation by one of the paper's
    authors (Liu et al. 2019, github.com/thu-ml/fpovi, ``ffn/svgd.py``: the mean of the SVGD
    and blob velocities); ``gamma`` weights the Wasserstein term whose scale the paper
    studies for pi-SGLD (its Figure 3). ``sq_dists`` as in :func:`svgd_velocity`.
    """
    kernel = _rbf(theta, bandwidth, sq_dists)
    drive, repulsion = _svgd_coefficients(kernel, bandwidth)
    on_theta = repulsion + _blob_repulsion(kernel, bandwidth)
    terms = [(drive + np.eye(len(theta)), grads)]
    if gamma:
        weights = gamma * _wasserstein_weights(theta, previous, lam)
        on_theta = on_theta - np.diag(weights.sum(axis=1))
        terms.append((weights, previous))
    return _combination([(0.5 * coefficients, array)
                         for coefficients, array in (*terms, (on_theta, theta))])  # fmt: skip
