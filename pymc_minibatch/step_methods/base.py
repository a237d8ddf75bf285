"""Base classes shared by every step method of this package.

They handle, identically under PyMC 5 and 6: the model adapter and the shared values of
variables sampled by other steps (``ArrayStepShared``), the per-chain RNG hand-over
(:mod:`pymc_minibatch._compat`), the ``tune`` statistic, PyMC's sampling state, and for
Metropolis-type steps the step-size adaptation during tuning.
"""

import functools

import numpy as np
import pymc as pm
from pymc.blocking import DictToArrayBijection, RaveledVars
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence, StepMethodState
from pymc.step_methods.state import dataclass_state

from pymc_minibatch._compat import ChainSetupMixin
from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.arguments import positive_float
from pymc_minibatch.kernels.adaptation import (
    DualAveragingState,
    dual_averaging_final,
    dual_averaging_init,
    dual_averaging_update,
)
from pymc_minibatch.kernels.row_queue import RowQueue, queue_length
from pymc_minibatch.model.adapter import MinibatchModel
from pymc_minibatch.model.recentring import recentring
from pymc_minibatch.model.variables import select_value_vars


@dataclass_state
class MinibatchStepState(StepMethodState):
    tune: bool


class MinibatchStep(ChainSetupMixin, ArrayStepShared):
    """A PyMC step method driven by a :class:`~pymc_minibatch.MinibatchModel`.

    Subclasses implement ``astep`` and extend ``stats_dtypes_shapes`` and
    ``_state_class``. Every field of the state class is per-chain: PyMC saves it before
    the first chain and restores it before each later chain, so nothing tuned in one chain
    reaches the next. Never selected automatically by ``pm.sample``: pass it as ``step=``.

    Construction has one order for every subclass: its ``__init__`` checks and stores its
    own configuration, calls ``super().__init__`` (which builds the adapter and what the
    base classes need from the full data), then does its own setup. ``reset_tuning`` runs
    once, after the outermost ``__init__`` has returned, so it may read anything any
    ``__init__`` set; no ``__init__`` calls it.

    A step given every variable (``vars=None``) of a model with non-centred group effects
    (``a = pm.Deterministic("a", mu + tau * z)``, ``z ~ Normal(0, 1)``, or ``mu + tau * z[g]``
    inline in the predictor) samples the model's centred form and maps each draw back to
    ``z`` (exact for an exact step; see :mod:`pymc_minibatch.model.recentring`);
    ``recentring`` then names the effects, else it is None.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _reset_tuning_when_built(cls.__dict__["__init__"])

    default_blocked = True
    default_tune_steps = 1000
    stats_dtypes_shapes = {"tune": (bool, [])}
    _state_class = MinibatchStepState
    #: Passes over all N rows each chain makes before its first step (e.g. FlyMC's draw of
    #: every row's brightness); the passes made at construction are ``full_data_passes``.
    setup_passes_per_chain = 0

    def __init__(self, vars=None, *, model=None, data=None, blocked=True, rng=None,
                 progressbar=True):  # fmt: skip
        model = pm.modelcontext(model)
        # non-centred group effects are sampled centred when the step moves every variable
        self.recentring = recentring(model) if vars is None else None
        sampled_model = model if self.recentring is None else self.recentring.model
        self.minibatch_model = MinibatchModel(sampled_model, vars, data=data,
                                              progressbar=progressbar)  # fmt: skip
        self.tune = True
        super().__init__(
            select_value_vars(model, vars), self.minibatch_model.shared, blocked=blocked, rng=rng
        )
        if self.minibatch_model.reads_chunks:
            self.stats_dtypes_shapes = {
                **self.stats_dtypes_shapes, "chunk_cache_hit_rate": (np.float64, [])
            }
            self.stats_dtypes = [{k: dtype for k, (dtype, _) in self.stats_dtypes_shapes.items()}]

    def step(self, point):
        """PyMC's step, plus the statistic ``chunk_cache_hit_rate`` when rows are read from
        chunked arrays: the fraction of this step's chunk look-ups served from the cache
        (NaN for a step that read no rows)."""
        if not self.minibatch_model.reads_chunks:
            return self._step_either_form(point)
        hits, misses = self.minibatch_model.chunk_cache_counts()
        new_point, stats = self._step_either_form(point)
        now_hits, now_misses = self.minibatch_model.chunk_cache_counts()
        looked_up = now_hits + now_misses - hits - misses
        stats[0]["chunk_cache_hit_rate"] = (now_hits - hits) / looked_up if looked_up else np.nan
        return new_point, stats

    def _step_either_form(self, point):
        """PyMC's step on the model's point, or, when the model's group effects are sampled
        centred (:mod:`pymc_minibatch.model.recentring`), the step on the centred point,
        mapped back."""
        if self.recentring is None:
            return super().step(point)
        self.recentring.sync_data()
        for name, shared_var in self.shared.items():
            shared_var.set_value(point[name], borrow=True)
        centred = self.recentring.to_centred(point)
        names = self.minibatch_model.var_names
        q = DictToArrayBijection.map({name: centred[name] for name in names})
        apoint, stats = self.astep(q)
        if not isinstance(apoint, RaveledVars):
            apoint = RaveledVars(apoint, q.point_map_info)
        moved = self.recentring.to_user(DictToArrayBijection.rmap(apoint, start_point=centred))
        return {name: moved[name] for name in point}, stats  # PyMC's traces read by position

    @property
    def setup_report(self):
        """Full-data passes and seconds per stage of this step's construction
        (:class:`~pymc_minibatch.model.setup_report.SetupReport`)."""
        return self.minibatch_model.setup_report

    def reset_tuning(self):
        """Restore the untuned settings; called at the start of every chain."""

    @staticmethod
    def competence(var, has_grad):
        return Competence.INCOMPATIBLE


def _reset_tuning_when_built(init):
    """``init``, followed by ``reset_tuning()`` when it is the outermost constructor call of
    the instance (the subclasses' ``super().__init__`` calls run inside it)."""

    @functools.wraps(init)
    def construct(self, *args, **kwargs):
        if self.__dict__.get("_under_construction"):
            init(self, *args, **kwargs)
            return
        self._under_construction = True
        try:
            init(self, *args, **kwargs)
        finally:
            del self._under_construction
        self.minibatch_model.setup_report.finish()
        self.reset_tuning()

    return construct


@dataclass_state
class MetropolisStepState(MinibatchStepState):
    proposal_scale: float
    adaptation: DualAveragingState
    started: bool
    last_evaluation: tuple | None
    row_queue: RowQueue


class MetropolisStep(MinibatchStep):
    """A minibatch step with a Gaussian random-walk proposal and a tuned proposal scale.

    The proposal is ``theta + proposal_scale * L z`` with ``L`` a square root of the proposal
    covariance. By default (``proposal_cov="laplace"``) that is the covariance of the
    Laplace approximation of the posterior, fitted on the full data at construction (see
    :meth:`~pymc_minibatch.MinibatchModel.laplace`), the initial proposal scale is
    ``2.38 / sqrt(ndim)`` (Roberts, Gelman & Gilks 1997), and each chain starts from a draw
    of the Laplace approximation: PyMC's initial point lies thousands of posterior sds
    from the posterior on tall data, and a random walk with one scale for every parameter
    mixes slowly when their posterior sds differ by orders of magnitude (a hierarchical
    scale against a slope). With an array the chain starts at PyMC's point and the initial
    proposal scale is ``2.38 / sqrt(ndim * N)``; ``None`` is the identity. While tuning, the
    proposal scale follows dual averaging toward ``target_accept`` (Hoffman & Gelman 2014,
    Algorithm 5); when tuning stops it is frozen at the averaged value.
    """

    stats_dtypes_shapes = {
        **MinibatchStep.stats_dtypes_shapes,
        "accept": (np.float64, []),
        "accepted": (bool, []),
        "proposal_scale": (np.float64, []),
        "nonfinite": (bool, []),
    }
    _state_class = MetropolisStepState

    @renamed_arguments(step_size="proposal_scale")
    def __init__(
        self,
        vars=None,
        *,
        proposal_scale=None,
        proposal_cov="laplace",
        target_accept=0.25,
        model=None,
        data=None,
        blocked=True,
        rng=None,
        progressbar=True,
    ):
        super().__init__(vars, model=model, data=data, blocked=blocked, rng=rng,
                         progressbar=progressbar)  # fmt: skip
        ndim, n_data = self.minibatch_model.ndim, self.minibatch_model.n_data
        if not 0.0 < target_accept < 1.0:
            raise ValueError(f"target_accept must lie in (0, 1), got {target_accept}")
        self.target_accept = float(target_accept)
        self.laplace = None
        if isinstance(proposal_cov, str):
            if proposal_cov != "laplace":
                raise ValueError(f"proposal_cov must be 'laplace', None or an array, got "
                                 f"{proposal_cov!r}")  # fmt: skip
            self.laplace = self.minibatch_model.laplace()
            self.proposal_chol = self.laplace.preconditioner  # L, with L z ~ N(0, covariance)
            default_scale = 2.38 / np.sqrt(ndim)
        else:
            self.proposal_chol = _proposal_cholesky(proposal_cov, ndim)
            # Posterior sds of tall-data models shrink like 1/sqrt(N); adaptation refines it
            default_scale = 2.38 / np.sqrt(ndim * n_data)
        proposal_scale = positive_float("proposal_scale", proposal_scale, allow_none=True)
        self.initial_proposal_scale = default_scale if proposal_scale is None else proposal_scale

    def reset_tuning(self):
        self.proposal_scale = self.initial_proposal_scale
        self.adaptation = dual_averaging_init(self.initial_proposal_scale)
        self.started = False
        self.last_evaluation = None
        # each chain draws its own rows from its own generator
        self.row_queue = RowQueue(queue_length(self.minibatch_model.n_data))

    def queued_rows(self, row_sampler):
        """``sample(rng, size)``: rows drawn ahead by ``row_sampler()`` (a
        :class:`~pymc_minibatch.kernels.weighted_rows.WeightedRows`, looked up at each refill)
        into this chain's queue and handed out in order; the rows of each refill are announced
        to the data (:meth:`~pymc_minibatch.MinibatchModel.prefetch_rows`). Exact for the
        steps whose rows are independent of the chain's state given their number
        (:mod:`pymc_minibatch.kernels.row_queue`)."""
        prefetch = self.minibatch_model.prefetch_rows

        def draw(rng, size):
            return row_sampler().sample(rng, size)

        # the queue looked up at each call: restoring ``sampling_state`` replaces it
        return lambda rng, size: self.row_queue.take(rng, size, draw, prefetch)

    def remember(self, theta, value):
        """Keep ``value``, computed at ``theta``, for the next step: the one evaluation cache
        of the Metropolis steps (the log posterior, the log prior or a batch estimate at the
        current point, so that a rejected proposal costs no re-evaluation)."""
        self.last_evaluation = (np.array(theta, copy=True), self._other_steps_values(), value)

    def recall(self, theta):
        """The value :meth:`remember` kept at ``theta``, or ``None`` if the chain has moved,
        or if another step of a ``CompoundStep`` has changed the variables this step does not
        sample (the value depends on them)."""
        if self.last_evaluation is None:
            return None
        point, others, value = self.last_evaluation
        if not np.array_equal(point, theta):  # before copying the other steps' values
            return None
        current = self._other_steps_values()
        unchanged = all(np.array_equal(others[name], current[name]) for name in current)
        return value if unchanged else None

    def current_logdensity(self, theta, logdensity):
        """``logdensity(theta)`` at the chain's current point ``theta`` (the log prior, or the
        log posterior): recalled when the last step remembered it (a step that accepts
        remembers its proposal's), else evaluated and remembered."""
        value = self.recall(theta)
        if value is None:
            value = logdensity(theta)
            self.remember(theta, value)
        return value

    def _other_steps_values(self):
        return {name: var.get_value() for name, var in self.shared.items()}

    def chain_start(self, q0):
        """``q0``, except at a chain's first step with the Laplace proposal: then a draw of
        the Laplace approximation, in the bulk of the posterior (its mode if the draw falls
        outside the prior's support, e.g. a box)."""
        if self.started:
            return q0
        self.started = True
        if self.laplace is None:
            return q0
        start = self.laplace.start(self.rng)
        if not np.isfinite(self.minibatch_model.logprior(start)):
            start = self.laplace.mode
        return RaveledVars(start, q0.point_map_info)

    def stop_tuning(self):
        if self.tune and self.adaptation.count > 0:
            self.proposal_scale = dual_averaging_final(self.adaptation)
        super().stop_tuning()

    def metropolis_stats(self, info):
        """The statistics every Metropolis step reports, from a kernel ``Info``."""
        return {
            "tune": self.tune,
            "accept": info.accept,
            "accepted": info.accepted,
            "proposal_scale": self.proposal_scale,
            "nonfinite": info.nonfinite,
        }

    def adapt_proposal_scale(self, accept_prob):
        """Move the proposal scale toward ``target_accept`` (only while tuning)."""
        if self.tune:
            self.adaptation = dual_averaging_update(
                self.adaptation, accept_prob, self.target_accept
            )
            self.proposal_scale = float(np.exp(self.adaptation.log_step_size))


def _proposal_cholesky(proposal_cov, ndim):
    if proposal_cov is None:
        return None
    cov = np.asarray(proposal_cov, dtype=np.float64)
    if cov.ndim == 1:
        cov = np.diag(cov)
    if cov.shape != (ndim, ndim):
        raise ValueError(
            f"proposal_cov must have shape ({ndim},) or ({ndim}, {ndim}), got {cov.shape}"
        )
    try:
        return np.linalg.cholesky(cov)
    except np.linalg.LinAlgError as err:
        raise ValueError("proposal_cov must be symmetric positive definite") from err
