"""The step methods of the package, in one list that ``__all__``, the docs and the tests read.

Adding a sampler means writing its kernel (``pymc_minibatch.kernels``), its step method
(``pymc_minibatch.step_methods``) and one :class:`SamplerEntry` here.
"""

from dataclasses import dataclass, field
from typing import Any

from pymc_minibatch.step_methods.flymc import FlyMC
from pymc_minibatch.step_methods.full_mh import FullMH
from pymc_minibatch.step_methods.mint import CMINT, MINT
from pymc_minibatch.step_methods.poisson_mh import PoissonMH
from pymc_minibatch.step_methods.sgmcmc import SGHMC, SGLD, SGMGT, SGMGTD, SGNHT
from pymc_minibatch.step_methods.tfmh import TFMH
from pymc_minibatch.step_methods.tuna import TunaMH

FAMILIES = {
    "exact": "Exact minibatch Metropolis–Hastings",
    "tempered": "Tempered minibatch MH",
    "sgmcmc": "Stochastic-gradient MCMC",
}


@dataclass(frozen=True)
class SamplerEntry:
    """One step method.

    Attributes
    ----------
    step_class : type
        The ``pymc.step_methods`` subclass users pass to ``pm.sample(step=...)``.
    family : str
        A key of :data:`FAMILIES` (the section of the API reference it appears in).
    required : dict
        Arguments a construction needs besides the model, with a value that suits a model
        of a few hundred rows (e.g. ``batch_size``); the contract tests construct with them.
    needs_bounded_support : bool
        Only models whose free variables have bounded supports qualify (PoissonMH's global
        bounds).
    """

    step_class: type
    family: str
    required: dict[str, Any] = field(default_factory=dict)
    needs_bounded_support: bool = False

    @property
    def name(self):
        return self.step_class.__name__


SAMPLERS = (
    SamplerEntry(TunaMH, "exact"),
    SamplerEntry(FullMH, "exact"),
    SamplerEntry(TFMH, "exact"),
    SamplerEntry(FlyMC, "exact"),
    SamplerEntry(PoissonMH, "exact", needs_bounded_support=True),
    SamplerEntry(MINT, "tempered", {"batch_size": 100}),
    SamplerEntry(CMINT, "tempered", {"batch_size": 100}),
    SamplerEntry(SGLD, "sgmcmc", {"batch_size": 100}),
    SamplerEntry(SGHMC, "sgmcmc", {"batch_size": 100}),
    SamplerEntry(SGNHT, "sgmcmc", {"batch_size": 100}),
    SamplerEntry(SGMGT, "sgmcmc", {"batch_size": 100}),
    SamplerEntry(SGMGTD, "sgmcmc", {"batch_size": 100}),
)

BY_NAME = {entry.name: entry for entry in SAMPLERS}
SAMPLER_NAMES = tuple(BY_NAME)
