"""ArviZ's trace plot for results of either PyMC version."""

import arviz as az

from pymc_minibatch._compat import _arviz_major


def plot_trace(result, **kwargs):
    """Trace and marginal density of each variable, as ArviZ draws them.

    ArviZ 0.x (PyMC 5, ``InferenceData`` results) calls this plot ``plot_trace``; ArviZ 1.x
    (PyMC 6, ``DataTree`` results) calls it ``plot_trace_dist``. This function calls the
    one the installed ArviZ has, with the matplotlib backend, so that a notebook runs
    unchanged under both.

    Parameters
    ----------
    result : arviz.InferenceData or xarray.DataTree
        What ``pm.sample`` or :func:`~pymc_minibatch.sample_particles` returned.
    **kwargs
        Passed to ArviZ's function, e.g. ``var_names``.

    Returns
    -------
    matplotlib axes (ArviZ 0.x) or ``PlotCollection`` (ArviZ 1.x)

    Examples
    --------
    >>> with model:  # doctest: +SKIP
    ...     idata = pm.sample(step=pmm.TunaMH(), draws=1000)
    >>> pmm.plot_trace(idata, var_names=["beta"])  # doctest: +SKIP
    """
    if _arviz_major() >= 1:
        return az.plot_trace_dist(result, backend="matplotlib", **kwargs)
    return az.plot_trace(result, **kwargs)
