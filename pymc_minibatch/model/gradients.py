"""Minibatch estimates of the log posterior and its gradient.

The plain estimate ``log p0(theta) + sum_{i in S} w_i l_i(theta)`` (``w_i = N / |S|`` for
rows drawn uniformly) at one point, at many points on the same rows, and minus its
likelihood part at a center (the minibatch part of a control-variate estimate);
:func:`grad_estimator` makes the estimator a sampler calls, plain or wrapped in
:class:`~pymc_minibatch.model.control_variates.ControlVariateGradients` (as BlackJAX's
``sgmcmc.gradients`` pairs ``grad_estimator`` with ``control_variates``).
"""

import functools

import numpy as np

from pymc_minibatch.model.control_variates import ControlVariateGradients


def grad_estimator(minibatch_model, center=None, particles=False, vectorised=True):
    """The estimator of the log posterior and its gradient a sampler calls.

    Parameters
    ----------
    minibatch_model : MinibatchModel
    center : ndarray, optional
        With a center (usually the Laplace fit's mode), the control-variate estimate
        around it (:class:`~pymc_minibatch.model.control_variates.ControlVariateGradients`,
        one full-data pass now); without, the plain one (:class:`PlainGradients`).
    particles : bool, default False
        Estimate at each row of ``thetas`` (shape ``(M, ndim)``) on the same rows:
        ``estimate(thetas, idx)``; otherwise at one point: ``estimate(theta, idx,
        weights=None)``, and ``estimate.gradient(theta, idx, weights=None)`` gives the
        gradient alone (for the updates whose log density nobody reads).
    vectorised : bool, default True
        With ``particles``, one call of the graph vectorised over the particles
        (:func:`grad_estimate_particles`); else one call of the one-point function per
        particle on rows gathered once (:func:`grad_estimate_each`), faster for networks.

    Returns
    -------
    callable
        ``estimate(...) -> (value, gradient)``.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> from pymc_minibatch.model.gradients import grad_estimator
    >>> y = np.random.default_rng(0).normal(3.0, 1.0, size=1000)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    >>> mm = pmm.MinibatchModel(model)
    >>> estimate = grad_estimator(mm)
    >>> value, grad = estimate(np.array([3.0]), np.arange(10))
    >>> bool(np.allclose(estimate.gradient(np.array([3.0]), np.arange(10)), grad))
    True
    >>> values, grads = grad_estimator(mm, particles=True)(np.zeros((4, 1)), np.arange(10))
    >>> grads.shape
    (4, 1)
    """
    if center is not None:
        estimate = ControlVariateGradients(minibatch_model, center)
        return estimate.particles if particles else estimate
    if not particles:
        return PlainGradients(minibatch_model)
    return functools.partial(grad_estimate_particles if vectorised else grad_estimate_each,
                             minibatch_model)  # fmt: skip


class PlainGradients:
    """The plain minibatch estimate at one point: ``(value, gradient)`` from a call
    (:func:`grad_estimate`), the gradient alone from :meth:`gradient`.

    Parameters
    ----------
    minibatch_model : MinibatchModel

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> from pymc_minibatch.model.gradients import PlainGradients
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=np.zeros(100))
    >>> estimate = PlainGradients(pmm.MinibatchModel(model))
    >>> estimate.gradient(np.array([1.0]), np.arange(10))
    array([-100.01])
    """

    def __init__(self, minibatch_model):
        self.minibatch_model = minibatch_model

    def __call__(self, theta, idx, weights=None):
        return grad_estimate(self.minibatch_model, theta, idx, weights)

    def gradient(self, theta, idx, weights=None):
        """The gradient of the estimate alone: without the log density, whose prior part is
        a pass over every parameter (a network's weights)."""
        return gradient_estimate(self.minibatch_model, theta, idx, weights)


def grad_estimate(minibatch_model, theta, idx, weights=None):
    """:meth:`MinibatchModel.grad_estimate`: ``(value, gradient)`` at ``theta`` from rows
    ``idx``, each row weighted by its entry of ``weights`` (default ``N / len(idx)``)."""
    mm = minibatch_model
    idx = np.asarray(idx)
    if idx.size == 0:
        raise ValueError("grad_estimate needs at least one row index")
    value, grad = mm.functions.call(
        "grad_estimate", mm.as_theta(theta), row_weights(mm.n_data, idx, weights),
        *mm.row_source.gather(idx),
    )  # fmt: skip
    return float(value), grad


def gradient_estimate(minibatch_model, theta, idx, weights=None, center=None):
    """:meth:`MinibatchModel.gradient_estimate`: the gradient of :func:`grad_estimate`
    (with ``center``, of :func:`grad_estimate_difference`) alone, without the log density,
    whose prior part is a pass over every parameter."""
    mm = minibatch_model
    idx = np.asarray(idx)
    if idx.size == 0:
        raise ValueError("gradient_estimate needs at least one row index")
    centers = () if center is None else (mm.as_theta(center),)
    name = "grad_estimate_gradient" if center is None else "grad_estimate_difference_gradient"
    return mm.functions.call(name, mm.as_theta(theta), *centers,
                             row_weights(mm.n_data, idx, weights), *mm.row_source.gather(idx))


def grad_estimate_difference(minibatch_model, theta, center, idx, weights=None):
    """:meth:`MinibatchModel.grad_estimate_difference`: :func:`grad_estimate` at ``theta``
    minus its likelihood part at ``center``, from one call on rows gathered once."""
    mm = minibatch_model
    idx = np.asarray(idx)
    if idx.size == 0:
        raise ValueError("grad_estimate_difference needs at least one row index")
    value, grad = mm.functions.call(
        "grad_estimate_difference",
        mm.as_theta(theta),
        mm.as_theta(center),
        row_weights(mm.n_data, idx, weights),
        *mm.row_source.gather(idx),
    )
    return float(value), grad


def grad_estimate_particles(minibatch_model, thetas, idx, weights=None):
    """:meth:`MinibatchModel.grad_estimate_particles`: :func:`grad_estimate` at each row of
    ``thetas`` on the same rows ``idx`` (weighted as there), from one call of a vectorised
    function."""
    mm = minibatch_model
    thetas, idx = _checked_particles(mm, thetas, idx, "grad_estimate_particles")
    if len(thetas) == 0:  # some compiled ops (PyTensor 2.x's C Softmax) fail on M = 0
        return np.empty(0), np.empty((0, mm.ndim))
    weights = row_weights(mm.n_data, idx, weights)
    if idx.size == 1:
        # PyTensor 2.x raises on the vectorised gradient of an indexing by a single
        # gathered row (AdvancedIncSubtensor1 runtime-broadcasting check): the row twice
        # at half the weight is the same estimate
        idx, weights = np.repeat(idx, 2), np.repeat(weights / 2, 2)
    values, grads = mm.functions.call(
        "grad_estimate_particles",
        np.ascontiguousarray(thetas),
        weights,
        *mm.row_source.gather(idx),
    )
    return values, grads


def grad_estimate_each(minibatch_model, thetas, idx, weights=None):
    """:func:`grad_estimate_particles` by one call of the one-point function per particle,
    on rows gathered once.

    For a network the vectorised graph's batched matrix products run several times slower
    in PyTensor's C backend than the same products one particle at a time
    (``benchmarks/big_models.py`` prints both)."""
    mm = minibatch_model
    thetas, idx = _checked_particles(mm, thetas, idx, "grad_estimate_each")
    weights, rows = row_weights(mm.n_data, idx, weights), mm.row_source.gather(idx)
    values, grads = np.empty(len(thetas)), np.empty_like(thetas)
    for m, theta in enumerate(thetas):
        values[m], grads[m] = mm.functions.call("grad_estimate", theta, weights, *rows)
    return values, grads


def _checked_particles(minibatch_model, thetas, idx, caller):
    """``thetas`` as float64 of shape ``(M, ndim)`` and ``idx`` as an array of at least one
    row, or a ``ValueError`` naming ``caller``."""
    ndim = minibatch_model.ndim
    thetas = np.asarray(thetas, dtype=np.float64)
    if thetas.ndim != 2 or thetas.shape[1] != ndim:
        raise ValueError(f"thetas must have shape (M, {ndim}), got {thetas.shape}")
    idx = np.asarray(idx)
    if idx.size == 0:
        raise ValueError(f"{caller} needs at least one row index")
    return thetas, idx


def row_weights(n_data, idx, weights):
    """Each row's weight in an estimate of a sum over all ``n_data`` rows (``n_data /
    len(idx)`` by default), checked against ``idx``.

    Raises
    ------
    ValueError
        If ``weights`` has another shape than ``idx``.
    """
    if weights is None:
        return np.full(idx.size, n_data / idx.size)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != idx.shape:
        raise ValueError(f"weights must have the shape of the rows {idx.shape}, got "
                         f"{weights.shape}")  # fmt: skip
    return weights
