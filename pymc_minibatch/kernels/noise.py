"""Standard normal vectors for the samplers' injected noise: the draws of
``rng.standard_normal(shape)``, faster where ``shape`` is large.

A stochastic-gradient update of a network of 10^5 weights draws 10^5 normals or more (one
vector for SGLD and SGHMC, three for SGMGT-D), and NumPy's ``Generator.standard_normal``
took about as long as the minibatch gradient itself (``benchmarks/big_models.py`` prints
both). Numba compiles the same ziggurat over the same bit generator (its
``np.random.Generator`` support draws NumPy's stream, value for value, and advances the
generator as NumPy does), without NumPy's per-call overhead per value: the draws, and every
chain seeded through ``pm.sample(random_seed=...)``, are unchanged.
"""

import math

import numba
import numpy as np

#: Draws below which NumPy's own call is used (the compiled loop gains nothing there, and
#: small models then never compile it).
COMPILED_MIN_SIZE = 4096


@numba.njit(cache=True, nogil=True)
def _fill(rng, out):
    for i in range(out.size):
        out[i] = rng.standard_normal()


def standard_normal(rng: np.random.Generator, shape):
    """``rng.standard_normal(shape)``: the same values, from the same state of ``rng``."""
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if math.prod(shape) < COMPILED_MIN_SIZE or not isinstance(rng, np.random.Generator):
        return rng.standard_normal(shape)  # (a test's stand-in generator too)
    out = np.empty(shape)
    _fill(rng, out.reshape(-1))
    return out
