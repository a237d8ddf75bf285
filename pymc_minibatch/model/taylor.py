"""Second-order control variates: each row's log-likelihood minus its quadratic Taylor expansion.

For a likelihood ``l_i(theta) = f(w_i)`` in ``k`` linear predictors ``w_i = a_i + A_i theta``
(``k = 1``: a location ``eta_i = x_i' theta``; ``k = 2``: a location and a log-scale),
expanded around a center ``theta_hat`` (the posterior mode) with ``delta = theta -
theta_hat`` and ``t_i = A_i delta``::

    T_i(theta) = l_i(theta_hat) + g_i' t_i + t_i' H_i t_i / 2,
    r_i(theta) = l_i(theta) - T_i(theta),

with ``g_i`` and ``H_i`` the gradient and Hessian of ``f`` at ``w_hat_i``. The sum of the
expansions over all rows is a quadratic computed once, ``sum_i T_i(theta) = const + G' delta +
delta' H delta / 2`` with ``G = sum_i A_i' g_i`` and ``H = sum_i A_i' H_i A_i``, so an exact
minibatch MH step only subsamples the residuals ``r_i`` (Cornish et al. 2019, "Scalable
Metropolis-Hastings for exact Bayesian inference with large datasets", ICML, SMH-2; Prado,
Nemeth & Sherlock 2024, "Metropolis-Hastings with scalable subsampling", arXiv:2407.19602).

Bounds. Let ``K_i`` bound the third derivative of ``f`` along any unit direction,
``|D^3 f(w)[v, v, v]| <= K_i`` (for a symmetric trilinear form this also bounds
``|D^3 f(w)[v, v, v']|``). The residual in ``u = w - w_hat`` then has ``||grad R(u)|| <= K_i
||u||^2 / 2``, and along the segment from ``u`` to ``u'``, ``|R(u') - R(u)| <= K_i ||u' - u||
(||u||^2 + ||u|| ||u'|| + ||u'||^2) / 6``. In whitened coordinates ``z = L^-1 delta`` (``L L'``
the covariance of the Laplace approximation), ``||u|| <= b_i ||z||`` with ``b_i = ||A_i L||``
(the operator norm; ``||L' x_i||`` for one predictor), hence::

    |r_i(theta') - r_i(theta)| <= (K_i b_i^3 / 6) ||z' - z|| (a^2 + a a' + a'^2),

``a = ||z||``, ``a' = ||z'||``: the constants ``c_i = K_i b_i^3 / 6`` and the symmetric metric
``M = ||z' - z|| (a^2 + a a' + a'^2)`` of :func:`pymc_minibatch.bounds.metric`. Near the mode
``z`` is of order 1 while ``b_i`` shrinks like ``1 / sqrt(N)``, so the expected batch ``C M``
falls like ``d^3 / sqrt(N)`` as the data grow. A Normal likelihood with fixed scale is
exactly quadratic: ``K_i = 0``, every residual vanishes and no row is ever evaluated.

Where ``K_i`` holds only on a bounded set of ``w`` (Poisson's ``exp(eta)``, a free scale's
``exp(-2 zeta)``), it is taken over the trust region ``||z|| <= R``: there ``||u_i|| <= b_i R``,
and the segment between two points of the (convex) region stays in it
(:mod:`pymc_minibatch.model.region`).
"""

from typing import NamedTuple

import numpy as np

from pymc_minibatch.bounds import Bounds
from pymc_minibatch.kernels.preconditioning import DensePreconditioner


class SecondOrderExpansion(NamedTuple):
    """The rows' quadratic expansions around ``center`` and the whitening of the bounds."""

    center: np.ndarray
    """``theta_hat``, shape (d,)."""
    whiten: np.ndarray
    """``L^-1``: ``z = whiten @ (theta - center)``, shape (d, d)."""
    designs: tuple
    """The rows' linear predictors ``d w / d theta`` (all observed variables), shape (N, d)
    each."""
    slopes: tuple
    """``d f / d w`` at the center, one per predictor, shape (N,) each."""
    curvatures: tuple
    """``(j, k, h)``: ``h = d^2 f / d w_j d w_k`` at the center for predictors ``j <= k`` of
    the same observed variable, shape (N,)."""
    gradient: np.ndarray
    """``G = sum_i grad T_i(theta_hat)``, shape (d,)."""
    hessian: np.ndarray
    """``H = sum_i hess T_i``, shape (d, d)."""

    def quadratic(self, theta):
        """``sum_i [T_i(theta) - l_i(theta_hat)] = G' delta + delta' H delta / 2``."""
        delta = theta - self.center
        return float(self.gradient @ delta + 0.5 * delta @ self.hessian @ delta)

    def row_difference(self, theta, theta2, idx):
        """``T_i(theta2) - T_i(theta)`` for rows ``idx``, shape (len(idx),)."""
        delta, delta2 = theta - self.center, theta2 - self.center
        difference = np.zeros(len(idx))
        moves = []
        for design, slope in zip(self.designs, self.slopes, strict=True):
            rows = np.take(design, idx, axis=0)
            t, t2 = rows @ delta, rows @ delta2
            difference += np.take(slope, idx) * (t2 - t)
            moves.append((t, t2))
        for j, k, curvature in self.curvatures:
            (t_j, t2_j), (t_k, t2_k) = moves[j], moves[k]
            weight = 0.5 if j == k else 1.0
            difference += weight * np.take(curvature, idx) * (t2_j * t2_k - t_j * t_k)
        return difference

    def whitened(self, theta):
        """``z = L^-1 (theta - center)``."""
        return self.whiten @ (theta - self.center)


class RowExpansion(NamedTuple):
    """One observed variable's rows as ``l_i = f(w_i)`` in ``k`` linear predictors, with
    the derivatives of ``f`` at the center and a bound on its third derivative."""

    name: str
    designs: tuple
    """``d w_j / d theta`` for each predictor ``j``, shape (N, d) each."""
    slopes: tuple
    """``d f / d w_j`` at the center, shape (N,) each."""
    curvatures: tuple
    """``(j, k, d^2 f / d w_j d w_k)`` at the center, ``j <= k``."""
    third: object
    """``third(radius)``: per-row bounds ``K_i`` on ``|D^3 f(w)[v, v, v]|`` (unit ``v``)
    for ``||w - w_hat_i|| <= radius_i`` (shape (N,); ``radius=None`` where ``K_i`` holds
    everywhere)."""
    second: object
    """``second(radius)``: the same for ``|D^2 f(w)[v, v]|`` (first-order control variates)."""
    local: bool
    """Whether ``K_i`` holds only on a bounded region (then a trust region is needed)."""


def whitening(laplace):
    """``(L, L^-1)`` of a Laplace fit, dense: ``theta - mode = L z``."""
    preconditioner = laplace.preconditioner
    if isinstance(preconditioner, DensePreconditioner):
        return preconditioner.transform, preconditioner.inverse
    return np.diag(preconditioner.scale), np.diag(1.0 / preconditioner.scale)


def predictor_norms(designs, transform):
    """``b_i = ||A_i L||``, the operator norm of the rows' ``k x d`` predictor matrices in
    whitened coordinates, shape (N,)."""
    whitened = [design @ transform for design in designs]
    if len(whitened) == 1:
        return np.linalg.norm(whitened[0], axis=1)
    gram = np.stack(
        [np.stack([np.einsum("nd,nd->n", a, b) for b in whitened], axis=-1) for a in whitened],
        axis=-2,
    )
    return np.sqrt(np.maximum(np.linalg.eigvalsh(gram)[:, -1], 0.0))


def second_order_bounds(minibatch_model, laplace, rows, radius=None):
    """Bounds on the second-order residuals and the expansion they belong to.

    Parameters
    ----------
    minibatch_model : MinibatchModel
    laplace : LaplaceFit
        Its mode is the center; its covariance whitens the bounds.
    rows : list of RowExpansion
        Every observed variable on the rows, expanded at ``laplace.mode``.
    radius : float, optional
        The trust region ``||z|| <= radius``; needed when a row's bound is local, and the
        bounds then hold only for pairs of points inside it.

    Returns
    -------
    (Bounds, SecondOrderExpansion)
    """
    mm = minibatch_model
    center = laplace.mode
    transform, whiten = whitening(laplace)
    c = np.zeros(mm.n_data)
    gradient, hessian = np.zeros(mm.ndim), np.zeros((mm.ndim, mm.ndim))
    designs, slopes, curvatures = [], [], []
    for row in rows:
        if row.local and radius is None:
            raise ValueError(f"the bounds of '{row.name}' hold on a trust region: pass radius")
        norms = predictor_norms(row.designs, transform)
        c += row.third(None if radius is None else radius * norms) * norms**3 / 6.0
        first = len(designs)
        for design, slope in zip(row.designs, row.slopes, strict=True):
            gradient += design.T @ slope
        for j, k, curvature in row.curvatures:
            block = row.designs[j].T @ (curvature[:, None] * row.designs[k])
            hessian += block if j == k else block + block.T
            curvatures.append((first + j, first + k, curvature))
        designs.extend(row.designs)
        slopes.extend(row.slopes)
    expansion = SecondOrderExpansion(
        center=center,
        whiten=whiten,
        designs=tuple(designs),
        slopes=tuple(slopes),
        curvatures=tuple(curvatures),
        gradient=gradient,
        hessian=hessian,
    )
    bounds = Bounds(c, center=center, whiten=whiten,
                    region_radius=radius if any(row.local for row in rows) else None)  # fmt: skip
    return bounds, expansion
