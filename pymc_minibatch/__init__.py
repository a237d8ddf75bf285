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
    NonFactorizableError,
    SamplerDivergenceError,
)
from pymc_minibatch.model.adapter import MinibatchModel
from pymc_minibatch.model.chunked import ChunkedRows
from pymc_minibatch.model.laplace import LaplaceFitWarning
from pymc_minibatch.particles import ParticlesNotSettledWarning, sample_particles
from pymc_minibatch.plotting import plot_trace
from pymc_minibatch.registry import BY_NAME as _SAMPLERS
from pymc_minibatch.registry import SAMPLER_NAMES

# the step methods (TunaMH, FullMH, ..., SGMGTD) come from the registry: one list to keep
globals().update({name: entry.step_class for name, entry in _SAMPLERS.items()})

__all__ = [
    *SAMPLER_NAMES,
    "AnswerCheckWarning",
    "BoundViolationError",
    "BoundsUnavailableError",
    "ChunkedRows",
    "DataValidationError",
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
