"""Shared wiring of the exact minibatch MH steps that rely on per-row bounds (TunaMH, TFMH)."""

import numpy as np
from pymc.blocking import RaveledVars

from pymc_minibatch.bounds import Bounds, metric
from pymc_minibatch.exceptions import BoundsUnavailableError, BoundViolationError
from pymc_minibatch.kernels.random_walk import propose
from pymc_minibatch.kernels.tuna import RowBounds
from pymc_minibatch.model.lipschitz import derive_bounds
from pymc_minibatch.step_methods.base import MetropolisStep

#: Relative slack when checking |Delta_i| <= c_i m (rounding in the log-densities).
BOUND_TOLERANCE = 1e-7


class BoundedMinibatchStep(MetropolisStep):
    """Random-walk proposal, bounds ``c_i`` with metric ``M``, and an exact prior term.

    With control-variate bounds (``bounds.center`` set), the row terms the kernel sees are
    the residuals ``r_i(theta) = l_i(theta) - grad l_i(center) . (theta - center)``, and
    their linear remainder ``G . (theta' - theta)``, with ``G`` the full-data gradient at the
    center, joins the exact part of the acceptance ratio.

    Subclasses implement ``decide(theta, proposal, exact_diff, m, row_pair, full_diff)``
    (``exact_diff``: the log-ratio terms computed exactly; ``row_pair(idx)``: the row terms
    at both points; ``full_diff()``: the exact full-data log-likelihood difference),
    returning a kernel ``Info`` with at least ``accept``, ``accepted``, ``nonfinite`` and
    ``bound_ratio``, and ``info_stats(info)`` for their extra statistics.
    """

    stats_dtypes_shapes = {
        **MetropolisStep.stats_dtypes_shapes,
        "batch_size": (np.int64, []),
        "expected_batch_size": (np.float64, []),
        "bound_ratio": (np.float64, []),
    }

    def __init__(self, vars=None, *, bounds="auto", control_variates="auto", model=None,
                 **kwargs):  # fmt: skip
        super().__init__(vars, model=model, **kwargs)
        mm = self.minibatch_model
        self.bounds = resolve_bounds(bounds, mm, control_variates)
        self.metric_indices = self.bounds.metric_indices(mm)
        center = self.bounds.center
        self.center_gradient = (
            None
            if center is None
            else mm.logp_and_grad(center)[1] - mm.logprior_and_grad(center)[1]
        )

    def row_bounds(self):
        return RowBounds(self.bounds.c, self.bounds.total, self.bounds.alias_table.sample)

    def astep(self, q0: RaveledVars):
        q0 = self.chain_start(q0)
        model = self.minibatch_model
        theta = q0.data
        proposal = propose(self.rng, theta, self.step_size, self.proposal_chol)
        m = metric(self.bounds, theta, proposal, self.metric_indices)
        logprior_current = self._current_logprior(theta)
        logprior_proposal = model.logprior(proposal)
        exact_diff = logprior_proposal - logprior_current
        if self.center_gradient is not None:
            exact_diff += float(self.center_gradient @ (proposal - theta))

        def row_pair(idx):
            current, proposed = model.loglik_pair(theta, proposal, idx)
            if self.center_gradient is not None:
                proposed = proposed - model.directional_grad_loglik(
                    self.bounds.center, proposal - theta, idx
                )
            return current, proposed

        def full_diff():
            return model.full_loglik(proposal) - model.full_loglik(theta)

        info = self.decide(theta, proposal, exact_diff, m, row_pair, full_diff)
        if info.bound_ratio > 1.0 + BOUND_TOLERANCE:
            raise BoundViolationError(
                f"{type(self).__name__}: |U_i(theta') - U_i(theta)| reached "
                f"{info.bound_ratio:.6g} x c_i M(theta, theta') at a row; the bounds are too "
                "small for this model, so the draws would not be exact. Pass larger bounds."
            )
        stats = {
            **self.metropolis_stats(info),
            "batch_size": info.batch_size,
            "expected_batch_size": info.expected_batch_size,
            "bound_ratio": info.bound_ratio,
            **self.info_stats(info),
        }
        if info.accepted:
            theta = proposal
            self._last_logprior = (proposal, logprior_proposal)
        self.adapt_step_size(info.accept)
        return RaveledVars(theta, q0.point_map_info), [stats]

    def decide(self, theta, proposal, exact_diff, m, row_pair, full_diff):
        raise NotImplementedError

    def info_stats(self, info):
        return {}

    def _current_logprior(self, theta):
        # reuse the accepted proposal's log-prior unless another step of a CompoundStep may
        # have moved the variables this step does not sample
        last = getattr(self, "_last_logprior", None)
        if last is not None and not self.shared and np.array_equal(last[0], theta):
            return last[1]
        value = self.minibatch_model.logprior(theta)
        self._last_logprior = (theta.copy(), value)
        return value


def resolve_bounds(bounds, minibatch_model, control_variates=False):
    """``"auto"`` -> derived bounds; a :class:`Bounds` is checked against the model.

    ``control_variates``: True, False, or "auto" (with them where every likelihood has a
    bounded second derivative, without them otherwise).
    """
    if isinstance(bounds, str) and bounds == "auto":
        if control_variates == "auto":
            try:
                return derive_bounds(minibatch_model, control_variates=True)
            except BoundsUnavailableError as err:
                if "second derivative" not in str(err):
                    raise
                return derive_bounds(minibatch_model, control_variates=False)
        return derive_bounds(minibatch_model, control_variates=bool(control_variates))
    if isinstance(bounds, Bounds):
        if bounds.c.shape != (minibatch_model.n_data,):
            raise ValueError(
                f"bounds.c has {bounds.c.size} values but the model has "
                f"{minibatch_model.n_data} rows"
            )
        return bounds
    if bounds is None:
        raise BoundsUnavailableError(
            "this sampler needs per-row bounds c_i with |U_i(theta) - U_i(theta')| <= c_i "
            "||theta - theta'||: pass bounds='auto' (supported GLM likelihoods) or "
            "pmm.bounds.Bounds(c, metric_vars=...)"
        )
    raise TypeError(f"bounds must be 'auto' or a pmm.bounds.Bounds, got {bounds!r}")
