"""The stochastic-gradient MCMC step method that the presets of
:mod:`pymc_minibatch.step_methods.sgmcmc` (SGLD, SGHMC, SGNHT, SGMGT and SGMGT-D) configure.

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
from pymc_minibatch.arguments import positive_int
from pymc_minibatch.draw_memory import check_chain_fits, default_per_draw
from pymc_minibatch.exceptions import SamplerDivergenceError
from pymc_minibatch.kernels import sg_chain
from pymc_minibatch.kernels.batches import checked_batch_size
from pymc_minibatch.kernels.noise import COMPILED_MIN_SIZE
from pymc_minibatch.kernels.preconditioning import identity_preconditioner
from pymc_minibatch.kernels.schedules import as_schedule
from pymc_minibatch.kernels.sg_chain import SGSettings, gradient_noise
from pymc_minibatch.kernels.sgmgt import SGState, validate_config
from pymc_minibatch.model.batch_layout import checked_stratify, chosen_strata
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

    **Big models** (more than :data:`~pymc_minibatch.model.curvature.MAX_SHARED`
    coordinates touched by every row, as a network's weights): the exact fit is out of
    reach, and :meth:`MinibatchModel.laplace` gives the diagonal fit of
    :mod:`pymc_minibatch.model.diagonal_fit` (a center by Adam, a diagonal precision scaled
    by the whitened curvature's largest eigenvalue). The sampler preconditions by it
    (``precondition='diagonal'`` in ``repr(step)``), starts each chain at its center,
    ``control_variates="auto"`` is off (see
    :func:`~pymc_minibatch.model.control_variates.use_control_variates`), the noise ``r`` of
    the default step size is measured at points near the center (its coordinates are
    scaled by the stiffness, where the plain estimate's noise is not ``N / B - 1``), and the
    answer check is skipped.

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
    ``pm.sample`` storing the draws in between. Default: 1, except on models too big for
    the exact Laplace fit (networks), where a draw is a megabyte or more: one draw per
    epoch (``ceil(N / batch_size)`` updates). There the size of a draw is logged at
    construction (level INFO, logger ``pymc_minibatch``), and under PyMC 6 a chain whose
    draws would not fit in the memory available is refused when it starts, with the
    arithmetic (:class:`~pymc_minibatch.DrawsExceedMemoryError`).

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
        updates_per_draw=None,
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
        # a draw per epoch keeps a network's chain in memory
        self.updates_per_draw = default_per_draw(type(self).__name__, mm, self.batch_size,
                                                 updates_per_draw, "updates_per_draw")
        checked_stratify(stratify)
        validate_config(config)
        self.config = config
        given_schedule = None if step_size is None else as_schedule(step_size)
        self.precondition = step_size is None if precondition is None else bool(precondition)
        self.control_variates = use_control_variates(
            control_variates, self.batch_size, mm.n_data, mm.laplace_is_exact
        )
        need_laplace = self.precondition or self.control_variates
        self.laplace = mm.laplace() if need_laplace else None
        self.answer_check = self._answer_check()
        self.preconditioner = (
            self.laplace.preconditioner if self.precondition else identity_preconditioner(mm.ndim)
        )
        self.estimate = grad_estimator(mm, self.laplace.mode if self.control_variates else None)
        # on big models the log density's prior part costs a pass over every parameter:
        # only a draw's last update, whose log density is recorded, computes it
        big = mm.ndim >= COMPILED_MIN_SIZE
        self.gradient_estimate = self.estimate.gradient if big else None
        """The estimate's gradient alone for the updates of a draw but its last (``None``:
        every update takes the log density too, one compiled function fewer)."""
        self.strata = chosen_strata(stratify, mm, self.batch_size, self.laplace is not None)
        """The stratified batches' layout (:class:`~pymc_minibatch.kernels.strata.Strata`),
        or None for uniform batches."""
        if self.strata is not None:  # the layout's weights, fixed: the chain passes rows only
            weights = self.strata.weights
            self.estimate = functools.partial(self.estimate, weights=weights)
            if big:
                self.gradient_estimate = functools.partial(self.gradient_estimate,
                                                           weights=weights)  # fmt: skip
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

    def _noise_ratio(self):
        plain = self.minibatch_model.n_data / self.batch_size - 1.0
        # the plain estimate's noise is N / B - 1 in the coordinates of the exact fit only:
        # the diagonal fit's are scaled by its stiffness, and are measured
        diagonal = self.precondition and not self.laplace.exact
        if not (self.control_variates or diagonal):
            return plain
        # a fixed seed: the step size, hence the chain under pm.sample's random_seed, must
        # not depend on the unseeded generator the step holds at construction
        rng = np.random.default_rng(NOISE_SEED)
        points = self.laplace.bulk_draws(rng, NOISE_POINTS)
        measured = gradient_noise(
            rng, self.estimate, self.preconditioner, points,
            self.minibatch_model.n_data, self.batch_size, self.strata,
        )  # fmt: skip
        return measured if np.isfinite(measured) else plain

    def check_chain_length(self, tune, draws):
        """Refuse a chain whose draws would not fit in memory (PyMC 6 gives the length)."""
        check_chain_fits(type(self).__name__, self.minibatch_model.ndim, tune + draws,
                         self.updates_per_draw)  # fmt: skip

    def reset_tuning(self):
        self.chain = None
        self.check_state = None if self.answer_check is None else self.answer_check.start()

    def repr_arguments(self):
        """The ``name=value`` strings of the choices ``repr`` shows (the defaults that depend
        on the model included), in order."""
        precondition = self.precondition
        if precondition and not self.laplace.exact:
            precondition = "'diagonal'"  # the diagonal fit of a model too big for the exact one
        return [f"batch_size={self.batch_size}", f"control_variates={self.control_variates}",
                f"precondition={precondition}", f"updates_per_draw={self.updates_per_draw}"]

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(self.repr_arguments())})"

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
        self.chain, info = sg_chain.step(self.rng, self.chain, self.estimate, self.settings,
                                         self.updates_per_draw, self.gradient_estimate)  # fmt: skip
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
        start = self.laplace.start(self.rng)
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
