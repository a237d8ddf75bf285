"""Second-order control variates: each row's log-likelihood minus its quadratic Taylor expansion.

For a likelihood ``l_i(theta) = f(eta_i)`` in a linear predictor ``eta_i = a_i + x_i' theta``,
expanded around a center ``theta_hat`` (the posterior mode) with ``delta = theta - theta_hat``
and ``t_i = x_i' delta``::

    T_i(theta) = l_i(theta_hat) + f'(eta_hat_i) t_i + f''(eta_hat_i) t_i^2 / 2,
    r_i(theta) = l_i(theta) - T_i(theta).

The sum of the expansions over all rows is a quadratic computed once,
``sum_i T_i(theta) = const + G' delta + delta' H delta / 2`` with ``G = sum_i f'_i x_i`` and
``H = sum_i f''_i x_i x_i'``, so an exact minibatch MH step only subsamples the residuals
``r_i`` (Cornish et al. 2019, "Scalable Metropolis-Hastings for exact Bayesian inference with
large datasets", ICML, SMH-2; Prado, Nemeth & Sherlock 2024, "Metropolis-Hastings with
scalable subsampling", arXiv:2407.19602).

Bounds. With ``|f'''| <= K_i``, the residual in ``eta`` has ``|R'(eta)| <= K_i (eta -
eta_hat)^2 / 2``, so ``|R(eta') - R(eta)| <= K_i |u'^3 - u^3| / 6`` with ``u = eta -
eta_hat``. In whitened coordinates ``z = L^-1 delta`` (``L L'`` the covariance of the
Laplace approximation), ``|u| <= b_i ||z||`` with ``b_i = ||L' x_i||``, hence::

    |r_i(theta') - r_i(theta)| <= (K_i b_i^3 / 6) ||z' - z|| (a^2 + a a' + a'^2),

``a = ||z||``, ``a' = ||z'||``: the constants ``c_i = K_i b_i^3 / 6`` and the symmetric metric
``M = ||z' - z|| (a^2 + a a' + a'^2)`` of :func:`pymc_minibatch.bounds.metric`. Near the mode
``z`` is of order 1 while ``b_i`` shrinks like ``1 / sqrt(N)``, so the expected batch ``C M``
falls like ``d^3 / sqrt(N)`` as the data grow. A Normal likelihood with fixed scale is
exactly quadratic: ``K_i = 0``, every residual vanishes and no row is ever evaluated.
"""

from typing import NamedTuple

import numpy as np

from pymc_minibatch.bounds import Bounds
from pymc_minibatch.kernels.preconditioning import DensePreconditioner
from pymc_minibatch.model.lipschitz import linear_predictors, require_bound


class SecondOrderExpansion(NamedTuple):
    """The rows' quadratic expansions around ``center`` and the whitening of the bounds."""

    center: np.ndarray
    """``theta_hat``, shape (d,)."""
    whiten: np.ndarray
    """``L^-1``: ``z = whiten @ (theta - center)``, shape (d, d)."""
    designs: tuple
    """``X`` of every observed variable on the rows, shape (N, d) each."""
    slopes: tuple
    """``f'(eta_hat_i)`` of every observed variable, shape (N,) each."""
    curvatures: tuple
    """``f''(eta_hat_i)`` of every observed variable, shape (N,) each."""
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
        for design, slope, curvature in zip(self.designs, self.slopes, self.curvatures,
                                            strict=True):  # fmt: skip
            rows = design[idx]
            t, t2 = rows @ delta, rows @ delta2
            difference += slope[idx] * (t2 - t) + 0.5 * curvature[idx] * (t2 * t2 - t * t)
        return difference

    def whitened(self, theta):
        """``z = L^-1 (theta - center)``."""
        return self.whiten @ (theta - self.center)


def second_order_bounds(minibatch_model, laplace, predictors=None):
    """Bounds on the second-order residuals and the expansion they belong to.

    Parameters
    ----------
    minibatch_model : MinibatchModel
    laplace : LaplaceFit
        Its mode is the center; its covariance whitens the bounds.
    predictors : list of LinearPredictor, optional
        The model's linear predictors with their derivatives at ``laplace.mode``, if
        already computed (:func:`~pymc_minibatch.model.lipschitz.linear_predictors`).

    Returns
    -------
    (Bounds, SecondOrderExpansion)

    Raises
    ------
    BoundsUnavailableError
        If a likelihood is not a supported family, or has no bounded third derivative
        (Laplace), naming the observed variable.
    """
    mm = minibatch_model
    center = laplace.mode
    preconditioner = laplace.preconditioner
    if isinstance(preconditioner, DensePreconditioner):
        transform, whiten = preconditioner.transform, preconditioner.inverse
    else:
        transform, whiten = np.diag(preconditioner.scale), np.diag(1.0 / preconditioner.scale)
    if predictors is None:
        predictors = linear_predictors(mm, expansion_point=center)
    c = np.zeros(mm.n_data)
    gradient, hessian = np.zeros(mm.ndim), np.zeros((mm.ndim, mm.ndim))
    for predictor in predictors:
        third = require_bound(predictor, 3)
        whitened_norms = np.linalg.norm(predictor.design @ transform, axis=1)
        c += third * whitened_norms**3 / 6.0
        gradient += predictor.design.T @ predictor.slope
        hessian += predictor.design.T @ (predictor.second[:, None] * predictor.design)
    expansion = SecondOrderExpansion(
        center=center,
        whiten=whiten,
        designs=tuple(p.design for p in predictors),
        slopes=tuple(p.slope for p in predictors),
        curvatures=tuple(p.second for p in predictors),
        gradient=gradient,
        hessian=hessian,
    )
    return Bounds(c, center=center, whiten=whiten), expansion
