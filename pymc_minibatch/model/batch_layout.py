"""The batches a minibatch sampler draws on a model: stratified by group or uniform.

Shared by the SG-MCMC step methods and ``sample_particles``: both take a ``stratify``
argument and draw :mod:`pymc_minibatch.kernels.strata`'s batches where it applies.
"""

from pymc_minibatch.kernels.strata import stratify as stratify_rows


def checked_stratify(stratify):
    """``stratify`` if it is ``"auto"``, True or False, else ``ValueError``."""
    if not (isinstance(stratify, bool) or (isinstance(stratify, str) and stratify == "auto")):
        raise ValueError(f"stratify must be 'auto', True or False, got {stratify!r}")
    return stratify


def chosen_strata(stratify, minibatch_model, batch_size, fitted):
    """The stratified batches' layout (:class:`~pymc_minibatch.kernels.strata.Strata`) for
    ``stratify``, or None for uniform batches.

    ``"auto"`` stratifies a hierarchical model (rows that touch the parameters of one group
    each) when ``batch_size`` holds a row of each non-empty group and a Laplace fit was made
    (``fitted``): it reuses the structure the fit found, where finding it without one would
    cost a pass over the data the settings asked to avoid. ``True`` refuses a model or
    ``batch_size`` where stratification does not apply; ``False`` gives uniform batches.
    """
    if stratify is False or (stratify == "auto" and not fitted):
        return None
    structure = minibatch_model.structure()
    strata = None
    if structure.n_groups:
        strata = stratify_rows(structure.row_groups, batch_size)
    if strata is None and stratify is True:
        raise ValueError(
            "stratify=True needs a hierarchical model (rows that touch the parameters "
            "of one group each) and a batch_size of at least one row per non-empty "
            f"group; this model has {structure.n_groups} groups"
        )
    return strata
