"""Minibatch MCMC and particle samplers for PyMC models on tall data.

Conventionally imported as ``import pymc_minibatch as pmm``.
"""

from pymc_minibatch import bounds, schedules
from pymc_minibatch.compare import compare, plot_compare
from pymc_minibatch.diagnostics import ksd
from pymc_minibatch.ensemble import cmint_average, cmint_ensemble
from pymc_minibatch.exceptions import (
    BoundsUnavailableError,
    BoundViolationError,
    DataValidationError,
    NonFactorizableError,
    SamplerDivergenceError,
)
from pymc_minibatch.model.adapter import MinibatchModel
from pymc_minibatch.particles import sample_particles
from pymc_minibatch.step_methods.flymc import FlyMC
from pymc_minibatch.step_methods.full_mh import FullMH
from pymc_minibatch.step_methods.mint import CMINT, MINT
from pymc_minibatch.step_methods.poisson_mh import PoissonMH
from pymc_minibatch.step_methods.sgmcmc import SGHMC, SGLD, SGMGT, SGMGTD, SGNHT
from pymc_minibatch.step_methods.tfmh import TFMH
from pymc_minibatch.step_methods.tuna import TunaMH

__all__ = [
    "CMINT",
    "MINT",
    "BoundViolationError",
    "BoundsUnavailableError",
    "DataValidationError",
    "FlyMC",
    "FullMH",
    "MinibatchModel",
    "NonFactorizableError",
    "PoissonMH",
    "SGHMC",
    "SGLD",
    "SGMGT",
    "SGMGTD",
    "SGNHT",
    "SamplerDivergenceError",
    "TFMH",
    "TunaMH",
    "bounds",
    "sample_particles",
    "schedules",
    "cmint_average",
    "cmint_ensemble",
    "compare",
    "ksd",
    "plot_compare",
]
__version__ = "0.1.0.dev0"
