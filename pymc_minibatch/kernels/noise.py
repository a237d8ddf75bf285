"""Standard normal vectors for the samplers' injected noise, fast where they are large.

A stochastic-gradient update of a network of 10^5 weights draws 10^5 normals or more (one
vector for SGLD and SGHMC, three for SGMGT-D), and NumPy's ``Generator.standard_normal``
took about as long as the minibatch gradient itself.

What holds:

* below ``COMPILED_MIN_SIZE`` values, or from a generator that is not a
  ``np.random.Generator``, :func:`standard_normal` is ``rng.standard_normal(shape)``: small
  models' draws are NumPy's, value for value;
* from ``COMPILED_MIN_SIZE`` values on, the draws are independent standard normals, exactly
  in distribution (53-bit uniforms, the exact tail), and a deterministic function of the
  state of ``rng``, which they advance by three 64-bit words: the same seed gives the same
  draws and the same stream after them. They are not NumPy's values.

How: a ziggurat of 256 strips (Marsaglia & Tsang 2000, "The Ziggurat Method for Generating
Random Variables", Journal of Statistical Software 5(8)), its tables computed below from the
paper's equations, compiled by Numba, over an SFC64 stream (Doty-Humphrey's Small Fast
Counting generator, NumPy's ``np.random.SFC64``: the tests check this one against it word for
word) that three words of ``rng`` seed. One 64-bit word per value: 8 bits pick the strip, 1
the sign, 53 the point; the 1.5% of points right of their strip's part under the curve take
more words. Not ``rng``'s own bits: PCG64 gives 159,010 words in 0.35 ms here (``random_raw``
and ``integers`` alike), two thirds of the compiled loop over NumPy's stream that this
replaces (a prototype of this ziggurat over them took 0.59 ms); stepped inside the loop,
SFC64 costs little more than the ziggurat itself.

Speed, 159,010 normals (MINT's MNIST network), medians of 200 calls with
``OPENBLAS_NUM_THREADS=1`` on a shared two-core machine: 0.28 ms, against 0.53 ms for the
compiled loop over NumPy's stream (1.9 times faster) and 1.5 ms for NumPy's
``standard_normal`` (5.5 times). ``benchmarks/big_models.py`` prints this draw beside NumPy's
as ``normal_draw_ms``.
"""

import math

import numba
import numpy as np

#: Draws below which NumPy's own call is used (the compiled loop gains nothing there, and
#: small models then never compile it).
COMPILED_MIN_SIZE = 4096

#: Strips of the ziggurat: 8 bits of a word pick one.
LAYERS = 256


def _density(x):
    return math.exp(-0.5 * x * x)


def ziggurat_edges(layers=LAYERS):
    """The right edges ``x[0] > x[1] = r > ... > x[layers] = 0`` of the ziggurat's strips.

    Strip ``i >= 1`` is the rectangle ``[0, x[i]] x [f(x[i]), f(x[i + 1])]`` under
    ``f(x) = exp(-x^2 / 2)``; strip 0 is ``[0, r] x [0, f(r)]`` with the tail beyond ``r``,
    drawn as the rectangle ``[0, x[0]]`` of the same height. All have the same area ``v``;
    ``r`` is the one for which ``layers`` strips close the ziggurat at ``f(0) = 1``
    (Marsaglia & Tsang 2000), found by bisection.

    Examples
    --------
    >>> from pymc_minibatch.kernels.noise import ziggurat_edges
    >>> x = ziggurat_edges()
    >>> len(x), round(float(x[1]), 10), float(x[-1])
    (257, 3.6541528854, 0.0)
    """

    def strips(r):
        v = r * _density(r) + math.sqrt(math.pi / 2) * math.erfc(r / math.sqrt(2))
        x = [v / _density(r), r]
        while len(x) < layers:
            top = _density(x[-1]) + v / x[-1]
            if top >= 1.0:  # the strips reach f(0) too soon: r is too small
                return None, v
            x.append(math.sqrt(-2.0 * math.log(top)))
        return x, v

    low, high = 1.0, 10.0
    while (r := 0.5 * (low + high)) not in (low, high):
        x, v = strips(r)
        if x is None or x[-1] * (1.0 - _density(x[-1])) < v:
            low = r
        else:  # the last strip is too big: r is too large
            high = r
    return np.array(strips(high)[0] + [0.0])


def _tables(x):
    """What the loop reads, from the edges ``x``: ``x``, ``f(x)``, and for the low 9 bits
    ``j = 2 i + s`` of a word (strip ``i``, sign ``s``) the scale ``(-1)^s x[i] 2^-53`` of the
    word's top 53 bits and the bound ``2^53 x[i + 1] / x[i]`` below which they fall in the
    part of the strip under the curve."""
    scale = np.repeat(x[:-1], 2) * np.tile([1.0, -1.0], len(x) - 1) * 2.0**-53
    return x, np.exp(-0.5 * x**2), scale, np.repeat(x[1:] / x[:-1], 2) * 2.0**53


_TABLES = _tables(ziggurat_edges())


@numba.njit(cache=True, nogil=True)
def _sfc64(a, b, c, counter):
    """One step of SFC64: its output, then its next state."""
    word = a + b + counter
    rotated = (c << np.uint64(24)) | (c >> np.uint64(40))
    b_next = c + (c << np.uint64(3))
    return word, b ^ (b >> np.uint64(11)), b_next, rotated + word, counter + np.uint64(1)


@numba.njit(cache=True, nogil=True)
def _uniform(word):
    """The word's top 53 bits as a uniform on ``[0, 1)``."""
    return np.int64(word >> np.uint64(11)) * 2.0**-53


@numba.njit(cache=True, nogil=True)
def _fill(out, key, tables):
    """Standard normals into ``out`` from the SFC64 stream seeded by ``key``'s three words."""
    x, fx, scale, core = tables
    a, b, c, counter = key[0], key[1], key[2], np.uint64(1)
    for _ in range(12):  # a fresh state's first words are discarded (as NumPy seeds SFC64)
        _, a, b, c, counter = _sfc64(a, b, c, counter)
    for k in range(out.size):
        word, a, b, c, counter = _sfc64(a, b, c, counter)
        j = np.int64(word & np.uint64(2 * LAYERS - 1))  # bits 1-8: the strip; bit 0: the sign
        m = np.int64(word >> np.uint64(11))
        z = m * scale[j]
        if m >= core[j]:  # right of the strip's part under the curve: 1.5% of draws
            beyond, a, b, c, counter = _beyond_core(j >> 1, abs(z), x, fx, a, b, c, counter)
            z = math.copysign(beyond, z)
        out[k] = z


@numba.njit(cache=True, nogil=True)
def _beyond_core(i, z, x, fx, a, b, c, counter):
    """Finish a draw whose point ``z`` fell right of ``x[i + 1]`` in strip ``i``: the tail,
    or the test under the curve, else a new point; the value and the stream's state."""
    while True:
        word, a, b, c, counter = _sfc64(a, b, c, counter)
        if i == 0:  # beyond r: the paper's exponential proposal for the tail
            second, a, b, c, counter = _sfc64(a, b, c, counter)
            t = -math.log1p(-_uniform(word)) / x[1]
            if -2.0 * math.log1p(-_uniform(second)) > t * t:
                return x[1] + t, a, b, c, counter
            continue
        if fx[i] + _uniform(word) * (fx[i + 1] - fx[i]) < math.exp(-0.5 * z * z):
            return z, a, b, c, counter
        word, a, b, c, counter = _sfc64(a, b, c, counter)
        i = np.int64(word & np.uint64(LAYERS - 1))
        z = _uniform(word) * x[i]
        if z < x[i + 1]:
            return z, a, b, c, counter


def standard_normal(rng: np.random.Generator, shape):
    """Independent standard normals of ``shape`` drawn from ``rng``.

    Parameters
    ----------
    rng : numpy.random.Generator
        The generator; any object with ``standard_normal`` below ``COMPILED_MIN_SIZE``.
    shape : int or tuple of int
        The shape of the draw.

    Returns
    -------
    numpy.ndarray
        ``rng.standard_normal(shape)`` below ``COMPILED_MIN_SIZE`` values; from there on the
        compiled ziggurat's values (see the module): standard normal, deterministic under
        the state of ``rng``, not NumPy's.

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_minibatch.kernels.noise import COMPILED_MIN_SIZE, standard_normal
    >>> small = standard_normal(np.random.default_rng(0), 3)
    >>> bool(np.array_equal(small, np.random.default_rng(0).standard_normal(3)))
    True
    >>> big = standard_normal(np.random.default_rng(0), (2, COMPILED_MIN_SIZE))
    >>> again = standard_normal(np.random.default_rng(0), (2, COMPILED_MIN_SIZE))
    >>> big.shape, bool(np.array_equal(big, again))
    ((2, 4096), True)
    """
    shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
    if math.prod(shape) < COMPILED_MIN_SIZE or not isinstance(rng, np.random.Generator):
        return rng.standard_normal(shape)  # (a test's stand-in generator too)
    out = np.empty(shape)
    _fill(out.reshape(-1), rng.integers(0, 2**64, size=3, dtype=np.uint64), _TABLES)
    return out
