"""Stochastic-gradient MCMC step methods: SGLD, SGHMC, SGNHT, SGMGT and SGMGT-D.

Each is a preset of the coefficients of one dynamics (Zhang et al. 2017, eq. 15;
:meth:`~pymc_minibatch.kernels.sgmgt.SGMGTConfig.sgld` and its siblings) run by
:class:`~pymc_minibatch.step_methods.sg_base.SGMCMC`.
"""

from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.arguments import positive_float
from pymc_minibatch.kernels.sgmgt import SGMGTConfig
from pymc_minibatch.step_methods.sg_base import SGMCMC

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
    updates_per_draw : int, optional
        Updates per recorded draw (each costs one gradient estimate); statistics describe
        the last update, ``resampled`` any of them. Default: 1; one epoch
        (``ceil(N / batch_size)`` updates) on models too big for the exact Laplace fit,
        whose draws take a megabyte or more (see :class:`SGMCMC`). Formerly ``thin``, still
        accepted with a ``FutureWarning``.
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
        self.a = a
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

    def repr_arguments(self):
        batch_size, *rest = super().repr_arguments()
        return [batch_size, f"a={self.a}", *rest]  # the kinetics, the preset's main choice


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
