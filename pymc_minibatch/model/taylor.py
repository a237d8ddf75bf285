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

import functools
from typing import NamedTuple

import numpy as np
from pytensor.graph.replace import clone_replace

from pymc_minibatch.kernels.arrowhead import ArrowheadFactor, ArrowheadMatrix


class SecondOrderExpansion(NamedTuple):
    """The rows' quadratic expansions around ``center`` and the whitening of the bounds.

    Nothing is kept per row: a step evaluates the rows' linear predictors and the
    derivatives of ``f`` at the center on the rows it reads (built by
    :func:`pymc_minibatch.model.expansions.second_order_bounds`)."""

    center: np.ndarray
    """``theta_hat``, shape (d,)."""
    factor: ArrowheadFactor
    """The Laplace fit's factor: ``z = factor.to_z(theta - center)``."""
    gradient: np.ndarray
    """``G = sum_i grad T_i(theta_hat)``, shape (d,)."""
    hessian: ArrowheadMatrix
    """``H = sum_i hess T_i`` (block arrowhead in a hierarchical model)."""
    terms: object
    """``terms(theta, *rows)``: the rows' predictors ``w`` (P arrays, all observed
    variables), ``d f / d w`` (P) and the curvatures ``d^2 f / d w_j d w_k`` (one per
    ``curvature_pairs`` entry), then other outputs; a
    :class:`~pymc_minibatch.model.functions.RowsFunction`."""
    n_predictors: int
    """P, the number of linear predictors over all observed variables."""
    curvature_pairs: tuple
    """``(j, k)``, ``j <= k``: the predictors of each curvature (same observed variable)."""

    def quadratic(self, theta):
        """``sum_i [T_i(theta) - l_i(theta_hat)] = G' delta + delta' H delta / 2``."""
        delta = theta - self.center
        return float(self.gradient @ delta + 0.5 * delta @ self.hessian.matvec(delta))

    def group_quadratics(self, delta, delta2):
        """Each group's share of ``quadratic(theta2) - quadratic(theta)`` when only the groups'
        local coordinates move (``delta = theta - center``, ``delta2 = theta2 - center``
        equal on the shared ones): the sum of ``T_i(theta2) - T_i(theta)`` over group
        ``g``'s rows, shape (G,), as ``H`` has no entries between two groups."""
        hessian = self.hessian
        local, x, x2 = hessian.local, delta[hessian.local], delta2[hessian.local]
        step = x2 - x
        return (
            np.einsum("ga,ga->g", self.gradient[local], step)
            + 0.5 * np.einsum("ga,gab,gb->g", x2, hessian.local_blocks, x2)
            - 0.5 * np.einsum("ga,gab,gb->g", x, hessian.local_blocks, x)
            + np.einsum("ga,gas,s->g", step, hessian.coupling, delta[hessian.shared])
        )

    def row_parts(self, theta, theta2, rows):
        """The linear and quadratic parts of ``T_i(theta2) - T_i(theta)`` on ``rows`` (from
        :meth:`~pymc_minibatch.MinibatchModel.gather_rows`), shape (len(rows),) each:
        ``g_i' (t2_i - t_i)`` and ``(t2_i' H_i t2_i - t_i' H_i t_i) / 2`` with ``t_i = w_i(theta)
        - w_i(theta_hat)`` (``= A_i delta``: the predictors are linear)."""
        p = self.n_predictors
        at_center = self.terms(self.center, *rows)
        at_theta, at_theta2 = self.terms(theta, *rows), self.terms(theta2, *rows)
        moves = [(at_theta[j] - at_center[j], at_theta2[j] - at_center[j]) for j in range(p)]
        linear = np.zeros(len(rows[0]))
        for j, (t, t2) in enumerate(moves):
            linear += at_center[p + j] * (t2 - t)
        quadratic = np.zeros(len(rows[0]))
        for q, (j, k) in enumerate(self.curvature_pairs):
            (t_j, t2_j), (t_k, t2_k) = moves[j], moves[k]
            weight = 0.5 if j == k else 1.0
            quadratic += weight * at_center[2 * p + q] * (t2_j * t2_k - t_j * t_k)
        return linear, quadratic

    def row_difference(self, theta, theta2, rows):
        """``T_i(theta2) - T_i(theta)`` on ``rows``, shape (len(rows),)."""
        linear, quadratic = self.row_parts(theta, theta2, rows)
        return linear + quadratic

    def residual_pair(self, theta, theta2, rows):
        """``(l_i(theta), l_i(theta2) - [T_i(theta2) - T_i(theta)])`` on ``rows``: the row
        terms of a step with second-order control variates (their difference is ``r_i(theta2)
        - r_i(theta)``), from one compiled call (what :meth:`row_difference` computes in
        NumPy from three calls and the log-likelihoods from a fourth)."""
        mm = self.terms.minibatch_model
        graph = functools.partial(_residual_pair_graph, self.n_predictors, self.curvature_pairs)
        function = mm.rows_graph_function("residual_pair", self.terms, graph)
        current, proposed = function(theta, theta2, self.center, *rows)
        return current, proposed

    def whitened(self, theta):
        """``z = L^-1 (theta - center)``."""
        return self.factor.to_z(theta - self.center)


def _residual_pair_graph(n_predictors, curvature_pairs, symbolic, per_row):
    """The graph of :meth:`SecondOrderExpansion.residual_pair`: extra inputs ``theta2`` and
    the center, outputs the log-likelihoods at ``theta`` and the residual differences at
    ``theta2``, with the terms ``per_row`` (of ``symbolic.theta``) taken at the three
    points."""
    theta = symbolic.theta
    theta2, center = theta.type("theta2"), theta.type("center")
    at_theta2 = clone_replace([symbolic.loglik, *per_row], replace={theta: theta2})
    loglik2, at_theta2 = at_theta2[0], at_theta2[1:]
    at_center = clone_replace(per_row, replace={theta: center})
    p = n_predictors
    moves = [(per_row[j] - at_center[j], at_theta2[j] - at_center[j]) for j in range(p)]
    difference = sum(at_center[p + j] * (t2 - t) for j, (t, t2) in enumerate(moves))
    for q, (j, k) in enumerate(curvature_pairs):
        (t_j, t2_j), (t_k, t2_k) = moves[j], moves[k]
        weight = 0.5 if j == k else 1.0
        difference = difference + weight * at_center[2 * p + q] * (t2_j * t2_k - t_j * t_k)
    return [theta2, center], [symbolic.loglik, loglik2 - difference]
