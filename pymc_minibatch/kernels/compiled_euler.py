"""The Euler step of :func:`~pymc_minibatch.kernels.sgmgt.euler_step`, compiled, for big models.

On a network of 10^5 weights every vector operation of the NumPy step reads and writes 10^5
numbers: SGHMC's step made about fifteen such passes, and the softened kinetics' ``tanh``
(``a = 1``, SGMGT and SGMGT-D) cost NumPy as much as the minibatch gradient
(``benchmarks/big_models.py`` prints the costs). Here the step is two compiled loops over
the coordinates (the momentum's, then the position's and thermostats'), compiled for each
kinetics and each set of the step's non-zero terms, so that they hold no branch and
vectorise. The kinetics' derivatives come from one ``exp`` per coordinate, computed by
NumPy's vectorised ``exp`` (``tanh(x / 2) = sign(x) (1 - e) r`` and
``sech(x / 2)^2 = 4 e r^2`` with ``e = exp(-|x|)`` and ``r = 1 / (1 + e)``) between the two
loops: the momentum's loop writes the exponent, and the new momentum's ``exp`` serves the
next step's friction.

The values are those of the NumPy step: the same operations in the same order, and the normal
draws of the same generator in the same order (all of the momentum's, then all of the
position's, then all of the thermostats'). Only the kinetics' derivatives differ, in their
last bits, where NumPy's ``tanh`` and this ``exp`` round differently.
"""

import functools
import math

import numba
import numpy as np

from pymc_minibatch.kernels.kinetics import GaussianKinetics
from pymc_minibatch.kernels.noise import COMPILED_MIN_SIZE, standard_normal

#: How each loop evaluates the kinetics: Gaussian, monomial a = 1, a = 2 (SGLD, without
#: momentum, has a loop of its own).
GAUSSIAN, MONOMIAL_1, MONOMIAL_2 = 1, 2, 3


def applies(config, size, rng) -> bool:
    """Whether :func:`euler_update` takes the step: a model of at least ``COMPILED_MIN_SIZE``
    coordinates, a NumPy generator, and kinetics with finite softening."""
    kinetics = config.kinetics
    finite = kinetics is None or isinstance(kinetics, GaussianKinetics) or np.isfinite(kinetics.c)
    return size >= COMPILED_MIN_SIZE and isinstance(rng, np.random.Generator) and finite


def euler_update(rng, position, momentum, thermostat, gradient, step_size, config,
                 momentum_decay=None):  # fmt: skip
    """One Euler step of eq. (15), the step of :func:`~pymc_minibatch.kernels.sgmgt.euler_step`,
    from the gradient ``gradient`` of the log density at ``position``.

    ``momentum_decay`` is what this function returned for ``momentum`` on the previous step
    (softened kinetics only): the step needs the kinetics' derivatives at the momentum it
    starts from and at the one it makes, and the first are the second of the step before.

    Returns
    -------
    tuple
        ``(position, momentum, thermostat, momentum_decay, gradient_sq)``: new arrays (the
        momentum and thermostats ``None`` without momentum), the new momentum's decay
        (``None`` unless the kinetics are softened) and ``gradient @ gradient``.
    """
    h = float(step_size)
    # the normal vectors first, in the NumPy step's order (a loop drawing them one by one
    # between its arithmetic ran slower than these passes); None for a term the step lacks
    noise = {name: standard_normal(rng, position.size) if sigma > 0 else None
             for name, sigma in (("momentum", config.sigma_p if config.kinetics else 0.0),
                                 ("position", config.sigma_theta),
                                 ("thermostat", config.sigma_xi))}  # fmt: skip
    scales = {name: math.sqrt(2.0 * sigma * h) for name, sigma in
              (("momentum", config.sigma_p), ("position", config.sigma_theta),
               ("thermostat", config.sigma_xi))}  # fmt: skip
    gradient_sq = float(gradient @ gradient)
    if config.kinetics is None:
        new_position = np.empty_like(position)
        _langevin(position, gradient, noise["position"], h * config.sigma_theta,
                  scales["position"], new_position)  # fmt: skip
        return new_position, None, None, None, gradient_sq
    code, c = _kinetics_code(config.kinetics)
    softened = code != GAUSSIAN
    if softened and momentum_decay is None:
        momentum_decay = _decay(momentum, code, c)
    coupled = config.gamma > 0
    new_momentum = np.empty_like(momentum)
    new_decay = np.empty_like(momentum) if softened else None
    _momentum_loop(code)(
        momentum, thermostat if coupled else None, gradient, momentum_decay, noise["momentum"],
        h, config.sigma_p, config.gamma, scales["momentum"], c, new_momentum, new_decay,
    )  # fmt: skip
    if softened:
        np.exp(new_decay, out=new_decay)  # the loop wrote the exponent
    new_position = np.empty_like(position)
    moves_thermostat = coupled or config.sigma_xi > 0
    new_thermostat = np.empty_like(thermostat) if moves_thermostat else None
    _position_loop(code, coupled)(
        position, new_momentum, thermostat, gradient, new_decay, noise["position"],
        noise["thermostat"], h, config.sigma_theta, config.sigma_xi, config.gamma,
        scales["position"], scales["thermostat"], c, new_position, new_thermostat,
    )  # fmt: skip
    return (new_position, new_momentum, new_thermostat if moves_thermostat else thermostat,
            new_decay, gradient_sq)  # fmt: skip


def _kinetics_code(kinetics):
    if isinstance(kinetics, GaussianKinetics):
        return GAUSSIAN, 0.0
    return (MONOMIAL_1 if kinetics.a == 1 else MONOMIAL_2), kinetics.c


def _decay(momentum, code, c):
    """``exp(-c |p|)`` (a = 1) or ``exp(-c sqrt|p|)`` (a = 2), vectorised."""
    decay = np.abs(momentum)  # then in place: one array for the three passes
    if code == MONOMIAL_2:
        np.sqrt(decay, out=decay)
    decay *= -c
    return np.exp(decay, out=decay)


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _exponent(p, code, c):
    """The exponent of :func:`_decay` (the same operations)."""
    return (abs(p) if code == MONOMIAL_1 else math.sqrt(abs(p))) * -c


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _derivatives(p, decay, code, c):
    """``(K_c'(p), K_c''(p))`` from ``decay`` (:func:`_decay`), without a branch: one
    reciprocal serves ``tanh`` and ``sech^2``; a compiled loop drops the second if unused."""
    if code == GAUSSIAN:
        return p, 1.0
    reciprocal = 1.0 / (1.0 + decay)
    tanh = (1.0 - decay) * reciprocal
    sech2 = 4.0 * decay * reciprocal * reciprocal
    if code == MONOMIAL_1:
        return math.copysign(tanh, p), 0.5 * c * sech2
    s = math.sqrt(abs(p))
    grad = math.copysign(tanh * tanh / (2.0 * s), p)
    hess = (c * s * tanh * sech2 - tanh * tanh) / (4.0 * s**3)
    return (grad if s > 0 else 0.0), (hess if s > 0 else math.inf)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _langevin(position, gradient, noise, drift_scale, noise_scale, out):
    for i in range(position.size):
        theta = position[i] + drift_scale * gradient[i]
        out[i] = theta + noise[i] * noise_scale


# The two loops are compiled per kinetics code (and the second with or without the
# thermostats' coupling): these choices and the absent (None) arrays are constants of the
# compiled code, which leaves each loop without a branch, so that LLVM vectorises it.


@functools.cache
def _momentum_loop(code):
    """The momentum's loop for kinetics ``code``: the new momentum into ``out`` and, for
    softened kinetics, the exponent of its decay into ``exponent``; ``thermostat`` is
    ``None`` without coupling, ``noise`` without momentum noise."""

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def momentum_loop(momentum, thermostat, gradient, decay, noise, h, sigma_p, gamma,
                      noise_scale, c, out, exponent):  # fmt: skip
        for i in range(momentum.size):
            friction = sigma_p
            if thermostat is not None:
                friction = sigma_p + gamma * thermostat[i]
            p = momentum[i]
            velocity = _derivatives(p, decay[i] if decay is not None else 0.0, code, c)[0]
            p = p + h * gradient[i] - h * friction * velocity
            if noise is not None:
                p += noise[i] * noise_scale
            out[i] = p
            if exponent is not None:
                exponent[i] = _exponent(p, code, c)

    return momentum_loop


@functools.cache
def _position_loop(code, coupled):
    """The position's and thermostats' loop for kinetics ``code``, with (``coupled``) or
    without the thermostats' coupling ``gamma``; ``position_noise`` is ``None`` without
    first-order diffusion, ``out_thermostat`` for fixed thermostats, ``thermostat_noise``
    without thermostat noise."""

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def position_loop(position, momentum, thermostat, gradient, decay, position_noise,
                      thermostat_noise, h, sigma_theta, sigma_xi, gamma, position_scale,
                      thermostat_scale, c, out_position, out_thermostat):  # fmt: skip
        for i in range(position.size):
            e = decay[i] if decay is not None else 0.0
            velocity, hess = _derivatives(momentum[i], e, code, c)
            theta = position[i] + h * velocity
            if position_noise is not None:
                theta = theta + h * sigma_theta * gradient[i]
                theta += position_noise[i] * position_scale
            out_position[i] = theta
            if out_thermostat is not None:
                drift = -sigma_xi * thermostat[i]
                if coupled:
                    drift = drift + gamma * (velocity * velocity - hess)
                xi = thermostat[i] + h * drift
                if thermostat_noise is not None:
                    xi = xi + thermostat_noise[i] * thermostat_scale
                out_thermostat[i] = xi

    return position_loop
