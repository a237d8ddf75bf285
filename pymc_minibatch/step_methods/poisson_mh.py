"""PoissonMH as a PyMC step method: the global-bound baseline of TunaMH."""

import warnings

import numpy as np

from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.arguments import positive_float
from pymc_minibatch.bounds import BOUND_TOLERANCE, GlobalBounds
from pymc_minibatch.exceptions import BoundsUnavailableError, BoundViolationError
from pymc_minibatch.kernels.exact_mh import ExactModel
from pymc_minibatch.kernels.poisson_mh import GlobalRowBounds, poisson_mh_rule
from pymc_minibatch.model.lipschitz import derive_global_bounds
from pymc_minibatch.step_methods.base import MetropolisStep
from pymc_minibatch.step_methods.exact import ExactMHStep


class PoissonMH(ExactMHStep):
    """Poisson-minibatching Metropolis–Hastings with global bounds (exact).

    Zhang & De Sa (2019), "Poisson-Minibatching for Gibbs Sampling with Convergence Rate
    Guarantees", NeurIPS; the form compared against TunaMH in Zhang, Cooper & De Sa (2020),
    Appendix D (kernel in :mod:`pymc_minibatch.kernels.poisson_mh`). Every step resamples
    Poisson auxiliary counts for the rows, from a batch of expected size ``lambda + L``
    drawn with probability proportional to each row's bound width ``M_i``, and accepts
    with a ratio over the rows with non-zero counts. It needs bounds
    ``lower_i <= log p(y_i | theta) <= upper_i`` over the whole support, which exist only
    on bounded parameter spaces and make ``L = sum_i M_i`` grow with the support's width:
    :class:`~pymc_minibatch.TunaMH` needs only local bounds and is almost always cheaper.

    Parameters
    ----------
    vars : list of variables, optional
        Continuous free variables to sample (default: all continuous ones).
    bounds : "auto" or GlobalBounds
        ``"auto"`` derives them for logistic, Student-t, Laplace and Cauchy regressions with
        fixed scale whose coefficients have ``Uniform`` priors with fixed limits and
        ``default_transform=None`` (:func:`~pymc_minibatch.model.lipschitz.derive_global_bounds`).
    poisson_rate : float, optional
        The Poisson rate ``lambda > 0`` of the auxiliary counts, the part of the expected
        batch ``lambda + L`` that does not come from the bounds; larger values give
        acceptance closer to full-data MH at the cost of larger batches. Default
        ``min(L^2, N / 2)``: Zhang & De Sa (2019) show that ``lambda`` of order ``L^2`` keeps
        the spectral gap within a constant factor of MH's. Formerly ``lam``, still accepted
        with a ``FutureWarning``.
    proposal_scale, proposal_cov, target_accept, model
        As for :class:`~pymc_minibatch.FullMH`.
    fallback : bool, default True
        Take full-data MH steps when ``lambda + L >= N`` (then no step saves any work; a
        warning says so at construction).

    Raises
    ------
    BoundsUnavailableError
        If ``bounds="auto"`` and the model has no derivable global bound.
    BoundViolationError
        During sampling, if an evaluated row leaves its interval (the result would be wrong).

    Examples
    --------
    Global bounds exist when the coefficients have a bounded prior support:

    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(0).laplace(0.7, 1.0, size=2000)
    >>> with pm.Model() as model:
    ...     mu = pm.Uniform("mu", 0.5, 0.9, default_transform=None)
    ...     obs = pm.Laplace("y", mu, 1.0, observed=y)
    ...     step = pmm.PoissonMH(poisson_rate=100.0)
    >>> round(step.bounds.total, 3)  # L = sum_i (upper_i - lower_i)
    800.0
    >>> idata = pm.sample(step=step, draws=2000, chains=2, model=model)  # doctest: +SKIP
    """

    name = "poisson_mh"
    rule = staticmethod(poisson_mh_rule)
    stats_dtypes_shapes = {
        **MetropolisStep.stats_dtypes_shapes,
        "batch_size": (np.int64, []),
        "kept": (np.int64, []),
        "expected_batch_size": (np.float64, []),
        "fallback": (bool, []),
    }

    @renamed_arguments(step_size="proposal_scale", lam="poisson_rate")
    def __init__(self, vars=None, *, bounds="auto", poisson_rate=None, fallback=True, **options):
        # options: those of MetropolisStep (see the docstring)
        poisson_rate = positive_float("poisson_rate", poisson_rate, allow_none=True)
        super().__init__(vars, **options)
        n_data = self.minibatch_model.n_data
        self.bounds = _resolve_global_bounds(bounds, self.minibatch_model)
        total = self.bounds.total
        self.poisson_rate = min(total**2, n_data / 2) if poisson_rate is None else poisson_rate
        """``lambda``, the Poisson rate of the auxiliary counts."""
        self.fallback = bool(fallback)
        if self.fallback and self.poisson_rate + total >= n_data:
            warnings.warn(
                "PoissonMH: the expected batch lambda + L = "
                f"{self.poisson_rate + total:.4g} is not below N = {n_data}, so every step uses "
                "the full data; the global bounds are too loose for this model (a narrower "
                "support helps; TunaMH needs no global bound)",
                UserWarning,
                stacklevel=3,  # past the renamed_arguments wrapper: the caller's line
            )

    def make_exact_model(self):
        """The kernel's model: the prior exact, the rows' log-likelihoods one by one."""
        model = self.minibatch_model
        return ExactModel(model.logprior, loglik=model.loglik, full_loglik=model.full_loglik)

    def reset_tuning(self):
        super().reset_tuning()
        bounds = self.bounds
        sample = self.queued_rows(lambda: bounds.row_sampler)
        self.global_rows = GlobalRowBounds(bounds.lower, bounds.spread, bounds.total, sample)

    def kernel_params(self):
        return super().kernel_params(rows=self.global_rows, fallback=self.fallback,
                                     poisson_rate=self.poisson_rate)  # fmt: skip

    def check_bounds(self, info):
        if info.bound_excess > BOUND_TOLERANCE:
            raise BoundViolationError(
                "PoissonMH: a row's log-likelihood left its global bounds [lower_i, upper_i] "
                f"(by {info.bound_excess:.3g} relative to its size), so the draws would not be "
                "exact. Pass wider bounds, or check that the prior confines the parameters to "
                "the set the bounds were derived for."
            )

    def info_stats(self, info):
        return {"kept": info.kept, "expected_batch_size": info.expected_batch_size,
                "fallback": info.fallback}  # fmt: skip


def _resolve_global_bounds(bounds, minibatch_model):
    if isinstance(bounds, str) and bounds == "auto":
        return derive_global_bounds(minibatch_model)
    if isinstance(bounds, GlobalBounds):
        return bounds.for_rows(minibatch_model.n_data)
    if bounds is None:
        raise BoundsUnavailableError(
            "PoissonMH needs global bounds lower_i <= log p(y_i | theta) <= upper_i over the "
            "support: pass bounds='auto' (supported regressions with Uniform coefficients) or "
            "pmm.bounds.GlobalBounds(lower, upper)"
        )
    raise TypeError(f"bounds must be 'auto' or a pmm.bounds.GlobalBounds, got {bounds!r}")
