"""CMINT ensembles: the snapshot draws of a cyclic MINT run, and averages over them."""

import numpy as np

from pymc_minibatch._compat import result_group, sample_stats


def cmint_ensemble(idata, group="posterior"):
    """The draws of ``group`` taken at CMINT's snapshots (one per round and chain).

    Parameters
    ----------
    idata : InferenceData or DataTree
        The result of ``pm.sample(step=pmm.CMINT(...))``, or that result extended by
        ``pm.sample_posterior_predictive`` (then ``group="posterior_predictive"``).
    group : str, default "posterior"

    Returns
    -------
    xarray.Dataset
        With dimensions ``(chain, draw)``, ``draw`` running over the snapshots.

    Raises
    ------
    ValueError
        If the result has no ``snapshot`` statistic or no snapshot was reached.

    Examples
    --------
    >>> ensemble = pmm.cmint_ensemble(idata)  # doctest: +SKIP
    >>> ensemble["beta"].mean(("chain", "draw"))  # doctest: +SKIP
    """
    stats = sample_stats(idata)
    if "snapshot" not in stats:
        raise ValueError("no 'snapshot' statistic: sample with step=pmm.CMINT(...)")
    snapshot = stats["snapshot"].values.astype(bool)
    draws = np.flatnonzero(snapshot[0])
    if draws.size == 0:
        raise ValueError(
            "no snapshot was taken: a snapshot ends each round of the schedule; sample "
            "draws=step.schedule_draws (or at least one round) after tuning"
        )
    if not all(np.array_equal(np.flatnonzero(chain), draws) for chain in snapshot):
        raise ValueError("chains took their snapshots at different draws")
    return result_group(idata, group).isel(draw=draws)


def cmint_average(idata, group="posterior_predictive"):
    """Average of ``group`` over the CMINT snapshots of every chain (the ensemble prediction).

    Typically the posterior-predictive group, e.g. class probabilities or predicted means
    from ``pm.sample_posterior_predictive(idata, extend_inferencedata=True)``.

    Returns
    -------
    xarray.Dataset
        ``group`` averaged over ``chain`` and the snapshot draws.

    Examples
    --------
    >>> prediction = pmm.cmint_average(idata)  # doctest: +SKIP
    """
    return cmint_ensemble(idata, group).mean(("chain", "draw"))
