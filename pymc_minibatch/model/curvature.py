"""Curvature of a model's log posterior at a point, for the preconditioned samplers."""

import numpy as np

from pymc_minibatch.kernels.preconditioning import DENSE_MAX_DIM, estimate_preconditioner

FISHER_ROWS = 256
"""Rows whose per-row gradients (and minibatch Hessian) estimate the curvature."""


def preconditioner_at(minibatch_model, theta, rng):
    """A preconditioner from the curvature at ``theta``, estimated on 256 random rows.

    Dense up to ``DENSE_MAX_DIM`` parameters (minus the minibatch Hessian by central
    differences, else the empirical Fisher information), diagonal beyond; see
    :func:`pymc_minibatch.kernels.preconditioning.estimate_preconditioner`.
    """
    mm = minibatch_model
    rows = rng.choice(mm.n_data, size=min(mm.n_data, FISHER_ROWS), replace=False)
    per_row = mm.grad_loglik(theta, rows, per_row=True)
    hessian = minibatch_hessian(mm, theta, rows) if mm.ndim <= DENSE_MAX_DIM else None
    return estimate_preconditioner(
        per_row, mm.n_data, prior_curvature(mm, theta), rng, hessian=hessian
    )


def minibatch_hessian(minibatch_model, theta, rows, rel_step=1e-4):
    """Minus the Hessian of the minibatch log posterior estimate on ``rows``, by central
    differences of its gradient (2 ndim gradient calls on the same rows)."""
    columns = []
    for d in range(theta.size):
        shift = np.zeros(theta.size)
        shift[d] = rel_step * max(1.0, abs(theta[d]))
        upper = minibatch_model.grad_estimate(theta + shift, rows)[1]
        lower = minibatch_model.grad_estimate(theta - shift, rows)[1]
        columns.append(-(upper - lower) / (2.0 * shift[d]))
    return np.column_stack(columns)


def prior_curvature(minibatch_model, theta, rel_step=1e-4):
    """``-d^2 log prior / d theta_d^2`` by central differences of the prior's gradient."""
    curvature = np.empty(theta.size)
    for d in range(theta.size):
        delta = rel_step * max(1.0, abs(theta[d]))
        shift = np.zeros(theta.size)
        shift[d] = delta
        upper = minibatch_model.logprior_and_grad(theta + shift)[1][d]
        lower = minibatch_model.logprior_and_grad(theta - shift)[1][d]
        curvature[d] = -(upper - lower) / (2.0 * delta)
    return curvature
