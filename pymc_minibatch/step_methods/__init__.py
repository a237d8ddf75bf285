"""Thin PyMC step methods wrapping the pure kernels of :mod:`pymc_minibatch.kernels`."""
