"""The graphs of the adapter's named compiled functions, as a table of builders.

:data:`BUILDERS` maps each name :class:`~pymc_minibatch.model.functions.CompiledFunctions`
compiles on first use to a builder: ``builder(graph)`` takes the model's
:class:`ThetaGraph` and returns ``(inputs, outputs)``, or ``(inputs, outputs, mode)`` to
compile in another mode than the adapter's.
"""

from typing import NamedTuple

import pytensor
import pytensor.tensor as pt
from pymc.logprob.utils import local_check_parameter_to_ninf_switch, local_remove_check_parameter
from pymc.pytensorf import join_nonshared_inputs
from pytensor.graph.fg import FunctionGraph
from pytensor.graph.replace import clone_replace, vectorize_graph
from pytensor.graph.rewriting.basic import in2out


class ThetaGraph(NamedTuple):
    """The symbolic pieces of a :class:`~pymc_minibatch.MinibatchModel` as functions of
    ``theta`` (the free variables the adapter leaves out enter as shared variables)."""

    theta: object
    """The flat vector of sampled values, shape ``(d,)``."""
    rows: list
    """The row inputs: each data array on the row axis, restricted to a batch of B rows."""
    terms: list
    """Per observed variable on the rows: its log-likelihood per row, shape ``(B,)``."""
    loglik: object
    """Their sum, the log-likelihood of each row, shape ``(B,)``."""
    logprior: object
    """The log prior with the transforms' Jacobians (a scalar)."""
    log_jacobian: object
    """The transforms' log-Jacobians alone (a scalar, part of ``logprior``)."""
    check_bounds: bool
    """The model's ``check_bounds``: whether PyMC's parameter checks are kept."""


def build_theta_graph(row_graph, initial_point, value_vars, shared, check_bounds):
    """The pieces of ``row_graph`` (:class:`~pymc_minibatch.model.graph.RowGraph`) as
    functions of ``theta``, the flat vector of ``value_vars`` at ``initial_point``'s shapes;
    the other free variables enter as the ``shared`` variables that replace them."""
    joined, theta = join_nonshared_inputs(
        initial_point,
        [*row_graph.row_terms, row_graph.logprior, row_graph.log_jacobian],
        value_vars,
        shared,
    )
    *terms, logprior, log_jacobian = joined
    loglik = terms[0] if len(terms) == 1 else pt.add(*terms)
    return ThetaGraph(theta, row_graph.row_inputs, terms, loglik, logprior, log_jacobian,
                      check_bounds)  # fmt: skip


def _loglik(graph):
    return [graph.theta, *graph.rows], graph.loglik


def _loglik_pair(graph):
    theta, ll = graph.theta, graph.loglik
    theta2 = theta.type("theta2")
    (ll2,) = clone_replace([ll], replace={theta: theta2})
    return [theta, theta2, *graph.rows], [ll, ll2]


def _grad_loglik(graph):
    theta, ll = graph.theta, graph.loglik
    return [theta, *graph.rows], [ll, pytensor.grad(ll.sum(), theta)]


def _grad_loglik_rows(graph):
    theta, ll = graph.theta, graph.loglik
    jac = pytensor.gradient.jacobian(ll, theta, vectorize=True)
    return [theta, *graph.rows], [ll, jac]


def _directional_grad_loglik(graph):
    # J v by the double-backward trick: J v = d/du [ (u' J) . v ]
    theta, ll = graph.theta, graph.loglik
    direction = theta.type("direction")
    weights = ll.type("weights")
    row_weighted_grad = pytensor.grad((ll * weights).sum(), theta)
    jvp = pytensor.grad(row_weighted_grad @ direction, weights)
    (jvp,) = clone_replace([jvp], replace={weights: pt.ones_like(ll)})
    return [theta, direction, *graph.rows], jvp


def _grad_estimate(graph):
    theta = graph.theta
    weights = pt.vector("weights", dtype="float64")
    value = graph.logprior + (weights * graph.loglik).sum()
    return [theta, weights, *graph.rows], [value, pytensor.grad(value, theta)]


def _grad_estimate_gradient(graph):
    # the gradient alone: the log density's prior part is a pass over every weight
    inputs, (_, grad) = _grad_estimate(graph)
    return inputs, grad


def _grad_estimate_particles(graph):
    return vectorised_over_theta(*_grad_estimate(graph), graph.check_bounds)


def _grad_estimate_difference(graph):
    theta, ll = graph.theta, graph.loglik
    weights = pt.vector("weights", dtype="float64")
    center = theta.type("center")
    (ll_center,) = clone_replace([ll], replace={theta: center})
    value = graph.logprior + (weights * (ll - ll_center)).sum()
    grad = pytensor.grad(graph.logprior + (weights * ll).sum(), theta) - pytensor.grad(
        (weights * ll_center).sum(), center
    )
    return [theta, center, weights, *graph.rows], [value, grad]


def _grad_estimate_difference_gradient(graph):
    inputs, (_, grad) = _grad_estimate_difference(graph)
    return inputs, grad


def _logprior(graph):
    return [graph.theta], graph.logprior


def _logprior_and_grad(graph):
    return [graph.theta], [graph.logprior, pytensor.grad(graph.logprior, graph.theta)]


def _log_jacobian_and_grad(graph):
    return [graph.theta], [graph.log_jacobian, pytensor.grad(graph.log_jacobian, graph.theta)]


def _row_terms(graph):
    # only for the parity check: compile fast, speed is irrelevant
    return [graph.theta, *graph.rows], graph.terms, "FAST_COMPILE"


#: ``name -> builder(graph) -> (inputs, outputs[, mode])``, ``graph`` a :class:`ThetaGraph`.
BUILDERS = {
    "loglik": _loglik,
    "loglik_pair": _loglik_pair,
    "grad_loglik": _grad_loglik,
    "grad_loglik_rows": _grad_loglik_rows,
    "directional_grad_loglik": _directional_grad_loglik,
    "grad_estimate": _grad_estimate,
    "grad_estimate_gradient": _grad_estimate_gradient,
    "grad_estimate_particles": _grad_estimate_particles,
    "grad_estimate_difference": _grad_estimate_difference,
    "grad_estimate_difference_gradient": _grad_estimate_difference_gradient,
    "logprior": _logprior,
    "logprior_and_grad": _logprior_and_grad,
    "log_jacobian_and_grad": _log_jacobian_and_grad,
    "row_terms": _row_terms,
}


def vectorised_over_theta(inputs, outputs, check_bounds):
    """``(inputs, outputs)`` of a graph whose first input ``theta`` gains a leading axis.

    ``theta`` becomes ``thetas`` of shape ``(M, ndim)`` and every output that depends on it
    gains a leading axis of length ``M``; the other inputs are shared by all ``M``.

    PyMC's parameter checks are first replaced on a copy of the graph as
    ``pymc.pytensorf.compile`` replaces them (by ``-inf`` where they fail, or dropped when
    the model has ``check_bounds=False``): PyTensor vectorises a check by reducing its
    condition over the new axis too, so one particle outside the support would give
    ``-inf`` at every particle.

    Parameters
    ----------
    inputs : list of TensorVariable
        ``theta`` first, then the inputs shared by every particle.
    outputs : list of TensorVariable
    check_bounds : bool
        The model's ``check_bounds``.

    Returns
    -------
    (list, list)
        ``[thetas, *inputs[1:]]`` and the vectorised outputs.
    """
    # a copy of the nodes, not of the roots: theta, the rows and shared variables are kept
    fgraph = FunctionGraph(outputs=outputs, clone=True, copy_inputs=False)
    rewrite = local_check_parameter_to_ninf_switch if check_bounds else local_remove_check_parameter
    in2out(rewrite).rewrite(fgraph)
    theta, *others = inputs
    thetas = pt.tensor("thetas", dtype=theta.dtype, shape=(None, *theta.type.shape))
    return [thetas, *others], vectorize_graph(fgraph.outputs, replace={theta: thetas})
