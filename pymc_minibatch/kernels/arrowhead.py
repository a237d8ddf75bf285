"""Block-arrowhead symmetric matrices and their Cholesky factors.

In a hierarchical model a row's log-likelihood touches a few *shared* parameters (population
means and scales, regression coefficients) and the *local* parameters of its own group
only, so the Hessian of the log posterior is zero between the local parameters of two
different groups. Ordered with each group's ``k`` local coordinates first and the ``S``
shared ones last, it is *block arrowhead*::

    P = [ A_1              B_1 ]
        [      A_2         B_2 ]
        [           ...    ... ]
        [ B_1^T B_2^T ...  C   ]

with ``A_g`` (k x k) per group, ``B_g`` (k x S) and ``C`` (S x S). Its Cholesky factor
``P = R R^T`` has the same pattern (no fill-in outside the last block row):
``A_g = L_g L_g^T``, ``W_g = L_g^-1 B_g`` and the Schur complement
``C - sum_g W_g^T W_g = L_S L_S^T``, so that::

    R = [ L_1               ]
        [      L_2          ]
        [           ...     ]
        [ W_1^T W_2^T ... L_S ]

Factorising costs ``O(G k^3 + G k^2 S + G k S^2 + S^3)`` and every product or solve with
``R`` costs ``O(G k^2 + G k S + S^2)``: linear in the number of groups ``G``, where a dense
factor of the ``d = G k + S`` parameters would cost ``O(d^3)`` to compute and ``O(d^2)``
memory (800 MB at ``d = 10^4``). Without local parameters (``G = 0``) it is a dense
Cholesky factorisation of ``C``.

:class:`ArrowheadFactor` whitens a Laplace approximation ``N(mode, P^-1)``: ``theta - mode =
L z`` with ``L = R^-T``, so ``L^T P L = I``; :meth:`ArrowheadFactor.to_z` is ``R^T``. A
row that touches group ``g`` then depends on ``z`` only through that group's ``k``
coordinates and the ``S`` shared ones (``R^-1`` keeps the pattern of ``R``), which is what
lets per-row bounds follow the movement of a row's own parameters
(:mod:`pymc_minibatch.model.taylor`).

:func:`damped_cholesky` factorises a matrix that is not positive definite (a Hessian away
from a mode) after shifting the diagonal of only the blocks that need it.
"""

from typing import NamedTuple

import numpy as np
import scipy.linalg


class ArrowheadMatrix(NamedTuple):
    """A symmetric ``d x d`` matrix with the block-arrowhead pattern of the module docstring.

    Every coordinate ``0..d-1`` appears exactly once among ``local`` and ``shared``.
    """

    shared: np.ndarray
    """``(S,)`` coordinates of the shared block."""
    local: np.ndarray
    """``(G, k)`` coordinates of each group's block."""
    local_blocks: np.ndarray
    """``(G, k, k)``: ``A_g``."""
    coupling: np.ndarray
    """``(G, k, S)``: ``B_g``, the entries between a group's and the shared coordinates."""
    shared_block: np.ndarray
    """``(S, S)``: ``C``."""

    @property
    def ndim(self):
        return int(self.shared.size + self.local.size)

    def matvec(self, x):
        """``M @ x`` for ``x`` of shape ``(..., d)``."""
        x = np.asarray(x, dtype=np.float64)
        out = np.empty_like(x)
        if not self.local.size:  # no groups: a dense product (at every step of a sampler)
            out[..., self.shared] = x[..., self.shared] @ self.shared_block
            return out
        x_local, x_shared = x[..., self.local], x[..., self.shared]
        out[..., self.local] = np.einsum("gab,...gb->...ga", self.local_blocks, x_local) + (
            np.einsum("gas,...s->...ga", self.coupling, x_shared)
        )
        out[..., self.shared] = x_shared @ self.shared_block + np.einsum(
            "gas,...ga->...s", self.coupling, x_local
        )
        return out

    def to_dense(self):
        """The full ``d x d`` array (for tests and small models)."""
        dense = np.zeros((self.ndim, self.ndim))
        dense[np.ix_(self.shared, self.shared)] = self.shared_block
        for g, indices in enumerate(self.local):
            dense[np.ix_(indices, indices)] = self.local_blocks[g]
            dense[np.ix_(indices, self.shared)] = self.coupling[g]
            dense[np.ix_(self.shared, indices)] = self.coupling[g].T
        return dense

    def diagonal(self):
        out = np.empty(self.ndim)
        out[self.shared] = np.diagonal(self.shared_block)
        out[self.local] = np.diagonal(self.local_blocks, axis1=1, axis2=2)
        return out

    def plus_diagonal(self, values):
        """``M + diag(values)`` (``values`` of shape ``(d,)`` or a scalar)."""
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), (self.ndim,))
        k = self.local.shape[1]
        local_blocks = self.local_blocks + values[self.local][:, :, None] * np.eye(k)
        shared_block = self.shared_block + np.diag(values[self.shared])
        return self._replace(local_blocks=local_blocks, shared_block=shared_block)

    def without_shared(self, coordinates):
        """The principal submatrix without the shared ``coordinates`` (positions in
        ``theta``): positive definite when this matrix is. It covers fewer coordinates than
        ``theta`` has; a factor of it gives the others zero whitened coordinates."""
        keep = ~np.isin(self.shared, coordinates)
        return self._replace(shared=self.shared[keep], coupling=self.coupling[:, :, keep],
                             shared_block=self.shared_block[np.ix_(keep, keep)])  # fmt: skip

    @classmethod
    def from_dense(cls, dense, shared=None, local=None):
        """The pattern ``(shared, local)`` read from a dense symmetric array (default: every
        coordinate shared); entries outside the pattern are ignored."""
        dense = np.asarray(dense, dtype=np.float64)
        d = dense.shape[0]
        shared = np.arange(d) if shared is None else np.asarray(shared)
        local = np.empty((0, 0), dtype=np.int64) if local is None else np.asarray(local)
        local_blocks = dense[local[:, :, None], local[:, None, :]]
        coupling = dense[local[:, :, None], shared[None, None, :]]
        return cls(shared, local, local_blocks, coupling, dense[np.ix_(shared, shared)])


class NotPositiveDefiniteError(np.linalg.LinAlgError):
    """The matrix has a non-positive pivot: it is not positive definite."""


class ArrowheadFactor(NamedTuple):
    """The lower Cholesky factor ``R`` of a positive definite :class:`ArrowheadMatrix`, as a
    linear preconditioner ``theta = L z`` with ``L = R^-T`` (so ``L^T P L = I``).

    ``factor @ z`` is ``L z``, so it stands in for a dense square root of the covariance
    ``P^-1`` in proposals (``theta + scale * factor @ xi``). All methods act on the last
    axis of arrays of shape ``(..., d)``.
    """

    shared: np.ndarray
    local: np.ndarray
    local_chol: np.ndarray
    """``(G, k, k)`` lower: ``L_g``."""
    local_chol_inverse: np.ndarray
    """``(G, k, k)``: ``L_g^-1``."""
    coupling: np.ndarray
    """``(G, k, S)``: ``W_g = L_g^-1 B_g``."""
    shared_chol: np.ndarray
    """``(S, S)`` lower: ``L_S``."""

    @property
    def ndim(self):
        return int(self.shared.size + self.local.size)

    def to_z(self, x):
        """``R^T x``: whitened coordinates of ``x`` (a difference from the mode); zero on the
        coordinates the factor does not cover (:meth:`ArrowheadMatrix.without_shared`)."""
        x = np.asarray(x, dtype=np.float64)
        z = np.zeros_like(x)
        if not self.local.size:  # no groups: a dense product (at every step of a sampler)
            z[..., self.shared] = x[..., self.shared] @ self.shared_chol
            return z
        x_local, x_shared = x[..., self.local], x[..., self.shared]
        z[..., self.local] = np.einsum("gba,...gb->...ga", self.local_chol, x_local) + (
            np.einsum("gas,...s->...ga", self.coupling, x_shared)
        )
        z[..., self.shared] = x_shared @ self.shared_chol
        return z

    def to_theta(self, z):
        """``R^-T z = L z``."""
        z = np.asarray(z, dtype=np.float64)
        x = np.empty_like(z)
        x_shared = _solve_rows(self.shared_chol.T, z[..., self.shared], lower=False)
        x[..., self.shared] = x_shared
        if not self.local.size:
            return x
        rhs = z[..., self.local] - np.einsum("gas,...s->...ga", self.coupling, x_shared)
        x[..., self.local] = np.einsum("gba,...gb->...ga", self.local_chol_inverse, rhs)
        return x

    def gradient_to_z(self, gradient):
        """``L^T g = R^-1 g``: a gradient in ``theta`` as a gradient in ``z``."""
        gradient = np.asarray(gradient, dtype=np.float64)
        y = np.empty_like(gradient)
        y_local = np.einsum("gab,...gb->...ga", self.local_chol_inverse, gradient[..., self.local])
        y[..., self.local] = y_local
        rhs = gradient[..., self.shared] - np.einsum("gas,...ga->...s", self.coupling, y_local)
        y[..., self.shared] = _solve_rows(self.shared_chol, rhs, lower=True)
        return y

    def solve(self, b):
        """``P^-1 b = L L^T b``."""
        return self.to_theta(self.gradient_to_z(b))

    def whitened_rows(self, rows, groups):
        """``R^-1 a`` for sparse rows ``a``: each row's entries on the shared coordinates
        (``rows[0]``, shape ``(n, S)``) and on its group's local ones (``rows[1]``, shape
        ``(n, k)``; ``groups`` ``(n,)``, -1 for a row with no local entries). Returns the
        two parts of ``R^-1 a``, which is zero on every other group: ``(n, S)`` and
        ``(n, k)``."""
        shared_part, local_part = rows
        if self.local.shape[0] == 0:  # no groups: every coordinate shared
            return _solve_rows(self.shared_chol, shared_part, lower=True), local_part
        groups = np.asarray(groups)
        has_group = groups >= 0
        safe = np.where(has_group, groups, 0)
        y_local = np.einsum("nab,nb->na", self.local_chol_inverse[safe], local_part)
        y_local[~has_group] = 0.0
        rhs = shared_part - np.einsum("nas,na->ns", self.coupling[safe], y_local)
        return _solve_rows(self.shared_chol, rhs, lower=True), y_local

    def __matmul__(self, z):
        return self.to_theta(z)

    def matrix(self):
        """``P = R R^T``, the :class:`ArrowheadMatrix` this factor whitens."""
        return ArrowheadMatrix(
            self.shared,
            self.local,
            np.einsum("gab,gcb->gac", self.local_chol, self.local_chol),
            np.einsum("gab,gbs->gas", self.local_chol, self.coupling),
            self.shared_chol @ self.shared_chol.T
            + np.einsum("gas,gat->st", self.coupling, self.coupling),
        )

    def covariance_diagonal(self):
        """The diagonal of ``P^-1 = L L^T``: the Laplace approximation's variances."""
        # L = R^-T: row j of L is column j of R^-1 ... computed through the blocks
        shared_inverse = scipy.linalg.solve_triangular(
            self.shared_chol, np.eye(self.shared.size), lower=True
        )  # L_S^-1
        variances = np.empty(self.ndim)
        variances[self.shared] = np.sum(shared_inverse**2, axis=0)
        # local rows of L: L_g^-T e - L_g^-T W_g L_S^-T ... : (L_g^-T)(I, -W_g L_S^-T)
        local_left = np.transpose(self.local_chol_inverse, (0, 2, 1))  # L_g^-T
        across = -np.einsum("gab,gbs,ts->gat", local_left, self.coupling, shared_inverse)
        variances[self.local] = np.sum(local_left**2, axis=2) + np.sum(across**2, axis=2)
        return variances

    def dense(self):
        """``L`` as a dense ``d x d`` array (for tests and small models)."""
        return self.to_theta(np.eye(self.ndim)).T


def cholesky(matrix: ArrowheadMatrix) -> ArrowheadFactor:
    """The Cholesky factor of a positive definite :class:`ArrowheadMatrix`.

    Raises
    ------
    NotPositiveDefiniteError
        If ``matrix`` is not positive definite (a group's block or the Schur complement of
        the shared block has a non-positive pivot).
    """
    try:
        local_chol = np.linalg.cholesky(matrix.local_blocks)
    except np.linalg.LinAlgError as err:
        raise NotPositiveDefiniteError("a group's block is not positive definite") from err
    inverse = _inverse(local_chol)
    coupling = np.einsum("gab,gbs->gas", inverse, matrix.coupling)
    schur = matrix.shared_block - np.einsum("gas,gat->st", coupling, coupling)
    try:
        shared_chol = np.linalg.cholesky(0.5 * (schur + schur.T))
    except np.linalg.LinAlgError as err:
        raise NotPositiveDefiniteError("the shared block's Schur complement is not positive "
                                       "definite") from err  # fmt: skip
    return ArrowheadFactor(matrix.shared, matrix.local, local_chol, inverse, coupling, shared_chol)


def schur_complement(matrix: ArrowheadMatrix):
    """``C - sum_g B_g^T A_g^-1 B_g``: the shared block once the groups' are eliminated (the
    groups' blocks must be positive definite)."""
    coupling = np.einsum("gab,gbs->gas", _inverse(np.linalg.cholesky(matrix.local_blocks)),
                         matrix.coupling)  # fmt: skip
    schur = matrix.shared_block - np.einsum("gas,gat->st", coupling, coupling)
    return 0.5 * (schur + schur.T)


def damped_cholesky(precision: ArrowheadMatrix):
    """``(cholesky(P + D), damped)``: ``D`` is zero where ``P`` is positive definite, and
    otherwise a diagonal shift of only the blocks that need one, each by just more than its
    most negative eigenvalue: the groups' blocks first, then the shared block against its
    Schur complement (a modified Cholesky factorisation, Gill & Murray 1974, "Newton-type
    methods for unconstrained and linearly constrained optimization", Mathematical
    Programming, by blocks). A Newton step far from a mode is then damped along the
    directions of negative curvature only (typically a hierarchical scale), and the other
    coordinates keep theirs."""
    try:
        return cholesky(precision), False
    except NotPositiveDefiniteError:
        pass
    scale = max(float(np.max(np.abs(precision.diagonal()))), 1e-300)
    local_blocks = precision.local_blocks
    if local_blocks.size:
        lowest = np.linalg.eigvalsh(local_blocks)[:, 0]
        shift = np.where(lowest > 1e-10 * scale, 0.0, 1e-8 * scale - 2.0 * lowest)
        k = local_blocks.shape[1]
        local_blocks = local_blocks + shift[:, None, None] * np.eye(k)
    repaired = precision._replace(local_blocks=local_blocks)
    try:
        return cholesky(repaired), True
    except NotPositiveDefiniteError:
        pass
    schur = schur_complement(repaired)
    lowest = float(np.linalg.eigvalsh(schur)[0])
    shift = 1e-8 * scale - 2.0 * min(lowest, 0.0)
    while True:
        try:
            damped = repaired._replace(
                shared_block=repaired.shared_block + shift * np.eye(repaired.shared.size)
            )
            return cholesky(damped), True
        except NotPositiveDefiniteError:  # rounding in the eigenvalue: a little more
            shift *= 10.0


def _inverse(lower):
    """Inverses of a stack of lower-triangular ``(G, k, k)`` matrices (``k = 0`` allowed)."""
    return np.linalg.inv(lower) if lower.shape[-1] else np.zeros_like(lower)


def _solve_rows(triangular, rhs, lower):
    """``triangular^-1 x`` for every ``x`` along the last axis of ``rhs``."""
    if triangular.size == 0:
        return rhs.copy()
    if rhs.ndim == 1 and triangular.flags.f_contiguous:
        # one vector (a sampler's step): BLAS directly, without SciPy's checks (a tenth of
        # the time), on the Fortran-ordered array it reads without a copy
        return scipy.linalg.blas.dtrsv(triangular, rhs, lower=int(lower))
    if rhs.ndim == 1 and triangular.flags.c_contiguous:  # its transpose is Fortran-ordered
        return scipy.linalg.blas.dtrsv(triangular.T, rhs, lower=int(not lower), trans=1)
    flat = rhs.reshape(-1, rhs.shape[-1])
    solved = scipy.linalg.solve_triangular(triangular, flat.T, lower=lower, check_finite=False)
    return solved.T.reshape(rhs.shape)
