"""The row terms a bounded exact sampler subsamples: log-likelihoods, or their residuals.

With control variates of order ``k``, each row's log-likelihood is split into its Taylor
expansion of order ``k`` around a center and a residual. The expansions sum over all rows
into a closed form (the *remainder* of a move, computed exactly), so that only the
residuals go through Poisson subsampling, and their bounds shrink with the distance to the
center (Cornish et al. 2019, "Scalable Metropolis-Hastings for exact Bayesian inference
with large datasets", ICML). For every pair of points::

    sum_i [l_i(theta') - l_i(theta)] = remainder(theta, theta') + sum_i [r_i(theta') - r_i(theta)].
"""


class PlainRows:
    """No control variates: the rows' log-likelihoods themselves."""

    order = 0

    def __init__(self, minibatch_model):
        self.minibatch_model = minibatch_model

    def remainder(self, theta, theta2):
        return 0.0

    def row_pair(self, theta, theta2, idx):
        """The row terms of rows ``idx`` at ``theta`` and at ``theta2``."""
        return self.minibatch_model.loglik_pair(theta, theta2, idx)


class FirstOrderResiduals(PlainRows):
    """``r_i(theta) = l_i(theta) - grad l_i(center) . (theta - center)`` (SMH-1)."""

    order = 1

    def __init__(self, minibatch_model, center):
        super().__init__(minibatch_model)
        self.center = center
        # the full-data gradient of the log-likelihood at the center
        self.gradient = (
            minibatch_model.logp_and_grad(center)[1] - minibatch_model.logprior_and_grad(center)[1]
        )

    def remainder(self, theta, theta2):
        return float(self.gradient @ (theta2 - theta))

    def row_pair(self, theta, theta2, idx):
        current, proposed = super().row_pair(theta, theta2, idx)
        linear = self.minibatch_model.directional_grad_loglik(self.center, theta2 - theta, idx)
        return current, proposed - linear


class SecondOrderResiduals(PlainRows):
    """``r_i = l_i - T_i`` with the quadratic expansions ``T_i`` of a
    :class:`~pymc_minibatch.model.taylor.SecondOrderExpansion` (SMH-2)."""

    order = 2

    def __init__(self, minibatch_model, expansion):
        super().__init__(minibatch_model)
        self.expansion = expansion
        # the expansion's values at the last two points asked about: a step asks again about
        # its current point, the previous step's proposal or current point
        self._recent = {}

    def _values_at(self, theta):
        """The expansion's values at ``theta`` already computed (a dict), kept for the last
        two points."""
        key = theta.tobytes()
        values = self._recent.pop(key, None)
        if values is None:
            values = {}
            if len(self._recent) == 2:  # forget the point asked about least recently
                del self._recent[next(iter(self._recent))]
        self._recent[key] = values
        return values

    def quadratic(self, theta):
        """``sum_i [T_i(theta) - l_i(center)]`` (:meth:`SecondOrderExpansion.quadratic
        <pymc_minibatch.model.taylor.SecondOrderExpansion.quadratic>`)."""
        values = self._values_at(theta)
        if "quadratic" not in values:
            values["quadratic"] = self.expansion.quadratic(theta)
        return values["quadratic"]

    def whitened(self, theta, z=None):
        """``z = L^-1 (theta - center)``; ``z``: the value, when the caller built ``theta``
        from it (a proposal made in whitened coordinates), kept for later steps."""
        values = self._values_at(theta)
        if z is not None:
            values["z"] = z
        elif "z" not in values:
            values["z"] = self.expansion.whitened(theta)
        return values["z"]

    def from_whitened(self, z):
        """The point ``center + L z`` (a proposal made in whitened coordinates), with ``z``
        kept for later steps."""
        theta = self.expansion.center + self.expansion.factor.to_theta(z)
        self.whitened(theta, z)
        return theta

    def remainder(self, theta, theta2):
        return self.quadratic(theta2) - self.quadratic(theta)

    def row_pair(self, theta, theta2, idx):
        return self.expansion.residual_pair(theta, theta2, self.minibatch_model.gather_rows(idx))
