"""The stochastic-gradient monomial-gamma thermostat (SGMGT) and its special cases.

Zhang, Chen, Li, Henao & Carin (2017), "Stochastic gradient monomial Gamma sampler", ICML
(the docs page "Stochastic-gradient MCMC" states it). State
``(theta, p, xi)`` with one thermostat per coordinate, Hamiltonian
``H = U(theta) + sum_d K_c(p_d) + sum_d xi_d^2 / 2`` and the SDE of eq. (15):

    d theta = grad K_c(p) dt + sigma_theta g(theta) dt + sqrt(2 sigma_theta) dW
    d p     = g(theta) dt - (sigma_p + gamma xi) * grad K_c(p) dt + sqrt(2 sigma_p) dW
    d xi    = gamma (grad K_c(p)^2 - hess K_c(p)) dt - sigma_xi xi dt + sqrt(2 sigma_xi) dW

with ``g = -grad U``, the gradient of the (minibatch estimate of the) log density.

Integrator: the semi-implicit Euler scheme of SGHMC (Chen et al. 2014) and SGNHT (Ding et
al. 2014): the momentum moves first, from the current ``theta``, ``xi`` and ``p``; then
``theta`` and ``xi`` move with the new momentum's ``grad K_c(p')``. One gradient per step.
The first-order terms of ``theta`` use the same gradient ``g(theta)``.

Special cases (``a = 1/2`` is the Gaussian kinetics ``p^2/2``):

- SGNHT (per-coordinate thermostats): ``a = 1/2``, ``sigma_theta = sigma_xi = 0``,
  ``gamma = 1``, ``sigma_p = A``; the SGNHT thermostat is ``A + xi``.
- SGHMC: ``a = 1/2``, ``gamma = 0`` (the thermostat never acts), friction ``sigma_p``.
- SGLD: no momentum (``kinetics=None``): ``theta += h sigma_theta g + sqrt(2 sigma_theta h) z``;
  Welling & Teh's step ``eps`` is ``h = eps`` with ``sigma_theta = 1/2``.
- SGMGT: ``a`` in ``{1, 2}``, ``sigma_theta = sigma_xi = 0``; SGMGT-D: both positive.

Stochastic resampling (Section 3 of the paper): every ``T_p`` steps ``p`` is redrawn
exactly from ``exp(-K_c)`` (:meth:`MonomialKinetics.sample`), every ``T_xi`` steps ``xi``
from ``N(0, 1)``.
"""

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels import compiled_euler
from pymc_minibatch.kernels.kinetics import GaussianKinetics, MonomialKinetics, make_kinetics
from pymc_minibatch.kernels.noise import standard_normal


class SGMGTConfig(NamedTuple):
    """The coefficients of eq. (15) of Zhang et al. (2017); the classmethods build the
    special cases the step methods run (:mod:`pymc_minibatch.step_methods.sgmcmc`)."""

    kinetics: GaussianKinetics | MonomialKinetics | None
    """``None``: first-order dynamics without momentum (SGLD)."""
    sigma_theta: float
    """First-order (Langevin) diffusion on ``theta``."""
    sigma_p: float
    """Momentum diffusion: the constant friction and injected noise."""
    sigma_xi: float
    """First-order diffusion on the thermostats."""
    gamma: float
    """The thermostats' coupling (0: no thermostat)."""

    @classmethod
    def sgld(cls):
        """Stochastic gradient Langevin dynamics: Welling & Teh (2011), "Bayesian learning
        via stochastic gradient Langevin dynamics", ICML, eq. (4).

        No momentum and ``sigma_theta = 1/2``, so that :func:`euler_step` is
        ``theta + (h / 2) g + sqrt(h) z``, their update with step ``eps = h``.

        Returns
        -------
        SGMGTConfig
        """
        return cls(None, sigma_theta=0.5, sigma_p=0.0, sigma_xi=0.0, gamma=0.0)

    @classmethod
    def sghmc(cls, sigma_p):
        """Stochastic gradient Hamiltonian Monte Carlo: Chen, Fox & Guestrin (2014),
        "Stochastic gradient Hamiltonian Monte Carlo", ICML, eq. (15) with unit mass, no
        estimate of the gradient noise (``beta_hat = 0``) and friction ``C = sigma_p``
        (their ``v = h p``, ``eta = h^2``, ``alpha = h C``).

        Eq. (15) of Zhang et al. (2017) with Gaussian kinetics (``a = 1/2``),
        ``sigma_theta = sigma_xi = 0`` and no thermostat (``gamma = 0``).

        Parameters
        ----------
        sigma_p : float
            The friction ``C``, also the injected noise ``sqrt(2 C h)``.

        Returns
        -------
        SGMGTConfig
        """
        return cls(
            GaussianKinetics(), sigma_theta=0.0, sigma_p=float(sigma_p), sigma_xi=0.0, gamma=0.0
        )

    @classmethod
    def sgnht(cls, sigma_p):
        """Stochastic gradient Nosé–Hoover thermostat: Ding et al. (2014), "Bayesian
        sampling using stochastic gradient thermostats", NeurIPS, Algorithm 1, with one
        thermostat per coordinate and ``A = sigma_p``.

        Eq. (15) of Zhang et al. (2017) with Gaussian kinetics (``a = 1/2``),
        ``sigma_theta = sigma_xi = 0`` and ``gamma = 1``: the friction ``sigma_p + xi`` is
        Ding et al.'s thermostat.

        Parameters
        ----------
        sigma_p : float
            Ding et al.'s ``A``: the injected noise and the thermostat's starting friction.

        Returns
        -------
        SGMGTConfig
        """
        return cls(
            GaussianKinetics(), sigma_theta=0.0, sigma_p=float(sigma_p), sigma_xi=0.0, gamma=1.0
        )

    @classmethod
    def sgmgt(cls, a, c, *, sigma_p, gamma, sigma_theta=0.0, sigma_xi=0.0):
        """Stochastic gradient monomial-gamma thermostat: Zhang, Chen, Li, Henao & Carin
        (2017), "Stochastic gradient monomial Gamma sampler", ICML, eq. (15) with the
        softened monomial-gamma kinetics ``K_c``.

        With ``sigma_theta = sigma_xi = 0`` it is their SGMGT; with both positive, SGMGT-D.

        Parameters
        ----------
        a : {0.5, 1, 2}
            Monomial parameter (0.5: Gaussian kinetics).
        c : float
            Softening of the kinetics.
        sigma_p, gamma, sigma_theta, sigma_xi : float
            The coefficients of eq. (15) (the fields of the same names).

        Returns
        -------
        SGMGTConfig
        """
        return cls(
            make_kinetics(a, c),
            sigma_theta=float(sigma_theta),
            sigma_p=float(sigma_p),
            sigma_xi=float(sigma_xi),
            gamma=float(gamma),
        )


class SGState(NamedTuple):
    """One chain of a stochastic-gradient sampler (the dynamics run in ``z``, ``theta = L z``).

    Only ``position``, ``momentum`` and ``thermostat`` enter :func:`euler_step`; the other
    fields belong to the chain (:mod:`pymc_minibatch.kernels.sg_chain`).
    """

    position: np.ndarray
    """``z``."""
    momentum: np.ndarray | None = None
    """``p`` (``None`` for first-order dynamics)."""
    thermostat: np.ndarray | None = None
    """``xi``, one per coordinate (``None`` for first-order dynamics)."""
    preconditioner: object = None
    """``theta = L z`` (:mod:`pymc_minibatch.kernels.preconditioning`)."""
    updates: int = 0
    """Updates made so far in this chain."""
    permutation: np.ndarray | None = None
    """The current epoch's order of the rows (``None``: no epoch started)."""
    cursor: int = 0
    """Rows of the epoch used so far."""
    anchor: np.ndarray | None = None
    """``z`` a divergence is measured from (the mode, or the chain's start)."""
    kinetics_cache: tuple | None = None
    """``(momentum, its exp-decay)`` left by the compiled step for softened kinetics: the
    next step reuses the decay while ``momentum`` is still that array."""


class SGMGTInfo(NamedTuple):
    grad_norm: float
    """Euclidean norm of the gradient estimate used by the step."""


def validate_config(config: SGMGTConfig):
    """Raise ``ValueError`` for hyperparameters the SDE does not allow."""
    for name in ("sigma_theta", "sigma_p", "sigma_xi", "gamma"):
        value = getattr(config, name)
        if not (np.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    if config.kinetics is None and config.sigma_theta == 0:
        raise ValueError("first-order dynamics (no momentum) need sigma_theta > 0")


def init_state(rng: np.random.Generator, position, config: SGMGTConfig, **chain) -> SGState:
    """Momentum drawn exactly from ``exp(-K_c)``, thermostats at 0; ``chain`` sets the
    other fields of :class:`SGState`."""
    position = np.asarray(position, dtype=np.float64)
    if config.kinetics is None:
        return SGState(position, **chain)
    momentum = config.kinetics.sample(rng, position.shape).momentum
    return SGState(position, momentum, np.zeros_like(position), **chain)


def euler_step(
    rng: np.random.Generator,
    state: SGState,
    gradient_fn: Callable[[np.ndarray], np.ndarray],
    step_size: float,
    config: SGMGTConfig,
) -> tuple[SGState, SGMGTInfo]:
    """One semi-implicit Euler step of eq. (15) with step ``h = step_size``.

    ``gradient_fn(theta)`` returns the (stochastic) gradient of the log density.
    Normal draws are taken for ``p``, then ``theta``, then ``xi``, each only when its
    diffusion coefficient is positive.
    """
    h = step_size
    theta = state.position
    gradient = gradient_fn(theta)
    kinetics = config.kinetics
    if compiled_euler.applies(config, theta.size, rng):  # big models: the same step, compiled
        cache = state.kinetics_cache
        decay = cache[1] if cache is not None and cache[0] is state.momentum else None
        theta, p, xi, decay, gradient_sq = compiled_euler.euler_update(
            rng, theta, state.momentum, state.thermostat, gradient, h, config, decay
        )
        cache = None if decay is None else (p, decay)
        state = state._replace(position=theta, momentum=p, thermostat=xi, kinetics_cache=cache)
        return state, SGMGTInfo(math.sqrt(gradient_sq))
    info = SGMGTInfo(math.sqrt(gradient @ gradient))
    # terms whose coefficient is 0 are skipped (the same values: they would add exact zeros)
    if kinetics is None:
        theta = theta + h * config.sigma_theta * gradient
        theta += _noise(rng, np.sqrt(2.0 * config.sigma_theta * h), theta.shape)
        return state._replace(position=theta), info

    p, xi = state.momentum, state.thermostat
    friction = config.sigma_p + config.gamma * xi if config.gamma > 0 else config.sigma_p
    p = p + h * gradient - h * friction * kinetics.grad(p)
    if config.sigma_p > 0:
        p += _noise(rng, np.sqrt(2.0 * config.sigma_p * h), p.shape)

    velocity = kinetics.grad(p)
    theta = theta + h * velocity
    if config.sigma_theta > 0:
        theta = theta + h * config.sigma_theta * gradient
        theta += _noise(rng, np.sqrt(2.0 * config.sigma_theta * h), theta.shape)

    if config.gamma > 0 or config.sigma_xi > 0:
        drift = -config.sigma_xi * xi
        if config.gamma > 0:
            drift = drift + config.gamma * (velocity**2 - kinetics.hess_diag(p))
        xi = xi + h * drift
    if config.sigma_xi > 0:
        xi = xi + _noise(rng, np.sqrt(2.0 * config.sigma_xi * h), xi.shape)
    return state._replace(position=theta, momentum=p, thermostat=xi), info


def _noise(rng, scale, shape):
    """``scale`` times a standard normal draw (scaled in place)."""
    noise = standard_normal(rng, shape)
    noise *= scale
    return noise


def resample_momentum(rng: np.random.Generator, state: SGState, config: SGMGTConfig):
    """Redraw ``p`` exactly from ``exp(-K_c)``; returns ``(state, accept_rate)``."""
    draw = config.kinetics.sample(rng, state.momentum.shape)
    return state._replace(momentum=draw.momentum), draw.accept_rate


def resample_thermostat(rng: np.random.Generator, state: SGState) -> SGState:
    """Redraw ``xi`` from its marginal ``N(0, 1)``."""
    return state._replace(thermostat=standard_normal(rng, state.thermostat.shape))


def kinetic_energy(state: SGState, config: SGMGTConfig) -> float:
    """``sum_d K_c(p_d)`` (NaN without momentum)."""
    if config.kinetics is None:
        return float("nan")
    return float(np.sum(config.kinetics.energy(state.momentum)))
