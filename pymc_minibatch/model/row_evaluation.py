"""``MinibatchModel``'s evaluation on a set of rows: log-likelihood, its gradients, log prior.

:class:`RowEvaluation` is the part of :class:`~pymc_minibatch.MinibatchModel` that a
sampler calls at every step: the per-row log-likelihood of the rows ``idx`` (repeats
allowed) at ``theta``, its gradients and directional derivatives, the log prior and the
transforms' log-Jacobians, and the reading of the rows (gathered once, prefetched, chunk
caches counted).

It is a mixin: it has no state of its own and needs from the class that mixes it in only
public names:

- ``functions``: the compiled functions by name
  (:class:`~pymc_minibatch.model.functions.CompiledFunctions`), called as
  ``functions.call(name, *inputs)`` with the names of
  :data:`~pymc_minibatch.model.builders.BUILDERS`;
- ``row_source``: the data arrays on the row axis
  (:class:`~pymc_minibatch.model.rows.RowSource`): ``gather``, ``prefetch`` and
  ``cache_counts``;
- ``as_theta(theta)`` and ``ndim``, the bijection's check of ``theta`` and its length.
"""

import numpy as np

#: Rows per vectorised Jacobian call (its cost grows with the square of the rows).
JACOBIAN_BLOCK_ROWS = 128


class RowEvaluation:
    """The evaluation on a set of rows of :class:`~pymc_minibatch.MinibatchModel` (see the
    module docstring for what it needs from the class)."""

    def gather_rows(self, idx):
        """The data of rows ``idx`` (repeats allowed), one in-memory array per row input:
        read once, then passed to several evaluations as ``rows=``.

        Examples
        --------
        >>> sorted(rows.shape for rows in mm.gather_rows(np.array([0, 2])))  # X and y
        [(2,), (2, 3)]
        """
        return self.row_source.gather(idx)

    def loglik(self, theta, idx):
        """Log-likelihood of rows ``idx`` (repeats allowed) at ``theta``, shape ``(len(idx),)``.

        Examples
        --------
        >>> mm.loglik(np.zeros(3), np.array([0, 1, 1])).round(4)
        array([-0.6931, -0.6931, -0.6931])
        """
        return self.functions.call("loglik", self.as_theta(theta), *self.row_source.gather(idx))

    def loglik_pair(self, theta, theta2, idx=None, *, rows=None):
        """``(loglik(theta, idx), loglik(theta2, idx))`` from one call on the same rows.

        ``rows``: the rows already read by :meth:`gather_rows` (instead of ``idx``).

        Examples
        --------
        >>> current, proposed = mm.loglik_pair(np.zeros(3), np.ones(3), np.arange(5))
        >>> current.shape, proposed.shape
        ((5,), (5,))
        """
        if rows is None:
            rows = self.row_source.gather(idx)
        return tuple(
            self.functions.call("loglik_pair", self.as_theta(theta), self.as_theta(theta2), *rows)
        )

    def grad_loglik(self, theta, idx, per_row=False):
        """Gradient of the log-likelihood of rows ``idx`` with respect to ``theta``.

        Returns the gradient of the sum over rows, shape ``(ndim,)``, or with
        ``per_row=True`` one gradient per row, shape ``(len(idx), ndim)``.

        Examples
        --------
        >>> mm.grad_loglik(np.zeros(3), np.arange(10)).shape
        (3,)
        >>> mm.grad_loglik(np.zeros(3), np.arange(10), per_row=True).shape  # doctest: +SKIP
        (10, 3)
        """
        theta = self.as_theta(theta)
        if not per_row:
            return self.functions.call("grad_loglik", theta, *self.row_source.gather(idx))[1]
        idx = np.asarray(idx).ravel()
        # a vectorised Jacobian costs O(B^2): work in blocks of JACOBIAN_BLOCK_ROWS rows
        blocks = [
            self._jacobian_block(theta, idx[start : start + JACOBIAN_BLOCK_ROWS])
            for start in range(0, idx.size, JACOBIAN_BLOCK_ROWS)
        ]
        return np.concatenate(blocks) if blocks else np.empty((0, self.ndim))

    def loglik_and_grad(self, theta, idx):
        """``(loglik(theta, idx), grad of their sum)`` from one call on the same rows.

        Examples
        --------
        >>> values, grad = mm.loglik_and_grad(np.zeros(3), np.arange(10))
        >>> values.shape, grad.shape
        ((10,), (3,))
        """
        values, grad = self.functions.call("grad_loglik", self.as_theta(theta),
                                            *self.row_source.gather(idx))  # fmt: skip
        return values, grad

    def _jacobian_block(self, theta, idx):
        if idx.size == 1:
            # PyTensor 2.x raises on a vectorised Jacobian over a single gathered row
            # (AdvancedIncSubtensor1 runtime-broadcasting check): evaluate the row twice
            rows = self.row_source.gather(np.repeat(idx, 2))
            return self.functions.call("grad_loglik_rows", theta, *rows)[1][:1]
        return self.functions.call("grad_loglik_rows", theta, *self.row_source.gather(idx))[1]

    def directional_grad_loglik(self, theta, direction, idx):
        """Per-row directional derivatives ``grad l_i(theta) . direction``, shape (len(idx),).

        One forward-mode product (Jacobian times vector) over the batch, in O(len(idx)).

        Examples
        --------
        Against a finite difference:

        >>> theta, direction, idx = np.zeros(3), np.array([1.0, 0.0, 0.0]), np.arange(4)
        >>> step = (mm.loglik(theta + 1e-6 * direction, idx) - mm.loglik(theta, idx)) / 1e-6
        >>> np.allclose(mm.directional_grad_loglik(theta, direction, idx), step, atol=1e-5)
        True
        """
        theta, direction = self.as_theta(theta), self.as_theta(direction)
        return self.functions.call("directional_grad_loglik", theta, direction,
                                    *self.row_source.gather(idx))  # fmt: skip

    # ---- the log prior, which reads no rows ----------------------------------------------
    def logprior(self, theta):
        """Priors with transform Jacobians, plus every term that touches no rows.

        Examples
        --------
        >>> round(mm.logprior(np.zeros(3)), 4)  # three standard normals at 0
        -2.7568
        """
        return float(self.functions.call("logprior", self.as_theta(theta)))

    def logprior_and_grad(self, theta):
        """``(logprior(theta), gradient)``.

        Examples
        --------
        >>> value, grad = mm.logprior_and_grad(np.ones(3))
        >>> grad
        array([-1., -1., -1.])
        """
        value, grad = self.functions.call("logprior_and_grad", self.as_theta(theta))
        return float(value), grad

    def log_jacobian_and_grad(self, theta):
        """The transforms' log-Jacobians (included in :meth:`logprior`) and their gradient.

        Samplers that temper the prior (MINT) temper the density of the constrained
        values, not the Jacobian, so that the tempered target does not depend on the
        parametrisation.

        Examples
        --------
        >>> mm.log_jacobian_and_grad(np.zeros(3))[0]  # beta is untransformed
        0.0
        """
        value, grad = self.functions.call("log_jacobian_and_grad", self.as_theta(theta))
        return float(value), grad

    # ---- the reading of the rows ---------------------------------------------------------
    def chunk_cache_counts(self):
        """``(hits, misses)`` of the chunk caches of chunked ``data=`` arrays so far (see
        :class:`~pymc_minibatch.ChunkedRows`); ``(0, 0)`` without them.

        Examples
        --------
        >>> mm.chunk_cache_counts()  # mm's rows are NumPy arrays
        (0, 0)
        """
        return self.row_source.cache_counts()

    def prefetch_rows(self, idx):
        """Announce that rows ``idx`` will be read by the next calls: chunked ``data=``
        arrays read them now, in one pass over their chunks
        (:meth:`~pymc_minibatch.ChunkedRows.prefetch`).
        Nothing changes in what any call returns.

        Examples
        --------
        >>> mm.prefetch_rows(np.array([7, 2, 7]))  # mm's rows are in memory: nothing to read
        >>> mm.loglik(theta, np.array([7, 2])).shape
        (2,)
        """
        self.row_source.prefetch(idx)
