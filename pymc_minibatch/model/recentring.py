"""The centred form of a model whose group effects are written non-centred.

PyMC's documentation recommends writing a hierarchical model's group effects
*non-centred*: ``a = pm.Deterministic("a", mu + tau * z)`` with ``z ~ Normal(0, 1)``.
That form suits NUTS on groups with little data. Tall data make it a poor one for the
samplers of this package: every row's linear predictor is then a *product* of sampled
values (``tau * z[g]``), so TunaMH's bounds do not apply, and the Laplace approximation
that starts and preconditions every sampler is a poor fit of the posterior in ``(tau,
z)``, which curves along the group scale (the funnel seen from the other side).

The *centred* form, ``a ~ Normal(mu, tau)``, describes the same distribution: the map
``(mu, tau, z) -> (mu, tau, mu + tau z)`` is a bijection whose Jacobian ``|tau|^G`` turns
the density of one form into the other's (Papaspiliopoulos, Roberts & Sköld 2007, "A
general framework for the parametrization of hierarchical models", *Statistical Science*
22(1), Section 2). A chain that leaves the centred posterior invariant therefore leaves the
non-centred one invariant once its states are mapped back with ``z = (a - mu) / tau``,
and its draws of ``z`` are exact draws when the chain is exact.

:func:`recentring` finds every deterministic of the form ``m + s * z`` or ``s * z``
(either order of the sum and of the product, ``m`` and ``s`` any expressions of other
variables, ``z`` a free ``Normal(0, sigma)`` with a constant ``sigma``, no transform and no
other use) and builds the centred model with ``a ~ Normal(m, |s| sigma)`` (``m = 0`` for
``s * z``) and ``z`` a deterministic of it. :class:`Recentring` maps points between the
two models.

The effects need not be named. Written inline, as a vector ``z`` of the groups' shape in
``m + s * z``, or indexed by row in ``mu + tau * z[g] + X @ beta`` with a scalar ``tau``,
the effect is named ``z_effect`` first: ``m + s * z``, resp. ``mu + tau * z`` with
``mu`` a scalar term of the sum (any order of the terms). The predictor then reads
``z_effect[g] + X @ beta``, linear in the sampled values, with ``z_effect ~ Normal(mu,
|tau| sigma)``. A sum with no scalar term (``X @ beta + tau * z[g]``) centres the scale
only (``z_effect ~ Normal(0, |tau| sigma)``). The draws of ``pm.sample`` hold the model's
own variables; those of :func:`~pymc_minibatch.sample_particles`, which reports the
centred model, hold ``z_effect`` too.
"""

import logging

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.model.fgraph import (
    ModelDeterministic,
    ModelFreeRV,
    fgraph_from_model,
    model_deterministic,
    model_free_rv,
    model_from_fgraph,
)
from pytensor.graph.traversal import ancestors
from pytensor.scalar import Add, Mul
from pytensor.tensor import subtensor
from pytensor.tensor.basic import get_underlying_scalar_constant_value
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.exceptions import NotScalarConstantError
from pytensor.tensor.random.basic import NormalRV
from pytensor.tensor.type_other import NoneTypeT

from pymc_minibatch._compat import IS_PYMC6
from pymc_minibatch.model.variables import select_value_vars

_log = logging.getLogger("pymc_minibatch")
#: The ops that index a variable (PyTensor 3.3 has no ``AdvancedSubtensor1``).
_INDEXING_OPS = tuple(
    getattr(subtensor, name)
    for name in ("Subtensor", "AdvancedSubtensor1", "AdvancedSubtensor")
    if hasattr(subtensor, name)
)


class NonCentredEffect:
    """One group effect ``name = m + s * standard``, with ``standard ~ Normal(0, sigma)``."""

    def __init__(self, name, standard):
        self.name = name
        self.standard = standard

    def __repr__(self):
        return f"{self.name} = m + s * {self.standard}"


class Recentring:
    """The centred form of a model and the maps between the two forms' points.

    Built by :func:`recentring`; ``model`` is the centred model, ``effects`` the
    :class:`NonCentredEffect` it centres. Points are dicts keyed by value-variable name;
    the variables not centred have the same names and values in both forms.
    """

    def __init__(self, user_model, centred_model, effects, named_model=None):
        self.user_model = user_model
        self.model = centred_model
        self.effects = effects
        self._effect_names = {e.name for e in effects}
        self._standard_names = {e.standard for e in effects}
        # the user's model with its inline effects named (the same value variables)
        named_model = user_model if named_model is None else named_model
        self._effects_of_user_point = _point_function(named_model, [e.name for e in effects])
        self._standards_of_centred_point = _point_function(
            centred_model, [e.standard for e in effects]
        )
        initial = user_model.initial_point()
        self._user_layout = DictToArrayBijection.map(
            {v.name: initial[v.name] for v in select_value_vars(user_model, None)}
        ).point_map_info
        self._data_pairs = [
            (user_model[v.name], copy[v.name])
            for copy in (centred_model, named_model)
            if copy is not user_model  # the named model is the user's without inline effects
            for v in copy.data_vars
        ]
        self.sync_data()  # PyMC's conversion copied the data: share the user's instead

    def user_point(self, theta):
        """The user's model's point of a flat vector of its continuous value variables
        (in the model's order, as :class:`~pymc_minibatch.MinibatchModel` lays them out)."""
        return DictToArrayBijection.rmap(RaveledVars(np.asarray(theta), self._user_layout))

    def to_centred(self, point):
        """The centred model's point of the user's model's ``point``."""
        values = self._effects_of_user_point(point)
        centred = {k: v for k, v in point.items() if k not in self._standard_names}
        centred.update({e.name: v for e, v in zip(self.effects, values, strict=True)})
        return centred

    def to_user(self, point):
        """The user's model's point of the centred model's ``point``."""
        values = self._standards_of_centred_point(point)
        user = {k: v for k, v in point.items() if k not in self._effect_names}
        user.update({e.standard: v for e, v in zip(self.effects, values, strict=True)})
        return user

    def sync_data(self):
        """Give the centred model (and the model with the inline effects named) the current
        values of the user's ``pm.Data`` (after a ``pm.set_data``), without copying them."""
        for user_var, centred_var in self._data_pairs:
            value = user_var.get_value(borrow=True)
            if centred_var.get_value(borrow=True) is not value:
                centred_var.set_value(value, borrow=True)

    def __repr__(self):
        return f"Recentring({', '.join(map(repr, self.effects))})"


def _point_function(model, names):
    """``point -> [values]`` of ``model``'s variables ``names`` in terms of its value
    variables (a graph in terms of random variables would draw them)."""
    outputs = model.replace_rvs_by_values([model[name] for name in names])
    return model.compile_fn(outputs, inputs=model.value_vars, on_unused_input="ignore",
                            point_fn=True)  # fmt: skip


def recentring(model):
    """The centred form of ``model``'s non-centred group effects, or None if it has none.

    Parameters
    ----------
    model : pymc.Model

    Returns
    -------
    Recentring or None

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pymc_minibatch.model.recentring import recentring
    >>> groups = np.arange(20) % 4
    >>> with pm.Model() as model:
    ...     mu, tau = pm.Normal("mu"), pm.HalfNormal("tau")
    ...     z = pm.Normal("z", 0, 1, shape=4)
    ...     a = pm.Deterministic("a", mu + tau * z)
    ...     y = pm.Normal("y", a[groups], 1, observed=np.zeros(20))
    >>> centring = recentring(model)
    >>> centring
    Recentring(a = m + s * z)
    >>> sorted(v.name for v in centring.model.value_vars)
    ['a', 'mu', 'tau_log__']
    >>> point = {"mu": 1.0, "tau_log__": np.log(2.0), "z": np.arange(4.0)}
    >>> centring.to_centred(point)["a"]
    array([1., 3., 5., 7.])
    >>> centring.to_user(centring.to_centred(point))["z"]
    array([0., 1., 2., 3.])
    """
    if model.parent is not None or any(v is not None for v in model.rvs_to_initial_values.values()):
        return None  # PyMC cannot rebuild these models from their graph
    fgraph, _ = fgraph_from_model(model)
    named_model = model
    if _name_inline_effects(fgraph, set(model.named_vars)):
        named_model = model_from_fgraph(fgraph, mutate_fgraph=True)
        fgraph, _ = fgraph_from_model(named_model)
    effects = []
    for output in list(fgraph.outputs):
        if output.owner is None or not isinstance(output.owner.op, ModelDeterministic):
            continue
        found = _non_centred(fgraph, output)
        if found is None:
            continue
        location, scale, standard, standard_sd = found
        name, expression = _name(output), output.owner.inputs[0]
        effect = pm.Normal.dist(mu=location, sigma=pt.abs(scale) * standard_sd,
                                shape=_shape_of(standard))  # fmt: skip
        effect.name = name
        value = effect.type(name=name)
        fgraph.remove_output(fgraph.outputs.index(output))
        effect_var = _model_var(model_free_rv, output, effect, value, None)
        fgraph.replace(expression, effect_var, import_missing=True)
        standard_expression = (effect_var - location) / scale  # location 0 for ``s * z``
        standard_name = _name(standard)
        standard_expression.name = standard_name
        fgraph.replace(standard, _model_var(model_deterministic, standard, standard_expression),
                       import_missing=True)  # fmt: skip
        effects.append(NonCentredEffect(name, standard_name))
    if not effects:
        return None
    centred = model_from_fgraph(fgraph, mutate_fgraph=True)
    _log.info("sampling the centred form of the non-centred group effects %s",
              ", ".join(map(repr, effects)))  # fmt: skip
    return Recentring(model, centred, effects, named_model)


def _name_inline_effects(fgraph, taken_names):
    """Turn each inline non-centred effect of the model graph ``fgraph`` into a deterministic
    ``z_effect`` (see the module docstring), in place; whether there was one.

    A free standard normal vector ``z`` used once, in ``m + s * z`` of its own shape or in
    ``s * z[...]`` with a scalar ``s``, names ``m + s * z``, with ``m`` any scalar term of
    the sum that holds ``s * z[...]`` (``m = 0`` if there is none); the model then reads the
    effect (indexed as ``z`` was) in place of ``m`` and the product.
    """
    named = False
    for standard in list(fgraph.outputs):
        found = _inline_product(fgraph, standard)
        if found is None:
            continue
        product, scale, indexing = found
        location, whole, rest = _inline_location(fgraph, product, standard, indexing is not None)
        if indexing is None:
            if location is None:
                continue  # a product with no location, e.g. a scaled coefficient vector
            if any(isinstance(node.op, ModelDeterministic) for node in _uses(fgraph, whole)):
                continue  # named already: recentring centres its deterministics
            expression = whole
        else:
            expression = _as_scalar(scale) * standard
            if location is not None:
                expression = _as_scalar(location) + expression
        name = _free_name(f"{_name(standard)}_effect", taken_names)
        expression.name = name  # a variable of the graph's copy: the user's keep their names
        effect = _model_var(model_deterministic, standard, expression, name=name)
        if indexing is None:
            fgraph.replace(whole, effect, import_missing=True)
        else:
            read = indexing.op(effect, *indexing.inputs[1:])
            fgraph.replace(whole, sum(rest, start=read), import_missing=True)
        fgraph.add_output(effect)
        taken_names.add(name)
        named = True
    return named


def _inline_product(fgraph, standard):
    """``(product, s, indexing)`` when the model variable ``standard`` is a free standard
    normal ``z`` used once, in ``product = s * z`` of its shape (``indexing`` None) or in
    ``product = s * z[...]`` with a scalar ``s`` (``indexing`` the node of ``z[...]``)."""
    if _standard_normal_sd(standard) is None or standard.type.ndim == 0:
        return None  # a group effect is a vector
    uses = _uses(fgraph, standard)
    if len(uses) != 1:
        return None
    (node,), factor, indexing = uses, standard, None
    if isinstance(node.op, _INDEXING_OPS) and node.inputs[0] is standard:
        indexing, factor = node, node.outputs[0]
        uses = _uses(fgraph, factor)
        if len(uses) != 1:
            return None
        (node,) = uses
    product = node.outputs[0]
    if not _is_elemwise(product, Mul) or len(node.inputs) != 2 or factor not in node.inputs:
        return None
    scale = node.inputs[1] if node.inputs[0] is factor else node.inputs[0]
    fits = _same_shape(standard, product) if indexing is None else _is_scalar(scale)
    return (product, scale, indexing) if fits else None


def _inline_location(fgraph, product, standard, indexed):
    """``(m, sum, rest)``: the sum of single-use binary additions that holds ``product`` as a
    term, a term ``m`` of it (scalar if ``indexed``, else the sum is ``m + product`` of
    ``standard``'s shape) and its other terms; ``(None, product, [])`` when there is none.
    (``standard`` is used once, in ``product``: no other term involves it.)"""
    uses = _uses(fgraph, product)
    if not indexed:
        if len(uses) == 1 and _is_binary_sum(uses[0].outputs[0]):
            whole = uses[0].outputs[0]
            (location,) = [v for v in uses[0].inputs if v is not product]
            if _same_shape(standard, whole):
                return location, whole, []
        return None, product, []
    whole = product
    while len(uses) == 1 and _is_binary_sum(uses[0].outputs[0]):
        whole = uses[0].outputs[0]
        uses = _uses(fgraph, whole)
    terms = [t for t in _sum_terms(fgraph, whole, whole) if t is not product]
    for i, term in enumerate(terms):
        if _is_scalar(term):
            return term, whole, terms[:i] + terms[i + 1 :]
    return None, product, []


def _sum_terms(fgraph, variable, whole):
    """The terms of ``variable`` as a sum of binary additions used once (``whole``, the
    outermost, may have any uses)."""
    if _is_binary_sum(variable) and (variable is whole or len(_uses(fgraph, variable)) == 1):
        return [t for v in variable.owner.inputs for t in _sum_terms(fgraph, v, whole)]
    return [variable]


def _is_binary_sum(variable):
    return _is_elemwise(variable, Add) and len(variable.owner.inputs) == 2


def _is_scalar(variable):
    return all(size == 1 for size in variable.type.shape)


def _as_scalar(variable):
    return variable.reshape(()) if variable.type.ndim else variable


def _uses(fgraph, variable):
    """The nodes of ``fgraph`` that take ``variable`` as an input."""
    return [node for node, _ in fgraph.clients[variable] if node in fgraph.apply_nodes]


def _free_name(name, taken_names):
    while name in taken_names:
        name = f"{name}_"
    return name


def _name(model_var):
    """The name of a variable of PyMC's graph of a model (an Op property in PyMC 6)."""
    return model_var.owner.op.name if IS_PYMC6 else model_var.name


def _model_var(make, like, *inputs, name=None):
    """``make(*inputs)`` (one of PyMC's ``model_free_rv``, ``model_deterministic``) with the
    dims of the model variable ``like`` and its name or ``name``: Op properties in PyMC 6,
    string inputs after the variable (and its value) in PyMC 5, where the name is that of
    the first input (the caller's to set)."""
    if IS_PYMC6:
        return make(*inputs, name or _name(like), *like.owner.op.dims)
    n_variables = 2 if isinstance(like.owner.op, ModelFreeRV) else 1
    return make(*inputs, *like.owner.inputs[n_variables:])


def _non_centred(fgraph, output):
    """``(m, s, z, sigma)`` when the deterministic ``output`` is ``m + s * z`` (or ``s * z``,
    with ``m = 0``) with ``z`` a free ``Normal(0, sigma)`` used nowhere else, else None."""
    expression = output.owner.inputs[0]
    if _is_elemwise(expression, Add) and len(expression.owner.inputs) == 2:
        terms = [expression.owner.inputs, expression.owner.inputs[::-1]]
    elif _is_elemwise(expression, Mul):
        terms = [(pt.constant(0.0, dtype=expression.dtype), expression)]
    else:
        return None
    for location, product in terms:
        if not _is_elemwise(product, Mul) or len(product.owner.inputs) != 2:
            continue
        for scale, standard in (product.owner.inputs, product.owner.inputs[::-1]):
            standard_sd = _standard_normal_sd(standard)
            if (
                standard_sd is None
                or not _same_shape(standard, expression)
                or _shape_of(standard) is None
            ):
                continue
            other_uses = [node for node in _uses(fgraph, standard) if node is not product.owner]
            if other_uses or standard in set(ancestors([location, scale])):
                continue
            return location, scale, standard, standard_sd
    return None


def _same_shape(standard, expression):
    """Whether ``expression`` has the shape of ``standard`` (not broadcast beyond it), as far
    as the static shapes tell: equal where both are known, broadcast nowhere else."""
    if standard.type.ndim != expression.type.ndim:
        return False
    return all(
        a == b if a is not None and b is not None else (a == 1) == (b == 1)
        for a, b in zip(standard.type.shape, expression.type.shape, strict=True)
    )


def _shape_of(standard):
    """The shape of the free variable ``standard``, as a graph that does not depend on it
    (its static shape, else the size its distribution was given), or None if neither is
    known."""
    if None not in standard.type.shape:
        return standard.type.shape
    rv = standard.owner.inputs[0]
    size = rv.owner.op.size_param(rv.owner)
    return None if size is None or isinstance(size.type, NoneTypeT) else size


def _is_elemwise(variable, scalar_op):
    owner = variable.owner
    return (
        owner is not None
        and isinstance(owner.op, Elemwise)
        and isinstance(owner.op.scalar_op, scalar_op)
    )


def _standard_normal_sd(variable):
    """``sigma`` if ``variable`` is a free ``Normal(0, sigma)`` with a constant ``sigma`` and
    no transform, else None."""
    owner = variable.owner
    if owner is None or not isinstance(owner.op, ModelFreeRV) or owner.op.transform is not None:
        return None
    rv = owner.inputs[0]
    if not isinstance(rv.owner.op, NormalRV):
        return None
    try:
        loc, sigma = (float(get_underlying_scalar_constant_value(p))
                      for p in rv.owner.op.dist_params(rv.owner))  # fmt: skip
    except NotScalarConstantError:
        return None
    return sigma if loc == 0.0 and sigma > 0.0 else None
