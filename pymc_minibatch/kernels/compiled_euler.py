"""The Euler step of :func:`~pymc_minibatch.kernels.sgmgt.euler_step`, compiled, for big models.

On a network of 10^5 weights every vector operation of the NumPy step reads and writes 10^5
numbers: SGHMC's step made about fifteen such passes, and the softened kinetics' ``tanh``
(``a = 1``, SGMGT and SGMGT-D) cost NumPy as much as the minibatch gradient
(``benchmarks/big_models.py`` prints the costs). Here each part of the step is one compiled
loop over the coordinates (summing the gradient's squares as it reads it), and the
kinetics' derivatives come from one ``exp`` per coordinate, computed by NumPy's vectorised
``exp`` (``tanh(x / 2) = sign(x) (1 - e) / (1 + e)`` and ``sech(x / 2)^2 = 4 e / (1 + e)^2``
with ``e = exp(-|x|)``): once per step, as the new momentum's ``exp`` serves the next step's
friction.

The values are those of the NumPy step: the same operations in the same order, and the normal
draws of the same generator in the same order (all of the momentum's, then all of the
position's, then all of the thermostats'). Only the kinetics' derivatives differ, in their
last bits, where NumPy's ``tanh`` and this ``exp`` round differently.
"""

import math

import numba
import numpy as np

from pymc_minibatch.kernels.kinetics import GaussianKinetics
from pymc_minibatch.kernels.noise import COMPILED_MIN_SIZE, standard_normal

#: How each loop evaluates the kinetics: no momentum (SGLD), Gaussian, monomial a = 1, a = 2.
NO_MOMENTUM, GAUSSIAN, MONOMIAL_1, MONOMIAL_2 = 0, 1, 2, 3


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
        (``None`` unless the kinetics are softened) and ``gradient @ gradient``, summed in
        the step's loop.
    """
    h = float(step_size)
    # the normal vectors first, in the NumPy step's order (a loop drawing them one by one
    # between its arithmetic ran slower than these two passes)
    noise = {name: standard_normal(rng, position.size) if sigma > 0 else position
             for name, sigma in (("momentum", config.sigma_p if config.kinetics else 0.0),
                                 ("position", config.sigma_theta),
                                 ("thermostat", config.sigma_xi))}  # fmt: skip
    scales = {name: math.sqrt(2.0 * sigma * h) for name, sigma in
              (("momentum", config.sigma_p), ("position", config.sigma_theta),
               ("thermostat", config.sigma_xi))}  # fmt: skip
    if config.kinetics is None:
        new_position = np.empty_like(position)
        gradient_sq = _langevin(position, gradient, noise["position"], h * config.sigma_theta,
                                scales["position"], new_position)  # fmt: skip
        return new_position, None, None, None, gradient_sq
    code, c = _kinetics_code(config.kinetics)
    if momentum_decay is None:
        momentum_decay = _decay(momentum, code, c)
    new_momentum = np.empty_like(momentum)
    gradient_sq = _momentum(momentum, thermostat, gradient, momentum_decay, noise["momentum"],
                            h, config.sigma_p, config.gamma, scales["momentum"], code,
                            new_momentum)  # fmt: skip
    new_position = np.empty_like(position)
    moves_thermostat = config.gamma > 0 or config.sigma_xi > 0
    new_thermostat = np.empty_like(thermostat) if moves_thermostat else thermostat
    new_decay = _decay(new_momentum, code, c)
    _position_and_thermostat(
        position, new_momentum, thermostat, gradient, new_decay,
        noise["position"], noise["thermostat"], h, config.sigma_theta, config.sigma_xi,
        config.gamma, scales["position"], scales["thermostat"], moves_thermostat, code, c,
        new_position, new_thermostat,
    )  # fmt: skip
    softened = code in (MONOMIAL_1, MONOMIAL_2)
    return (new_position, new_momentum, new_thermostat, new_decay if softened else None,
            gradient_sq)  # fmt: skip


def _kinetics_code(kinetics):
    if isinstance(kinetics, GaussianKinetics):
        return GAUSSIAN, 0.0
    return (MONOMIAL_1 if kinetics.a == 1 else MONOMIAL_2), kinetics.c


def _decay(momentum, code, c):
    """``exp(-c |p|)`` (a = 1) or ``exp(-c sqrt|p|)`` (a = 2), vectorised; unused otherwise."""
    if code not in (MONOMIAL_1, MONOMIAL_2):
        return momentum
    decay = np.abs(momentum)  # then in place: one array for the three passes
    if code == MONOMIAL_2:
        np.sqrt(decay, out=decay)
    decay *= -c
    return np.exp(decay, out=decay)


@numba.njit(cache=True, nogil=True, inline="always")
def _kinetics_grad(p, decay, code):
    """``K_c'(p)`` from ``decay`` (:func:`_decay`)."""
    if code == GAUSSIAN:
        return p
    tanh = (1.0 - decay) / (1.0 + decay)
    if code == MONOMIAL_1:
        return math.copysign(tanh, p)
    s = math.sqrt(abs(p))
    return math.copysign(tanh * tanh / (2.0 * s), p) if s > 0 else 0.0


@numba.njit(cache=True, nogil=True, inline="always")
def _kinetics_hess(p, decay, code, c):
    """``K_c''(p)`` from ``decay`` (:func:`_decay`)."""
    if code == GAUSSIAN:
        return 1.0
    sech2 = 4.0 * decay / (1.0 + decay) ** 2
    if code == MONOMIAL_1:
        return 0.5 * c * sech2
    s = math.sqrt(abs(p))
    if s == 0:
        return math.inf
    tanh = (1.0 - decay) / (1.0 + decay)
    return (c * s * tanh * sech2 - tanh * tanh) / (4.0 * s**3)


@numba.njit(cache=True, nogil=True)
def _langevin(position, gradient, noise, drift_scale, noise_scale, out):
    gradient_sq = 0.0
    for i in range(position.size):
        gradient_sq += gradient[i] * gradient[i]
        theta = position[i] + drift_scale * gradient[i]
        out[i] = theta + noise[i] * noise_scale
    return gradient_sq


@numba.njit(cache=True, nogil=True)
def _momentum(momentum, thermostat, gradient, decay, noise, h, sigma_p, gamma, noise_scale,
              code, out):  # fmt: skip
    gradient_sq = 0.0
    for i in range(momentum.size):
        gradient_sq += gradient[i] * gradient[i]
        friction = sigma_p + gamma * thermostat[i] if gamma > 0 else sigma_p
        p = momentum[i]
        p = p + h * gradient[i] - h * friction * _kinetics_grad(p, decay[i], code)
        if sigma_p > 0:
            p += noise[i] * noise_scale
        out[i] = p
    return gradient_sq


@numba.njit(cache=True, nogil=True)
def _position_and_thermostat(position, momentum, thermostat, gradient, decay, position_noise,
                             thermostat_noise, h, sigma_theta, sigma_xi, gamma, position_scale,
                             thermostat_scale, moves_thermostat, code, c, out_position,
                             out_thermostat):  # fmt: skip
    for i in range(position.size):
        velocity = _kinetics_grad(momentum[i], decay[i], code)
        theta = position[i] + h * velocity
        if sigma_theta > 0:
            theta = theta + h * sigma_theta * gradient[i]
            theta += position_noise[i] * position_scale
        out_position[i] = theta
        if moves_thermostat:
            drift = -sigma_xi * thermostat[i]
            if gamma > 0:
                hess = _kinetics_hess(momentum[i], decay[i], code, c)
                drift = drift + gamma * (velocity * velocity - hess)
            xi = thermostat[i] + h * drift
            if sigma_xi > 0:
                xi = xi + thermostat_noise[i] * thermostat_scale
            out_thermostat[i] = xi
