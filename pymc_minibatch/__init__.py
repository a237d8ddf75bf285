"""Minibatch MCMC and particle samplers for PyMC models on tall data.

Conventionally imported as ``import pymc_minibatch as pmm``.
"""

from pymc_minibatch.exceptions import NonFactorizableError
from pymc_minibatch.model.adapter import MinibatchModel
from pymc_minibatch.step_methods.full_mh import FullMH

__all__ = ["FullMH", "MinibatchModel", "NonFactorizableError"]
__version__ = "0.1.0.dev0"
