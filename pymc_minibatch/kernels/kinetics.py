"""Kinetic energies for the momentum of SG-MCMC samplers, with exact momentum draws.

Monomial-gamma kinetics (Zhang et al. 2016, "Towards unifying Hamiltonian Monte Carlo and
slice sampling"; softened by Zhang et al. 2017, "Stochastic gradient monomial Gamma
sampler", ICML, eq. 14): per coordinate the stiff
energy is ``K(p) = |p|^(1/a)``, so that ``|p|^(1/a) ~ Gamma(a, 1)``. It is not
differentiable at ``p = 0`` for ``a >= 1``; the softened ``K_c`` (``c > 0``) is, and tends
to ``K`` as ``c -> infinity``. ``a = 1/2`` is the Gaussian kinetics ``p^2 / 2`` of
SGHMC/SGNHT (with the normalisation that makes ``p ~ N(0, 1)``).

Derivatives (per coordinate, ``sigma`` the logistic function):

- ``a = 1``: ``K_c = -p + (2/c) log(1 + e^(cp)) = |p| + (2/c) log1p(e^(-c|p|))``,
  ``K_c' = tanh(cp/2)``, ``K_c'' = 2c sigma(cp)(1 - sigma(cp))``.
- ``a = 2``: with ``s = |p|^(1/2)`` and ``u = cs/2``,
  ``K_c = s + 4 / (c (1 + e^(cs))) = s + (2/c)(1 - tanh u)``,
  ``K_c' = sign(p) tanh(u)^2 / (2s)``,
  ``K_c'' = (c s tanh(u) sech(u)^2 - tanh(u)^2) / (4 s^3)``.

  The paper calls ``K_c`` infinitely differentiable; for ``a = 2`` it is not: near 0,
  ``K_c = 2/c + c^2 |p|^(3/2) / 12 + ...``, so ``K_c'`` is continuous (and 0 at 0) but
  ``K_c''`` grows like ``c^2 / (16 s)``: integrable, infinite at ``p = 0``. The
  thermostat's drift ``K_c'^2 - K_c''`` still has mean zero under ``exp(-K_c)``
  (integration by parts needs only a continuous ``K_c'``), but single Euler steps with
  ``p`` close to 0 give the thermostat large kicks.
"""

from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.noise import standard_normal


class MomentumDraw(NamedTuple):
    momentum: np.ndarray
    accept_rate: float
    """Accepted / proposed coordinates of the rejection sampler (1 when drawn directly)."""


class GaussianKinetics:
    """``K(p) = p^2 / 2`` per coordinate (monomial parameter ``a = 1/2``)."""

    a = 0.5
    c = np.inf

    def energy(self, p):
        """``K(p)`` per coordinate."""
        return 0.5 * np.square(p)

    def stiff_energy(self, p):
        return self.energy(p)

    def grad(self, p):
        """``K'(p)`` per coordinate."""
        return np.asarray(p, dtype=np.float64)

    def hess_diag(self, p):
        """``K''(p)`` per coordinate."""
        return np.ones_like(p, dtype=np.float64)

    def sample(self, rng: np.random.Generator, size) -> MomentumDraw:
        """Exact draws from ``exp(-K)``: standard normal."""
        return MomentumDraw(standard_normal(rng, size), 1.0)

    def __repr__(self):
        return "GaussianKinetics()"


class MonomialKinetics:
    """Softened monomial-gamma kinetics ``K_c`` for ``a`` in ``{1, 2}``.

    Parameters
    ----------
    a : {1, 2}
        Monomial parameter: the stiff energy is ``|p|^(1/a)``.
    c : float
        Softening, ``c > 0``; ``np.inf`` gives the stiff energy (not differentiable at 0,
        for tests and draws only).
    """

    def __init__(self, a, c):
        if a not in (1, 2):
            raise ValueError(
                f"monomial parameter a must be 1 or 2 (or 0.5 for Gaussian kinetics), got {a}"
            )
        if not c > 0:
            raise ValueError(f"softening c must be positive, got {c}")
        self.a = int(a)
        self.c = float(c)

    def stiff_energy(self, p):
        """``K(p) = |p|^(1/a)`` per coordinate."""
        absp = np.abs(p)
        return absp if self.a == 1 else np.sqrt(absp)

    def energy(self, p):
        """``K_c(p)`` per coordinate (the stiff energy when ``c`` is infinite)."""
        absp, c = np.abs(p), self.c
        if np.isinf(c):
            return self.stiff_energy(p)
        if self.a == 1:
            return absp + (2.0 / c) * np.log1p(np.exp(-c * absp))
        s = np.sqrt(absp)
        return s + (2.0 / c) * (1.0 - np.tanh(0.5 * c * s))

    def grad(self, p):
        """``K_c'(p)`` per coordinate."""
        p = np.asarray(p, dtype=np.float64)
        c = self.c
        if self.a == 1:
            return np.sign(p) if np.isinf(c) else np.tanh(0.5 * c * p)
        s = np.sqrt(np.abs(p))
        safe_s = np.where(s > 0, s, 1.0)
        magnitude = (1.0 if np.isinf(c) else np.tanh(0.5 * c * s) ** 2) / (2.0 * safe_s)
        return np.where(s > 0, np.sign(p) * magnitude, 0.0)

    def hess_diag(self, p):
        """``K_c''(p)`` per coordinate (``+inf`` at ``p = 0`` for ``a = 2``)."""
        p = np.asarray(p, dtype=np.float64)
        c = self.c
        if np.isinf(c):
            raise ValueError("the stiff kinetics has no second derivative at 0; use finite c")
        if self.a == 1:
            decay = np.exp(-c * np.abs(p))  # sech^2(x/2) = 4 e^-|x| / (1 + e^-|x|)^2
            return 0.5 * c * 4.0 * decay / (1.0 + decay) ** 2
        s = np.sqrt(np.abs(p))
        u = 0.5 * c * s
        decay = np.exp(-2.0 * u)
        sech2 = 4.0 * decay / (1.0 + decay) ** 2
        tanh_u = np.tanh(u)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = (c * s * tanh_u * sech2 - tanh_u**2) / (4.0 * s**3)
        return np.where(s > 0, value, np.inf)

    def sample(self, rng: np.random.Generator, size) -> MomentumDraw:
        """Exact draws from ``exp(-K_c)`` by coordinate-wise rejection.

        Propose from the stiff law (``u ~ Gamma(a, 1)``, ``|p| = u^a``, a random sign) and
        accept with probability ``exp(K(p) - K_c(p))``, which is at most 1 because
        ``K_c >= K``: ``K_c - K`` is ``(2/c) log1p(e^(-c|p|))`` (a = 1) or
        ``(2/c)(1 - tanh(c s / 2))`` (a = 2), both in ``[0, 2/c]``.
        """
        momentum = np.empty(size)
        flat = momentum.reshape(-1)
        pending = np.arange(flat.size)
        proposed = 0
        while pending.size:
            u = rng.gamma(self.a, 1.0, size=pending.size)
            candidate = np.where(rng.random(pending.size) < 0.5, -1.0, 1.0) * u**self.a
            log_accept = self.stiff_energy(candidate) - self.energy(candidate)
            accepted = np.log(rng.random(pending.size)) < log_accept
            flat[pending[accepted]] = candidate[accepted]
            proposed += pending.size
            pending = pending[~accepted]
        return MomentumDraw(momentum, flat.size / proposed if proposed else 1.0)

    def __repr__(self):
        return f"MonomialKinetics(a={self.a}, c={self.c:g})"


def make_kinetics(a, c):
    """Kinetics for monomial parameter ``a`` in ``{0.5, 1, 2}`` and softening ``c``."""
    if a == 0.5:
        return GaussianKinetics()
    return MonomialKinetics(a, c)
