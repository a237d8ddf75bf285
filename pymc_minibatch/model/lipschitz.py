"""Derive TunaMH bounds from a PyMC model whose likelihood is Lipschitz in a linear predictor.

If ``U_i(theta) = f(eta_i)`` with ``|f'| <= L_i`` and ``eta_i = a_i + x_i' theta`` linear in
the sampled (transformed) parameters, then ``|U_i(theta) - U_i(theta')| <=
L_i ||x_i|| ||theta - theta'||`` over the coordinates with a non-zero column of X (Zhang,
Cooper & De Sa 2020, Section 5; ../shared/ALGORITHMS.md section 1). Supported families:

========================  =================  ==========================
distribution              linear predictor   L_i
========================  =================  ==========================
Bernoulli(logit_p=eta)    eta                1
StudentT(nu, mu=eta, s)   eta                (nu + 1) / (2 sqrt(nu) s)
Laplace(mu=eta, b)        eta                1 / b
Cauchy(alpha=eta, beta)   eta                1 / beta
========================  =================  ==========================

with every parameter other than ``eta`` fixed (free of sampled variables). ``x_i`` is read
numerically from the compiled graph (``eta`` at ``theta`` plus unit steps), and linearity
is verified at random points; several observed variables on the same rows add up.

For control variates (bounds on Taylor residuals around a center) the second derivative
must be bounded too, ``|f''| <= K_i``: 1/4 (Bernoulli-logit), ``(nu + 1) / (nu s^2)``
(Student-t; its maximum is at zero residual), ``2 / beta^2`` (Cauchy); Laplace has a kink
and gets none.

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
    StudentTRV,
    UniformRV,
)

from pymc_minibatch.bounds import Bounds, GlobalBounds
from pymc_minibatch.exceptions import BoundsUnavailableError

SUPPORTED = "Bernoulli(logit_p=...), StudentT, Laplace, Cauchy location regressions"


class LinearPredictor(NamedTuple):
    """One observed variable on the rows, as ``U_i = f(eta_i)`` with ``eta = offset + X theta``."""

    name: str
    family: type
    """The PyTensor RandomVariable class of the distribution (e.g. ``BernoulliRV``)."""
    offset: np.ndarray
    """``eta`` at ``theta = 0`` (measured as ``eta(theta0) - X theta0``), shape (N,)."""
    design: np.ndarray
    """``X``, shape (N, ndim): ``d eta_i / d theta``."""
    lipschitz: np.ndarray
    """``L_i``, shape (N,): bound on ``|f'(eta_i)|``."""
    curvature: np.ndarray | None
    """``K_i``, shape (N,): bound on ``|f''(eta_i)|``, or None where ``f`` has a kink."""
    observed: np.ndarray
    """The observed values, shape (N,)."""


LOCAL_BOUNDS_REMEDY = (
    "pass bounds=pmm.bounds.Bounds(c, metric_vars=...) with |U_i(theta) - U_i(theta')| <= "
    "c_i ||theta - theta'|| for every row i"
)
GLOBAL_BOUNDS_REMEDY = (
    "pass bounds=pmm.bounds.GlobalBounds(lower, upper) with lower_i <= log p(y_i | theta) <= "
    "upper_i over the whole support"
)


def linear_predictors(minibatch_model, random_seed=0, remedy=LOCAL_BOUNDS_REMEDY):
    """The linear predictors of every observed variable on the rows.

    ``remedy`` ends a refusal: what the calling sampler accepts instead.

    Raises
    ------
    BoundsUnavailableError
        Naming the observed variable and what is needed (a supported family, fixed
        non-location parameters, a predictor linear in the sampled parameters).
    """
    mm = minibatch_model
    graph = mm._row_graph
    free_rvs = set(mm.model.free_RVs)
    etas, lipschitz, curvature = [], [], []
    for name, rv in zip(graph.row_term_names, graph.row_rvs, strict=True):
        eta, constant, second = _family_predictor(name, rv, remedy)
        if free_rvs & set(ancestors([constant])):
            raise BoundsUnavailableError(
                f"observed variable '{name}' ({type(rv.owner.op).__name__}): its scale/shape "
                "parameters depend on sampled variables, so no fixed Lipschitz constant "
                f"exists; fix them or {remedy}"
            )
        etas.append(eta)
        lipschitz.append(constant)
        curvature.append(pt.constant(np.nan) if second is None else second)
    n_terms = len(etas)
    evaluate = mm.compile_rows_function(etas + lipschitz + list(graph.row_values) + curvature)

    theta0 = mm.initial_theta()
    base = evaluate(theta0)
    predictors = []
    for term, (name, rv) in enumerate(zip(graph.row_term_names, graph.row_rvs, strict=True)):
        design = np.empty((mm.n_data, mm.ndim))
        for j in range(mm.ndim):
            design[:, j] = evaluate(theta0 + np.eye(mm.ndim)[j])[term] - base[term]
        _check_linear(evaluate, term, theta0, base[term], design, name, random_seed, remedy)
        predictors.append(
            LinearPredictor(
                name=name,
                family=type(rv.owner.op),
                offset=base[term] - design @ theta0,
                design=design,
                lipschitz=np.abs(base[n_terms + term]),
                observed=base[2 * n_terms + term],
                curvature=None
                if np.isnan(base[3 * n_terms + term][0])
                else np.abs(base[3 * n_terms + term]),
            )
        )
    return predictors


def derive_bounds(minibatch_model, control_variates=False):
    """Bounds for the observed variables on the rows, over the coordinates that enter them.

    Without control variates, ``c_i = sum_k L_ik ||x_ik||`` with the Euclidean metric. With
    them, ``c_i = sum_k K_ik ||x_ik||^2`` for the Taylor residuals around the MAP (found
    by L-BFGS on the full data), with the Taylor metric of :mod:`pymc_minibatch.bounds`.

    Raises
    ------
    BoundsUnavailableError
        If a likelihood is not one of the supported families (see the module docstring), or
        with ``control_variates`` if one has no bounded second derivative (Laplace).
    """
    c = np.zeros(minibatch_model.n_data)
    used = np.zeros(minibatch_model.ndim, dtype=bool)
    for predictor in linear_predictors(minibatch_model):
        norms = np.linalg.norm(predictor.design, axis=1)
        if not control_variates:
            c += predictor.lipschitz * norms
        elif predictor.curvature is None:
            raise BoundsUnavailableError(
                f"observed variable '{predictor.name}' ({predictor.family.__name__}) has no "
                "bounded second derivative, so control-variate bounds do not apply; use "
                "control_variates=False"
            )
        else:
            c += predictor.curvature * norms**2
        used |= np.any(predictor.design != 0.0, axis=0)
    center = minibatch_model.find_map() if control_variates else None
    return Bounds(c, center=center, _metric_indices=np.flatnonzero(used))


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
        half_width += predictor.lipschitz * eta_half_width
    loglik_center = mm.loglik(center, np.arange(mm.n_data))
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


def _family_predictor(name, rv, remedy):
    op = rv.owner.op
    # float64 throughout: PyTensor stores integral constants as int8, and sqrt(int8) is float32
    params = [pt.cast(p, "float64") for p in op.dist_params(rv.owner)]
    if isinstance(op, BernoulliRV):
        (p,) = op.dist_params(rv.owner)
        if p.owner is None or not (
            isinstance(p.owner.op, Elemwise) and isinstance(p.owner.op.scalar_op, Sigmoid)
        ):
            raise BoundsUnavailableError(
                f"observed variable '{name}' is Bernoulli but not parametrised by logit_p "
                f"(or p = invlogit(eta)); auto bounds need the logit link, or {remedy}"
            )
        return p.owner.inputs[0], pt.constant(1.0), pt.constant(0.25)
    if isinstance(op, StudentTRV):
        nu, mu, sigma = params
        return mu, (nu + 1.0) / (2.0 * pt.sqrt(nu) * sigma), (nu + 1.0) / (nu * sigma**2)
    if isinstance(op, LaplaceRV):
        mu, b = params
        return mu, 1.0 / b, None
    if isinstance(op, CauchyRV):
        alpha, beta = params
        return alpha, 1.0 / beta, 2.0 / beta**2
    raise BoundsUnavailableError(
        f"cannot derive per-row bounds for observed variable '{name}' "
        f"({type(op).__name__}): supported are {SUPPORTED}; {remedy}"
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
                f"the linear predictor of observed variable '{name}' is not linear in the "
                f"sampled (transformed) parameters, so auto bounds do not apply; {remedy}"
            )
