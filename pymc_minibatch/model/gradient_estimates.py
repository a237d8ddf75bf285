"""``MinibatchModel``'s minibatch estimates of the log posterior and its gradient.

:class:`GradientEstimates` is the part of :class:`~pymc_minibatch.MinibatchModel` that
stochastic-gradient samplers call: the plain estimate at one point, at many points on the
same rows, and minus its likelihood part at a center (the minibatch part of a
control-variate estimate). The estimators themselves are in
:mod:`pymc_minibatch.model.gradients`; these methods are their public names on the model.

It is a mixin: it has no state of its own, and the estimators need from the class that
mixes it in only public names: ``functions`` (the compiled functions by name),
``row_source`` (the rows, gathered once per call), ``as_theta``, ``ndim`` and ``n_data``.
"""

from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.model import gradients


class GradientEstimates:
    """The minibatch gradient estimates of :class:`~pymc_minibatch.MinibatchModel` (see the
    module docstring for what they need from the class)."""

    def grad_estimate(self, theta, idx, weights=None):
        """Unbiased minibatch estimate of the log posterior and its gradient.

        ``logprior(theta) + N / len(idx) * sum(loglik(theta, idx))`` and its gradient:
        unbiased for the full log posterior when ``idx`` is drawn uniformly (with or
        without replacement). ``weights`` (one per row of ``idx``) replace ``N / len(idx)``
        for batches drawn otherwise (stratified: :mod:`pymc_minibatch.kernels.strata`).

        Examples
        --------
        >>> rng = np.random.default_rng(1)
        >>> value, grad = mm.grad_estimate(np.zeros(3), rng.choice(mm.n_data, 100))
        >>> grad.shape
        (3,)
        """
        return gradients.grad_estimate(self, theta, idx, weights)

    @renamed_arguments(centre="center")
    def grad_estimate_difference(self, theta, center, idx, weights=None):
        """:meth:`grad_estimate` at ``theta`` minus its likelihood part at ``center``.

        ``logprior(theta) + N / len(idx) * sum(loglik(theta, idx) - loglik(center, idx))``
        and its gradient with respect to ``theta`` minus the likelihood part's gradient at
        ``center``, from one call on rows gathered once: the minibatch part of a
        control-variate estimate (see
        :class:`~pymc_minibatch.model.control_variates.ControlVariateGradients`).

        Examples
        --------
        >>> value, grad = mm.grad_estimate_difference(np.ones(3), np.ones(3), np.arange(100))
        >>> bool(np.isclose(value, mm.logprior(np.ones(3))))
        True
        >>> bool(np.allclose(grad, mm.logprior_and_grad(np.ones(3))[1]))
        True
        """
        return gradients.grad_estimate_difference(self, theta, center, idx, weights)

    def gradient_estimate(self, theta, idx, weights=None, center=None):
        """The gradient of :meth:`grad_estimate` (with ``center``, of
        :meth:`grad_estimate_difference`) alone, without the log density: cheaper where
        the prior's value is a pass over many parameters (a network's weights).

        Examples
        --------
        >>> grad = mm.gradient_estimate(np.ones(3), np.arange(100))
        >>> bool(np.allclose(grad, mm.grad_estimate(np.ones(3), np.arange(100))[1]))
        True
        """
        return gradients.gradient_estimate(self, theta, idx, weights, center)

    def grad_estimate_particles(self, thetas, idx, weights=None):
        """:meth:`grad_estimate` at each row of ``thetas`` (shape ``(M, ndim)``), all on the
        same rows ``idx`` (gathered once) with the same ``weights``. Returns values ``(M,)``
        and gradients ``(M, ndim)``.

        One call of one compiled function for all particles: the graph of
        :meth:`grad_estimate` and its gradient vectorised over a leading particle axis of
        ``theta`` (``pytensor.graph.replace.vectorize_graph``). A parameter outside its
        support gives ``-inf`` (or is not checked, with ``check_bounds=False``) at that
        particle alone, as in :meth:`grad_estimate`.

        Examples
        --------
        >>> values, grads = mm.grad_estimate_particles(np.zeros((4, 3)), np.arange(100))
        >>> values.shape, grads.shape
        ((4,), (4, 3))
        """
        return gradients.grad_estimate_particles(self, thetas, idx, weights)
