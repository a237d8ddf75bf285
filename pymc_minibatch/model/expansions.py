"""Bounds of Taylor control variates and the sums of the rows' expansions, in one pass.

The expansions of :mod:`pymc_minibatch.model.taylor` and the trust-region bounds of
:mod:`pymc_minibatch.model.region` need, for every row, its linear predictors' design
``A_i``, the derivatives of its log-likelihood at the mode and a bound on a higher
derivative. None of this is kept per row: one pass over the data (block by block, through
Dask when the rows are in chunked arrays, see :meth:`MinibatchModel.over_all_rows`)
reduces each block to its rows' bounds ``c_i`` and its share of the expansions' sums ``G``
and ``H``; a step recomputes the few rows' expansions it needs from the rows it reads
(:meth:`SecondOrderExpansion.row_difference`). So the memory that stays is one float32 per
row (each bound rounded up, so still a bound), and the pass reads the data once however
many parameters there are (the designs are measured by finite differences inside each
block).
"""

import numpy as np
import pytensor.tensor as pt

from pymc_minibatch.bounds import Bounds
from pymc_minibatch.model.lipschitz import _check_linear
from pymc_minibatch.model.region import _predictor_remedy, _spec
from pymc_minibatch.model.taylor import SecondOrderExpansion, predictor_norms, whitening

#: Rows evaluated at once inside a block: the ``d + 2`` evaluations and the designs of a
#: sub-block are the pass's working memory (about ``(d + 10) * 8`` bytes per row).
SUB_BLOCK_ROWS = 2**14


class _Layout:
    """Where each observed variable's terms sit among the outputs of the rows function:
    ``[predictors (P), slopes (P), curvatures (Q), extras]``, predictors numbered across
    all observed variables."""

    def __init__(self, specs):
        self.n_predictors = sum(len(spec.predictors) for spec in specs)
        self.curvature_pairs = []
        self.predictors, self.extras = [], []
        first, n_extras = 0, 0
        n_curvatures = sum(len(spec.curvatures) for spec in specs)
        extras_start = 2 * self.n_predictors + n_curvatures
        for spec in specs:
            self.predictors.append(range(first, first + len(spec.predictors)))
            self.curvature_pairs.extend((first + j, first + k) for j, k, _ in spec.curvatures)
            start = extras_start + n_extras
            self.extras.append(range(start, start + len(spec.extra)))
            first += len(spec.predictors)
            n_extras += len(spec.extra)


def _expansion_terms(minibatch_model):
    """The observed variables' specs, their layout and the rows function of their terms.

    Raises
    ------
    BoundsUnavailableError
        Naming the observed variable, when its likelihood has no bounded third derivative
        even on a bounded region (see :mod:`pymc_minibatch.model.region`).
    """
    mm = minibatch_model
    graph = mm._row_graph
    free_rvs = set(mm.model.free_RVs)
    names = list(graph.row_term_names)
    specs = [
        _spec(name, rv, value, free_rvs)
        for name, rv, value in zip(names, graph.row_rvs, graph.row_values, strict=True)
    ]
    outputs = (
        [g for spec in specs for g in spec.predictors]
        + [g for spec in specs for g in spec.slopes]
        + [h for spec in specs for _, _, h in spec.curvatures]
        + [g for spec in specs for g in spec.extra]
    )
    terms = mm.rows_function([pt.cast(g, "float64") for g in outputs])
    return names, specs, _Layout(specs), terms


class _BlockBounds:
    """A block of rows reduced to ``(c, G, H)``: its rows' bounds and its share of the
    expansions' gradient and Hessian sums (``G``, ``H`` zero for ``order=1``).

    Picklable (a Dask task); ``theta`` of the call is the center of the expansion.
    """

    def __init__(self, terms, names, specs, layout, theta0, transform, radius, order,
                 random_seed=0):  # fmt: skip
        self.terms = terms
        self.names = names
        self.bounds = [(spec.third if order == 2 else spec.second) for spec in specs]
        self.remedies = [
            [_predictor_remedy(spec, j) for j in range(len(spec.predictors))] for spec in specs
        ]
        self.layout = layout
        self.theta0 = theta0
        self.transform = transform
        self.radius = radius
        self.order = order
        self.random_seed = random_seed

    def __call__(self, center, *rows):
        ndim = center.size
        c = np.zeros(len(rows[0]))
        gradient, hessian = np.zeros(ndim), np.zeros((ndim, ndim))
        for start in range(0, c.size, SUB_BLOCK_ROWS):
            sub = [r[start : start + SUB_BLOCK_ROWS] for r in rows]
            c[start : start + SUB_BLOCK_ROWS] = self._reduce(center, sub, gradient, hessian)
        return _rounded_up_to_float32(c), gradient, hessian

    def _reduce(self, center, rows, gradient, hessian):
        layout, n_predictors = self.layout, self.layout.n_predictors
        at_center = self.terms(center, *rows)
        base = self.terms(self.theta0, *rows)
        steps = [self.terms(self.theta0 + unit, *rows) for unit in np.eye(center.size)]
        designs = [np.stack([step[p] - base[p] for step in steps], axis=1)
                   for p in range(n_predictors)]  # fmt: skip

        def evaluate(theta, idx):
            return self.terms(theta, *(r[idx] for r in rows))

        c = np.zeros(len(rows[0]))
        for name, bound, remedies, predictors, extras in zip(
            self.names, self.bounds, self.remedies, layout.predictors, layout.extras,
            strict=True,
        ):  # fmt: skip
            for p, remedy in zip(predictors, remedies, strict=True):
                _check_linear(evaluate, p, self.theta0, base[p], designs[p], name,
                              self.random_seed, remedy)  # fmt: skip
            own = [designs[p] for p in predictors]
            w_hat = [at_center[p] for p in predictors]
            extra = [at_center[e] for e in extras]
            norms = predictor_norms(own, self.transform)
            radius = None if self.radius is None else self.radius * norms
            if self.order == 2:
                c += bound(w_hat, extra, radius) * norms**3 / 6.0
            else:  # first order: K_i ||A_i||^2, in plain coordinates
                plain = predictor_norms(own, np.eye(center.size))
                c += bound(w_hat, extra, radius) * plain**2
        if self.order == 2:
            for p in range(n_predictors):
                gradient += designs[p].T @ at_center[n_predictors + p]
            for q, (j, k) in enumerate(layout.curvature_pairs):
                curvature = at_center[2 * n_predictors + q]
                block = designs[j].T @ (curvature[:, None] * designs[k])
                hessian += block if j == k else block + block.T
        return c


def _rounded_up_to_float32(c):
    """``c`` in float32, each value rounded up: still upper bounds, in 4 bytes per row
    instead of 8 (the bounds are the one array a step keeps per row)."""
    single = c.astype(np.float32)
    below = single < c
    single[below] = np.nextafter(single[below], np.float32(np.inf))
    return single


def _bounds_pass(minibatch_model, laplace, radius, order):
    """``(c, G, H, specs, layout, terms)`` from one pass over the rows."""
    mm = minibatch_model
    names, specs, layout, terms = _expansion_terms(mm)
    if radius is None and any(spec.local for spec in specs):
        local = [name for name, spec in zip(names, specs, strict=True) if spec.local]
        raise ValueError(f"the bounds of {local} hold on a trust region: pass radius")
    transform, _ = whitening(laplace)
    reduce_block = _BlockBounds(terms.block_function(), names, specs, layout,
                                mm.initial_theta(), transform, radius, order)  # fmt: skip
    c = np.empty(mm.n_data, dtype=np.float32)
    gradient, hessian = np.zeros(mm.ndim), np.zeros((mm.ndim, mm.ndim))
    filled = 0

    def consume(block):
        # each block's bounds are copied into c as they come: c is the only per-row array
        nonlocal filled
        block_c, block_gradient, block_hessian = block
        c[filled : filled + block_c.size] = block_c
        filled += block_c.size
        gradient[:] += block_gradient
        hessian[:] += block_hessian

    mm.over_all_rows(reduce_block, laplace.mode, consume=consume)
    return c, gradient, hessian, specs, layout, terms


def second_order_bounds(minibatch_model, laplace, radius=None):
    """Bounds on the second-order residuals and the expansion they belong to (see
    :mod:`pymc_minibatch.model.taylor`), from one pass over the rows.

    Parameters
    ----------
    minibatch_model : MinibatchModel
    laplace : LaplaceFit
        Its mode is the center; its covariance whitens the bounds.
    radius : float, optional
        The trust region ``||z|| <= radius``; needed when a row's bound is local, and the
        bounds then hold only for pairs of points inside it.

    Returns
    -------
    (Bounds, SecondOrderExpansion)

    Raises
    ------
    BoundsUnavailableError
        Naming the observed variable, when its likelihood has no bounded third derivative
        even on a bounded region, or its predictors are not linear in the sampled values.
    """
    c, gradient, hessian, specs, layout, terms = _bounds_pass(minibatch_model, laplace,
                                                              radius, order=2)  # fmt: skip
    center = laplace.mode
    _, whiten = whitening(laplace)
    expansion = SecondOrderExpansion(
        center=center,
        whiten=whiten,
        gradient=gradient,
        hessian=hessian,
        terms=terms,
        n_predictors=layout.n_predictors,
        curvature_pairs=tuple(layout.curvature_pairs),
    )
    local = any(spec.local for spec in specs)
    bounds = Bounds(c, center=center, whiten=whiten, region_radius=radius if local else None)
    return bounds, expansion


def first_order_bounds(minibatch_model, laplace, radius):
    """Bounds on the first-order residuals ``l_i - grad l_i(theta_hat) . (theta - theta_hat)``
    for pairs in the trust region ``||z|| <= radius``, from one pass over the rows.

    With ``|D^2 f(w)[v, v]| <= K_i`` over the region, ``|r_i(theta') - r_i(theta)| <= K_i
    ||A_i||^2 ||theta' - theta|| (||theta - theta_hat|| + ||theta' - theta_hat||) / 2`` (the
    Taylor metric of :func:`pymc_minibatch.bounds.metric`; ``||A_i||`` the operator norm of
    the row's predictor matrix), so ``c_i = K_i ||A_i||^2``.
    """
    c = _bounds_pass(minibatch_model, laplace, radius, order=1)[0]
    _, whiten = whitening(laplace)
    return Bounds(c, center=laplace.mode, region_radius=radius, region_whiten=whiten)

