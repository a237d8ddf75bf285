"""Linear preconditioners for gradient-based samplers: ``theta = L z``.

The target is unchanged by the change of variables; ``L`` plays the part of a mass matrix and
is chosen so that the curvature of the log posterior in ``z`` is close to the identity. The
Laplace fit's (:mod:`pymc_minibatch.model.laplace`) is an
:class:`~pymc_minibatch.kernels.arrowhead.ArrowheadFactor`, ``L = R^-T`` for the exact
full-data curvature ``R R^T`` at the mode; :class:`DiagonalPreconditioner` is the scaling of
samplers run without it (``precondition=False``: the identity). Both map arrays of shape
``(..., d)`` along their last axis.
"""

from typing import NamedTuple

import numpy as np


class DiagonalPreconditioner(NamedTuple):
    scale: np.ndarray

    def to_theta(self, z):
        return z * self.scale

    def to_z(self, theta):
        return theta / self.scale

    def gradient_to_z(self, gradient):
        return gradient * self.scale

    def covariance_diagonal(self):
        return self.scale**2

    def __matmul__(self, z):
        return self.to_theta(z)


def identity_preconditioner(ndim):
    return DiagonalPreconditioner(np.ones(ndim))


class ScaledOperator(NamedTuple):
    """``factor * (operator @ z)``: a square root of a covariance scaled by ``factor``."""

    operator: object
    factor: float

    def __matmul__(self, z):
        return self.factor * (self.operator @ z)


def scaled(operator, factor):
    """``operator`` (a matrix or a preconditioner) times the scalar ``factor``."""
    if isinstance(operator, np.ndarray):
        return operator * factor
    return ScaledOperator(operator, float(factor))
