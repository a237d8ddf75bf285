"""Results of samplers that run outside ``pm.sample``, as the installed PyMC's result type."""

import numpy as np
import xarray as xr
from pymc.backends.arviz import coords_and_dims_for_inferencedata, dict_to_dataset

from pymc_minibatch._compat import IS_PYMC6


def draws_to_result(minibatch_model, thetas, sample_stats=None, attrs=None):
    """``pm.sample``'s result type from flat transformed draws of one chain.

    Parameters
    ----------
    minibatch_model : MinibatchModel
        Gives the model and the layout of ``theta``.
    thetas : ndarray, shape (n_draws, ndim)
        Draws in the flat transformed space, taken as draws ``0..n_draws-1`` of chain 0.
    sample_stats : xarray.Dataset, optional
        Stored as the ``sample_stats`` group as given.
    attrs : dict, optional
        Added to the attributes of the posterior.

    Returns
    -------
    arviz.InferenceData (PyMC 5) or xarray.DataTree (PyMC 6)
        The posterior holds the free variables in their constrained space and every
        Deterministic, with the model's coords and dims.
    """
    model = minibatch_model.model
    outputs = model.unobserved_value_vars
    evaluate = model.compile_fn(
        outputs, inputs=model.value_vars, on_unused_input="ignore", point_fn=False
    )
    keep = {rv.name for rv in model.free_RVs} | {d.name for d in model.deterministics}
    columns = {v.name: [] for v in outputs if v.name in keep}
    for theta in thetas:
        point = minibatch_model.point_from_theta(theta)
        values = evaluate(**{v.name: point[v.name] for v in model.value_vars})
        for variable, value in zip(outputs, values, strict=True):
            if variable.name in columns:
                columns[variable.name].append(value)
    posterior = {name: np.asarray(values)[None] for name, values in columns.items()}
    coords, dims = coords_and_dims_for_inferencedata(model)
    groups = {"posterior": dict_to_dataset(posterior, coords=coords, dims=dims)}
    groups["posterior"].attrs.update(attrs or {})
    if sample_stats is not None:
        groups["sample_stats"] = sample_stats
    if IS_PYMC6:
        return xr.DataTree.from_dict(groups)
    from arviz import InferenceData

    return InferenceData(**groups)
