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

import functools
import weakref

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph

from pymc_minibatch.bounds import Bounds
from pymc_minibatch.exceptions import BoundsUnavailableError
from pymc_minibatch.kernels.arrowhead import ArrowheadMatrix, cholesky
from pymc_minibatch.model.lipschitz import NOT_LINEAR
from pymc_minibatch.model.region import _predictor_remedy, _spec, default_radius
from pymc_minibatch.model.taylor import SecondOrderExpansion

#: The expansion terms of each model (:func:`_expansion_terms`).
_TERMS = weakref.WeakKeyDictionary()

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
    """The observed variables' specs, their layout and the rows function of their terms
    (built once per model: the curvature passes of the Laplace fit and the bounds' pass
    share its compiled function).

    Raises
    ------
    BoundsUnavailableError
        Naming the observed variable, when its likelihood has no bounded third derivative
        even on a bounded region (see :mod:`pymc_minibatch.model.region`).
    """
    built = _TERMS.get(minibatch_model)
    if built is None:
        built = _TERMS[minibatch_model] = _build_expansion_terms(minibatch_model)
    return built


def _build_expansion_terms(minibatch_model):
    mm = minibatch_model
    graph = mm.row_graph
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
    layout = _Layout(specs)
    moved = mm.rows_graph_function(
        "moved_predictors", terms, functools.partial(_moved_predictors_graph, layout.n_predictors)
    )
    return names, specs, layout, terms, moved


def _moved_predictors_graph(n_predictors, symbolic, per_row):
    """Graph of :meth:`MinibatchModel.rows_graph_function`: the rows' predictors at
    ``theta + steps[m]`` for every row ``m`` of the input ``steps``, shape ``(M, n)`` each:
    the points a block's designs are differenced at, in one call (one product of the rows
    with all the steps where the predictor is ``X @ theta``)."""
    steps = pt.matrix("steps", dtype="float64")
    predictors = per_row[:n_predictors]
    moved = vectorize_graph(predictors, replace={symbolic.theta: symbolic.theta + steps})
    # (a predictor that does not depend on theta keeps the shape (n,))
    return [steps], [pt.broadcast_to(m, (steps.shape[0], p.shape[0]))
                     for m, p in zip(moved, predictors, strict=True)]  # fmt: skip


class _Designs:
    """The directions along which a block's predictors are differenced, and what they give.

    With the structure of :mod:`pymc_minibatch.model.structure` (``S`` shared coordinates,
    ``k`` local ones per group), a row's linear predictor ``w_i = a_i + A_i theta`` has
    ``A_i`` zero outside the shared coordinates and its own group's: the shared part comes
    from ``S`` unit steps, the local part from ``k`` steps that move slot ``j`` of every group
    at once (``v_j``), and the row's group from ``k`` more that move slot ``j`` of group
    ``g`` by ``g + 1`` (``v'_j``: the row's difference is ``g + 1`` times its difference along
    ``v_j``). ``S + 2 k`` evaluations of the rows, whatever the number of groups.
    """

    def __init__(self, structure, ndim):
        self.shared = structure.shared
        self.local = structure.local
        n_shared, n_slots = self.shared.size, self.local.shape[1]
        steps = np.zeros((n_shared + 2 * n_slots, ndim))
        steps[np.arange(n_shared), self.shared] = 1.0
        labels = np.arange(1, self.local.shape[0] + 1, dtype=np.float64)
        for j in range(n_slots):
            steps[n_shared + j, self.local[:, j]] = 1.0
            steps[n_shared + n_slots + j, self.local[:, j]] = labels
        self.steps = steps

    def of_block(self, terms, moved, theta0, rows, n_predictors):
        """``(base, shared, local, groups)``: the terms at ``theta0``, per predictor its
        shared part ``(n, S)`` and local part ``(n, k)`` of ``A_i``, and each row's group
        (-1: its predictors touch no local coordinate); ``moved`` gives the predictors at
        ``theta0`` plus each step (:func:`_moved_predictors_graph`)."""
        base = terms(theta0, *rows)
        moved = moved(theta0, self.steps, *rows)
        n_shared, n_slots = self.shared.size, self.local.shape[1]
        shared, local, labelled = [], [], []
        for p in range(n_predictors):
            differences = (moved[p] - base[p]).T
            shared.append(differences[:, :n_shared])
            local.append(differences[:, n_shared : n_shared + n_slots])
            labelled.append(differences[:, n_shared + n_slots :])
        groups = np.full(len(base[0]), -1, dtype=np.int64)
        if n_slots:
            plain, scaled = np.concatenate(local, axis=1), np.concatenate(labelled, axis=1)
            column = np.argmax(np.abs(plain), axis=1)
            row = np.arange(plain.shape[0])
            pivot = plain[row, column]
            touched = pivot != 0.0
            groups[touched] = np.rint(scaled[row, column][touched] / pivot[touched]) - 1
        return base, shared, local, groups


def _sparse_gram(shared, local):
    """``A_i A_i^T`` of each row's predictors (``(n, P, P)``) from their parts."""
    return (np.einsum("pns,qns->npq", np.array(shared), np.array(shared))
            + np.einsum("pnk,qnk->npq", np.array(local), np.array(local)))  # fmt: skip


def _operator_norms(gram):
    """Square roots of the largest eigenvalues of a stack of Gram matrices."""
    if gram.shape[-1] == 1:
        return np.sqrt(np.maximum(gram[:, 0, 0], 0.0))
    return np.sqrt(np.maximum(np.linalg.eigvalsh(gram)[:, -1], 0.0))


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
            [_predictor_remedy(spec, j) for j in range(len(spec.predictors))] for spec in specs
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
        sums = _zero_sums(self.designs, center.size)
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
                _check_linear_parts(evaluate, p, self.theta0, base[p], (shared[p], local[p]),
                                    groups, self.designs, name, self.random_seed,
                                    remedy)  # fmt: skip
            whitened = [self.factor.whitened_rows((shared[p][:, self.shared_columns], local[p]),
                                                  groups)
                        for p in predictors]  # fmt: skip
            norms = _operator_norms(_sparse_gram(*zip(*whitened, strict=True)))
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
                plain = _operator_norms(_sparse_gram([shared[p] for p in predictors],
                                                     [local[p] for p in predictors]))  # fmt: skip
                c += bound(w_hat, extra, radii) * plain**2
        if self.order == 2:
            _add_sums(sums, at_center, shared, local, groups, layout, self.designs)
        return c


def _zero_sums(designs, ndim):
    """The sums of :func:`_add_sums`, zero: ``G`` and ``H`` by part."""
    n_groups, n_slots = designs.local.shape
    n_shared = designs.shared.size
    return {
        "gradient": np.zeros(ndim),
        "shared_block": np.zeros((n_shared, n_shared)),
        "coupling": np.zeros((n_groups, n_slots, n_shared)),
        "local_blocks": np.zeros((n_groups, n_slots, n_slots)),
    }


def _add_sums(sums, at_center, shared, local, groups, layout, designs):
    """``G += sum_i A_i' g_i`` and ``H += sum_i A_i' H_i A_i`` over the rows, by part."""
    n_predictors = layout.n_predictors
    n_groups, n_slots = designs.local.shape
    has_group = groups >= 0
    in_group = groups[has_group]
    for p in range(n_predictors):
        slope = at_center[n_predictors + p]
        sums["gradient"][designs.shared] += shared[p].T @ slope
        for j in range(n_slots):
            sums["gradient"][designs.local[:, j]] += np.bincount(
                in_group, (local[p][:, j] * slope)[has_group], minlength=n_groups
            )
    for q, (j, k) in enumerate(layout.curvature_pairs):
        curvature = at_center[2 * n_predictors + q]
        pairs = [(j, k)] if j == k else [(j, k), (k, j)]
        for a, b in pairs:
            sums["shared_block"] += shared[a].T @ (curvature[:, None] * shared[b])
            if not n_slots:
                continue
            weighted = (curvature[:, None] * local[a])[has_group]
            coupling = np.einsum("na,ns->nas", weighted, shared[b][has_group])
            sums["coupling"] += _scatter(in_group, coupling, n_groups)
            block = np.einsum("na,nb->nab", weighted, local[b][has_group])
            sums["local_blocks"] += _scatter(in_group, block, n_groups)


def _scatter(groups, values, n_groups):
    """``sum`` of ``values`` (``(n, ...)``) per group, shape ``(n_groups, ...)``."""
    flat = values.reshape(values.shape[0], -1)
    if not flat.shape[1]:  # e.g. the couplings when no coordinate is shared
        return np.zeros((n_groups, *values.shape[1:]))
    out = np.stack([np.bincount(groups, flat[:, e], minlength=n_groups)
                    for e in range(flat.shape[1])], axis=1)  # fmt: skip
    return out.reshape((n_groups, *values.shape[1:]))


def _check_linear_parts(evaluate, term, theta0, eta0, parts, groups, designs, name,
                        random_seed, remedy):  # fmt: skip
    """:func:`~pymc_minibatch.model.lipschitz._check_linear` on a design given by its shared
    and local ``parts``."""
    shared, local = parts
    rng = np.random.default_rng(random_seed)
    rows = rng.choice(eta0.size, size=min(eta0.size, 64), replace=False)
    for _ in range(2):
        move = rng.normal(size=theta0.shape)
        predicted = eta0[rows] + shared[rows] @ move[designs.shared]
        if designs.local.size:
            own = np.where(groups[rows, None] >= 0,
                           move[designs.local[np.maximum(groups[rows], 0)]], 0.0)  # fmt: skip
            predicted += np.sum(local[rows] * own, axis=1)
        actual = evaluate(theta0 + move, rows)[term]
        if not np.allclose(actual, predicted, rtol=1e-6, atol=1e-6):
            raise BoundsUnavailableError(
                f"the linear predictor of observed variable '{name}' {NOT_LINEAR}; {remedy}"
            )


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
    names, specs, layout, terms, moved = _expansion_terms(mm)
    if radius is None and any(spec.local for spec in specs):
        local = [name for name, spec in zip(names, specs, strict=True) if spec.local]
        raise ValueError(f"the bounds of {local} hold on a trust region: pass radius")
    designs = _Designs(laplace.structure, mm.ndim)
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
    return c, sums["gradient"], _hessian(designs, sums), specs, layout, terms, factor


def _block_loglik_sum(symbolic):
    """Graph of :meth:`MinibatchModel.graph_function`: a block's summed log-likelihood."""
    return [], symbolic.loglik.sum()


class _BlockCurvature:
    """A block of rows reduced to its summed log-likelihood at ``theta``, and the gradient
    and Hessian of it from the rows' linear predictors: ``sum_i A_i' g_i`` and ``sum_i A_i'
    H_i A_i`` with ``g_i``, ``H_i`` the derivatives of ``f`` at ``w_i(theta)`` (exact, as the
    predictors are linear; :func:`_check_linear_parts` confirms it on every block).
    Picklable (a Dask task)."""

    def __init__(self, terms, moved, loglik_sum, names, specs, layout, theta0, designs):
        self.terms = terms
        self.moved = moved
        self.loglik_sum = loglik_sum
        self.names = names
        self.remedies = [
            [_predictor_remedy(spec, j) for j in range(len(spec.predictors))] for spec in specs
        ]
        self.layout = layout
        self.theta0 = theta0
        self.designs = designs

    def __call__(self, theta, *rows):
        sums = _zero_sums(self.designs, theta.size)
        value = 0.0
        for start in range(0, len(rows[0]), SUB_BLOCK_ROWS):
            sub = [r[start : start + SUB_BLOCK_ROWS] for r in rows]
            value += float(self.loglik_sum(theta, *sub))
            self._reduce(theta, sub, sums)
        return value, sums

    def _reduce(self, theta, rows, sums):
        layout = self.layout
        base, shared, local, groups = self.designs.of_block(self.terms, self.moved, self.theta0,
                                                            rows, layout.n_predictors)  # fmt: skip

        def evaluate(point, idx):
            return self.terms(point, *(r[idx] for r in rows))

        for name, remedies, predictors in zip(self.names, self.remedies, layout.predictors,
                                              strict=True):  # fmt: skip
            for p, remedy in zip(predictors, remedies, strict=True):
                _check_linear_parts(evaluate, p, self.theta0, base[p], (shared[p], local[p]),
                                    groups, self.designs, name, 0, remedy)  # fmt: skip
        _add_sums(sums, self.terms(theta, *rows), shared, local, groups, layout, self.designs)


def likelihood_curvature(minibatch_model, theta, structure, rows=None):
    """The full-data log-likelihood at ``theta``, its gradient and its Hessian (an
    :class:`~pymc_minibatch.kernels.arrowhead.ArrowheadMatrix` in ``structure``), from one
    pass that evaluates each block's rows forward only: ``S + 2 k + 3`` times, ``S`` shared
    coordinates and ``k`` local ones per group, where the Hessian-vector products of
    :func:`~pymc_minibatch.model.curvature.full_data_curvature` differentiate each block
    twice, ``S + k + 1`` times. With ``rows`` (from
    :meth:`~pymc_minibatch.MinibatchModel.gather_rows`), those of these rows instead (no
    pass).

    Raises
    ------
    BoundsUnavailableError
        When a likelihood is not one of the families of second-order control variates
        (:mod:`pymc_minibatch.model.region`) or its predictors are not linear in ``theta``.
    """
    mm = minibatch_model
    names, specs, layout, terms, moved = _expansion_terms(mm)
    designs = _Designs(structure, mm.ndim)
    loglik_sum = mm.graph_function("block_loglik_sum", _block_loglik_sum)
    reduce_block = _BlockCurvature(terms.block_function(), moved, loglik_sum, names, specs,
                                   layout, mm.initial_theta(), designs)  # fmt: skip
    if rows is not None:
        total, sums = reduce_block(np.asarray(theta, dtype=np.float64), *rows)
        return total, sums["gradient"], _hessian(designs, sums)
    total, sums = 0.0, _zero_sums(designs, mm.ndim)

    def consume(block):
        nonlocal total
        block_value, block_sums = block
        total += block_value
        for key, value in block_sums.items():
            sums[key] += value

    mm.over_all_rows(reduce_block, theta, consume=consume)
    return total, sums["gradient"], _hessian(designs, sums)


def _hessian(designs, sums):
    """The :class:`ArrowheadMatrix` of the sums ``H`` by part."""
    return ArrowheadMatrix(designs.shared, designs.local, sums["local_blocks"],
                           sums["coupling"], sums["shared_block"])  # fmt: skip


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
