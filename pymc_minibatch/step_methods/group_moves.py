"""The model of TunaMH's sweep of group moves on a hierarchical model, built once.

One step of :class:`~pymc_minibatch.TunaMH` with group moves is one call of the kernel
:func:`pymc_minibatch.kernels.group_sweep.step` (the moves are described there): the
population parameters no row touches, every group given the shared parameters, then the
shared parameters that rows touch. :class:`GroupMoves` reads the blocks from the model's
graph and the step's expansion and gathers the kernel's
:class:`~pymc_minibatch.kernels.group_sweep.SweepModel`: the log prior and its split by
group (:mod:`pymc_minibatch.model.group_prior`), the rows' expansions and terms, the bounds'
metric and trust region per group, each group's proposal precision given the shared
parameters (from the graph, through PyTensor), and the approximation's blocks.

``chi`` of the group move is ``GROUP_KAPPA`` over the running mean of the groups' metrics
(each group's noise involves its own bounds only); that of the shared move follows TunaMH's
rule with ``SHARED_KAPPA``.
"""

import numpy as np
import pytensor
import pytensor.tensor as pt

from pymc_minibatch.kernels.group_sweep import SweepModel
from pymc_minibatch.kernels.pcn import shared_block

#: ``chi`` of the group move times the mean of the groups' metrics.
GROUP_KAPPA = 1.0
#: ``kappa`` of the shared move's ``chi`` (:data:`pymc_minibatch.step_methods.tuna.
#: TARGET_KAPPA` for an unblocked step): its proposal moves a few coordinates, and on a
#: 1000-group model its acceptance stayed above 0.8 at a fifth of the unblocked value.
SHARED_KAPPA = 1.0


def prior_hessian_vector(symbolic):
    """``(v) -> H v``, ``H`` the Hessian of the log prior (a graph for
    :meth:`~pymc_minibatch.MinibatchModel.prior_function`): with ``v`` the indicator of one
    local slot of every group, each group's column of that slot at once, as no prior term
    ties two groups."""
    direction = pt.vector("direction")
    gradient = pytensor.grad(symbolic.logprior, symbolic.theta)
    return [direction], pytensor.grad(pt.sum(gradient * direction), symbolic.theta)


class GroupMoves:
    """The blocks of a hierarchical model and the sweep's model (``model``).

    Parameters
    ----------
    step : TunaMH
        With second-order control variates, the pCN proposal and a metric per group.
    split_prior : GroupPrior
        The model's log prior by group (:func:`~pymc_minibatch.model.group_prior.group_prior`).
    """

    def __init__(self, step, split_prior):
        mm = step.minibatch_model
        expansion = step.residuals.expansion
        factor = expansion.factor
        precision = factor.matrix()
        population = np.intersect1d(mm.row_free_indices(), factor.shared)
        touched = np.setdiff1d(factor.shared, population)
        self.split_prior = split_prior
        self.minibatch_model = mm
        self.center = expansion.center
        self.shared = factor.shared
        self.local = local = factor.local
        self.likelihood_precision = -expansion.hessian.local_blocks
        self.laplace_blocks = precision.local_blocks
        self.slot_directions = np.zeros((local.shape[1], mm.ndim))
        for j in range(local.shape[1]):
            self.slot_directions[j, local[:, j]] = 1.0
        bounds = step.bounds
        self.model = SweepModel(
            mm.logprior, split_prior, expansion.group_quadratics, self.group_precisions,
            bounds.metrics, bounds.groups_outside_region, step.residuals.row_pair,
            step.make_exact_model(), expansion.center, factor, precision,
            shared_block(precision, population) if population.size else None,
            shared_block(precision, touched) if touched.size else None,
        )  # fmt: skip

    def group_precisions(self, theta):
        """Each group's precision given the current shared parameters, shape ``(G, k, k)``:
        its rows' curvature at the mode (from the expansion) plus its prior's curvature at
        the mode's local values and the current shared ones; a group where that sum is not
        positive definite keeps the Laplace fit's block. A function of the shared
        parameters alone, so that the group's move stays reversible."""
        point = self.center.copy()
        point[self.shared] = theta[self.shared]
        local = self.local
        # compiled once by the adapter (again after unpickling, with the adapter)
        hessian_vector = self.minibatch_model.prior_function("prior_hessian_vector",
                                                             prior_hessian_vector)  # fmt: skip
        prior = np.stack([-hessian_vector(point, direction)[local]
                          for direction in self.slot_directions], axis=-1)  # fmt: skip
        blocks = self.likelihood_precision + 0.5 * (prior + np.transpose(prior, (0, 2, 1)))
        positive = np.all(np.linalg.eigvalsh(blocks) > 0.0, axis=1) & np.all(
            np.isfinite(blocks), axis=(1, 2)
        )
        return np.where(positive[:, None, None], blocks, self.laplace_blocks)
