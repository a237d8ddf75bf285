"""Shared wiring of the exact minibatch MH steps that rely on per-row bounds (TunaMH, TFMH)."""

import numpy as np
from pymc.blocking import RaveledVars
from pymc.step_methods.state import dataclass_state

from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.arguments import positive_float
from pymc_minibatch.bounds import BOUND_TOLERANCE, Bounds
from pymc_minibatch.exceptions import BoundsUnavailableError, BoundViolationError
from pymc_minibatch.kernels.pcn import (
    RHO_CANDIDATES,
    RhoSearch,
    pcn_propose,
    rho_search_best,
    rho_search_candidate,
    rho_search_init,
    rho_search_update,
)
from pymc_minibatch.kernels.random_walk import propose
from pymc_minibatch.kernels.tuna import RowBounds, single_group
from pymc_minibatch.model.expansions import (
    default_group_radius,
    first_order_bounds,
    second_order_bounds,
)
from pymc_minibatch.model.lipschitz import derive_bounds, linear_predictors, observed_families
from pymc_minibatch.model.region import needs_row_expansions
from pymc_minibatch.step_methods.base import MetropolisStep, MetropolisStepState
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


class BoundedMinibatchStep(MetropolisStep):
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

    Subclasses implement ``decide(theta, proposal, exact_diff, metrics, row_pair, full_diff,
    full_data)`` (``exact_diff``: the log-ratio terms computed exactly; ``metrics``: the
    metric of each group of rows, :meth:`~pymc_minibatch.bounds.Bounds.metrics`;
    ``row_pair(idx)``: the
    row terms at both points; ``full_diff()``: the exact full-data difference of the row
    terms; ``full_data``: take a full-data step),
    returning a kernel ``Info`` with at least ``accept``, ``accepted``, ``nonfinite``,
    ``bound_ratio`` and ``batch_size``, and ``info_stats(info)`` for their extra statistics.
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
        self._drawn_totals = None  # (C_g of the groups drawn from, groups always whole)
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
        super().reset_tuning()
        self.rho_search = rho_search_init()
        self.rho = RHO_CANDIDATES[0] if self.fixed_rho is None else self.fixed_rho
        if self.proposal == "pcn":
            self._set_rho(self.rho)

    def stop_tuning(self):
        if self.tune and self.proposal == "pcn" and self.fixed_rho is None:
            self._set_rho(RHO_CANDIDATES[rho_search_best(self.rho_search)])
        super().stop_tuning()

    def row_bounds(self):
        """The kernels' :class:`~pymc_minibatch.kernels.tuna.RowBounds`: rows drawn ahead
        into the chain's queue with one metric for all rows, within their groups with a
        metric per group (the row sampler is built at the first draw of a row: never for
        all-zero bounds)."""
        bounds = self.bounds
        if bounds.groups is None:
            return single_group(bounds.c, bounds.total,
                                self.queued_rows(lambda: bounds.row_sampler))  # fmt: skip
        rows = bounds.row_sampler
        if self._drawn_totals is None:
            # a group whose bounds sum to its number of rows or more would be drawn whole
            # at a metric of 1 already: evaluated whole at every step, out of C
            whole = (rows.totals >= rows.sizes) & (rows.sizes > 0)
            self._drawn_totals = np.where(whole, 0.0, rows.totals), np.flatnonzero(whole)
        totals, whole = self._drawn_totals
        return RowBounds(bounds.c, float(totals.sum()), rows.sample, totals, rows.sizes,
                         rows.rows_of, whole)  # fmt: skip

    def astep(self, q0: RaveledVars):
        q0 = self.chain_start(q0)
        theta = q0.data
        searching = self._search_candidate()
        if searching is not None:
            self._set_rho(RHO_CANDIDATES[searching])
        proposal, proposal_log_ratio, whitened = self._propose(theta)
        info, logprior_proposal, inside = self.decide_proposal(
            theta, proposal, proposal_log_ratio, self.current_logprior(theta), searching,
            whitened,
        )
        stats = {
            **self.metropolis_stats(info),
            "batch_size": info.batch_size,
            "expected_batch_size": info.expected_batch_size,
            "bound_ratio": info.bound_ratio,
            "expansion_order": self.residuals.order,
            "rho": self.rho if self.proposal == "pcn" else np.nan,
            "outside_region": not inside,
            **self.info_stats(info),
        }
        if info.accepted:
            theta = proposal
            self.remember(proposal, logprior_proposal)
        if self.proposal == "rw":
            self.adapt_proposal_scale(info.accept)
        return RaveledVars(theta, q0.point_map_info), [stats]

    def decide_proposal(self, theta, proposal, proposal_log_ratio, logprior_current,
                        searching, whitened=None):  # fmt: skip
        """Decide ``proposal`` with the bounds: ``(info, log prior at the proposal, whether
        both points lie in the trust region)``.

        ``proposal_log_ratio`` is the proposal's part of the exact log-ratio; the prior
        difference and the remainder of the row terms' expansions join it here. While
        ``searching`` (a candidate rho's index), the step's squared jump in whitened units
        is added to the rho search. ``whitened``: ``(z, z')`` of the pair in the expansion's
        whitening, when known."""
        model = self.minibatch_model
        if whitened is None and searching is not None:
            whitened = self.residuals.whitened(theta), self.residuals.whitened(proposal)
        shared_whitening = whitened if self._bounds_whiten_like_expansion else None
        metrics = self.bounds.metrics(theta, proposal, self.metric_indices, shared_whitening)
        logprior_proposal = model.logprior(proposal)
        remainder = self.residuals.remainder(theta, proposal)
        exact_diff = proposal_log_ratio + logprior_proposal - logprior_current + remainder

        def row_pair(idx):
            return self.residuals.row_pair(theta, proposal, idx)

        def full_diff():
            return model.full_loglik(proposal) - model.full_loglik(theta) - remainder

        inside = self.bounds.inside_region(theta) and self.bounds.inside_region(proposal)
        info = self.decide(theta, proposal, exact_diff, metrics, row_pair, full_diff, not inside)
        self.check_bound_ratio(info.bound_ratio)
        if searching is not None:
            jump = whitened[1] - whitened[0]
            self.rho_search = rho_search_update(
                self.rho_search, searching, info.accept, float(jump @ jump), info.batch_size
            )
        return info, logprior_proposal, inside

    def check_bound_ratio(self, bound_ratio):
        """Raise :class:`~pymc_minibatch.exceptions.BoundViolationError` when an evaluated
        row broke its bound (``bound_ratio`` above 1 beyond rounding)."""
        if bound_ratio > 1.0 + BOUND_TOLERANCE:
            raise BoundViolationError(
                f"{type(self).__name__}: |U_i(theta') - U_i(theta)| reached "
                f"{bound_ratio:.6g} x c_i M(theta, theta') at a row; the bounds are too "
                "small for this model, so the draws would not be exact. Pass larger bounds."
            )

    def _propose(self, theta):
        """A proposal, its part of the exact log-ratio and, for pCN, the whitened pair ``(z,
        z')`` (else None). The ratio is that of the proposal densities, ``log q(theta |
        theta') - log q(theta' | theta)``: zero for the random walk; for pCN, reversible for
        ``pi_hat = N(center, L L')``, ``log pi_hat(theta) - log pi_hat(theta')``."""
        if self.proposal == "rw":
            return propose(self.rng, theta, self.proposal_scale, self.proposal_chol), 0.0, None
        expansion = self.residuals.expansion
        z = self.residuals.whitened(theta)
        z2 = pcn_propose(self.rng, z, self.rho)
        proposal = expansion.center + expansion.factor.to_theta(z2)
        self.residuals.whitened(proposal, z2)
        return proposal, 0.5 * float(z2 @ z2 - z @ z), (z, z2)

    def _search_candidate(self):
        """The candidate rho to run at this step while the search lasts, else None (once
        it is over, the best candidate is kept for the rest of the tuning, so that ``chi``
        is tuned for it)."""
        if self.proposal != "pcn" or self.fixed_rho is not None or not self.tune:
            return None
        index = rho_search_candidate(self.rho_search)
        if index is None:
            self._set_rho(RHO_CANDIDATES[rho_search_best(self.rho_search)])
        return index

    def _set_rho(self, rho):
        if rho != self.rho:
            self.rho = rho
            self.proposal_changed()
        # the pCN innovation's scale, in Laplace sds: the analogue of a random walk's step
        self.proposal_scale = float(np.sqrt(1.0 - rho * rho))

    def proposal_changed(self):
        """Called when the pCN correlation changes while tuning (subclasses re-tune)."""

    def decide(self, theta, proposal, exact_diff, metrics, row_pair, full_diff, full_data):
        raise NotImplementedError

    def info_stats(self, info):
        return {}


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
    if (
        all(f.third is not None for f in families)
        and not mm.shared
        and not mm.laplace().repaired
    ):
        return 2
    if all(f.curvature is not None for f in families):
        return 1
    return 0
