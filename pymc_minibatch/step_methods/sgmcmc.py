"""Stochastic-gradient MCMC step methods: SGLD, SGHMC, SGNHT, SGMGT and SGMGT-D.

All five run one chain kernel (:mod:`pymc_minibatch.kernels.sg_chain`, with the dynamics of
:mod:`pymc_minibatch.kernels.sgmgt`) with different hyperparameters; this module builds the
gradient estimate, the preconditioner and the default step size, maps ``theta`` to the
kernel's ``z`` and back, and copies the kernel's statistics into ``sample_stats``.
"""

import functools

import numpy as np
from pymc.blocking import RaveledVars
from pymc.stats.convergence import SamplerWarning
from pymc.step_methods.state import dataclass_state

from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.answer_check import CheckState, SteinCheck
from pymc_minibatch.arguments import positive_float, positive_int
from pymc_minibatch.exceptions import SamplerDivergenceError
from pymc_minibatch.kernels import sg_chain
from pymc_minibatch.kernels.batches import checked_batch_size
from pymc_minibatch.kernels.preconditioning import identity_preconditioner
from pymc_minibatch.kernels.schedules import as_schedule
from pymc_minibatch.kernels.sg_chain import SGSettings, gradient_noise
from pymc_minibatch.kernels.sgmgt import SGMGTConfig, SGState, validate_config
from pymc_minibatch.kernels.strata import stratify as stratify_rows
from pymc_minibatch.model.control_variates import use_control_variates
from pymc_minibatch.model.gradients import grad_estimator
from pymc_minibatch.step_methods.base import MinibatchStep, MinibatchStepState

NOISE_POINTS = 4
"""Draws of the Laplace approximation at which the default step size measures the noise of
the control-variate gradient."""
NOISE_SEED = 20261130
"""Seed of the points and batches of that measurement."""


@dataclass_state
class SGMCMCState(MinibatchStepState):
    chain: SGState | None
    check_state: CheckState | None


class SGMCMC(MinibatchStep):
    """Base class of the stochastic-gradient samplers (use the presets below).

    Every update draws the next ``batch_size`` rows of an epoch (a fresh random permutation
    of the rows each epoch; the ``N mod batch_size`` rows left over at the end of an epoch
    are skipped in that epoch) and estimates the gradient of the log posterior from them
    without bias.

    **Stratified batches** (``stratify="auto"``, the default, in hierarchical models: rows
    that touch one group's parameters each; see :meth:`MinibatchModel.structure`): every
    update takes each group of at most ``m`` rows whole and draws ``m`` rows with
    replacement from each larger group, weighted by ``n_g / m``, with ``m`` the largest
    count that keeps a batch within ``batch_size`` rows (Zhao & Zhang 2014, "Accelerating
    minibatch stochastic gradient descent using stratified sampling", arXiv:1405.3080;
    :mod:`pymc_minibatch.kernels.strata`). A uniform batch holds no row of most small
    groups, whose coordinates' gradient noise (about ``N / (B n_g)`` in preconditioned
    units) then sets the step size of every coordinate; stratified, it is about ``1 / m``.
    When ``batch_size`` is below the number of groups, or without a Laplace fit
    (``precondition=False`` and no control variates), batches are uniform.

    **Control variates** (``control_variates="auto"``, the default, is on unless every
    update uses all rows): the estimate is ``grad log p0(theta) + G + (N / B) sum_{i in
    batch} [grad l_i(theta) - grad l_i(theta_hat)]`` with ``theta_hat`` the posterior mode
    and ``G = sum_i grad l_i(theta_hat)`` computed once at construction (one pass over the
    data; Baker, Fearnhead, Fox & Nemeth 2019, "Control variates for stochastic gradient
    MCMC", Statistics and Computing). The per-row gradients at the mode are recomputed on
    each batch, in the same compiled call. Within the posterior its noise no longer grows
    with ``N / B``, so the step (and the mixing per update) stays fixed as ``N`` grows.
    ``False`` gives the plain estimate ``grad log p0(theta) + (N / B) sum_{i in batch}
    grad l_i(theta)``.

    **Preconditioning and start** (``precondition=True``, the default when ``step_size`` is
    not given): at construction the sampler fits the Laplace approximation
    ``N(theta_hat, L L^T)`` of the posterior on the full data (the mode by Newton steps
    with the exact full-data Hessian, whose inverse is ``L L^T``; block arrowhead when each
    row touches one group's parameters and the shared ones; see
    :meth:`MinibatchModel.laplace`). It then runs in ``z`` with ``theta = L z``,
    a linear change of variables (the target is unchanged; ``L`` plays the part of a mass
    matrix) in which the posterior's curvature is about the identity, and each chain starts
    from a draw of the Laplace approximation, in the bulk of the posterior, whatever PyMC's
    initial point (which is far out for tall data). Step sizes (and the ``step_size``
    statistic) are in units of ``z``.

    **Check of the answer**: after tuning, the chain's draws are checked with the model's
    score at them, the gradient estimate of the update that leaves each draw (Stein's
    identities: the score averages to zero over the posterior, and its product with
    ``theta_j`` to minus one), after 200 draws and then at every doubling: a coordinate
    whose mean is about a posterior sd or more from where the score puts it, an sd more
    than 3 times too wide or too narrow, or sds together outside 0.8-1.25 times the
    posterior's, each significant beyond the chain's Monte Carlo error (from batch means;
    while the batches are shorter than the chain's autocorrelation, the verdict waits for a
    later check), means the draws are not the posterior's. The chain reports it once in the
    ``"warning"`` statistic, which ``pm.sample`` logs (as it does NUTS's divergences; see
    :mod:`pymc_minibatch.answer_check`). Without a Laplace fit (``precondition=False`` and
    no control variates) or when its search found no mode, the check has no units and is
    skipped.

    **Default step size** (``step_size=None``): a constant ``h`` in units of ``z``, in
    which the posterior sd is about 1, set from ``r``, the variance per coordinate of ``z``
    of the gradient estimate's noise (the largest over coordinates); each preset's rule is
    in its docstring. With control variates ``r`` is measured at construction: 8 batches at
    each of 4 draws of the Laplace approximation (32 minibatch gradients). It is about 0 on
    tall data near a Gaussian posterior, so the rules give their largest steps. Without,
    ``r = N / B - 1``, the plain estimate's noise in whitened coordinates.

    **Several updates per draw** (``updates_per_draw=k``): each draw is the state after
    ``k`` updates, the same chain as ``k = 1`` thinned by ``k``, without the cost of
    ``pm.sample`` storing the draws in between.

    **Divergence**: a non-finite log density, gradient or state, or a chain more than
    ``1e4`` preconditioned posterior sds from the mode (or from its start without the
    Laplace fit), stops sampling with :class:`~pymc_minibatch.SamplerDivergenceError`
    naming the update, the variable that moved furthest and what to change.
    """

    name = "sgmcmc"
    stats_dtypes_shapes = {
        **MinibatchStep.stats_dtypes_shapes,
        "step_size": (np.float64, []),
        "log_density": (np.float64, []),
        "kinetic_energy": (np.float64, []),
        "thermostat_mean": (np.float64, []),
        "resampled": (bool, []),
        "resample_accept_rate": (np.float64, []),
        "grad_norm": (np.float64, []),
        "warning": (SamplerWarning, None),
    }
    _state_class = SGMCMCState

    @renamed_arguments(thin="updates_per_draw")
    def __init__(
        self,
        vars=None,
        *,
        batch_size,
        config,
        step_size=None,
        updates_per_draw=1,
        precondition=None,
        control_variates="auto",
        stratify="auto",
        momentum_resample_every=None,
        thermostat_resample_every=None,
        model=None,
        data=None,
        blocked=True,
        rng=None,
        progressbar=True,
    ):
        super().__init__(vars, model=model, data=data, blocked=blocked, rng=rng,
                         progressbar=progressbar)  # fmt: skip
        mm = self.minibatch_model
        self.batch_size = checked_batch_size(batch_size, mm.n_data)
        self.updates_per_draw = positive_int("updates_per_draw", updates_per_draw)
        if not (isinstance(stratify, bool) or (isinstance(stratify, str) and stratify == "auto")):
            raise ValueError(f"stratify must be 'auto', True or False, got {stratify!r}")
        validate_config(config)
        self.config = config
        given_schedule = None if step_size is None else as_schedule(step_size)
        self.precondition = step_size is None if precondition is None else bool(precondition)
        self.control_variates = use_control_variates(control_variates, self.batch_size, mm.n_data)
        need_laplace = self.precondition or self.control_variates
        self.laplace = mm.laplace() if need_laplace else None
        self.answer_check = self._answer_check()
        self.preconditioner = (
            self.laplace.preconditioner if self.precondition else identity_preconditioner(mm.ndim)
        )
        self.estimate = grad_estimator(mm, self.laplace.mode if self.control_variates else None)
        self.strata = self._strata(stratify)
        """The stratified batches' layout (:class:`~pymc_minibatch.kernels.strata.Strata`),
        or None for uniform batches."""
        if self.strata is not None:  # the layout's weights, fixed: the chain passes rows only
            self.estimate = functools.partial(self.estimate, weights=self.strata.weights)
        self.noise_ratio = self._noise_ratio() if given_schedule is None else None
        """``r`` of the default step-size rule (``None`` when ``step_size`` is given)."""
        self.schedule = (
            as_schedule(self.default_step_size(self.noise_ratio))
            if given_schedule is None
            else given_schedule
        )
        initial_step = float(self.schedule(0))
        self.settings = SGSettings(
            config,
            self.schedule,
            mm.n_data,
            self.batch_size,
            _resample_period("momentum_resample_every", momentum_resample_every, initial_step),
            _resample_period("thermostat_resample_every", thermostat_resample_every, initial_step),
            self.strata,
        )

    @property
    def momentum_resample_every(self):
        return self.settings.momentum_resample_every

    @property
    def thermostat_resample_every(self):
        return self.settings.thermostat_resample_every

    def default_step_size(self, noise_ratio):
        """The default ``h`` given the noise ratio ``r`` (see the preset's docstring)."""
        raise NotImplementedError

    def _strata(self, stratify):
        # "auto" reuses the structure the Laplace fit found; without a fit, finding it
        # would cost a pass over the data the settings asked to avoid
        if stratify is False or (stratify == "auto" and self.laplace is None):
            return None
        structure = self.minibatch_model.structure()
        strata = None
        if structure.n_groups:
            strata = stratify_rows(structure.row_groups, self.batch_size)
        if strata is None and stratify is True:
            raise ValueError(
                "stratify=True needs a hierarchical model (rows that touch the parameters "
                "of one group each) and a batch_size of at least one row per non-empty "
                f"group; this model has {structure.n_groups} groups"
            )
        return strata

    def _noise_ratio(self):
        plain = self.minibatch_model.n_data / self.batch_size - 1.0
        if not self.control_variates:
            return plain
        # a fixed seed: the step size, hence the chain under pm.sample's random_seed, must
        # not depend on the unseeded generator the step holds at construction
        rng = np.random.default_rng(NOISE_SEED)
        points = self.laplace.draw(rng, size=NOISE_POINTS)
        measured = gradient_noise(
            rng, self.estimate, self.preconditioner, points,
            self.minibatch_model.n_data, self.batch_size, self.strata,
        )  # fmt: skip
        return measured if np.isfinite(measured) else plain

    def reset_tuning(self):
        self.chain = None
        self.check_state = None if self.answer_check is None else self.answer_check.start()

    def __repr__(self):
        return (
            f"{type(self).__name__}(batch_size={self.batch_size}, "
            f"control_variates={self.control_variates}, precondition={self.precondition}, "
            f"updates_per_draw={self.updates_per_draw})"
        )

    def astep(self, q0: RaveledVars):
        theta = q0.data
        if self.chain is None:
            self.chain = sg_chain.init(
                self.rng, self._chain_start(theta), self._anchor(theta),
                self.preconditioner, self.config,
            )  # fmt: skip
        elif not np.array_equal(theta, self.preconditioner.to_theta(self.chain.position)):
            # PyMC's point is authoritative: another step of a CompoundStep moved it (only
            # then: a round trip through theta would perturb z by rounding)
            self.chain = self.chain._replace(position=self.preconditioner.to_z(theta))
        checking = not self.tune and self.check_state is not None
        if checking:  # the draw the updates start from, scored by their first gradient
            previous = self.preconditioner.to_theta(self.chain.position)
        self.chain, info = sg_chain.step(
            self.rng, self.chain, self.estimate, self.settings, self.updates_per_draw
        )
        if info.divergence is not None:
            raise SamplerDivergenceError(self._divergence_message(info))
        position = self.preconditioner.to_theta(self.chain.position)
        warning = None
        if checking:
            self.check_state, warning = self.answer_check.observe(
                self.check_state, previous, info.start_gradient
            )
        stats = {
            "tune": self.tune,
            "step_size": info.step_size,
            "log_density": info.log_density,
            "kinetic_energy": info.kinetic_energy,
            "thermostat_mean": info.thermostat_mean,
            "resampled": info.resampled,
            "resample_accept_rate": info.resample_accept_rate,
            "grad_norm": info.grad_norm,  # in the user's parametrisation, not in z
            "warning": warning,
        }
        return RaveledVars(position, q0.point_map_info), [stats]

    def _answer_check(self):
        """The chain's check against the Laplace fit (none without one)."""
        if self.laplace is None or not self.laplace.is_mode:
            return None
        advice = "Pass a smaller step_size or a larger batch_size"
        if not self.precondition:
            advice += ", or leave step_size unset to precondition"
        return SteinCheck(
            self.laplace, self.minibatch_model.coordinate_names(), type(self).__name__,
            advice + "; or sample exactly with pmm.TunaMH.",
        )  # fmt: skip

    def _chain_start(self, theta):
        """A draw of the Laplace approximation when preconditioning (its mode if the draw
        falls outside the prior's support), else PyMC's point."""
        if not self.precondition:
            return theta.copy()
        start = self.laplace.draw(self.rng)
        if not np.isfinite(self.minibatch_model.logprior(start)):
            start = self.laplace.mode
        return start

    def _anchor(self, start):
        return start.copy() if self.laplace is None else self.laplace.mode

    def _divergence_message(self, info):
        divergence = info.divergence
        phase = "tuning" if self.tune else "sampling"
        what = "it ran away" if divergence.reason == "ran away" else divergence.reason
        move = ""
        if divergence.coordinate is not None:
            name = self.minibatch_model.coordinate_names()[divergence.coordinate]
            units = "preconditioned posterior sds" if self.precondition else "transformed units"
            origin = "the chain's start" if self.laplace is None else "the mode"
            move = f", after '{name}' moved {divergence.distance:.3g} {units} from {origin}"
        step_size = info.step_size
        advice = f"Pass a smaller step_size (e.g. {step_size / 10:g}) or a larger batch_size"
        if not self.precondition:
            advice += ", or leave step_size unset to precondition"
        return (
            f"{type(self).__name__} diverged at update {info.updates} of this chain ({phase}): "
            f"{what} with step size {step_size:g}{move}. {advice}."
        )


RESAMPLE_TIME = 10.0
"""Default resampling period in units of the SDE's time: the paper's 100 updates at h = 0.1."""


def _resample_period(name, value, initial_step):
    """Updates between resamplings: None (never), a positive int, or "auto"."""
    if value is None:
        return None
    if isinstance(value, str) and value == "auto":
        return max(1, round(RESAMPLE_TIME / initial_step))
    return positive_int(name, value)


_COMMON_PARAMETERS = """
    vars : list of variables, optional
        Continuous free variables to sample (default: all continuous ones).
    batch_size : int
        Rows per gradient estimate (at most, with stratified batches).
    stratify : {"auto", True, False}, default "auto"
        Stratified batches, as described in :class:`SGMCMC`: ``"auto"`` in hierarchical
        models when ``batch_size`` holds a row of each group and the Laplace fit is made;
        ``True`` refuses a model or ``batch_size`` where they do not apply.
    step_size : float or schedule, optional
        ``h``, a positive number or a schedule from :mod:`pymc_minibatch.schedules`
        (``constant``, ``polynomial_decay``, ``cyclical``) evaluated at the update count
        ``t = 0, 1, ...`` of the chain (tuning included). Default: the rule above.
    updates_per_draw : int, default 1
        Updates per recorded draw (each costs one gradient estimate); statistics describe
        the last update, ``resampled`` any of them. Formerly ``thin``, still accepted with a
        ``FutureWarning``.
    precondition : bool, optional
        Run in the preconditioned coordinates of the Laplace approximation, starting each
        chain from a draw of it, as described in :class:`SGMCMC`. Default: True when
        ``step_size`` is not given, False otherwise (then ``h`` is in the units of the
        model's (transformed) parameters, as in the papers, and chains start at PyMC's
        initial point).
    model : pymc.Model, optional
    data : dict, optional
        Arrays to read the rows from instead of the model's data (``{name: array}``, by
        ``pm.Data`` or observed-variable name; N comes from the arrays): see
        :class:`~pymc_minibatch.MinibatchModel`.
    progressbar : bool, default True
        On data of at least a million rows, show each full-data pass of the construction
        (the Laplace fit, the bounds) in a progress bar; ``step.setup_report`` gives the
        passes and seconds of each stage either way.
"""


class SGLD(SGMCMC):
    __doc__ = f"""Stochastic gradient Langevin dynamics (Welling & Teh 2011, ICML).

    ``theta <- theta + (h / 2) g(theta) + sqrt(h) z`` with the minibatch gradient ``g``
    (no momentum; the first-order special case of the SGMGT kernel with
    ``sigma_theta = 1/2``).

    **Default step size**: ``h = 0.2 / (1 + r)`` with ``r`` the gradient noise (see
    :class:`SGMCMC`). On a Gaussian posterior with unit scale the Euler step inflates the
    stationary variance by about ``h / 4`` and the gradient noise by about ``h r / 4``;
    the rule keeps their sum near 5% (2.5% in sd). A chain then needs about ``4 / h``
    updates per independent draw (its autocorrelation is ``1 - h / 2`` per update): about
    20 with control variates on tall data, where ``h`` is near 0.2, growing with ``N / B``
    without them. Plan ``draws`` (or ``updates_per_draw``) accordingly.

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
        super().__init__(vars, batch_size=batch_size, config=SGMGTConfig.sgld(), **kwargs)

    def default_step_size(self, noise_ratio):
        return 0.2 / (1.0 + noise_ratio)


class SGHMC(SGMCMC):
    __doc__ = f"""Stochastic gradient Hamiltonian Monte Carlo (Chen, Fox & Guestrin 2014, ICML).

    ``p <- p + h g(theta) - h sigma_p p + sqrt(2 sigma_p h) z``, ``theta <- theta + h p``
    (the SGMGT kernel with Gaussian kinetics and no thermostat, ``B_hat = 0``; Chen et
    al.'s friction ``C`` is ``sigma_p``).

    **Default step size**: ``h = min(0.2, 0.2 sigma_p / (1 + r))`` with ``r`` the
    gradient noise (see :class:`SGMCMC`). The gradient noise adds about
    ``h r / (2 sigma_p)`` to the momentum's temperature (SGHMC does not correct it); the
    rule keeps it near 10%. Without noise the semi-implicit Euler step biases little: on a
    unit Gaussian the stationary sd is within 3% of 1 at ``h = 0.2``
    (``tests/kernels/test_sg_chain.py``).

    Parameters
    ----------{_COMMON_PARAMETERS}    sigma_p : float, default 1.0
        Momentum diffusion: the friction and injected-noise coefficient (Chen et al.'s
        ``C``). Formerly ``friction``, still accepted with a ``FutureWarning``.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=5_000)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    ...     step = pmm.SGHMC(batch_size=100, sigma_p=1.0)
    >>> idata = pm.sample(step=step, draws=5000, tune=1000, chains=2,
    ...                   model=model)  # doctest: +SKIP
    """

    name = "sghmc"

    @renamed_arguments(friction="sigma_p")
    def __init__(self, vars=None, *, batch_size, sigma_p=1.0, **kwargs):
        sigma_p = positive_float("sigma_p", sigma_p)
        config = SGMGTConfig.sghmc(sigma_p)
        super().__init__(vars, batch_size=batch_size, config=config, **kwargs)

    def default_step_size(self, noise_ratio):
        return min(0.2, 0.2 * self.config.sigma_p / (1.0 + noise_ratio))


class SGNHT(SGMCMC):
    __doc__ = f"""Stochastic gradient Nosé–Hoover thermostat (Ding et al. 2014, NeurIPS).

    ``p <- p + h g(theta) - h (sigma_p + xi) p + sqrt(2 sigma_p h) z``,
    ``theta <- theta + h p``, ``xi <- xi + h (p^2 - 1)``, with one thermostat per
    coordinate (the SGMGT kernel with Gaussian kinetics, ``sigma_theta = sigma_xi = 0``,
    ``gamma = 1``; the friction ``sigma_p + xi`` is Ding et al.'s thermostat, their ``A``
    is ``sigma_p``). The thermostat absorbs the unknown gradient
    noise by holding ``E[p^2] = 1``.

    **Default step size**: ``h = min(0.1, 0.5 / (1 + r))`` with ``r`` the gradient noise
    (see :class:`SGMCMC`). The thermostat settles near ``sigma_p + h r / 2`` and removes most
    of the gradient noise's heat, but not all of it at large ``h r``: on a unit Gaussian
    with ``r = 49`` the stationary variance of SGNHT, SGMGT (a = 1, 2) and SGMGT-D stays
    within 10% of 1 at ``h = 0.5 / (1 + r)`` and is off by 20–50% at ``h = 0.1``
    (``tests/kernels/test_sgmgt.py``). Without noise (control variates on tall data) the
    sd of SGNHT and SGMGT (a = 1) is within 5% of 1 at ``h = 0.1``
    (``tests/kernels/test_sg_chain.py``).

    Parameters
    ----------{_COMMON_PARAMETERS}    sigma_p : float, default 1.0
        Momentum diffusion: the injected noise (and the thermostat's starting friction;
        Ding et al.'s ``A``). Formerly ``diffusion``, still accepted with a ``FutureWarning``.

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

    @renamed_arguments(diffusion="sigma_p")
    def __init__(self, vars=None, *, batch_size, sigma_p=1.0, **kwargs):
        sigma_p = positive_float("sigma_p", sigma_p)
        config = SGMGTConfig.sgnht(sigma_p)
        super().__init__(vars, batch_size=batch_size, config=config, **kwargs)

    def default_step_size(self, noise_ratio):
        return thermostat_step_size(noise_ratio)


def thermostat_step_size(noise_ratio):
    """``min(0.1, 0.5 / (1 + r))``: the default for the thermostat samplers."""
    return min(0.1, 0.5 / (1.0 + noise_ratio))


class SGMGT(SGMCMC):
    __doc__ = f"""Stochastic gradient monomial-gamma thermostat (Zhang et al. 2017, ICML).

    SGNHT with the softened monomial-gamma kinetics ``K_c`` (``|p|^(1/a)`` away from 0):
    heavier-tailed momentum, which crosses energy barriers between modes more often, plus
    exact stochastic resampling of ``p`` from ``exp(-K_c)`` every
    ``momentum_resample_every`` updates and of ``xi`` from ``N(0, 1)`` every
    ``thermostat_resample_every`` updates (eq. 15 of the paper, kernel in
    :mod:`pymc_minibatch.kernels.sgmgt`). With ``sigma_theta > 0`` and ``sigma_xi > 0``
    it is SGMGT-D (see :class:`SGMGTD`).

    **Default step size**: as :class:`SGNHT`, ``h = min(0.1, 0.5 / (1 + r))``.

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
        config = SGMGTConfig.sgmgt(
            a, c, sigma_p=sigma_p, gamma=gamma, sigma_theta=sigma_theta, sigma_xi=sigma_xi
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
