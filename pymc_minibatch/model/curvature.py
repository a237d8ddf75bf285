"""The exact Hessian of the full-data log posterior, from one pass, at any dimension.

With the structure of :mod:`pymc_minibatch.model.structure` (``S`` shared coordinates and
``k`` local ones per group), the Hessian ``H`` is block arrowhead and ``S + k`` Hessian-vector
products of the summed log-likelihood give all of it (the symmetric "star colouring" of
Coleman & Moré 1984, "Estimation of sparse Hessian matrices and graph coloring problems",
Mathematical Programming 28): a unit direction per shared coordinate gives its column, and
one direction per local slot, ``v_j = sum_g e_(g, j)``, gives every group's block at once,
since no row touches two groups (``(H v_j)_(g, i) = H_(g, i), (g, j)``). Each product is
the gradient of a block's gradient along the direction, so a pass reads every block once
(and evaluates it ``S + k + 1`` times) and keeps ``O((S + k) d)`` numbers, however many
groups there are; the log prior's Hessian comes from the same directions (no rows).

One more direction, random, checks the structure: the assembled matrix times it must equal
its exact Hessian-vector product. A prior that couples groups (a zero-sum constraint, a
Gaussian process over the groups) fails the check, and the structure falls back to every
coordinate shared (a dense Hessian, ``d + 1`` products) where ``d`` allows it.

Where every likelihood is a family of second-order control variates with linear
predictors (:mod:`pymc_minibatch.model.region`; Bernoulli-logit, Poisson, Normal and
Student-t with a free scale, ...), the likelihood's part needs no product at all: it is
``sum_i A_i' H_i A_i`` from each row's predictor design ``A_i`` and the second derivatives
``H_i`` of its family (:func:`pymc_minibatch.model.linear_curvature.likelihood_curvature`),
which the same pass computes with forward evaluations only, about three times faster at
``d = 10`` (``benchmarks/step_cost.py`` prints the passes' seconds); the products along
the directions, and the check, are then taken from that matrix and the prior's.

Nothing here is estimated from a subsample: every row contributes to every entry.
"""

import weakref
from typing import NamedTuple

import numpy as np
import pytensor
import pytensor.tensor as pt

from pymc_minibatch.exceptions import BoundsUnavailableError
from pymc_minibatch.kernels.arrowhead import ArrowheadMatrix
from pymc_minibatch.model.linear_curvature import likelihood_curvature
from pymc_minibatch.model.structure import all_shared

#: Shared coordinates beyond which a dense Hessian is not computed (a pass costs ``S``
#: Hessian-vector products, and the shared block ``S^2`` numbers).
MAX_SHARED = 3000
#: Relative error of the structured Hessian times a random direction, against the exact
#: product, beyond which the structure is rejected.
STRUCTURE_RTOL = 1e-6
#: Directions of a block's linear predictors (``S + 2 k``) beyond which the likelihood's
#: Hessian comes from Hessian-vector products instead (the designs of a block of
#: ``SUB_BLOCK_ROWS`` rows take ``8 (S + 2 k)`` bytes per row and predictor).
MAX_DESIGNS = 256

#: Models whose likelihood's Hessian cannot come from linear predictors.
_WITHOUT_DESIGNS = weakref.WeakSet()


class StructureMismatchError(ValueError):
    """The Hessian does not have the structure the rows' derivatives showed (the prior
    couples groups)."""


class Curvature(NamedTuple):
    """The full-data log posterior at a point, its gradient, and minus its Hessian."""

    value: float
    gradient: np.ndarray
    precision: ArrowheadMatrix
    """``-d^2 log p / d theta^2`` (block arrowhead)."""


def block_hessian_product(symbolic):
    """Graph of :meth:`MinibatchModel.graph_function`: the block's summed log-likelihood,
    its gradient and its Hessian times ``direction``.

    One direction per call: PyTensor 2.38's rewrites of the same product vectorised over a
    matrix of directions (``vectorize_graph``, or ``jacobian(..., vectorize=True)``) did
    not finish compiling for some models (the demo's logistic regression); the value and
    gradient come with each product at no extra cost (the product differentiates the
    gradient)."""
    direction = pt.vector("direction", dtype="float64")
    total = symbolic.loglik.sum()
    gradient = pytensor.grad(total, symbolic.theta)
    product = pytensor.grad(gradient @ direction, symbolic.theta, disconnected_inputs="ignore")
    return [direction], [total, gradient, product]


def prior_hessian_product(symbolic):
    """As :func:`block_hessian_product`, for the log prior (no rows)."""
    direction = pt.vector("direction", dtype="float64")
    gradient = pytensor.grad(symbolic.logprior, symbolic.theta, disconnected_inputs="ignore")
    product = pytensor.grad(gradient @ direction, symbolic.theta, disconnected_inputs="ignore")
    return [direction], [symbolic.logprior, gradient, product]


class _CurvatureBlock:
    """A block of rows reduced to its summed log-likelihood, gradient and Hessian-vector
    products along ``directions`` (one compiled call each). Picklable."""

    def __init__(self, function, directions):
        self.function = function
        self.directions = directions

    def __call__(self, theta, *rows):
        return _products(lambda direction: self.function(theta, direction, *rows),
                         self.directions)  # fmt: skip


def _products(function, directions):
    """``(value, gradient, products)`` from ``function(direction)`` along each direction."""
    products = np.empty_like(directions)
    for j, direction in enumerate(directions):
        value, gradient, products[j] = function(direction)
    return float(value), np.asarray(gradient), products


def curvature_directions(structure, probe):
    """The ``S + k + 1`` directions of a pass: shared unit vectors, local slots, ``probe``."""
    ndim = probe.size
    n_shared, n_slots = structure.shared.size, structure.local.shape[1]
    directions = np.zeros((n_shared + n_slots + 1, ndim))
    directions[np.arange(n_shared), structure.shared] = 1.0
    for slot in range(n_slots):
        directions[n_shared + slot, structure.local[:, slot]] = 1.0
    directions[-1] = probe
    return directions


def _assemble(structure, products):
    """The block-arrowhead matrix whose products along the directions are ``products``."""
    n_shared = structure.shared.size
    shared_columns = products[:n_shared]  # (S, d): H e_s
    slot_columns = products[n_shared:-1]  # (k, d): H v_j
    shared_block = shared_columns[:, structure.shared]
    coupling = np.transpose(shared_columns[:, structure.local], (1, 2, 0))  # (G, k, S)
    local_blocks = np.transpose(slot_columns[:, structure.local], (1, 2, 0))  # (G, k_i, k_j)
    matrix = ArrowheadMatrix(
        structure.shared,
        structure.local,
        0.5 * (local_blocks + np.transpose(local_blocks, (0, 2, 1))),
        coupling,
        0.5 * (shared_block + shared_block.T),
    )
    return matrix


def full_data_curvature(minibatch_model, theta, structure=None, random_seed=0):
    """The log posterior at ``theta``, its gradient and minus its Hessian, exactly, from one
    pass over all rows.

    Parameters
    ----------
    minibatch_model : MinibatchModel
    theta : ndarray, shape (d,)
    structure : ParameterStructure, optional
        Default: every coordinate shared (dense).
    random_seed : int
        Seeds the random direction that checks the structure.

    Returns
    -------
    Curvature

    Raises
    ------
    StructureMismatchError
        If the Hessian times a random direction differs from the structured matrix's (the
        caller may retry with :func:`~pymc_minibatch.model.structure.all_shared`).
    ValueError
        If more than ``MAX_SHARED`` coordinates are shared.
    """
    mm = minibatch_model
    structure = all_shared(mm.ndim) if structure is None else structure
    theta, directions = _directions(mm, theta, structure, random_seed)
    from_designs = _from_designs(mm, theta, structure, directions)
    if from_designs is not None:
        return _posterior_curvature(mm, theta, structure, directions, *from_designs)
    function = mm.graph_function("block_hessian_product", block_hessian_product)
    block = _CurvatureBlock(function, directions)
    loglik, gradient, products = 0.0, np.zeros(mm.ndim), np.zeros((len(directions), mm.ndim))

    def consume(result):
        nonlocal loglik
        block_total, block_gradient, block_products = result
        loglik += block_total
        gradient[:] += block_gradient
        products[:] += block_products

    mm.over_all_rows(block, theta, consume=consume)
    return _posterior_curvature(mm, theta, structure, directions, loglik, gradient, products)


def subsample_curvature(minibatch_model, theta, rows, scale, structure=None, random_seed=0):
    """As :func:`full_data_curvature`, with the log-likelihood of the rows ``rows`` (read by
    :meth:`MinibatchModel.gather_rows`) times ``scale`` in place of the full data's: the
    posterior of a subsample with each row counted ``scale`` times, whose mode is a start
    for the full-data search (no pass over the data).

    Raises
    ------
    StructureMismatchError, ValueError
        As :func:`full_data_curvature`.
    """
    mm = minibatch_model
    structure = all_shared(mm.ndim) if structure is None else structure
    theta, directions = _directions(mm, theta, structure, random_seed)
    from_designs = _from_designs(mm, theta, structure, directions, rows)
    if from_designs is not None:
        loglik, gradient, products = from_designs
    else:
        function = mm.graph_function("block_hessian_product", block_hessian_product)
        loglik, gradient, products = _CurvatureBlock(function, directions)(theta, *rows)
    return _posterior_curvature(mm, theta, structure, directions, scale * loglik,
                                scale * gradient, scale * products)  # fmt: skip


def _from_designs(minibatch_model, theta, structure, directions, rows=None):
    """``(loglik, gradient, products along directions)`` of the likelihood from its linear
    predictors (:func:`~pymc_minibatch.model.linear_curvature.likelihood_curvature`: all rows in
    one pass, or ``rows``), or None where the model's likelihood has none or too many."""
    mm = minibatch_model
    n_designs = structure.shared.size + 2 * structure.local.shape[1]
    if mm in _WITHOUT_DESIGNS or n_designs > MAX_DESIGNS:
        return None
    try:
        loglik, gradient, hessian = likelihood_curvature(mm, theta, structure, rows)
    except BoundsUnavailableError:
        _WITHOUT_DESIGNS.add(mm)  # not a family with linear predictors: products instead
        return None
    return loglik, gradient, hessian.matvec(directions)


def _directions(minibatch_model, theta, structure, random_seed):
    """``(theta, directions)`` of a pass, after checking the number of shared coordinates."""
    if structure.shared.size > MAX_SHARED:
        raise ValueError(
            f"the exact curvature needs {structure.shared.size} Hessian-vector products per "
            f"pass (coordinates touched by rows of more than one group), above {MAX_SHARED}"
        )
    probe = np.random.default_rng(random_seed).standard_normal(minibatch_model.ndim)
    return np.asarray(theta, dtype=np.float64), curvature_directions(structure, probe)


def _posterior_curvature(minibatch_model, theta, structure, directions, loglik, gradient,
                         products):  # fmt: skip
    """The :class:`Curvature` from the likelihood's sums along ``directions`` (the last
    one the random probe), with the log prior's added and the structure checked."""
    probe = directions[-1]
    prior = minibatch_model.prior_function("prior_hessian_product", prior_hessian_product)
    prior_value, prior_gradient, prior_products = _products(
        lambda direction: prior(theta, direction), directions
    )
    products = products + prior_products
    hessian = _assemble(structure, products)
    exact, assembled = products[-1], hessian.matvec(probe)
    error = np.linalg.norm(assembled - exact)
    # (where the rows are not finite, a search is outside the support: no structure to check)
    checked = structure.local.size and np.all(np.isfinite(exact))
    if checked and not error <= STRUCTURE_RTOL * (np.linalg.norm(exact) + 1e-300):
        raise StructureMismatchError(
            "the Hessian couples parameters that no row couples (relative error "
            f"{error / np.linalg.norm(exact):.2g} of the structured matrix along a random "
            "direction): the prior ties groups together"
        )
    precision = hessian._replace(
        local_blocks=-hessian.local_blocks,
        coupling=-hessian.coupling,
        shared_block=-hessian.shared_block,
    )
    return Curvature(float(prior_value) + loglik, gradient + prior_gradient, precision)
