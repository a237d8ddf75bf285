"""Second-order expansions of every row, including likelihoods bounded only on a trust region.

A second-order control variate needs a bound ``K_i`` on each row's third derivative in its
linear predictors (:mod:`pymc_minibatch.model.taylor`). Bernoulli-logit, Student-t and Cauchy
rows with a fixed scale have a global one (:mod:`pymc_minibatch.model.lipschitz`). The
likelihoods below have none, but they have one on any bounded set of predictor values, and
with tall data the posterior sits in a small region around its mode. Their bounds are
taken over the **trust region** ``B = {theta : ||z|| <= R}``, ``z = L^-1 (theta -
theta_hat)`` in the whitened coordinates of the Laplace approximation: inside ``B`` each
row's predictor ``w_ij = a_ij' theta`` moves by at most ``rho_ij = R ||L' a_ij||`` from its
value at the mode (each predictor its own: a group's intercept may move far in a group of
three rows while the shared noise scale moves by a few thousandths).

==========================================  ==================  ================================
likelihood                                  predictors ``w``    ``K_i`` over ``|u_j| <= rho_j``
==========================================  ==================  ================================
``Poisson(mu=exp(eta))``                    ``eta``             ``exp(eta_hat + rho_1)``
``Normal(mu=eta, sigma)``, sigma sampled    ``eta, log sigma``  ``s (4/sqrt3 (1 + 2E) + 4 E^2)``
``LogNormal(mu=eta, sigma)``, sigma sampled ``eta, log sigma``  as Normal, with ``log y``
``StudentT(nu, eta, sigma)``, sigma sampled ``eta, log sigma``  ``(nu+1)(8h a^3 + 6a^2 + 6a + 12)``
==========================================  ==================  ================================

For the Normal, ``f = -zeta - e^2 exp(-2 zeta) / 2`` with ``e = y - eta`` and ``zeta = log
sigma`` has ``D^3 f[v, v, v] = exp(-2 zeta) (6 v_1^2 v_2 + 12 e v_1 v_2^2 + 4 e^2 v_2^3)``;
on the unit circle ``|v_1^2 v_2|`` and ``|v_1 v_2^2|`` are at most ``2 / (3 sqrt 3)``, and
over the region ``s = exp(-2 (zeta_hat - rho_2))`` and ``E = |y - eta_hat| + rho_1`` bound
``exp(-2 zeta)`` and ``|e|``. For the Student-t (``nu`` fixed; Cauchy: ``nu = 1``), ``a =
exp(-(zeta_hat - rho_2)) / sqrt(nu)`` and ``h = 3/8 + sqrt(2)/4`` (see
:func:`_free_scale_student_t`). ``sigma`` may be any expression whose logarithm is linear in the
sampled values (a positive prior with its default log transform, such as ``HalfNormal``,
or a log-linear model of the scale); a varying-intercept or varying-slope model is
supported when the group parameters enter the predictor linearly (centred
parametrisation): each row's ``||A_i L||`` then involves only the coordinates it touches.

A LogNormal with a fixed scale is a Normal location model of ``log y``: exactly quadratic,
``K_i = 0`` everywhere, no region and no row evaluated.

First-order control variates (SMH-1) use the same region with a bound on the second
derivative, ``|D^2 f(w)[v, v]| <= K2_i``
(:func:`pymc_minibatch.model.expansions.first_order_bounds`): ``exp(eta_hat + rho_1)``
for the Poisson, the Hessian's Frobenius norm ``s sqrt(1 + 8 E^2 + 4 E^4)`` for the Normal and
``(nu + 1) (2 a^2 + a + 3)`` for the Student-t.

Exactness. A TunaMH or TFMH step whose current point or proposal lies outside ``B`` is a
full-data MH step instead. Whether a step is minibatch or full-data depends only on the
unordered pair ``{theta, theta'}``, so each of the two kernels is applied to a pair in
both directions and satisfies detailed balance there: the chain targets the exact
posterior, as with TunaMH's fallback when ``lambda >= N`` (Zhang, Cooper & De Sa 2020).
"""

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.traversal import ancestors
from pytensor.tensor.random.basic import CauchyRV, LogNormalRV, NormalRV, PoissonRV, StudentTRV

from pymc_minibatch.exceptions import BoundsUnavailableError
from pymc_minibatch.model.lipschitz import (
    LOCAL_BOUNDS_REMEDY,
    STUDENT_T_THIRD,
    SUPPORTED,
    SUPPORTED_ON_REGION,
    fixed_family,
)

#: The trust region's radius is ``sqrt(d)`` (the typical ``||z||`` under the Laplace
#: approximation) plus this many standard deviations.
RADIUS_MARGIN = 10.0
#: ``max |v_1^2 v_2|`` over the unit circle, times 6: the Normal's third-derivative constant.
_CUBE = 6.0 * 2.0 / (3.0 * np.sqrt(3.0))


def default_radius(ndim):
    """``sqrt(d) + 10``: under the Laplace approximation ``||z||^2`` is chi-square with ``d``
    degrees of freedom, so the mass outside is below ``1e-20`` for every ``d``."""
    return float(np.sqrt(ndim) + RADIUS_MARGIN)


class _Spec:
    """Graphs of one observed variable: predictors, ``f``'s derivatives, and its bound."""

    def __init__(self, predictors, slopes, curvatures, third, second, local, extra=(),
                 global_family=False):  # fmt: skip
        self.predictors = list(predictors)
        self.slopes = list(slopes)
        self.curvatures = list(curvatures)  # (j, k, graph)
        # third(w_hat, extra_values, radii) -> K_i, radii[j] the distance predictor j may
        # move in the region (None without one); second(...) likewise for D^2 f
        self.third, self.second = third, second
        self.local = local
        self.extra = list(extra)  # graphs whose values at the center the bounds need
        # a family of pymc_minibatch.model.lipschitz, bounded at every order everywhere
        self.global_family = global_family


def needs_row_expansions(minibatch_model):
    """Whether some observed variable is bounded only through this module's expansions (on
    a trust region, or a LogNormal; no refusal: unsupported likelihoods are refused when
    the bounds are computed, :mod:`pymc_minibatch.model.expansions`)."""
    graph = minibatch_model.row_graph
    free_rvs = set(minibatch_model.model.free_RVs)
    for name, rv, value in zip(graph.row_term_names, graph.row_rvs, graph.row_values,
                               strict=True):  # fmt: skip
        try:
            if not row_spec(name, rv, value, free_rvs).global_family:
                return True
        except BoundsUnavailableError:
            continue
    return False


def row_spec(name, rv, value, free_rvs):
    """The graphs of observed variable ``name`` (rebuilt on a batch of rows, ``rv``, with
    observed ``value``) that its rows' expansions and bounds need.

    Raises
    ------
    BoundsUnavailableError
        When its likelihood has no bounded third derivative even on a bounded region.
    """
    op = rv.owner.op
    params = op.dist_params(rv.owner)
    y = pt.cast(value, "float64")
    if isinstance(op, PoissonRV):
        (mu,) = params
        mu = pt.cast(mu, "float64")
        # the second and third derivatives are both -exp(eta)
        bound = lambda w, extra, radii: np.exp(w[0] + radii[0])  # noqa: E731
        return _Spec([pt.log(mu)], [y - mu], [(0, 0, -mu)], bound, bound, local=True)
    if isinstance(op, NormalRV | LogNormalRV):
        mu, sigma = params
        response = pt.log(y) if isinstance(op, LogNormalRV) else y
        if free_rvs & set(ancestors([sigma])):
            return _free_scale(mu, sigma, response)
        if isinstance(op, LogNormalRV):  # a Normal location model of log y: exactly quadratic
            s = 1.0 / pt.cast(sigma, "float64") ** 2
            residual = response - pt.cast(mu, "float64")
            return _Spec([mu], [residual * s], [(0, 0, -s * pt.ones_like(residual))],
                         lambda w, extra, radii: np.zeros_like(w[0]),
                         lambda w, extra, radii: extra[0], local=False,
                         extra=[s * pt.ones_like(residual)])  # fmt: skip
    if isinstance(op, StudentTRV | CauchyRV):
        nu, mu, sigma = params if isinstance(op, StudentTRV) else (pt.constant(1.0), *params)
        if free_rvs & set(ancestors([sigma])) and not free_rvs & set(ancestors([nu])):
            return _free_scale_student_t(mu, sigma, nu, y)
    family = fixed_family(name, rv, value, free_rvs, LOCAL_BOUNDS_REMEDY)
    if family.third is None:
        raise BoundsUnavailableError(
            f"observed variable '{name}' ({type(op).__name__}) has no bounded third "
            "derivative (it has a kink), so second-order control variates do not apply; use "
            "expansion_order=0 or 1"
        )
    return _Spec([family.eta], [family.slope], [(0, 0, family.second)],
                 lambda w, extra, radii: np.abs(extra[0]),
                 lambda w, extra, radii: np.abs(extra[1]), local=False,
                 extra=[pt.broadcast_to(family.third, family.slope.shape),
                        pt.broadcast_to(family.curvature, family.slope.shape)],
                 global_family=True)  # fmt: skip


def _free_scale(mu, sigma, response):
    """Normal rows of ``response`` in ``(eta, zeta = log sigma)`` (see the module docstring)."""
    sigma = pt.cast(sigma, "float64")
    residual = response - pt.cast(mu, "float64")
    s = 1.0 / sigma**2
    ones = pt.ones_like(residual)

    def bounds(w, extra, radii):
        (response_values,) = extra
        scale = np.exp(-2.0 * (w[1] - radii[1]))
        error = np.abs(response_values - w[0]) + radii[0]
        return scale, error

    def third(w, extra, radii):
        scale, error = bounds(w, extra, radii)
        return scale * (_CUBE * (1.0 + 2.0 * error) + 4.0 * error**2)

    def second(w, extra, radii):  # the Hessian's Frobenius norm
        scale, error = bounds(w, extra, radii)
        return scale * np.sqrt(1.0 + 8.0 * error**2 + 4.0 * error**4)

    return _Spec(
        [mu, pt.log(sigma) * ones],
        [residual * s, residual**2 * s - 1.0],
        [(0, 0, -s * ones), (0, 1, -2.0 * residual * s), (1, 1, -2.0 * residual**2 * s)],
        third,
        second,
        local=True,
        extra=[response * ones],
    )


def _free_scale_student_t(mu, sigma, nu, y):
    """Student-t rows (Cauchy: ``nu = 1``) in ``(eta, zeta = log sigma)`` with ``nu`` fixed.

    With ``t = (y - eta) a``, ``a = exp(-zeta) / sqrt(nu)`` and ``g(t) = -(nu + 1) / 2
    log(1 + t^2)``, ``f = -zeta + g(t)``. Along a unit direction ``v`` the derivatives of
    ``t`` are ``-(a v_1 + t v_2)``, ``v_2 (2 a v_1 + t v_2)`` and ``-v_2^2 (3 a v_1 + t v_2)``,
    at most ``a + |t|``, ``2a + |t|`` and ``3a + |t|`` in size. With ``|g1| <= (nu + 1) / 2``,
    ``|t g1| <= nu + 1``, ``|g2| <= nu + 1``, ``|t g2| <= (nu + 1) / 2``, ``t^2 |g2| <= nu + 1``,
    ``|g3| <= 2 (nu + 1) h``, ``|t^3 g3| <= 2 (nu + 1)`` (``gk`` the k-th derivative of ``g``)
    and ``(a + |t|)^3 <= 4 (a^3 + |t|^3)``, the third derivative ``g3 t1^3 + 3 g2 t1 t2 + g1 t3``
    is at most ``(nu + 1) (8 h a^3 + 6 a^2 + 6 a + 12)`` whatever ``t`` is: only ``a`` needs
    the region.
    """
    nu, sigma = pt.cast(nu, "float64"), pt.cast(sigma, "float64")
    residual = y - pt.cast(mu, "float64")
    a = 1.0 / (sigma * pt.sqrt(nu))
    t = residual * a
    first = -(nu + 1.0) * t / (1.0 + t**2)
    second = -(nu + 1.0) * (1.0 - t**2) / (1.0 + t**2) ** 2
    ones = pt.ones_like(residual)

    def third(w, extra, radii):
        (nu_values,) = extra
        a_max = np.exp(-(w[1] - radii[1])) / np.sqrt(nu_values)
        return (nu_values + 1.0) * (8.0 * STUDENT_T_THIRD * a_max**3 + 6.0 * a_max**2
                                    + 6.0 * a_max + 12.0)  # fmt: skip

    def second_bound(w, extra, radii):  # g2 t1^2 + g1 t2, with (a + |t|)^2 <= 2 (a^2 + t^2)
        (nu_values,) = extra
        a_max = np.exp(-(w[1] - radii[1])) / np.sqrt(nu_values)
        return (nu_values + 1.0) * (2.0 * a_max**2 + a_max + 3.0)

    return _Spec(
        [mu, pt.log(sigma) * ones],
        [-a * first, -1.0 - t * first],
        [
            (0, 0, a**2 * second),
            (0, 1, a * first + a * t * second),
            (1, 1, t * first + t**2 * second),
        ],  # fmt: skip
        third,
        second_bound,
        local=True,
        extra=[nu * ones],
    )


def predictor_remedy(spec, j):
    """What to do when predictor ``j`` of ``spec`` is not linear in the sampled values."""
    if spec.local and j == 1:
        return ("give the scale a prior with a log transform (HalfNormal, Exponential, "
                "LogNormal, ...) or a log-linear model, or pass your own bounds")  # fmt: skip
    return f"supported are {SUPPORTED} and, on a trust region, {SUPPORTED_ON_REGION}"
