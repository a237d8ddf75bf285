"""A diagonal preconditioner for stochastic-gradient samplers from per-row gradients.

The curvature of the log posterior is estimated by the empirical Fisher information
``F = N Cov_i(grad l_i)`` of a subsample of rows plus the prior's curvature ``P`` (diagonal).
The scale ``s`` puts the sampler in ``z = theta / s`` with ``diag(S C S) = 1 / lambda``,
``C = F + P``, where ``lambda`` is the largest eigenvalue of the diagonally scaled
curvature. So every direction of ``z`` has curvature at most 1, also when the parameters are
strongly correlated (a diagonal scaling alone leaves eigenvalues up to the dimension).
"""

import numpy as np

POWER_ITERATIONS = 50


def diagonal_preconditioner(per_row_grads, n_data, prior_curvature, rng: np.random.Generator):
    """Per-coordinate scale ``s`` from per-row gradients (rows x dims) at one point.

    Coordinates with no estimated curvature (or a non-finite one) get scale 1.
    """
    centred = per_row_grads - per_row_grads.mean(axis=0)
    weight = n_data / per_row_grads.shape[0]
    prior = np.maximum(prior_curvature, 0.0)
    precision = weight * np.sum(centred**2, axis=0) + prior
    usable = np.isfinite(precision) & (precision > 0)
    diagonal = np.where(usable, 1.0 / np.sqrt(np.where(usable, precision, 1.0)), 1.0)
    if not np.all(np.isfinite(centred)):
        return diagonal

    def scaled_curvature(v):
        u = diagonal * v
        return diagonal * (weight * (centred.T @ (centred @ u)) + prior * u)

    vector = rng.standard_normal(diagonal.size)
    largest = 1.0
    for _ in range(POWER_ITERATIONS):
        image = scaled_curvature(vector)
        norm = np.linalg.norm(image)
        if not norm > 0:
            break
        largest, vector = norm, image / norm
    return diagonal / np.sqrt(max(largest, 1.0))
