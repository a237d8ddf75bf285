"""Minibatch MCMC and particle samplers for PyMC models on tall data.

Conventionally imported as ``import pymc_minibatch as pmm``.
"""

from pymc_minibatch import bounds, schedules
from pymc_minibatch.answer_check import AnswerCheckWarning
from pymc_minibatch.compare import compare, plot_compare
from pymc_minibatch.diagnostics import ksd
from pymc_minibatch.ensemble import cmint_average, cmint_ensemble
from pymc_minibatch.exceptions import (
    BoundsUnavailableError,
    BoundViolationError,
    DataValidationError,
    DrawsExceedMemoryError,
    NonFactorizableError,
    SamplerDivergenceError,
)
from pymc_minibatch.model.adapter import MinibatchModel
from pymc_minibatch.model.chunked import ChunkedRows
from pymc_minibatch.model.laplace import LaplaceFitWarning
from pymc_minibatch.particles import ParticlesNotSettledWarning, sample_particles
from pymc_minibatch.plotting import plot_trace
from pymc_minibatch.step_methods.flymc import FlyMC
from pymc_minibatch.step_methods.full_mh import FullMH
from pymc_minibatch.step_methods.mint import CMINT, MINT
from pymc_minibatch.step_methods.poisson_mh import PoissonMH
from pymc_minibatch.step_methods.sgmcmc import SGHMC, SGLD, SGMGT, SGMGTD, SGNHT
from pymc_minibatch.step_methods.tfmh import TFMH
from pymc_minibatch.step_methods.tuna import TunaMH

# the step methods, named one by one so that static tools see them; a test holds this list
# to the registry's (pymc_minibatch.registry.SAMPLERS)
__all__ = [
    "TunaMH",
    "FullMH",
    "TFMH",
    "FlyMC",
    "PoissonMH",
    "MINT",
    "CMINT",
    "SGLD",
    "SGHMC",
    "SGNHT",
    "SGMGT",
    "SGMGTD",
    "AnswerCheckWarning",
    "BoundViolationError",
    "BoundsUnavailableError",
    "ChunkedRows",
    "DataValidationError",
    "DrawsExceedMemoryError",
    "LaplaceFitWarning",
    "MinibatchModel",
    "NonFactorizableError",
    "ParticlesNotSettledWarning",
    "SamplerDivergenceError",
    "bounds",
    "sample_particles",
    "schedules",
    "cmint_average",
    "cmint_ensemble",
    "compare",
    "ksd",
    "plot_compare",
    "plot_trace",
]
__version__ = "0.1.0.dev0"
