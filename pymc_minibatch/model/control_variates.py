"""Control-variate estimates of the log posterior and its gradient for tall data.

Baker, Fearnhead, Fox & Nemeth (2019), "Control variates for stochastic gradient MCMC",
Statistics and Computing 29: with a center ``theta_hat`` (the posterior mode) and the
full-data log-likelihood ``L`` and its gradient computed there once,

    f_S(theta) = log p0(theta) + L(theta_hat)
                 + N / |S| * sum_{i in S} [l_i(theta) - l_i(theta_hat)]

and its gradient estimate ``log p(theta)`` and ``grad log p(theta)`` without bias for rows
``S`` drawn uniformly. The minibatch part is a difference of per-row terms that nearly
cancel near ``theta_hat``: its noise scales with ``|theta - theta_hat|^2`` instead of with
``N / |S|``, so within the posterior (``|theta - theta_hat| ~ 1 / sqrt(N)``) it stays
bounded as ``N`` grows.
"""

import numpy as np


class ControlVariateGradients:
    """Control-variate estimates around ``center`` for one point or for many.

    Parameters
    ----------
    minibatch_model : MinibatchModel
    center : ndarray
        ``theta_hat``, flat transformed values (usually the Laplace fit's mode). The
        full-data log-likelihood and its gradient there cost one pass over the data.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> from pymc_minibatch.model.control_variates import ControlVariateGradients
    >>> y = np.random.default_rng(0).normal(3.0, 1.0, size=10_000)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    >>> mm = pmm.MinibatchModel(model)
    >>> estimate = ControlVariateGradients(mm, mm.laplace().mode)

    The likelihood is quadratic, so the estimate is exact on any batch:

    >>> value, grad = estimate(np.array([3.1]), np.arange(10))
    >>> bool(np.allclose(grad, mm.logp_and_grad(np.array([3.1]))[1]))
    True
    """

    def __init__(self, minibatch_model, center):
        self.minibatch_model = minibatch_model
        self.center = np.asarray(center, dtype=np.float64)
        logp, grad = minibatch_model.logp_and_grad(self.center)
        self._center_prior = minibatch_model.logprior_and_grad(self.center)
        prior, prior_grad = self._center_prior
        self.center_loglik = logp - prior
        """Full-data log-likelihood at the center."""
        self.center_grad_loglik = grad - prior_grad
        """Its gradient, ``sum_i grad l_i(theta_hat)``."""

    def __call__(self, theta, idx, weights=None):
        """``(log p estimate, gradient estimate)`` at ``theta`` from rows ``idx`` (with
        ``weights``: each row's weight, for batches not drawn uniformly)."""
        value, grad = self.minibatch_model.grad_estimate_difference(
            theta, self.center, idx, weights
        )
        return value + self.center_loglik, grad + self.center_grad_loglik

    def gradient(self, theta, idx, weights=None):
        """The gradient estimate of :meth:`__call__` alone (no log density)."""
        grad = self.minibatch_model.gradient_estimate(theta, idx, weights, self.center)
        return grad + self.center_grad_loglik

    def particles(self, thetas, idx, weights=None):
        """The estimates at each row of ``thetas`` (shape ``(M, ndim)``) on the same rows
        and ``weights``: values ``(M,)`` and gradients ``(M, ndim)``. The center's minibatch
        terms are computed once for all particles."""
        mm = self.minibatch_model
        logp, grads = mm.grad_estimate_particles(thetas, idx, weights)
        center_logp, center_grad = mm.grad_estimate(self.center, idx, weights)
        # grad_estimate includes the prior at the center: keep only its likelihood part
        center_prior, center_prior_grad = self._center_prior
        center_loglik = center_logp - center_prior
        center_grad_loglik = center_grad - center_prior_grad
        return (
            logp - center_loglik + self.center_loglik,
            grads - center_grad_loglik + self.center_grad_loglik,
        )


def use_control_variates(control_variates, batch_size, n_data, exact_fit=lambda: True):
    """Resolve a ``control_variates`` argument: ``"auto"`` is on unless every batch holds all
    rows (then the plain estimate is exact already) or ``exact_fit()`` is False; ``True`` or
    ``False`` as given.

    Without the exact Laplace fit (a network: :mod:`pymc_minibatch.model.diagonal_fit`) the
    center is a local mode found by Adam, which a chain soon leaves: on the 784-200-10
    network of ``benchmarks/big_models.py``, at the last draws of SGLD's chain, the
    control-variate estimate's noise was three quarters of the plain one's, for twice the
    cost per update."""
    if isinstance(control_variates, str) and control_variates == "auto":
        return batch_size < n_data and bool(exact_fit())
    if isinstance(control_variates, bool | np.bool_):
        return bool(control_variates)
    raise ValueError(f"control_variates must be 'auto', True or False, got {control_variates!r}")
