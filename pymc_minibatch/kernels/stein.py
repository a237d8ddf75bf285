"""Kernel Stein discrepancy (KSD) with the inverse multiquadric (IMQ) kernel.

For a target density ``p`` with score ``s = grad log p`` and a base kernel ``k``, the
Langevin Stein kernel is (Liu, Lee & Jordan 2016; Chwialkowski, Strathmann & Gretton 2016)

    k_p(x, y) = s(x).s(y) k(x, y) + s(x).grad_y k(x, y) + s(y).grad_x k(x, y)
                + trace(grad_x grad_y k(x, y)),

and ``KSD^2 = E_{x,y ~ q} k_p(x, y)``, which is zero when ``q = p`` and positive otherwise
for a suitable ``k``. With the IMQ kernel ``k(x, y) = (c^2 + |x - y|^2)^beta``,
``beta in (-1, 0)``, the KSD detects non-convergence (a sequence whose KSD goes to zero
converges weakly to ``p``) for distantly dissipative targets with Lipschitz score, while
Gaussian and Matern kernels can miss it in dimension 3 and above (Gorham & Mackey 2017,
"Measuring sample quality with kernels", ICML).

With ``u = c^2 + |r|^2`` and ``r = x - y`` the closed forms used here are

    grad_x k = 2 beta u^(beta-1) r,        grad_y k = -grad_x k,
    trace(grad_x grad_y k) = -4 beta (beta-1) u^(beta-2) |r|^2 - 2 beta d u^(beta-1),

so ``k_p(x, y) = s(x).s(y) u^beta + 2 beta u^(beta-1) (s(y) - s(x)).r + trace term`` and
on the diagonal ``k_p(x, x) = |s(x)|^2 c^(2 beta) - 2 beta d c^(2 beta - 2)``.

Written here (about 60 lines of NumPy): the PyPI packages that compute a KSD
(``ksd-metric``, ``ksddescent``) are small single-author projects, and no maintained
package provides an IMQ KSD for arbitrary score vectors.
"""

import numpy as np


def check_imq_params(c, beta):
    """Raise ``ValueError`` unless ``c > 0`` and ``-1 < beta < 0``.

    Examples
    --------
    >>> check_imq_params(1.0, -0.5)
    >>> check_imq_params(1.0, 0.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the IMQ kernel needs beta in (-1, 0) ... got beta=0.5
    """
    if not (np.isfinite(c) and c > 0):
        raise ValueError(f"the IMQ kernel needs c > 0, got c={c}")
    if not (-1 < beta < 0):
        raise ValueError(
            f"the IMQ kernel needs beta in (-1, 0) to detect non-convergence "
            f"(Gorham & Mackey 2017), got beta={beta}"
        )


def _check(x, score, c, beta):
    check_imq_params(c, beta)
    x = np.asarray(x, dtype=np.float64)
    score = np.asarray(score, dtype=np.float64)
    if x.ndim == 1:
        x, score = x[:, None], score.reshape(-1, 1)
    if x.ndim != 2 or score.shape != x.shape:
        raise ValueError(
            f"x and score must both have shape (n, d); got {np.shape(x)} and {np.shape(score)}"
        )
    if len(x) < 1:
        raise ValueError("the KSD needs at least one point")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(score))):
        raise ValueError("x and score must be finite")
    return x, score


def imq_stein_kernel(x, score, c=1.0, beta=-0.5):
    """Matrix ``k_p(x_i, x_j)`` of the IMQ Stein kernel over the points ``x``.

    Parameters
    ----------
    x : ndarray, shape (n, d) or (n,)
        Points (a 1-d array is ``n`` points in one dimension).
    score : ndarray, same shape as ``x``
        ``grad log p`` of the target at each point.
    c : float, default 1.0
        IMQ kernel offset, ``c > 0``.
    beta : float, default -0.5
        IMQ kernel exponent, in ``(-1, 0)``.

    Returns
    -------
    ndarray, shape (n, n)
        Symmetric; ``k_p(x, x) = |s(x)|^2 c^(2 beta) - 2 beta d c^(2 beta - 2)`` on the
        diagonal. Memory is a few ``n x n`` float64 arrays (8 MB each at ``n = 1000``).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0], [1.0]])
    >>> imq_stein_kernel(x, -x)  # standard normal target: score -x
    array([[ 1.        , -0.53033009],
           [-0.53033009,  2.        ]])
    """
    x, score = _check(x, score, c, beta)
    d = x.shape[1]
    x = x - x.mean(axis=0)  # the kernel is translation invariant; centring limits cancellation
    sq_norm = np.einsum("ij,ij->i", x, x)
    r2 = np.maximum(sq_norm[:, None] + sq_norm[None, :] - 2.0 * (x @ x.T), 0.0)
    np.fill_diagonal(r2, 0.0)
    u = c * c + r2
    k = u**beta
    k1 = k / u  # u^(beta-1)
    # (s(y) - s(x)).(x - y) for x = x_i, y = x_j:  A_ij + A_ji - a_i - a_j, A_ij = s_i.x_j
    sx = score @ x.T
    diag = np.diag(sx)
    cross = sx + sx.T - diag[:, None] - diag[None, :]
    out = (score @ score.T) * k
    out += 2.0 * beta * k1 * cross
    out -= 4.0 * beta * (beta - 1.0) * (k1 / u) * r2
    out -= 2.0 * beta * d * k1
    return out


def balanced_scale(x, score):
    """Per-coordinate scale ``sqrt(sd(x_j) / rms(score_j))`` of a sample and its scores.

    The geometric mean of two estimates of the target's spread: the sample's standard
    deviation and the inverse root-mean-square score (``E_p[s_j^2]`` is the Fisher
    information). For a Gaussian target and any sample ``N(mu, rho^2 Sigma)`` with the
    right center the product ``sd * (1 / rms)`` does not depend on ``rho``, so over- and
    under-dispersed samples (including a collapsed one) are measured with the same kernel
    as exact ones. A coordinate with zero spread uses ``1 / rms``, one with all-zero
    scores uses ``sd``, and one with both uses 1.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.random.default_rng(0).normal(size=(1000, 1))
    >>> x = 0.1 * z  # target N(0, 0.2^2): score -x / 0.04; the sample is half as wide
    >>> np.round(balanced_scale(x, -x / 0.04), 3)
    array([0.2])
    """
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    score = np.asarray(score, dtype=np.float64).reshape(len(score), -1)
    sd = x.std(axis=0, ddof=1) if len(x) > 1 else np.zeros(x.shape[1])
    rms = np.sqrt(np.mean(score**2, axis=0))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(
            sd > 0,
            np.where(rms > 0, np.sqrt(sd / rms), sd),
            np.where(rms > 0, 1.0 / rms, 1.0),
        )
    return scale


def imq_ksd(x, score, c=1.0, beta=-0.5, scale=None):
    """Kernel Stein discrepancy of the points ``x`` from the target whose score is given.

    The square root of the V-statistic ``mean_{i,j} k_p(x_i, x_j)`` over all ``n^2``
    pairs (diagonal included): it is a squared RKHS norm, so never negative, and for
    i.i.d. draws from the target ``E[KSD^2] = E[k_p(x, x)] / n`` (the off-diagonal terms
    have mean zero).

    Parameters
    ----------
    x, score, c, beta
        As in :func:`imq_stein_kernel`.
    scale : float or ndarray of shape (d,), optional
        Measure in the standardised coordinates ``z = x / scale``, whose score is
        ``score * scale``: the same as the kernel ``k((x - y) / scale)`` weighted by
        ``scale^2`` per coordinate, still a valid discrepancy for any fixed positive scale.
        The KSD is then dimensionless. ``None`` (default) is ``scale = 1``: the KSD is in
        units of the score and depends on the units of ``x``.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(400, 2))  # N(0, I) draws
    >>> bool(imq_ksd(x, -x) < imq_ksd(x + 0.5, -(x + 0.5)))
    True
    """
    x, score = _check(x, score, c, beta)
    if scale is not None:
        scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), (x.shape[1],))
        if not np.all(np.isfinite(scale) & (scale > 0)):
            raise ValueError(f"scale must be positive and finite, got {scale}")
        x, score = x / scale, score * scale
    value = float(np.mean(imq_stein_kernel(x, score, c, beta)))
    return float(np.sqrt(max(value, 0.0)))
