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

from pymc_minibatch.bounds import Bounds
from pymc_minibatch.kernels.arrowhead import cholesky
from pymc_minibatch.model.designs import (
    SUB_BLOCK_ROWS,
    Designs,
    add_sums,
    check_linear_parts,
    expansion_terms,
    operator_norms,
    sparse_gram,
    summed_hessian,
    zero_sums,
)
from pymc_minibatch.model.region import default_radius, predictor_remedy
from pymc_minibatch.model.taylor import SecondOrderExpansion


class _BlockBounds:
    """A block of rows reduced to ``(c, G, H)``: its rows' bounds and its share of the
    expansions' gradient and Hessian sums (zero for ``order=1``; ``H`` in the block-arrowhead
    layout of the structure, as its shared block, couplings and groups' blocks).

    Picklable (a Dask task); ``theta`` of the call is the center of the expansion.
    """

    def __init__(self, terms, moved, names, specs, layout, theta0, factor, designs, radius,
                 order, random_seed=0):  # fmt: skip
        self.terms = terms
        self.moved = moved
        self.names = names
        self.bounds = [(spec.third if order == 2 else spec.second) for spec in specs]
        self.remedies = [
            [predictor_remedy(spec, j) for j in range(len(spec.predictors))] for spec in specs
        ]
        self.layout = layout
        self.theta0 = theta0
        self.factor = factor
        # the factor may leave out shared coordinates no row touches (row_factor)
        self.shared_columns = np.searchsorted(designs.shared, factor.shared)
        self.designs = designs
        self.radius = radius
        self.order = order
        self.random_seed = random_seed

    def __call__(self, center, *rows):
        sums = zero_sums(self.designs, center.size)
        c = np.zeros(len(rows[0]))
        for start in range(0, c.size, SUB_BLOCK_ROWS):
            sub = [r[start : start + SUB_BLOCK_ROWS] for r in rows]
            c[start : start + SUB_BLOCK_ROWS] = self._reduce(center, sub, sums)
        return _rounded_up_to_float32(c), sums

    def _reduce(self, center, rows, sums):
        layout, n_predictors = self.layout, self.layout.n_predictors
        at_center = self.terms(center, *rows)
        base, shared, local, groups = self.designs.of_block(self.terms, self.moved, self.theta0,
                                                            rows, n_predictors)  # fmt: skip

        def evaluate(theta, idx):
            return self.terms(theta, *(r[idx] for r in rows))

        c = np.zeros(len(rows[0]))
        for name, bound, remedies, predictors, extras in zip(
            self.names, self.bounds, self.remedies, layout.predictors, layout.extras,
            strict=True,
        ):  # fmt: skip
            for p, remedy in zip(predictors, remedies, strict=True):
                check_linear_parts(evaluate, p, self.theta0, base[p], (shared[p], local[p]),
                                    groups, self.designs, name, self.random_seed,
                                    remedy)  # fmt: skip
            whitened = [self.factor.whitened_rows((shared[p][:, self.shared_columns], local[p]),
                                                  groups)
                        for p in predictors]  # fmt: skip
            norms = operator_norms(sparse_gram(*zip(*whitened, strict=True)))
            w_hat = [at_center[p] for p in predictors]
            extra = [at_center[e] for e in extras]
            # each predictor moves by at most R times the norm of its whitened row
            radii = None if self.radius is None else [
                self.radius * np.sqrt(np.sum(part_s**2, axis=1) + np.sum(part_l**2, axis=1))
                for part_s, part_l in whitened
            ]  # fmt: skip
            if self.order == 2:
                c += bound(w_hat, extra, radii) * norms**3 / 6.0
            else:  # first order: K_i ||A_i||^2, in plain coordinates
                plain = operator_norms(sparse_gram([shared[p] for p in predictors],
                                                     [local[p] for p in predictors]))  # fmt: skip
                c += bound(w_hat, extra, radii) * plain**2
        if self.order == 2:
            add_sums(sums, at_center, shared, local, groups, layout, self.designs)
        return c


def _rounded_up_to_float32(c):
    """``c`` in float32, each value rounded up: still upper bounds, in 4 bytes per row
    instead of 8 (the bounds are the one array a step keeps per row)."""
    single = c.astype(np.float32)
    below = single < c
    single[below] = np.nextafter(single[below], np.float32(np.inf))
    return single


def _bounds_pass(minibatch_model, laplace, radius, order):
    """``(c, G, H, specs, layout, terms, factor)`` from one pass over the rows (``H`` an
    :class:`~pymc_minibatch.kernels.arrowhead.ArrowheadMatrix` in the Laplace fit's
    structure; ``factor`` the whitening of the bounds, :func:`row_factor`)."""
    mm = minibatch_model
    names, specs, layout, terms, moved = expansion_terms(mm)
    if radius is None and any(spec.local for spec in specs):
        local = [name for name, spec in zip(names, specs, strict=True) if spec.local]
        raise ValueError(f"the bounds of {local} hold on a trust region: pass radius")
    designs = Designs(laplace.structure, mm.ndim)
    factor = row_factor(mm, laplace)
    reduce_block = _BlockBounds(terms.block_function(), moved, names, specs, layout,
                                mm.initial_theta(), factor, designs, radius, order)  # fmt: skip
    c = np.empty(mm.n_data, dtype=np.float32)
    sums = None
    filled = 0

    def consume(block):
        # each block's bounds are copied into c as they come: c is the only per-row array
        nonlocal filled, sums
        block_c, block_sums = block
        c[filled : filled + block_c.size] = block_c
        filled += block_c.size
        if sums is None:
            sums = block_sums
        else:
            for key, value in block_sums.items():
                sums[key] += value

    mm.over_all_rows(reduce_block, laplace.mode, consume=consume)
    return c, sums["gradient"], summed_hessian(designs, sums), specs, layout, terms, factor


def row_factor(minibatch_model, laplace):
    """The whitening of the rows' bounds: the Laplace fit's factor, without the shared
    coordinates no row touches when there are any.

    A row's predictors depend only on the coordinates it touches, so its bound may follow
    their whitening alone: the Cholesky factor of the precision's principal submatrix on
    them (the Laplace approximation's precision *given* the others). A centred
    hierarchical model's population scale, which only the prior touches, then stays out
    of every row's metric; its joint mode lies several Laplace sds below its posterior
    mean with a thousand groups, and the metric grows with the cube of the whitened
    distance. Without such coordinates, or when the fit's curvature had to be repaired,
    the fit's own factor.
    """
    free = np.intersect1d(minibatch_model.row_free_indices(), laplace.structure.shared)
    if free.size == 0 or laplace.repaired:
        return laplace.preconditioner
    return cholesky(laplace.precision.without_shared(free))


def default_group_radius(structure):
    """:func:`~pymc_minibatch.model.region.default_radius` of the coordinates a row's group
    sees: its own and the shared ones (every coordinate without groups)."""
    return default_radius(structure.shared.size + structure.local.shape[1])


def second_order_bounds(minibatch_model, laplace, radius=None):
    """Bounds on the second-order residuals and the expansion they belong to (see
    :mod:`pymc_minibatch.model.taylor`), from one pass over the rows.

    Parameters
    ----------
    minibatch_model : MinibatchModel
    laplace : LaplaceFit
        Its mode is the center; its factor whitens the bounds, and its structure gives each
        group of rows a metric of its own.
    radius : float, optional
        The trust region ``||(z_g, z_S)|| <= radius`` for every group ``g`` (``||z|| <=
        radius`` without groups); needed when a row's bound is local, and the bounds then
        hold only for pairs of points inside it.

    Returns
    -------
    (Bounds, SecondOrderExpansion)

    Raises
    ------
    BoundsUnavailableError
        Naming the observed variable, when its likelihood has no bounded third derivative
        even on a bounded region, or its predictors are not linear in the sampled values.
    """
    c, gradient, hessian, specs, layout, terms, row_whiten = _bounds_pass(
        minibatch_model, laplace, radius, order=2
    )
    center, factor = laplace.mode, laplace.preconditioner
    expansion = SecondOrderExpansion(
        center=center,
        factor=factor,
        gradient=gradient,
        hessian=hessian,
        terms=terms,
        n_predictors=layout.n_predictors,
        curvature_pairs=tuple(layout.curvature_pairs),
    )
    local = any(spec.local for spec in specs)
    bounds = Bounds(c, center=center, whiten=row_whiten, groups=_groups(laplace.structure),
                    region_radius=radius if local else None)  # fmt: skip
    return bounds, expansion


def first_order_bounds(minibatch_model, laplace, radius):
    """Bounds on the first-order residuals ``l_i - grad l_i(theta_hat) . (theta - theta_hat)``
    for pairs in the trust region ``||(z_g, z_S)|| <= radius`` for every group ``g``, from
    one pass over the rows.

    With ``|D^2 f(w)[v, v]| <= K_i`` over the region, ``|r_i(theta') - r_i(theta)| <= K_i
    ||A_i||^2 ||theta' - theta|| (||theta - theta_hat|| + ||theta' - theta_hat||) / 2`` (the
    Taylor metric of :func:`pymc_minibatch.bounds.metric`; ``||A_i||`` the operator norm of
    the row's predictor matrix), so ``c_i = K_i ||A_i||^2``.
    """
    c, *_, row_whiten = _bounds_pass(minibatch_model, laplace, radius, order=1)
    return Bounds(c, center=laplace.mode, region_radius=radius,
                  region_whiten=row_whiten)  # fmt: skip


def _groups(structure):
    """The rows' groups for grouped bounds, or None without groups."""
    return structure.row_groups if structure.local.size else None
