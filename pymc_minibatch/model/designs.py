"""The rows' linear predictors, their designs measured block by block, and the sums of
their expansions.

The bounds of Taylor control variates (:mod:`pymc_minibatch.model.expansions`) and the
likelihood's curvature from its predictors (:mod:`pymc_minibatch.model.linear_curvature`)
both need, for every row, its linear predictors' design ``A_i`` and the derivatives of
its log-likelihood: each block of rows is evaluated at the mode and at ``S + 2 k``
steps from it (:class:`Designs`), and reduced to its share of the gradient and Hessian
sums ``G`` and ``H`` (:func:`add_sums`).
"""

import functools
import weakref

import numpy as np
import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph

from pymc_minibatch.exceptions import BoundsUnavailableError
from pymc_minibatch.kernels.arrowhead import ArrowheadMatrix
from pymc_minibatch.model.lipschitz import NOT_LINEAR
from pymc_minibatch.model.region import row_spec

#: The expansion terms of each model (:func:`expansion_terms`).
_TERMS = weakref.WeakKeyDictionary()

#: Rows evaluated at once inside a block: the ``d + 2`` evaluations and the designs of a
#: sub-block are the pass's working memory (about ``(d + 10) * 8`` bytes per row).
SUB_BLOCK_ROWS = 2**14


class Layout:
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


def expansion_terms(minibatch_model):
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
        row_spec(name, rv, value, free_rvs)
        for name, rv, value in zip(names, graph.row_rvs, graph.row_values, strict=True)
    ]
    outputs = (
        [g for spec in specs for g in spec.predictors]
        + [g for spec in specs for g in spec.slopes]
        + [h for spec in specs for _, _, h in spec.curvatures]
        + [g for spec in specs for g in spec.extra]
    )
    terms = mm.rows_function([pt.cast(g, "float64") for g in outputs])
    layout = Layout(specs)
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


class Designs:
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


def sparse_gram(shared, local):
    """``A_i A_i^T`` of each row's predictors (``(n, P, P)``) from their parts."""
    return (np.einsum("pns,qns->npq", np.array(shared), np.array(shared))
            + np.einsum("pnk,qnk->npq", np.array(local), np.array(local)))  # fmt: skip


def operator_norms(gram):
    """Square roots of the largest eigenvalues of a stack of Gram matrices."""
    if gram.shape[-1] == 1:
        return np.sqrt(np.maximum(gram[:, 0, 0], 0.0))
    return np.sqrt(np.maximum(np.linalg.eigvalsh(gram)[:, -1], 0.0))


def zero_sums(designs, ndim):
    """The sums of :func:`add_sums`, zero: ``G`` and ``H`` by part."""
    n_groups, n_slots = designs.local.shape
    n_shared = designs.shared.size
    return {
        "gradient": np.zeros(ndim),
        "shared_block": np.zeros((n_shared, n_shared)),
        "coupling": np.zeros((n_groups, n_slots, n_shared)),
        "local_blocks": np.zeros((n_groups, n_slots, n_slots)),
    }


def add_sums(sums, at_center, shared, local, groups, layout, designs):
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


def check_linear_parts(evaluate, term, theta0, eta0, parts, groups, designs, name,
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


def summed_hessian(designs, sums):
    """The :class:`ArrowheadMatrix` of the sums ``H`` by part."""
    return ArrowheadMatrix(designs.shared, designs.local, sums["local_blocks"],
                           sums["coupling"], sums["shared_block"])  # fmt: skip
