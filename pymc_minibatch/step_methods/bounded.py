"""Shared wiring of the exact minibatch MH steps that rely on per-row bounds (TunaMH, TFMH)."""

import numpy as np
from pymc.step_methods.state import dataclass_state

from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.arguments import positive_float
from pymc_minibatch.bounds import BOUND_TOLERANCE, Bounds, PairMetrics
from pymc_minibatch.exceptions import BoundsUnavailableError, BoundViolationError
from pymc_minibatch.kernels.exact_mh import ExactModel
from pymc_minibatch.kernels.exact_tuning import (
    RhoTuning,
    pcn_noise_scale,
    rho_final,
    rho_init,
    rho_searching,
    rho_update,
)
from pymc_minibatch.kernels.pcn import RhoSearch
from pymc_minibatch.kernels.tuna import RowBounds, single_group
from pymc_minibatch.model.curvature import MAX_SHARED
from pymc_minibatch.model.expansions import (
    default_group_radius,
    first_order_bounds,
    second_order_bounds,
)
from pymc_minibatch.model.lipschitz import derive_bounds, linear_predictors, observed_families
from pymc_minibatch.model.region import needs_row_expansions
from pymc_minibatch.step_methods.base import MetropolisStep, MetropolisStepState
from pymc_minibatch.step_methods.exact import ExactMHStep
from pymc_minibatch.step_methods.residuals import (
    FirstOrderResiduals,
    PlainRows,
    SecondOrderResiduals,
)

PROPOSALS = ("auto", "rw", "pcn")


@dataclass_state
class BoundedStepState(MetropolisStepState):
    rho: float
    rho_search: RhoSearch


class BoundedMinibatchStep(ExactMHStep):
    """A proposal, bounds ``c_i`` with metric ``M``, row terms, and an exact prior term.

    The row terms are the log-likelihoods, or with control variates of order 1 or 2 their
    residuals around the posterior mode (:mod:`pymc_minibatch.step_methods.residuals`),
    whose summed expansions join the exact part of the acceptance ratio. The proposal is a
    Gaussian random walk (``"rw"``) or, with second-order control variates, a preconditioned
    Crank–Nicolson move reversible for the Laplace approximation (``"pcn"``,
    :mod:`pymc_minibatch.kernels.pcn`), whose log-density then also enters the exact part.

    Where the bounds hold only on a trust region (:mod:`pymc_minibatch.model.region`), a
    step whose current point or proposal lies outside it is a full-data MH step (counted in
    the ``outside_region`` statistic); the choice depends only on the pair, so the chain
    stays exact.

    The transition is one call of :func:`pymc_minibatch.kernels.exact_mh.step`; a subclass
    sets its acceptance ``rule`` and the statistics it adds (``info_stats``).
    """

    stats_dtypes_shapes = {
        **MetropolisStep.stats_dtypes_shapes,
        "batch_size": (np.int64, []),
        "expected_batch_size": (np.float64, []),
        "bound_ratio": (np.float64, []),
        "expansion_order": (np.int64, []),
        "rho": (np.float64, []),
        "outside_region": (bool, []),
    }
    _state_class = BoundedStepState

    @renamed_arguments(control_variates="expansion_order")
    def __init__(self, vars=None, *, bounds="auto", expansion_order="auto", proposal="auto",
                 rho=None, trust_region=None, proposal_cov="laplace", model=None,
                 **kwargs):  # fmt: skip
        if proposal not in PROPOSALS:
            raise ValueError(f"proposal must be one of {PROPOSALS}, got {proposal!r}")
        trust_region = positive_float("trust_region", trust_region, allow_none=True)
        if rho is not None and not (np.isfinite(rho) and 0.0 <= rho < 1.0):
            raise ValueError(f"rho must lie in [0, 1) or be None (tuned), got {rho}")
        self.fixed_rho = None if rho is None else float(rho)
        super().__init__(vars, proposal_cov=proposal_cov, model=model, **kwargs)
        mm = self.minibatch_model
        with mm.setup_report.stage("bounds"):
            self.bounds, self.residuals = resolve_bounds(bounds, mm, expansion_order,
                                                         trust_region)  # fmt: skip
        self.metric_indices = self.bounds.metric_indices(mm)
        expansion = getattr(self.residuals, "expansion", None)
        # the bounds' metric then reads the proposal's whitened pair instead of whitening
        self._bounds_whiten_like_expansion = expansion is not None and (
            self.bounds.whiten is expansion.factor and self.bounds.center is expansion.center
        )
        if proposal == "auto":
            laplace_ready = self.laplace is not None
            proposal = "pcn" if self.residuals.order == 2 and laplace_ready else "rw"
        if proposal == "pcn":
            if self.residuals.order != 2:
                raise ValueError(
                    "proposal='pcn' needs expansion_order=2: the pCN move is reversible for "
                    "the Laplace approximation, and only second-order control variates take "
                    "that approximation out of the subsampled part of the acceptance ratio"
                )
            if self.laplace is None:
                raise ValueError("proposal='pcn' moves with the Laplace covariance: leave "
                                 "proposal_cov='laplace'")  # fmt: skip
        self.proposal = proposal

    def __repr__(self):
        rho = "tuned" if self.fixed_rho is None else self.fixed_rho
        extra = f", rho={rho}" if self.proposal == "pcn" else ""
        if self.bounds.region_radius is not None:
            extra += f", trust_region={self.bounds.region_radius:.3g}"
        return (
            f"{type(self).__name__}(expansion_order={self.residuals.order}, "
            f"proposal={self.proposal!r}{extra})"
        )

    def reset_tuning(self):
        self._row_bounds = None  # built at the first step
        super().reset_tuning()
        tuning = rho_init()
        self.rho_search = tuning.search
        self.rho = tuning.rho if self.fixed_rho is None else self.fixed_rho
        if self.proposal == "pcn":
            self._set_rho(self.rho)

    def stop_tuning(self):
        if self._tunes_rho():
            self._set_rho(rho_final(RhoTuning(self.rho, self.rho_search)))
        super().stop_tuning()

    def make_exact_model(self):
        """The kernel's model: the prior exact, the row terms and their remainder, the
        bounds' metric and trust region, the whitening of the pCN proposal."""
        mm, residuals, bounds = self.minibatch_model, self.residuals, self.bounds
        return ExactModel(
            mm.logprior, residuals.remainder, residuals.row_pair, full_loglik=mm.full_loglik,
            metrics=PairMetrics(bounds, self.metric_indices, self._bounds_whiten_like_expansion),
            inside_region=bounds.inside_region, whitened=getattr(residuals, "whitened", None),
            from_whitened=getattr(residuals, "from_whitened", None),
        )

    def row_bounds(self):
        """The kernels' :class:`~pymc_minibatch.kernels.tuna.RowBounds`: rows drawn ahead
        into the chain's queue with one metric for all rows, within their groups with a
        metric per group. Built at the first step (the row sampler is built at the first
        draw of a row: never for all-zero bounds)."""
        if self._row_bounds is None:
            self._row_bounds = self._chain_row_bounds()
        return self._row_bounds

    def _chain_row_bounds(self):
        bounds = self.bounds
        if bounds.groups is None:
            return single_group(bounds.c, bounds.total,
                                self.queued_rows(lambda: bounds.row_sampler))  # fmt: skip
        rows = bounds.row_sampler
        # a group whose bounds sum to its number of rows or more would be drawn whole at a
        # metric of 1 already: evaluated whole at every step, out of C
        whole = (rows.totals >= rows.sizes) & (rows.sizes > 0)
        totals = np.where(whole, 0.0, rows.totals)
        return RowBounds(bounds.c, float(totals.sum()), rows.sample, totals, rows.sizes,
                         rows.rows_of, np.flatnonzero(whole))  # fmt: skip

    def kernel_params(self, **settings):
        """The kernel's settings: this step's proposal, its ``rho`` and rows."""
        searching = self._tunes_rho() and rho_searching(RhoTuning(self.rho, self.rho_search))
        return super().kernel_params(proposal=self.proposal, rho=self.rho, search=searching,
                                     rows=self.row_bounds(), **settings)  # fmt: skip

    def check_bounds(self, info):
        """Raise :class:`~pymc_minibatch.exceptions.BoundViolationError` when an evaluated
        row broke its bound (``bound_ratio`` above 1 beyond rounding)."""
        if info.bound_ratio > 1.0 + BOUND_TOLERANCE:
            raise BoundViolationError(
                f"{type(self).__name__}: |U_i(theta') - U_i(theta)| reached "
                f"{info.bound_ratio:.6g} x c_i M(theta, theta') at a row; the bounds are too "
                "small for this model, so the draws would not be exact. Pass larger bounds."
            )

    def info_stats(self, info):
        return {
            "expected_batch_size": info.expected_batch_size,
            "bound_ratio": info.bound_ratio,
            "expansion_order": self.residuals.order,
            "rho": self.rho if self.proposal == "pcn" else np.nan,
            "outside_region": info.outside_region,
        }

    def tune_after(self, info):
        """The random walk's scale, or while searching, pCN's correlation."""
        if self.proposal == "rw":
            self.adapt_proposal_scale(info.accept)
        elif self._tunes_rho():
            self.tune_rho(info)

    def tune_rho(self, info):
        """Add a step to the search of pCN's correlation and set the next one."""
        tuning = rho_update(RhoTuning(self.rho, self.rho_search), info.accept,
                            info.squared_jump, info.batch_size)  # fmt: skip
        self.rho_search = tuning.search
        self._set_rho(tuning.rho)

    def _tunes_rho(self):
        return self.proposal == "pcn" and self.fixed_rho is None and self.tune

    def _set_rho(self, rho):
        self.rho = rho
        self.proposal_scale = pcn_noise_scale(rho)


def resolve_bounds(bounds, minibatch_model, expansion_order="auto", trust_region=None):
    """The bounds and the row terms they hold for.

    Parameters
    ----------
    bounds : "auto" or Bounds
        ``"auto"`` derives them from the model; a :class:`Bounds` is checked against it
        (with a ``center``: first-order residuals around it).
    minibatch_model : MinibatchModel
    expansion_order : {"auto", 0, 1, 2}
        Order of the Taylor expansion around the mode subtracted from each row (the control
        variates) with ``bounds="auto"`` (``True``/``False`` mean 1/0). ``"auto"``: 2 where
        every likelihood has a bounded third derivative (globally, or on a trust region
        around the mode), the Laplace approximation's curvature is positive definite and the
        step samples every free variable; else 1 where every likelihood has a bounded second
        derivative; else 0.
    trust_region : float, optional
        Radius ``R`` of the trust region ``||z|| <= R`` in Laplace sds, used where a
        likelihood is bounded only there (default ``sqrt(d) + 10``, ``d`` the coordinates a
        row's group sees: see :func:`~pymc_minibatch.model.expansions.default_group_radius`).

    Returns
    -------
    (Bounds, PlainRows or FirstOrderResiduals or SecondOrderResiduals)
    """
    mm = minibatch_model
    if isinstance(bounds, Bounds):
        if bounds.c.shape != (mm.n_data,):
            raise ValueError(
                f"bounds.c has {bounds.c.size} values but the model has {mm.n_data} rows"
            )
        if bounds.order == 2:
            raise ValueError("user bounds for second-order residuals are not supported: use "
                             "bounds='auto' with expansion_order=2")  # fmt: skip
        if bounds.order == 1:
            return bounds, FirstOrderResiduals(mm, bounds.center)
        return bounds, PlainRows(mm)
    if bounds is None:
        raise BoundsUnavailableError(
            "this sampler needs per-row bounds c_i with |U_i(theta) - U_i(theta')| <= c_i "
            "||theta - theta'||: pass bounds='auto' (supported GLM likelihoods) or "
            "pmm.bounds.Bounds(c, metric_vars=...)"
        )
    if not (isinstance(bounds, str) and bounds == "auto"):
        raise TypeError(f"bounds must be 'auto' or a pmm.bounds.Bounds, got {bounds!r}")
    automatic = isinstance(expansion_order, str) and expansion_order == "auto"
    if not automatic and (expansion_order not in (0, 1, 2) or isinstance(expansion_order, float)):
        raise ValueError(f"expansion_order must be 'auto', 0, 1 or 2, got {expansion_order!r}")
    def radius():
        if trust_region is not None:
            return float(trust_region)
        return default_group_radius(mm.laplace().structure)

    if needs_row_expansions(mm):
        # no global bound (or a LogNormal): control variates of order 2 or 1, on a trust
        # region where a likelihood needs one
        _require_exact_curvature(mm)
        if not automatic and expansion_order == 0:
            try:
                linear_predictors(mm)
            except BoundsUnavailableError as error:  # names the likelihood
                raise BoundsUnavailableError(
                    f"{error}; or expansion_order=2 (the default) or 1, which bound it on a "
                    "trust region around the mode"
                ) from None
        order = (1 if mm.shared else 2) if automatic else int(expansion_order)
        if order == 2:
            return _second_order(mm, radius())
        laplace = mm.laplace()
        bounds = first_order_bounds(mm, laplace, radius())
        return bounds, FirstOrderResiduals(mm, laplace.mode)
    # automatic: refuses unsupported likelihoods
    order = _automatic_order(mm) if automatic else int(expansion_order)
    if order:
        _require_exact_curvature(mm)
    if order == 2:
        return _second_order(mm, radius())
    center = mm.laplace().mode if order == 1 else None
    bounds = derive_bounds(mm, order, center=center)
    return bounds, (FirstOrderResiduals(mm, center) if order == 1 else PlainRows(mm))


def _second_order(minibatch_model, radius):
    """Second-order bounds and residuals, on the trust region of ``radius`` where a
    likelihood needs one."""
    mm = minibatch_model
    if mm.shared:
        raise ValueError(
            "expansion_order=2 needs the step to sample every continuous free variable "
            f"(the expansion is taken at the joint mode); {sorted(mm.shared)} are left out"
        )
    bounds, expansion = second_order_bounds(mm, mm.laplace(), radius)
    return bounds, SecondOrderResiduals(mm, expansion)


def _require_exact_curvature(minibatch_model):
    """Refuse control variates without the exact Laplace fit (a model too big for it).

    Raises
    ------
    BoundsUnavailableError
        If :meth:`MinibatchModel.laplace_is_exact` is False.
    """
    mm = minibatch_model
    if not mm.laplace_is_exact():
        raise BoundsUnavailableError(
            f"control variates and trust regions need the exact curvature at the mode, out of "
            f"reach here: {mm.structure().shared.size} coordinates are touched by rows of "
            f"more than one group (above {MAX_SHARED}); use expansion_order=0 where the "
            "likelihood has global bounds, or a sampler built for big models (the "
            "stochastic-gradient presets, MINT, the particle methods)"
        )


def _automatic_order(minibatch_model):
    """The highest order of control variates the model's likelihoods allow (see
    :func:`resolve_bounds`).

    Raises
    ------
    BoundsUnavailableError
        Naming an observed variable whose likelihood is not a supported family.
    """
    mm = minibatch_model
    families = observed_families(mm)
    if not mm.laplace_is_exact():
        return 0
    if (
        all(f.third is not None for f in families)
        and not mm.shared
        and not mm.laplace().repaired
    ):
        return 2
    if all(f.curvature is not None for f in families):
        return 1
    return 0
