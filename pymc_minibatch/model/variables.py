"""The free variables of a model that ``theta`` covers: the continuous ones a minibatch
sampler moves (the others are left to PyMC's other step methods)."""

from pymc.util import get_value_vars_from_user_vars
from pymc.vartypes import continuous_types


def select_value_vars(model, vars):
    """The value variables of ``vars`` (default: every continuous free variable of ``model``).

    Raises
    ------
    ValueError
        If ``vars`` holds a discrete variable, or ``model`` has no continuous one.
    """
    if vars is None:
        value_vars = [v for v in model.value_vars if v.dtype in continuous_types]
        if not value_vars:
            raise ValueError("the model has no continuous free variables to sample")
        return value_vars
    value_vars = get_value_vars_from_user_vars(vars, model)
    discrete = [v.name for v in value_vars if v.dtype not in continuous_types]
    if discrete:
        raise ValueError(
            f"discrete variables {discrete} cannot be moved by a minibatch sampler; leave "
            "them out of `vars` and let PyMC assign them another step (e.g. pm.Metropolis)"
        )
    return value_vars
