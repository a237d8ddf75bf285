"""The likelihood's gradient and Hessian from its rows' linear predictors, in one pass.

Where every row's log-likelihood is ``f(w_i)`` of linear predictors ``w_i = a_i + A_i
theta``, the gradient and Hessian of the full-data log-likelihood are ``sum_i A_i' g_i``
and ``sum_i A_i' H_i A_i``: each block of rows is evaluated forward only, at the point and
along the designs' steps (:mod:`pymc_minibatch.model.designs`), never differentiated.
"""

import numpy as np

from pymc_minibatch.model.designs import (
    SUB_BLOCK_ROWS,
    Designs,
    add_sums,
    check_linear_parts,
    expansion_terms,
    summed_hessian,
    zero_sums,
)
from pymc_minibatch.model.region import predictor_remedy


def _block_loglik_sum(symbolic):
    """Graph of :meth:`MinibatchModel.graph_function`: a block's summed log-likelihood."""
    return [], symbolic.loglik.sum()


class _BlockCurvature:
    """A block of rows reduced to its summed log-likelihood at ``theta``, and the gradient
    and Hessian of it from the rows' linear predictors: ``sum_i A_i' g_i`` and ``sum_i A_i'
    H_i A_i`` with ``g_i``, ``H_i`` the derivatives of ``f`` at ``w_i(theta)`` (exact, as the
    predictors are linear; :func:`check_linear_parts` confirms it on every block).
    Picklable (a Dask task)."""

    def __init__(self, terms, moved, loglik_sum, names, specs, layout, theta0, designs):
        self.terms = terms
        self.moved = moved
        self.loglik_sum = loglik_sum
        self.names = names
        self.remedies = [
            [predictor_remedy(spec, j) for j in range(len(spec.predictors))] for spec in specs
        ]
        self.layout = layout
        self.theta0 = theta0
        self.designs = designs

    def __call__(self, theta, *rows):
        sums = zero_sums(self.designs, theta.size)
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
                check_linear_parts(evaluate, p, self.theta0, base[p], (shared[p], local[p]),
                                    groups, self.designs, name, 0, remedy)  # fmt: skip
        add_sums(sums, self.terms(theta, *rows), shared, local, groups, layout, self.designs)


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
    names, specs, layout, terms, moved = expansion_terms(mm)
    designs = Designs(structure, mm.ndim)
    loglik_sum = mm.graph_function("block_loglik_sum", _block_loglik_sum)
    reduce_block = _BlockCurvature(terms.block_function(), moved, loglik_sum, names, specs,
                                   layout, mm.initial_theta(), designs)  # fmt: skip
    if rows is not None:
        total, sums = reduce_block(np.asarray(theta, dtype=np.float64), *rows)
        return total, sums["gradient"], summed_hessian(designs, sums)
    total, sums = 0.0, zero_sums(designs, mm.ndim)

    def consume(block):
        nonlocal total
        block_value, block_sums = block
        total += block_value
        for key, value in block_sums.items():
            sums[key] += value

    mm.over_all_rows(reduce_block, theta, consume=consume)
    return total, sums["gradient"], summed_hessian(designs, sums)
