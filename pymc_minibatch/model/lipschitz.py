"""Derive TunaMH bounds from a PyMC model whose likelihood is Lipschitz in a linear predictor.

If ``U_i(theta) = f(eta_i)`` with ``|f'| <= L_i`` and ``eta_i = a_i + x_i' theta`` linear in
the sampled (transformed) parameters, then ``|U_i(theta) - U_i(theta')| <=
L_i ||x_i|| ||theta - theta'||`` over the coordinates with a non-zero column of X (Zhang,
Cooper & De Sa 2020, Section 5). Supported families, with ``|f^(k)| <= K_k`` the bounds on
the k-th derivative in ``eta`` (``u = (y - eta) / s``):

=======================  =======================  =================  =========================
distribution             L_i = K_1                K_2                K_3
=======================  =======================  =================  =========================
Bernoulli(logit_p=eta)   1                        1/4                1 / (6 sqrt 3)
StudentT(nu, mu=eta, s)  (nu+1) / (2 sqrt(nu) s)  (nu+1) / (nu s^2)  2 (nu+1) h / (nu^1.5 s^3)
Cauchy(alpha=eta, beta)  1 / beta                 2 / beta^2         4 h / beta^3
Laplace(mu=eta, b)       1 / b                    none (a kink)      none
Normal(mu=eta, sigma)    none (unbounded)         1 / sigma^2        0
NegativeBinomial         max(y, alpha)            (y + alpha) / 4    (y + alpha) / (6 sqrt 3)
=======================  =======================  =================  =========================

with every parameter other than ``eta`` fixed (free of sampled variables) and, for the
negative binomial, ``eta = log mu`` (``mu=exp(eta)``, ``alpha`` fixed: ``l = y eta - (y + alpha)
log(alpha + exp(eta))`` up to a constant, whose derivatives are those of a logistic in ``eta -
log alpha`` times ``y + alpha``), and
``h = max_t |t (3 - t^2)| / (1 + t^2)^3 = 3/8 + sqrt(2)/4`` (at ``t = sqrt(2) - 1``; the
Student-t's third derivative in ``u = sqrt(nu) t`` is ``2 (nu + 1) u (3 nu - u^2) /
(nu + u^2)^3``). ``x_i`` is read numerically from the compiled graph (``eta`` at ``theta``
plus unit steps), and linearity is verified at random points; several observed variables
on the same rows add up.

``K_1`` gives plain bounds, ``K_2`` the bounds of first-order control variates (Taylor
residuals around a center; Cornish et al. 2019, "Scalable Metropolis-Hastings for exact
Bayesian inference with large datasets", ICML) and ``K_3`` those of second-order ones
(:mod:`pymc_minibatch.model.taylor`). The predictor also carries ``f'(eta)`` and
``f''(eta)`` as graphs, for the second-order expansion.

For PoissonMH's global bounds the coefficients entering ``eta`` must range over a box:
each needs a ``Uniform`` prior with fixed limits and ``default_transform=None`` (so that ``eta``
stays linear in what is sampled, and the box is the support). Over the box ``eta_i``
spans an interval of width ``w_i = sum_j |x_ij| (b_j - a_j)`` centred on its value at the
box center ``theta_c``, so ``|l_i(theta) - l_i(theta_c)| <= L_i w_i / 2``.
"""

from typing import NamedTuple

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.traversal import ancestors
from pytensor.scalar.math import Sigmoid
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.random.basic import (
    BernoulliRV,
    CauchyRV,
    LaplaceRV,
    NegBinomialRV,
    NormalRV,
    StudentTRV,
    UniformRV,
)

from pymc_minibatch.bounds import Bounds, GlobalBounds
from pymc_minibatch.exceptions import BoundsUnavailableError

SUPPORTED = (
    "Bernoulli(logit_p=...), StudentT, Laplace, Cauchy location regressions, NegativeBinomial("
    "mu=exp(...), alpha) with alpha fixed, and Normal ones with control variates"
)


class LinearPredictor(NamedTuple):
    """One observed variable on the rows, as ``U_i = f(eta_i)`` with ``eta = offset + X theta``."""

    name: str
    family: type
    """The PyTensor RandomVariable class of the distribution (e.g. ``BernoulliRV``)."""
    offset: np.ndarray
    """``eta`` at ``theta = 0`` (measured as ``eta(theta0) - X theta0``), shape (N,)."""
    design: np.ndarray
    """``X``, shape (N, ndim): ``d eta_i / d theta``."""
    lipschitz: np.ndarray | None
    """``L_i``, shape (N,): bound on ``|f'(eta_i)|``, or None where ``f'`` is unbounded."""
    curvature: np.ndarray | None
    """``K_i``, shape (N,): bound on ``|f''(eta_i)|``, or None where ``f`` has a kink."""
    third: np.ndarray | None
    """Bound on ``|f'''(eta_i)|``, shape (N,), or None where there is none."""
    observed: np.ndarray
    """The observed values, shape (N,)."""
    slope: np.ndarray | None
    """``d l_i / d eta_i`` at ``expansion_point`` (None without one), shape (N,)."""
    second: np.ndarray | None
    """``d^2 l_i / d eta_i^2`` at ``expansion_point`` (None without one), shape (N,)."""


class _Family(NamedTuple):
    """Graphs of one observed variable: its linear predictor, the bounds on the derivatives
    of its log-likelihood in it (None where unbounded) and the first two derivatives."""

    eta: object
    lipschitz: object | None
    curvature: object | None
    third: object | None
    slope: object
    second: object


#: What second-order control variates bound on a trust region (:mod:`~pymc_minibatch.model.region`).
SUPPORTED_ON_REGION = (
    "Poisson(mu=exp(eta)), and Normal, LogNormal, Student-t (fixed nu) or Cauchy with a "
    "sampled scale whose logarithm is linear in the sampled values"
)

LOCAL_BOUNDS_REMEDY = (
    "pass bounds=pmm.bounds.Bounds(c, metric_vars=...) with |U_i(theta) - U_i(theta')| <= "
    "c_i ||theta - theta'|| for every row i"
)
NOT_LINEAR = (
    "is not linear in the sampled (transformed) parameters (a product of sampled values is "
    "not, e.g. a group effect whose scale varies by row, mu + tau * x * z[g]; the samplers "
    "move a non-centred effect, pm.Deterministic('a', mu + tau * z) or mu + tau * z[g] with "
    "z ~ Normal(0, 1) and a scalar tau, in its centred form when given every variable "
    "(vars=None), else write it centred, a ~ Normal(mu, tau) and a[g]), so auto bounds do "
    "not apply"
)
GLOBAL_BOUNDS_REMEDY = (
    "pass bounds=pmm.bounds.GlobalBounds(lower, upper) with lower_i <= log p(y_i | theta) <= "
    "upper_i over the whole support"
)


def linear_predictors(
    minibatch_model, random_seed=0, remedy=LOCAL_BOUNDS_REMEDY, expansion_point=None
):
    """The linear predictors of every observed variable on the rows.

    ``remedy`` ends a refusal: what the calling sampler accepts instead. With an
    ``expansion_point`` (a ``theta``), each predictor also carries the first two derivatives
    of its rows' log-likelihoods in ``eta`` there.

    Raises
    ------
    BoundsUnavailableError
        Naming the observed variable and what is needed (a supported family, fixed
        non-location parameters, a predictor linear in the sampled parameters).
    """
    mm = minibatch_model
    graph = mm.row_graph
    families = observed_families(mm, remedy)
    missing = pt.constant(np.nan)
    fields = ("eta", "lipschitz", "curvature", "third", "slope", "second")
    etas, lipschitz, curvature, third, slope, second = (
        [missing if getattr(f, field) is None else getattr(f, field) for f in families]
        for field in fields
    )
    evaluate = mm.compile_rows_function(
        etas + lipschitz + curvature + third + list(graph.row_values) + slope + second
    )
    n_terms = len(families)

    def output(values, kind, term):
        array = values[kind * n_terms + term]
        if 1 <= kind <= 3:  # bounds: None where the family has none
            return None if np.isnan(array[0]) else np.abs(array)
        return array

    theta0 = mm.initial_theta()
    base = evaluate(theta0)
    at_expansion = None if expansion_point is None else evaluate(expansion_point)
    predictors = []
    units = np.eye(mm.ndim)  # once: built per coordinate it cost O(d^3)
    for term, (name, rv) in enumerate(zip(graph.row_term_names, graph.row_rvs, strict=True)):
        design = np.empty((mm.n_data, mm.ndim))
        for j in range(mm.ndim):
            design[:, j] = evaluate(theta0 + units[j])[term] - base[term]
        _check_linear(evaluate, term, theta0, base[term], design, name, random_seed, remedy)
        predictors.append(
            LinearPredictor(
                name=name,
                family=type(rv.owner.op),
                offset=base[term] - design @ theta0,
                design=design,
                lipschitz=output(base, 1, term),
                curvature=output(base, 2, term),
                third=output(base, 3, term),
                observed=output(base, 4, term),
                slope=None if at_expansion is None else output(at_expansion, 5, term),
                second=None if at_expansion is None else output(at_expansion, 6, term),
            )
        )
    return predictors


def observed_families(minibatch_model, remedy=LOCAL_BOUNDS_REMEDY):
    """The :func:`fixed_family` graphs of every observed variable on the rows, in order.

    Raises
    ------
    BoundsUnavailableError
        Naming the first observed variable whose likelihood is not a supported family
        (``remedy`` ends the message).
    """
    graph = minibatch_model.row_graph
    free_rvs = set(minibatch_model.model.free_RVs)
    return [
        fixed_family(name, rv, value, free_rvs, remedy)
        for name, rv, value in zip(graph.row_term_names, graph.row_rvs, graph.row_values,
                                   strict=True)  # fmt: skip
    ]


def derive_bounds(minibatch_model, expansion_order=0, center=None, predictors=None):
    """Bounds for the observed variables on the rows, over the coordinates that enter them.

    With ``expansion_order=0``, ``c_i = sum_k L_ik ||x_ik||`` with the Euclidean metric.
    With ``1``, ``c_i = sum_k K_ik ||x_ik||^2`` for the first-order Taylor residuals around
    ``center`` (typically the posterior mode), with the Taylor metric of
    :mod:`pymc_minibatch.bounds`. Second order: :mod:`pymc_minibatch.model.taylor`.
    ``predictors``: the model's :func:`linear_predictors`, if already computed.

    Raises
    ------
    BoundsUnavailableError
        If a likelihood is not one of the supported families (see the module docstring), or
        if one has no bounded derivative of the order needed (Laplace: no second, Normal: no
        first).
    """
    c = np.zeros(minibatch_model.n_data)
    used = np.zeros(minibatch_model.ndim, dtype=bool)
    if predictors is None:
        predictors = linear_predictors(minibatch_model)
    for predictor in predictors:
        norms = np.linalg.norm(predictor.design, axis=1)
        bound = require_bound(predictor, expansion_order + 1)
        c += bound * norms ** (expansion_order + 1)
        used |= np.any(predictor.design != 0.0, axis=0)
    if expansion_order and center is None:
        raise ValueError("first-order control variates need the center of the expansion")
    return Bounds(c, center=center if expansion_order else None,
                  _metric_indices=np.flatnonzero(used))  # fmt: skip


#: What each order of control variates needs, and what to do without it.
_DERIVATIVE_NEEDED = {
    1: (
        "first",
        "its log-likelihood is unbounded in the linear predictor",
        "TunaMH or TFMH with expansion_order=1 or 2 ('auto' picks them)",
    ),
    2: ("second", "it has a kink", "expansion_order=0"),
    3: ("third", "it has a kink", "expansion_order=0 or 1"),
}


def require_bound(predictor, derivative):
    """``predictor``'s bound on the ``derivative``-th derivative (1, 2 or 3) of its rows'
    log-likelihood in ``eta``.

    Raises
    ------
    BoundsUnavailableError
        Naming the observed variable, when the family has no such bound.
    """
    bound = (predictor.lipschitz, predictor.curvature, predictor.third)[derivative - 1]
    if bound is None:
        ordinal, why, instead = _DERIVATIVE_NEEDED[derivative]
        order = derivative - 1
        raise BoundsUnavailableError(
            f"observed variable '{predictor.name}' ({predictor.family.__name__}) has no bounded "
            f"{ordinal} derivative ({why}), so "
            + ("plain bounds do not apply" if order == 0 else
               f"bounds for control variates of order {order} do not apply")
            + f"; use {instead}"
        )  # fmt: skip
    return bound


def derive_global_bounds(minibatch_model):
    """Global bounds on every row's log-likelihood for PoissonMH (see the module docstring).

    Raises
    ------
    BoundsUnavailableError
        If a likelihood is not one of the supported families, or a coefficient entering
        the linear predictor has no bounded support (a ``Uniform`` prior with fixed limits
        and ``default_transform=None``).
    """
    mm = minibatch_model
    predictors = linear_predictors(mm, remedy=GLOBAL_BOUNDS_REMEDY)
    used = np.zeros(mm.ndim, dtype=bool)
    for predictor in predictors:
        used |= np.any(predictor.design != 0.0, axis=0)
    low, high = _support_box(mm, used, [predictor.name for predictor in predictors])
    center = mm.initial_theta()
    center[used] = 0.5 * (low[used] + high[used])
    half_width = np.zeros(mm.n_data)
    for predictor in predictors:
        eta_half_width = 0.5 * np.abs(predictor.design[:, used]) @ (high - low)[used]
        half_width += require_bound(predictor, 1) * eta_half_width
    loglik_center = mm.full_loglik_rows(center)
    return GlobalBounds(loglik_center - half_width, loglik_center + half_width)


def _support_box(minibatch_model, used, observed_names):
    """Limits ``(low, high)`` in theta of the coordinates flagged ``used`` (NaN elsewhere);
    ``observed_names`` name the likelihoods in a refusal."""
    mm = minibatch_model
    model = mm.model
    free_rvs = set(model.free_RVs)
    low, high = np.full(mm.ndim, np.nan), np.full(mm.ndim, np.nan)
    for rv in model.free_RVs:
        value = model.rvs_to_values[rv]
        if value.name not in mm.var_names:
            continue
        indices = mm.theta_indices([value.name])
        if not np.any(used[indices]):
            continue
        limits = rv.owner.op.dist_params(rv.owner) if isinstance(rv.owner.op, UniformRV) else ()
        if (
            not limits
            or model.rvs_to_transforms.get(rv) is not None
            or free_rvs & set(ancestors(limits))
        ):
            raise BoundsUnavailableError(
                f"free variable '{rv.name}' enters the likelihood of observed variable(s) "
                f"{', '.join(repr(name) for name in observed_names)} without a bounded support, "
                "so no global bound on the log-likelihood exists; PoissonMH needs a Uniform prior "
                "with fixed limits and default_transform=None on it, or "
                "pmm.bounds.GlobalBounds(lower, upper) (TunaMH needs no such bound)"
            )
        shape = tuple(rv.shape.eval())
        low[indices] = np.broadcast_to(limits[0].eval(), shape).ravel()
        high[indices] = np.broadcast_to(limits[1].eval(), shape).ravel()
    return low, high


#: ``max_t |t (3 - t^2)| / (1 + t^2)^3``: with it, the Student-t third derivative's bound.
STUDENT_T_THIRD = 3.0 / 8.0 + np.sqrt(2.0) / 4.0


def fixed_family(name, rv, value, free_rvs, remedy):
    """:func:`_family_predictor`, refused when its bounds depend on sampled variables."""
    family = _family_predictor(name, rv, value, remedy)
    constants = [c for c in (family.lipschitz, family.curvature, family.third) if c is not None]
    if free_rvs & set(ancestors(constants)):
        raise BoundsUnavailableError(
            f"observed variable '{name}' ({type(rv.owner.op).__name__}): its scale/shape "
            "parameters depend on sampled variables, so no fixed Lipschitz constant exists, "
            "and trust-region bounds exist (with control variates) only for "
            f"{SUPPORTED_ON_REGION}; fix them or {remedy}"
        )
    return family


def _family_predictor(name, rv, value, remedy):
    """The :class:`_Family` of observed variable ``name`` (``value``: its observed rows)."""
    op = rv.owner.op
    # float64 throughout: PyTensor stores integral constants as int8, and sqrt(int8) is float32
    params = [pt.cast(p, "float64") for p in op.dist_params(rv.owner)]
    y = pt.cast(value, "float64")
    if isinstance(op, BernoulliRV):
        (p,) = op.dist_params(rv.owner)
        if p.owner is None or not (
            isinstance(p.owner.op, Elemwise) and isinstance(p.owner.op.scalar_op, Sigmoid)
        ):
            raise BoundsUnavailableError(
                f"observed variable '{name}' is Bernoulli but not parametrised by logit_p "
                f"(or p = invlogit(eta)); auto bounds need the logit link, or {remedy}"
            )
        eta = p.owner.inputs[0]
        prob = pt.sigmoid(pt.cast(eta, "float64"))
        return _Family(eta, pt.constant(1.0), pt.constant(0.25),
                       pt.constant(1.0 / (6.0 * np.sqrt(3.0))), y - prob,
                       -prob * (1.0 - prob))  # fmt: skip
    if isinstance(op, StudentTRV):
        nu, mu, sigma = params
        return _student_t(op.dist_params(rv.owner)[1], nu, sigma, y)
    if isinstance(op, CauchyRV):
        alpha, beta = params
        return _student_t(op.dist_params(rv.owner)[0], pt.constant(1.0), beta, y)
    if isinstance(op, LaplaceRV):
        mu, b = params
        sign = pt.sign(y - mu)
        return _Family(op.dist_params(rv.owner)[0], 1.0 / b, None, None, sign / b,
                       pt.zeros_like(mu))  # fmt: skip
    if isinstance(op, NegBinomialRV):
        # PyMC's (mu, alpha) arrive as n = alpha, p = alpha / (mu + alpha)
        n, p = params
        eta = pt.log(n) + pt.log1p(-p) - pt.log(p)
        total = y + n
        return _Family(eta, pt.maximum(y, n), total / 4.0, total / (6.0 * np.sqrt(3.0)),
                       y - total * (1.0 - p), -total * p * (1.0 - p))  # fmt: skip
    if isinstance(op, NormalRV):
        mu, sigma = params
        return _Family(op.dist_params(rv.owner)[0], None, 1.0 / sigma**2,
                       pt.zeros_like(sigma), (y - mu) / sigma**2,
                       -pt.ones_like(mu) / sigma**2)  # fmt: skip
    raise BoundsUnavailableError(
        f"cannot derive per-row bounds for observed variable '{name}' "
        f"({type(op).__name__}): supported are {SUPPORTED}; {remedy}"
    )


def _student_t(eta, nu, scale, y):
    """Student-t location family in ``eta`` (Cauchy: ``nu = 1``); ``u = (y - eta) / scale``,
    ``l = -(nu + 1) / 2 log(1 + u^2 / nu)``."""
    u = (y - pt.cast(eta, "float64")) / scale
    return _Family(
        eta,
        (nu + 1.0) / (2.0 * pt.sqrt(nu) * scale),
        (nu + 1.0) / (nu * scale**2),
        2.0 * (nu + 1.0) * STUDENT_T_THIRD / (nu**1.5 * scale**3),
        (nu + 1.0) * u / (scale * (nu + u**2)),
        -(nu + 1.0) * (nu - u**2) / (scale**2 * (nu + u**2) ** 2),
    )


def _check_linear(evaluate, term, theta0, eta0, design, name, random_seed, remedy):
    rng = np.random.default_rng(random_seed)
    rows = rng.choice(design.shape[0], size=min(design.shape[0], 64), replace=False)
    for _ in range(2):
        theta = theta0 + rng.normal(size=theta0.shape)
        predicted = eta0[rows] + design[rows] @ (theta - theta0)
        actual = evaluate(theta, rows)[term]
        if not np.allclose(actual, predicted, rtol=1e-6, atol=1e-6):
            raise BoundsUnavailableError(
                f"the linear predictor of observed variable '{name}' {NOT_LINEAR}; {remedy}"
            )
