"""MINT-MCMC and its cyclic variant CMINT as PyMC step methods."""

import numpy as np
from pymc.blocking import RaveledVars
from pymc.step_methods.state import dataclass_state

from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.arguments import positive_int
from pymc_minibatch.draw_memory import check_chain_fits, default_per_draw
from pymc_minibatch.kernels import mint as mint_kernel
from pymc_minibatch.kernels.mint import (
    CyclicSchedule,
    MintConfig,
    MintTarget,
    cyclic_draw,
    cyclic_step_sizes,
    tempering_settings,
)
from pymc_minibatch.kernels.preconditioning import scaled
from pymc_minibatch.step_methods.base import MetropolisStep, MetropolisStepState

PROPOSALS = ("rw", "sgld")

BIG_MODEL_LANGEVIN_STEP = 0.01
"""The Langevin proposal's time step ``h`` on models given the diagonal fit, in its whitened
units (posterior sds), not tuned: the paper's regime on its network, small steps accepted
nearly always. On the digits network of ``benchmarks/networks_digits.py`` CMINT's snapshots
then predict as well as the Adam center."""


def big_model_fit(laplace) -> bool:
    """Whether ``laplace`` is the diagonal fit of a model too big for the exact one."""
    return laplace is not None and not laplace.exact


def _draw_info(infos):
    """One draw's decision from its steps': the mean acceptance probability, whether any
    step moved, whether any proposal was not finite."""
    return mint_kernel.Info(
        float(np.mean([info.accept for info in infos])),
        any(info.accepted for info in infos),
        any(info.nonfinite for info in infos),
    )


def _former_step_size(step_size, kwargs):
    """``step_size`` was the Langevin step ``h = s^2`` with ``proposal="sgld"``."""
    if kwargs.get("proposal") == "sgld" and np.isfinite(step_size) and step_size > 0:
        return float(np.sqrt(step_size))
    return step_size


class MINT(MetropolisStep):
    """Mini-batch tempered MCMC: MH on a minibatch estimate, targeting a tempered posterior.

    Each step draws a fresh batch of ``batch_size`` rows without replacement for the
    proposal and compares its mean log-likelihood with the one stored for the current
    point (never recomputed: the augmented-space chain of Li & Wong 2017, "Mini-batch
    Tempered MCMC", arXiv:1707.09705; kernel in :mod:`pymc_minibatch.kernels.mint`).

    **What it samples.** With ``n`` rows, ``m = batch_size``, ``tau = log m / (2 log n)``
    and ``lambda = alpha tau``, the chain's invariant distribution is (exactly, as a
    pseudo-marginal chain) ``f*(theta) ∝ p(theta)^(1/T) E_S[exp(n^lambda mu_S(theta))]``,
    which is close to the posterior raised to ``1/T`` with temperature ``T = n^(1-lambda)``:

        f*(theta) ≈ p(theta)^(1/T) p(y | theta)^(1/T) exp(eps^2 s^2(theta) (1 - m/n) / 2),

    ``eps = n^(lambda - tau)``, ``s^2(theta)`` the variance of the rows' log-likelihoods.
    The last factor widens ``f*`` slightly: for a Normal mean with ``n = 10^4``, ``m = 500``,
    ``alpha = 0.99`` (``T ≈ 461``, ``eps^2 ≈ 0.94``) its variance is about 4% above that of
    the tempered posterior. The draws keep every mode of the posterior and move between
    them far more easily, but their spread is about ``sqrt(T)`` times the posterior's:
    MINT is for exploring multimodal posteriors and building ensembles, not for
    calibrated posterior uncertainty.

    **Choosing batch_size and alpha.** The temperature falls as the batch grows: ``T =
    n^(1 - alpha tau)`` with ``m = n^(2 tau)``, so ``T = n / m^(alpha/2)``; ``alpha``
    close to 1 (0.99, as in the paper) gives the lowest temperature for a given batch while
    keeping ``eps`` (hence the widening) below 1. Choose the largest batch the budget allows
    (the cost per step is ``m`` rows), and read ``temperature`` before sampling.

    Parameters
    ----------
    vars : list of variables, optional
        Continuous free variables to sample (default: all continuous ones).
    batch_size : int
        Rows per minibatch ``m`` (drawn without replacement, a fresh batch every step).
    alpha : float, default 0.99
        ``lambda = alpha tau``, in (0, 1).
    proposal : {"rw", "sgld"}, optional
        Gaussian random walk ``theta + s L xi``, or a Langevin step
        ``theta + (s^2/2) L L^T g + s L xi`` on the minibatch gradient ``g`` of the tempered
        target (the Langevin time step is ``h = s^2``; its reverse density enters the ratio;
        the gradient at each point uses that point's batch). Default: ``"rw"``, except on
        models too big for the exact Laplace fit (networks), which get the diagonal fit and
        ``"sgld"``: the paper's own proposal for its network (Li & Wong 2017, Section 3.2.3).
    proposal_scale : float, optional
        The scale ``s`` of the proposal's noise. Default: ``2.38 / sqrt(ndim)`` with the
        Laplace proposal, else ``2.38 sqrt(T / (ndim n))``; tuned by dual averaging toward
        ``target_accept`` during tuning and frozen afterwards. With ``"sgld"`` on the
        diagonal fit: ``sqrt(BIG_MODEL_LANGEVIN_STEP)``, not tuned (see Notes). Formerly
        ``step_size``, which for ``"sgld"`` was ``h = s^2``; still accepted (converted) with
        a ``FutureWarning``.
    proposal_cov : "laplace", None or array, default "laplace"
        The proposal's square root ``L``. ``"laplace"``: from the posterior's Laplace fit,
        scaled by ``sqrt(T)`` for the random walk (the tempered posterior is about
        ``sqrt(T)`` times wider), with each chain starting from a draw of the (untempered)
        Laplace approximation (the center of the diagonal fit on big models); see
        :class:`~pymc_minibatch.step_methods.base.MetropolisStep`. ``None``: identity. An
        array (a covariance): random walk only.
    target_accept : float, default 0.3
    temper_prior : bool, default True
        Temper the prior by ``1/T`` as well (the whole posterior is raised to ``1/T``, in
        the space of the constrained values: transform Jacobians are not tempered). With
        False only the likelihood is tempered.
    steps_per_draw : int, optional
        MH steps per recorded draw: each draw is the state after that many steps, the same
        chain thinned (statistics: ``accept`` is the mean acceptance probability of the
        draw's steps, ``accepted`` and ``nonfinite`` whether any step was). Default: 1; one
        epoch (``ceil(n / batch_size)`` steps) on models too big for the exact Laplace fit,
        whose draws take a megabyte or more (the size is logged at construction, and under
        PyMC 6 a chain that cannot fit is refused when it starts; see
        :class:`~pymc_minibatch.DrawsExceedMemoryError`).
    model : pymc.Model, optional
    data : dict, optional
        Arrays to read the rows from instead of the model's data (``{name: array}``, by
        ``pm.Data`` or observed-variable name; N comes from the arrays): see
        :class:`~pymc_minibatch.MinibatchModel`.
    progressbar : bool, default True
        On data of at least a million rows, show each full-data pass of the construction
        (the Laplace fit, the bounds) in a progress bar; ``step.setup_report`` gives the
        passes and seconds of each stage either way.

    Notes
    -----
    **Big models.** On a network the tempered posterior is far wider than the posterior
    (``T = 147`` on 1,437 digits in batches of 100; ``T`` in the thousands on MNIST), and a
    proposal tuned toward an acceptance rate carries the chain there, away from every good
    mode: the random walk reached test accuracy 0.62 on digits (three seeds; 0.97 with the
    defaults). As in the paper's network
    experiment (a constant SGLD step, acceptance near 1), the Langevin proposal then keeps
    the small step ``h = BIG_MODEL_LANGEVIN_STEP`` in the fit's whitened units from the
    fit's center, and explores the modes around it rather than the tempered target
    (``benchmarks/networks_digits.py``).

    ``temperature``, ``tempering_exponent`` (``lambda``) and ``tau`` are properties of the
    step; ``temperature`` and ``batch_size`` are also sample statistics. ``pm.sample`` gives
    step methods no way to add attributes to its result: :meth:`annotate` writes these
    settings into the posterior's attrs. When another step of a ``CompoundStep`` changes
    variables this step does not sample, the stored estimate is recomputed on a fresh batch.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=10_000)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    ...     step = pmm.MINT(batch_size=500)
    ...     idata = pm.sample(step=step, draws=300, tune=300, chains=1,
    ...                       progressbar=False, random_seed=0)
    >>> round(step.temperature)
    461
    >>> idata = step.annotate(idata)
    >>> round(idata["posterior"].attrs["temperature"])
    461
    """

    name = "mint"
    stats_dtypes_shapes = {
        **MetropolisStep.stats_dtypes_shapes,
        "batch_size": (np.int64, []),
        "temperature": (np.float64, []),
    }

    @renamed_arguments(step_size=("proposal_scale", _former_step_size))
    def __init__(
        self,
        vars=None,
        *,
        batch_size,
        alpha=0.99,
        proposal=None,
        proposal_scale=None,
        proposal_cov="laplace",
        target_accept=0.3,
        temper_prior=True,
        steps_per_draw=None,
        **options,
    ):
        if proposal is not None and proposal not in PROPOSALS:
            raise ValueError(f"proposal must be one of {PROPOSALS}, got {proposal!r}")
        if proposal == "sgld" and not (proposal_cov is None or isinstance(proposal_cov, str)):
            raise ValueError(
                "a proposal_cov array applies to the random-walk proposal only; the Langevin "
                "proposal takes 'laplace' (preconditioned by the fit) or None"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
            raise TypeError(f"batch_size must be an integer, got {batch_size!r}")
        self.proposal = proposal
        self.batch_size = int(batch_size)
        self.temper_prior = bool(temper_prior)
        self._alpha = float(alpha)
        super().__init__(
            vars,
            proposal_scale=proposal_scale,
            proposal_cov=proposal_cov,
            target_accept=target_accept,
            **options,  # model, data, blocked, rng
        )
        mm = self.minibatch_model
        if proposal is None:  # the paper's proposal for networks where the fit is diagonal
            self.proposal = "sgld" if big_model_fit(self.laplace) else "rw"
        self.settings = tempering_settings(mm.n_data, self.batch_size, self._alpha)
        self.config = MintConfig(
            self.settings, mm.n_data, self.batch_size, self.proposal, self.temper_prior
        )
        if self.laplace is not None and self.proposal == "rw":
            # the tempered posterior is sqrt(T) times wider
            self.proposal_chol = scaled(self.proposal_chol, np.sqrt(self.temperature))
        if proposal_scale is None and self.laplace is None:
            # the tempered posterior is sqrt(T) times wider than the base default assumes
            self.initial_proposal_scale = 2.38 * np.sqrt(self.temperature / (mm.ndim * mm.n_data))
        # on the diagonal fit the Langevin proposal keeps a small step (see the class notes)
        self.tunes_proposal_scale = not (self.proposal == "sgld" and big_model_fit(self.laplace))
        if not self.tunes_proposal_scale and proposal_scale is None:
            self.initial_proposal_scale = np.sqrt(BIG_MODEL_LANGEVIN_STEP)
        self.steps_per_epoch = -(-mm.n_data // self.batch_size)
        # a draw per epoch keeps a network's chain in memory
        self.steps_per_draw = default_per_draw(type(self).__name__, mm, self.batch_size,
                                               steps_per_draw, "steps_per_draw")

    def __repr__(self):
        covariance = ", proposal_cov="
        if self.laplace is None:
            covariance += "given" if self.proposal_chol is not None else "None"
        else:
            covariance += "'laplace'" if self.laplace.exact else "'diagonal'"
        return (
            f"{type(self).__name__}(batch_size={self.batch_size}, "
            f"temperature={self.temperature:.4g}, proposal={self.proposal!r}{covariance})"
        )

    @property
    def temperature(self):
        """``T = n^(1 - lambda)``."""
        return self.settings.temperature

    @property
    def tempering_exponent(self):
        """``lambda = alpha tau``."""
        return self.settings.tempering_exponent

    @property
    def tau(self):
        """``tau = log(batch_size) / (2 log n)``."""
        return self.settings.tau

    def annotate(self, idata):
        """Write the tempering settings into the posterior's attrs; returns ``idata``."""
        idata["posterior"].attrs.update(
            {
                "minibatch_sampler": type(self).__name__,
                "temperature": self.temperature,
                "tempering_exponent": self.tempering_exponent,
                "tau": self.tau,
                "batch_size": self.batch_size,
                "alpha": self._alpha,
                "temper_prior": int(self.temper_prior),
            }
        )
        return idata

    def astep(self, q0: RaveledVars):
        q0 = self.chain_start(q0)
        state, infos = self._current_state(q0.data), []
        for _ in range(self.steps_per_draw):
            state, info = mint_kernel.step(self.rng, state, self._target(), self.config,
                                           self._step_scale(), self.proposal_chol)  # fmt: skip
            infos.append(info)
            if self.tunes_proposal_scale:
                self.adapt_proposal_scale(info.accept)
        self.remember(state.position, state)
        stats = {
            **self.metropolis_stats(_draw_info(infos)),
            "batch_size": self.batch_size,
            "temperature": self.temperature,
        }
        return RaveledVars(state.position, q0.point_map_info), [stats]

    def _step_scale(self):
        """The proposal scale of the next step."""
        return self.proposal_scale

    def check_chain_length(self, tune, draws):
        """Refuse a chain whose draws would not fit in memory (PyMC 6 gives the length)."""
        check_chain_fits(type(self).__name__, self.minibatch_model.ndim, tune + draws,
                         self.steps_per_draw, "steps_per_draw")  # fmt: skip

    def _current_state(self, theta):
        # the kept estimate, unless theta or the variables other steps sample changed: then
        # a fresh batch for the current point
        state = self.recall(theta)
        if state is None:
            state = mint_kernel.init(self.rng, theta.copy(), self._target(), self.config)
        return state

    def _target(self):
        # the random walk needs no gradients: the cheaper functions without them
        mm = self.minibatch_model
        if self.proposal == "rw":
            return MintTarget(
                lambda theta, idx: (mm.loglik(theta, idx), None),
                lambda theta: (mm.logprior(theta), None),
                mm.log_jacobian_and_grad,
            )
        return MintTarget(mm.loglik_and_grad, mm.logprior_and_grad, mm.log_jacobian_and_grad)


@dataclass_state
class CMINTState(MetropolisStepState):
    steps_taken: int
    schedule: CyclicSchedule | None


class CMINT(MINT):
    """Cyclic MINT: a cyclic proposal scale with snapshots, for ensembles (Li & Wong 2017).

    After tuning (the initial ``proposal_scale`` is tuned as in :class:`MINT`, unless
    ``tune=0``), the draws follow rounds of ``round_epochs`` epochs, an epoch being
    ``ceil(n / batch_size)`` steps: every ``decay_every`` epochs the proposal scale is
    multiplied by ``decay``; at the end of each round the current draw is marked as a
    snapshot (statistic ``snapshot``) and the proposal scale is multiplied by
    ``raise_factor``, which helps the chain leave the mode it settled in (the paper's step
    size schedule). After ``n_rounds`` rounds the proposal scale stays fixed and no more
    snapshots are taken (see
    :func:`pymc_minibatch.kernels.mint.cyclic_step_sizes`). Sample ``draws=step.schedule_draws``
    to run exactly the whole schedule; :func:`pymc_minibatch.cmint_ensemble` then returns the
    ``n_rounds`` snapshots of every chain, and :func:`pymc_minibatch.cmint_average` averages
    posterior-predictive output over them. With ``steps_per_draw`` (which must divide an
    epoch's steps) the schedule is the same, step by step, and each snapshot is still a
    draw.

    The defaults are the paper's MNIST setting (Section 3.2.3: decay 0.9 every 5 epochs, step
    doubled every 50 epochs, 10 rounds); scale ``round_epochs`` and ``decay_every`` down
    together for smaller budgets.

    Parameters
    ----------
    vars, batch_size, alpha, proposal, proposal_scale, proposal_cov, target_accept
        As for :class:`MINT`.
    temper_prior, steps_per_draw, model
        As for :class:`MINT`.
    n_rounds : int, default 10
        ``K``, the number of rounds (and of snapshots per chain).
    round_epochs : int, default 50
        ``R``, epochs per round.
    decay_every : int, default 5
        ``r``, epochs between decays.
    decay : float, default 0.9
        Factor in (0, 1) applied every ``decay_every`` epochs.
    raise_factor : float, default 2.0
        Factor > 1 applied after each snapshot.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(0).normal(1.0, 1.0, size=2_000)
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 10)
    ...     obs = pm.Normal("y", mu, 1.0, observed=y)
    ...     step = pmm.CMINT(batch_size=200, n_rounds=3, round_epochs=4, decay_every=1)
    ...     idata = pm.sample(step=step, draws=step.schedule_draws, tune=200, chains=1,
    ...                       progressbar=False, random_seed=0)
    >>> pmm.cmint_ensemble(idata)["mu"].shape
    (1, 3)
    """

    name = "cmint"
    stats_dtypes_shapes = {
        **MINT.stats_dtypes_shapes,
        "snapshot": (bool, []),
        "epoch": (np.int64, []),
    }
    _state_class = CMINTState

    def __init__(
        self,
        vars=None,
        *,
        batch_size,
        n_rounds=10,
        round_epochs=50,
        decay_every=5,
        decay=0.9,
        raise_factor=2.0,
        **kwargs,
    ):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"decay must lie in (0, 1), got {decay}")
        if not (np.isfinite(raise_factor) and raise_factor > 1.0):
            raise ValueError(f"raise_factor must be a finite number above 1, got {raise_factor}")
        self.n_rounds = positive_int("n_rounds", n_rounds)
        self.round_epochs = positive_int("round_epochs", round_epochs)
        self.decay_every = positive_int("decay_every", decay_every)
        self.decay, self.raise_factor = decay, raise_factor
        super().__init__(vars, batch_size=batch_size, **kwargs)
        if self.steps_per_epoch % self.steps_per_draw:
            raise ValueError(
                f"steps_per_draw must divide the {self.steps_per_epoch} steps of an epoch (so "
                f"that every snapshot is a draw), got {self.steps_per_draw}"
            )
        self.steps_taken = 0

    @property
    def schedule_draws(self):
        """Draws covering the whole schedule: ``n_rounds * round_epochs`` epochs."""
        return self.n_rounds * self.round_epochs * self.steps_per_epoch // self.steps_per_draw

    def reset_tuning(self):
        super().reset_tuning()
        self.steps_taken = 0
        self.schedule = None

    def stop_tuning(self):
        super().stop_tuning()
        self.schedule = self._cyclic_schedule(self.proposal_scale)

    def _cyclic_schedule(self, initial):
        """The kernel's schedule (scales and snapshot epochs), one epoch past its end."""
        return cyclic_step_sizes(
            initial,
            self.n_rounds * self.round_epochs + 1,
            decay=self.decay,
            decay_every=self.decay_every,
            raise_factor=self.raise_factor,
            round_epochs=self.round_epochs,
            n_rounds=self.n_rounds,
        )

    def astep(self, q0: RaveledVars):
        if self.tune:
            point, [stats] = super().astep(q0)
            return point, [{**stats, "snapshot": False, "epoch": 0}]
        if self.schedule is None:  # sampling without a tuning phase
            self.schedule = self._cyclic_schedule(self.proposal_scale)
        point, [stats] = super().astep(q0)
        # the draw's last step: a snapshot ends an epoch, and epochs end at draws
        last = cyclic_draw(self.schedule, self.steps_per_epoch, self.steps_taken - 1)
        return point, [{**stats, "snapshot": last.snapshot, "epoch": last.epoch}]

    def _step_scale(self):
        """The schedule's scale at the next step after tuning (the tuned one while tuning)."""
        if self.tune:
            return self.proposal_scale
        step = cyclic_draw(self.schedule, self.steps_per_epoch, self.steps_taken)
        self.proposal_scale = step.step_size
        self.steps_taken += 1
        return self.proposal_scale
