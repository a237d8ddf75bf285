"""Stochastic-gradient MCMC step methods: SGLD, SGHMC, SGNHT, SGMGT and SGMGT-D.

All five run the one kernel of :mod:`pymc_minibatch.kernels.sgmgt` with different
hyperparameters; this module only draws batches, preconditions, picks step sizes and
reports statistics.
"""

import numpy as np
from pymc.blocking import RaveledVars
from pymc.step_methods.state import dataclass_state

from pymc_minibatch.exceptions import SamplerDivergenceError
from pymc_minibatch.kernels.batches import checked_batch_size, next_epoch_batch
from pymc_minibatch.kernels.kinetics import make_kinetics
from pymc_minibatch.kernels.preconditioning import identity_preconditioner
from pymc_minibatch.kernels.schedules import as_schedule
from pymc_minibatch.kernels.sgmgt import (
    SGMGTConfig,
    SGMGTState,
    euler_step,
    init_state,
    kinetic_energy,
    resample_momentum,
    resample_thermostat,
    validate_config,
)
from pymc_minibatch.step_methods.base import MinibatchStep, MinibatchStepState

RUNAWAY_DISTANCE = 1e4
"""Preconditioned posterior sds from the mode beyond which a chain has diverged."""


@dataclass_state
class SGMCMCState(MinibatchStepState):
    dynamics: SGMGTState | None
    updates: int
    permutation: np.ndarray | None
    cursor: int
    anchor: np.ndarray | None


class SGMCMC(MinibatchStep):
    """Base class of the stochastic-gradient samplers (use the presets below).

    Every update draws the next ``batch_size`` rows of an epoch (a fresh random permutation
    of the rows each epoch; the ``N mod batch_size`` rows left over at the end of an epoch
    are skipped in that epoch) and uses the unbiased gradient estimate
    ``grad log p(theta) + (N / B) sum_{i in batch} grad log p(y_i | theta)``.

    **Preconditioning and start** (``precondition=True``, the default when ``step_size`` is
    not given): at construction the sampler fits the Laplace approximation
    ``N(theta_hat, L L^T)`` of the posterior on the full data (the mode by L-BFGS, then the
    curvature there by finite differences of full-data gradients, made positive definite;
    see :mod:`pymc_minibatch.model.laplace` and :meth:`MinibatchModel.laplace`). It then
    runs in ``z`` with ``theta = L z``, a linear change of variables (the target is
    unchanged; ``L`` plays the part of a mass matrix) in which the posterior's curvature is
    about the identity, and each chain starts from a draw of the Laplace approximation, in
    the bulk of the posterior, whatever PyMC's initial point (which is far out for tall
    data). Step sizes (and the ``step_size`` statistic) are in units of ``z``. Up to 100
    parameters ``L`` is dense; beyond, it is diagonal (estimated from per-row gradients at
    the mode, see :mod:`pymc_minibatch.kernels.preconditioning`).

    **Default step size** (``step_size=None``): a constant ``h`` in units of ``z``, in
    which the posterior sd is about 1 and the gradient noise variance per coordinate about
    ``r = N / B - 1``; each preset's rule is in its docstring.

    **Divergence**: a non-finite log density, gradient or state, or a chain more than
    ``1e4`` preconditioned posterior sds from the mode (or from its start without
    preconditioning), stops sampling with :class:`~pymc_minibatch.SamplerDivergenceError`
    naming the update, the variable that moved furthest and what to change.
    """

    name = "sgmcmc"
    stats_dtypes_shapes = {
        **MinibatchStep.stats_dtypes_shapes,
        "step_size": (np.float64, []),
        "kinetic_energy": (np.float64, []),
        "thermostat_mean": (np.float64, []),
        "resampled": (bool, []),
        "resample_accept_rate": (np.float64, []),
        "grad_norm": (np.float64, []),
    }
    _state_class = SGMCMCState

    def __init__(
        self,
        vars=None,
        *,
        batch_size,
        config,
        step_size=None,
        thin=1,
        precondition=None,
        momentum_resample_every=None,
        thermostat_resample_every=None,
        model=None,
        blocked=True,
        rng=None,
    ):
        super().__init__(vars, model=model, blocked=blocked, rng=rng)
        mm = self.minibatch_model
        self.batch_size = checked_batch_size(batch_size, mm.n_data)
        self.thin = _positive_int("thin", thin)
        validate_config(config)
        self.config = config
        self.precondition = step_size is None if precondition is None else bool(precondition)
        if step_size is None:
            step_size = self.default_step_size(mm.n_data / self.batch_size - 1.0)
        self.schedule = as_schedule(step_size)
        initial_step = float(self.schedule(0))
        self.momentum_resample_every = _resample_period(
            "momentum_resample_every", momentum_resample_every, initial_step
        )
        self.thermostat_resample_every = _resample_period(
            "thermostat_resample_every", thermostat_resample_every, initial_step
        )
        self.laplace = mm.laplace(rng=self.rng) if self.precondition else None
        self.preconditioner = (
            self.laplace.preconditioner if self.precondition else identity_preconditioner(mm.ndim)
        )
        self.reset_tuning()

    def default_step_size(self, noise_ratio):
        """The default ``h`` given ``r = N / B - 1`` (see the preset's docstring)."""
        raise NotImplementedError

    def reset_tuning(self):
        self.dynamics = None
        self.updates = 0
        self.permutation = None
        self.cursor = 0
        self.anchor = None

    def astep(self, q0: RaveledVars):
        theta = q0.data
        if self.dynamics is None:  # a chain starts: from a Laplace draw when preconditioning
            start = self.laplace.draw(self.rng) if self.precondition else theta.copy()
            self.anchor = self.laplace.mode if self.precondition else start
            self.dynamics = init_state(self.rng, self.preconditioner.to_z(start), self.config)
        else:  # PyMC's point is authoritative (another step of a CompoundStep may move it)
            self.dynamics = self.dynamics._replace(position=self.preconditioner.to_z(theta))
        resampled, accept_rates = False, []
        for _ in range(self.thin):
            step_size = float(self.schedule(self.updates))
            with np.errstate(over="ignore", invalid="ignore"):  # reported by _check_finite
                self.dynamics, _ = euler_step(
                    self.rng, self.dynamics, self._gradient, step_size, self.config
                )
                self.updates += 1
                self._check_finite(step_size)
            self._check_runaway(step_size)
            did_resample, accept_rate = self._resample()
            resampled |= did_resample
            accept_rates.extend(accept_rate)
        stats = {
            "tune": self.tune,
            "step_size": step_size,
            "kinetic_energy": kinetic_energy(self.dynamics, self.config),
            "thermostat_mean": self._thermostat_mean(),
            "resampled": resampled,
            "resample_accept_rate": float(np.mean(accept_rates)) if accept_rates else np.nan,
            # the gradient norm in the user's parametrisation, not in z
            "grad_norm": self._grad_norm,
        }
        position = self.preconditioner.to_theta(self.dynamics.position)
        return RaveledVars(position, q0.point_map_info), [stats]

    def _gradient(self, z):
        theta = self.preconditioner.to_theta(z)
        self._log_density, grad = self.minibatch_model.grad_estimate(theta, self._next_batch())
        self._grad_norm = float(np.linalg.norm(grad))
        return self.preconditioner.gradient_to_z(grad)

    def _next_batch(self):
        rows, self.permutation, self.cursor = next_epoch_batch(
            self.rng, self.minibatch_model.n_data, self.batch_size, self.permutation, self.cursor
        )
        return rows

    def _resample(self):
        if self.config.kinetics is None:
            return False, []
        resampled, accept_rates = False, []
        period = self.momentum_resample_every
        if period is not None and self.updates % period == 0:
            self.dynamics, accept_rate = resample_momentum(self.rng, self.dynamics, self.config)
            resampled = True
            accept_rates.append(accept_rate)
        period = self.thermostat_resample_every
        if period is not None and self.updates % period == 0:
            self.dynamics = resample_thermostat(self.rng, self.dynamics)
            resampled = True
        return resampled, accept_rates

    def _thermostat_mean(self):
        if self.config.kinetics is None or self.config.gamma == 0:
            return np.nan
        return float(np.mean(self.dynamics.thermostat))

    def _check_finite(self, step_size):
        dynamics = self.dynamics
        parts = {
            "log density": self._log_density,
            "gradient": self._grad_norm,
            "position": dynamics.position,
        }
        if dynamics.momentum is not None:
            parts.update(momentum=dynamics.momentum, thermostat=dynamics.thermostat)
        if np.isfinite(sum(np.sum(value) for value in parts.values())):
            return
        bad = [name for name, value in parts.items() if not np.all(np.isfinite(value))]
        raise SamplerDivergenceError(
            f"{self._where()}: non-finite {', '.join(bad)} with step size {step_size:g}"
            f"{self._largest_move()}. {self._advice(step_size)}"
        )

    def _check_runaway(self, step_size):
        """Stop a chain that left the mode (or its start) by more than RUNAWAY_DISTANCE
        preconditioned units: an unstable step can grow without ever overflowing."""
        distance = np.max(np.abs(self.dynamics.position - self.preconditioner.to_z(self.anchor)))
        if distance > RUNAWAY_DISTANCE:
            raise SamplerDivergenceError(
                f"{self._where()}: it ran away with step size {step_size:g}"
                f"{self._largest_move()}. {self._advice(step_size)}"
            )

    def _where(self):
        phase = "tuning" if self.tune else "sampling"
        return f"{type(self).__name__} diverged at update {self.updates} of this chain ({phase})"

    def _largest_move(self):
        """Which parameter moved furthest from the anchor, in its preconditioned sds."""
        to_theta = self.preconditioner.to_theta
        move = to_theta(self.dynamics.position) - self.anchor
        scale = np.sqrt(np.sum(to_theta(np.eye(move.size)) ** 2, axis=1))  # sd of each theta_d
        moves = np.abs(move) / scale
        if not np.any(np.isfinite(moves)):
            return ""
        index = int(np.nanargmax(np.where(np.isfinite(moves), moves, -np.inf)))
        units = "preconditioned posterior sds" if self.precondition else "transformed units"
        origin = "the mode" if self.precondition else "the chain's start"
        name = self.minibatch_model.coordinate_names()[index]
        return f", after '{name}' moved {moves[index]:.3g} {units} from {origin}"

    def _advice(self, step_size):
        return (
            f"Pass a smaller step_size (e.g. {step_size / 10:g}) or a larger batch_size"
            + ("" if self.precondition else ", or leave step_size unset to precondition")
            + "."
        )


def _positive_float(name, value):
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return float(value)


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


RESAMPLE_TIME = 10.0
"""Default resampling period in units of the SDE's time: the paper's 100 updates at h = 0.1."""


def _resample_period(name, value, initial_step):
    """Updates between resamplings: None (never), a positive int, or "auto"."""
    if value is None:
        return None
    if isinstance(value, str) and value == "auto":
        return max(1, round(RESAMPLE_TIME / initial_step))
    return _positive_int(name, value)


_COMMON_PARAMETERS = """
    vars : list of variables, optional
        Continuous free variables to sample (default: all continuous ones).
    batch_size : int
        Rows per gradient estimate.
    step_size : float or schedule, optional
        ``h``, a positive number or a schedule from :mod:`pymc_minibatch.schedules`
        (``constant``, ``polynomial_decay``, ``cyclical``) evaluated at the update count
        ``t = 0, 1, ...`` of the chain (tuning included). Default: the rule above.
    thin : int, default 1
        Updates per recorded draw (each costs one gradient estimate); statistics describe
        the last update, ``resampled`` any of them.
    precondition : bool, optional
        Run in the preconditioned coordinates of the Laplace approximation, starting each
        chain from a draw of it, as described in :class:`SGMCMC`. Default: True when
        ``step_size`` is not given, False otherwise (then ``h`` is in the units of the
        model's (transformed) parameters, as in the papers, and chains start at PyMC's
        initial point).
    model : pymc.Model, optional
"""


class SGLD(SGMCMC):
    __doc__ = f"""Stochastic gradient Langevin dynamics (Welling & Teh 2011, ICML).

    ``theta <- theta + (h / 2) g(theta) + sqrt(h) z`` with the minibatch gradient ``g``
    (no momentum; the first-order special case of the SGMGT kernel with
    ``sigma_theta = 1/2``).

    **Default step size**: ``h = 0.4 / (1 + r)`` with ``r = N / B - 1``. On a Gaussian
    posterior with unit scale the Euler step inflates the stationary variance by about
    ``h / 4`` and the gradient noise by about ``h r / 4``; the rule keeps their sum near
    10%. A chain then needs about ``2 / h`` updates per independent draw, growing with
    ``N / B``: plan ``draws`` (or ``thin``) accordingly.

    Parameters
    ----------{_COMMON_PARAMETERS}
    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=5_000)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    ...     idata = pm.sample(step=pmm.SGLD(batch_size=100), draws=200, tune=400,
    ...                       chains=1, progressbar=False, random_seed=0)
    >>> idata["sample_stats"]["step_size"].values.shape
    (1, 200)

    A decaying step size instead of the default rule (then no preconditioning):

    >>> step = pmm.SGLD(batch_size=100, step_size=pmm.schedules.polynomial_decay(1e-4),
    ...                 model=model)
    """

    name = "sgld"

    def __init__(self, vars=None, *, batch_size, **kwargs):
        config = SGMGTConfig(None, sigma_theta=0.5, sigma_p=0.0, sigma_xi=0.0, gamma=0.0)
        super().__init__(vars, batch_size=batch_size, config=config, **kwargs)

    def default_step_size(self, noise_ratio):
        return 0.4 / (1.0 + noise_ratio)


class SGHMC(SGMCMC):
    __doc__ = f"""Stochastic gradient Hamiltonian Monte Carlo (Chen, Fox & Guestrin 2014, ICML).

    ``p <- p + h g(theta) - h friction p + sqrt(2 friction h) z``, ``theta <- theta + h p``
    (the SGMGT kernel with Gaussian kinetics and no thermostat, ``B_hat = 0``).

    **Default step size**: ``h = min(0.1, 0.2 friction / (1 + r))`` with ``r = N / B - 1``.
    The gradient noise adds about ``h r / (2 friction)`` to the momentum's temperature
    (SGHMC does not correct it); the rule keeps it near 10%.

    Parameters
    ----------{_COMMON_PARAMETERS}    friction : float, default 1.0
        ``C = sigma_p``, friction and injected-noise coefficient.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=5_000)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    ...     step = pmm.SGHMC(batch_size=100, friction=1.0)
    >>> idata = pm.sample(step=step, draws=5000, tune=1000, chains=2,
    ...                   model=model)  # doctest: +SKIP
    """

    name = "sghmc"

    def __init__(self, vars=None, *, batch_size, friction=1.0, **kwargs):
        friction = _positive_float("friction", friction)
        config = SGMGTConfig(make_kinetics(0.5, np.inf), 0.0, friction, 0.0, 0.0)
        super().__init__(vars, batch_size=batch_size, config=config, **kwargs)

    def default_step_size(self, noise_ratio):
        return min(0.1, 0.2 * self.config.sigma_p / (1.0 + noise_ratio))


class SGNHT(SGMCMC):
    __doc__ = f"""Stochastic gradient Nosé–Hoover thermostat (Ding et al. 2014, NeurIPS).

    ``p <- p + h g(theta) - h (A + xi) p + sqrt(2 A h) z``, ``theta <- theta + h p``,
    ``xi <- xi + h (p^2 - 1)``, with one thermostat per coordinate (the SGMGT kernel with
    Gaussian kinetics, ``sigma_theta = sigma_xi = 0``, ``gamma = 1``; the friction
    ``A + xi`` is Ding et al.'s thermostat). The thermostat absorbs the unknown gradient
    noise by holding ``E[p^2] = 1``.

    **Default step size**: ``h = min(0.05, 0.5 / (1 + r))`` with ``r = N / B - 1``. The
    thermostat settles near ``A + h r / 2`` and removes most of the gradient noise's
    heat, but not all of it at large ``h r``: on a unit Gaussian with ``r = 49`` the
    stationary variance of SGNHT, SGMGT (a = 1, 2) and SGMGT-D stays within 10% of 1 at
    ``h = 0.5 / (1 + r)`` and is off by 20–50% at ``h = 0.1``
    (``tests/kernels/test_sgmgt.py``).

    Parameters
    ----------{_COMMON_PARAMETERS}    diffusion : float, default 1.0
        ``A = sigma_p``, the injected noise (and the thermostat's starting friction).

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=5_000)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    ...     step = pmm.SGNHT(batch_size=100)
    >>> idata = pm.sample(step=step, draws=5000, tune=1000, chains=2,
    ...                   model=model)  # doctest: +SKIP
    """

    name = "sgnht"

    def __init__(self, vars=None, *, batch_size, diffusion=1.0, **kwargs):
        diffusion = _positive_float("diffusion", diffusion)
        config = SGMGTConfig(make_kinetics(0.5, np.inf), 0.0, diffusion, 0.0, 1.0)
        super().__init__(vars, batch_size=batch_size, config=config, **kwargs)

    def default_step_size(self, noise_ratio):
        return thermostat_step_size(noise_ratio)


def thermostat_step_size(noise_ratio):
    """``min(0.05, 0.5 / (1 + r))``: the default for the thermostat samplers."""
    return min(0.05, 0.5 / (1.0 + noise_ratio))


class SGMGT(SGMCMC):
    __doc__ = f"""Stochastic gradient monomial-gamma thermostat (Zhang et al. 2017, ICML).

    SGNHT with the softened monomial-gamma kinetics ``K_c`` (``|p|^(1/a)`` away from 0):
    heavier-tailed momentum, which crosses energy barriers between modes more often, plus
    exact stochastic resampling of ``p`` from ``exp(-K_c)`` every
    ``momentum_resample_every`` updates and of ``xi`` from ``N(0, 1)`` every
    ``thermostat_resample_every`` updates (eq. 15 of the paper, kernel in
    :mod:`pymc_minibatch.kernels.sgmgt`). With ``sigma_theta > 0`` and ``sigma_xi > 0``
    it is SGMGT-D (see :class:`SGMGTD`).

    **Default step size**: as :class:`SGNHT`, ``h = min(0.05, 0.5 / (1 + r))``.

    **Choosing a**: ``a = 2`` crosses energy barriers more often (its momentum's kinetic
    energy after a resampling is Gamma(2, 1)-distributed, against Gamma(1/2, 1) for
    Gaussian kinetics), but its velocity ``K_c'(p)`` is small in the bulk: on a unit
    Gaussian with gradient noise ``r = 49`` at ``h = 0.01`` it gives about 0.4 effective
    draws per 1000 updates, against 2.5 for ``a = 1``. Prefer ``a = 1`` unless the
    posterior is multimodal.

    Parameters
    ----------{_COMMON_PARAMETERS}    a : {{0.5, 1, 2}}, default 1
        Monomial parameter (0.5: Gaussian kinetics, i.e. SGNHT with resampling).
    c : float, default 10.0
        Softening of the kinetics; momentum draws accept with probability at least
        ``exp(-2/c)``.
    sigma_p : float, default 1.0
        Momentum diffusion (and constant friction).
    gamma : float, default 1.0
        Thermostat coupling.
    sigma_theta, sigma_xi : float, default 0.0
        First-order (Langevin) diffusion on ``theta`` and ``xi``.
    momentum_resample_every, thermostat_resample_every : int, None or "auto"
        Resampling periods ``T_p``, ``T_xi`` in updates (None: never). ``"auto"`` (the
        default) is ``round(10 / h)`` for the initial step ``h``: the paper's 100 updates
        at ``h = 0.1``, kept as 10 units of the SDE's time. A fixed count resamples far
        more often in time at small steps, which turns the dynamics into a random walk:
        on a unit Gaussian with gradient noise ``r = 49`` and ``h = 0.01``, SGMGT (a = 1)
        gives 0.85 effective draws per 1000 updates with ``T = 100`` against 2.5 with
        ``T = 1000``.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=5_000)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    ...     step = pmm.SGMGT(batch_size=100, a=2)
    >>> idata = pm.sample(step=step, draws=5000, tune=1000, chains=2,
    ...                   model=model)  # doctest: +SKIP
    """

    name = "sgmgt"

    def __init__(
        self,
        vars=None,
        *,
        batch_size,
        a=1,
        c=10.0,
        sigma_p=1.0,
        gamma=1.0,
        sigma_theta=0.0,
        sigma_xi=0.0,
        momentum_resample_every="auto",
        thermostat_resample_every="auto",
        **kwargs,
    ):
        config = SGMGTConfig(
            make_kinetics(a, c), float(sigma_theta), float(sigma_p), float(sigma_xi), float(gamma)
        )
        super().__init__(
            vars,
            batch_size=batch_size,
            config=config,
            momentum_resample_every=momentum_resample_every,
            thermostat_resample_every=thermostat_resample_every,
            **kwargs,
        )

    def default_step_size(self, noise_ratio):
        return thermostat_step_size(noise_ratio)


class SGMGTD(SGMGT):
    __doc__ = f"""SGMGT-D: :class:`SGMGT` with Langevin diffusion on ``theta`` and ``xi``.

    The ``d theta`` and ``d xi`` equations of eq. (15) gain ``sigma_theta g dt +
    sqrt(2 sigma_theta) dW`` and ``-sigma_xi xi dt + sqrt(2 sigma_xi) dW``, which keep
    ``theta`` moving when the monomial-gamma velocity is small and make the SDE elliptic
    (Zhang et al. 2017). Same arguments as :class:`SGMGT`, with defaults
    ``sigma_theta = 0.01`` and ``sigma_xi = 0.1`` (in preconditioned units; the paper tunes
    them by validation).

    Parameters
    ----------{_COMMON_PARAMETERS}    a, c, sigma_p, gamma
        As for :class:`SGMGT`.
    momentum_resample_every, thermostat_resample_every
        As for :class:`SGMGT`.
    sigma_theta : float, default 0.01
    sigma_xi : float, default 0.1

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=5_000)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    ...     step = pmm.SGMGTD(batch_size=100, a=1)
    >>> idata = pm.sample(step=step, draws=5000, tune=1000, chains=2,
    ...                   model=model)  # doctest: +SKIP
    """

    name = "sgmgtd"

    def __init__(self, vars=None, *, batch_size, sigma_theta=0.01, sigma_xi=0.1, **kwargs):
        if not (sigma_theta > 0 and sigma_xi > 0):
            raise ValueError(
                "SGMGTD needs sigma_theta > 0 and sigma_xi > 0 (use SGMGT for zero values)"
            )
        super().__init__(
            vars, batch_size=batch_size, sigma_theta=sigma_theta, sigma_xi=sigma_xi, **kwargs
        )
