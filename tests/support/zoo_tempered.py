"""Reference summaries of MINT's tempered targets on the model zoo (``tests/support/zoo.py``).

``tests/support/zoo_tempered_reference.json``, written by ``benchmarks/zoo_tempered_reference.py``,
holds per zoo model the NUTS summaries (closed form for ``normal_mean``) of the posterior
raised to ``1/T`` with untempered transform Jacobians, the target of ``pmm.MINT`` with
``temper_prior=True``, for batches of ``batch_size`` rows (5000) and ``alpha`` 0.99. All
nine zoo models have one. ``varying_intercepts``' was sampled in another parametrisation
(its entry's ``"parametrisation"`` says which), but every entry's parameters are the zoo
model's free variables in the constrained space, labelled as ``tests.support.zoo.scalar_draws``
labels a MINT run's draws (``"mu_a"``, ``"sigma_a"``, ``"a[0]"``, ...). A regeneration in
which NUTS does not converge cleanly stores ``"unavailable"`` (the reason) instead of
``"parameters"``; none does at present.
"""

import json
from pathlib import Path

#: Tempered reference summaries of the zoo models.
TEMPERED_REFERENCE_PATH = Path(__file__).with_name("zoo_tempered_reference.json")


def tempered_reference(name):
    """Reference summaries of zoo model ``name``'s tempered target, and its temperature.

    Parameters
    ----------
    name : str
        A key of ``tests.support.zoo.ZOO``.

    Returns
    -------
    parameters : dict of {str : dict of {str : float}} or None
        Scalar label (``"beta[0]"``) -> ``{"mean", "sd", "mcse_mean", "mcse_sd"}`` in the
        constrained space, as ``tests.support.zoo.reference`` gives them; None when NUTS could not
        give a reliable reference (the file's ``"unavailable"`` says why).
    temperature : float
        ``T`` of ``pymc_minibatch.kernels.mint.tempering_settings`` for the model's rows and
        the batch size and alpha stored at the file's top level.

    Raises
    ------
    KeyError
        If the file has no entry for ``name``.
    ValueError
        If the entry has neither ``"parameters"`` nor ``"unavailable"``.
    """
    models = json.loads(TEMPERED_REFERENCE_PATH.read_text())["models"]
    if name not in models:
        raise KeyError(f"no tempered reference for {name!r}; stored: {sorted(models)}")
    entry = models[name]
    if "parameters" not in entry and "unavailable" not in entry:
        raise ValueError(f"tempered reference of {name!r} has neither parameters nor a reason")
    return entry.get("parameters"), entry["temperature"]
