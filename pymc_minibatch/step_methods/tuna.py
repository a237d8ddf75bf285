"""TunaMH as a PyMC step method."""

import numpy as np
from pymc.blocking import RaveledVars
from pymc.step_methods.state import dataclass_state

from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.arguments import positive_float
from pymc_minibatch.kernels import group_sweep
from pymc_minibatch.kernels.exact_tuning import (
    ChiTuning,
    SweepTuning,
    chi_init,
    rho_searching,
    sweep_tuning_final,
    sweep_tuning_init,
    sweep_tuning_update,
)
from pymc_minibatch.kernels.tuna import tuna_rule
from pymc_minibatch.model.group_prior import group_prior
from pymc_minibatch.step_methods.bounded import BoundedMinibatchStep, BoundedStepState
from pymc_minibatch.step_methods.group_moves import GROUP_KAPPA, SHARED_KAPPA, GroupMoves

GROUP_MOVES = ("auto", True, False)

#: chi is tuned so that kappa = chi * C * E[m] equals this (lambda ~ (1 + kappa) C E[m]):
#: acceptance collapses for kappa << 1, while the batch grows like (1 + kappa) times its
#: floor C E[m] (see the docs page "TunaMH: exact minibatch Metropolis–Hastings").
TARGET_KAPPA = 5.0
#: ...unless that makes the expected batch exceed this fraction of N.
MAX_BATCH_FRACTION = 0.1


@dataclass_state
class TunaMHState(BoundedStepState):
    chi_tuning: ChiTuning
    sweep_tuning: SweepTuning | None


class TunaMH(BoundedMinibatchStep):
    """Exact minibatch Metropolis–Hastings (TunaMH).

    Each step evaluates only a Poisson-sized minibatch of rows drawn with probability
    proportional to per-row bounds ``c_i``, yet the chain targets the exact posterior
    (Zhang, Cooper & De Sa 2020, "Asymptotically Optimal Exact Minibatch
    Metropolis-Hastings", NeurIPS; update rule in :mod:`pymc_minibatch.kernels.tuna`).
    The prior and transform Jacobians enter the acceptance ratio exactly.

    By default, where the model allows it (Bernoulli-logit, Student-t, Cauchy or Normal
    location regressions with fixed scale, a positive definite Laplace approximation, every
    continuous variable sampled by this step), TunaMH runs on second-order control variates
    with a pCN proposal: each row's log-likelihood minus its quadratic Taylor expansion at the
    posterior mode is subsampled, the expansions' sum is computed exactly, and the proposal
    leaves the Laplace approximation invariant (Cornish et al. 2019, "Scalable
    Metropolis-Hastings for exact Bayesian inference with large datasets", ICML; Prado,
    Nemeth & Sherlock 2024, arXiv:2407.19602). Near a Gaussian posterior the acceptance then
    approaches 1 and the expected batch falls like ``d^3 / sqrt(N)`` as the data grow; with a
    Normal likelihood of fixed scale no row is evaluated at all after setup. Otherwise it
    falls back to first-order control variates (SMH-1, batches that stay flat in N) or plain
    Lipschitz bounds (batches that grow like ``sqrt(N)``) with a Gaussian random walk. The
    repr and the ``expansion_order`` and ``rho`` statistics say which path was taken.

    Poisson log-linear rows and Normal, LogNormal, Student-t or Cauchy rows with a sampled
    scale have bounded third derivatives only on bounded sets: their bounds hold on a trust
    region around the mode (:mod:`pymc_minibatch.model.region`), and a step with a point
    outside it is a full-data MH step (``outside_region`` statistic); the chain stays exact.

    The pCN proposal is built around one mode: on a posterior with well-separated modes it
    moves between them rarely (the chain stays exact); pass ``proposal="rw"`` there (see the
    "Which sampler" page of the docs).

    Parameters
    ----------
    vars : list of variables, optional
        Continuous free variables to sample (default: all continuous ones).
    bounds : "auto" or Bounds
        Per-row constants with ``|U_i(theta) - U_i(theta')| <= c_i M(theta, theta')``.
        ``"auto"`` derives them from the model (see :mod:`pymc_minibatch.model.lipschitz`).
    expansion_order : {"auto", 0, 1, 2}, default "auto"
        With ``bounds="auto"``: the order of the Taylor expansion around the posterior mode
        subtracted from each row, the control variates (0: none). ``"auto"`` takes the
        highest the model allows (above). User bounds carry their own ``center`` (order 1).
        Formerly ``control_variates``, still accepted with a ``FutureWarning``.
    proposal : {"auto", "rw", "pcn"}, default "auto"
        ``"rw"``: Gaussian random walk with the Laplace covariance and a tuned scale;
        ``"pcn"``: ``theta' = mode + rho (theta - mode) + sqrt(1 - rho^2) L xi``, reversible for
        the Laplace approximation ``N(mode, L L')``; needs ``expansion_order=2``. ``"auto"``:
        pCN with order 2, else the random walk.
    rho : float in [0, 1), optional
        pCN correlation (0: independence sampler from the Laplace approximation). ``None``
        tunes it during warm-up (:mod:`pymc_minibatch.kernels.pcn`), with ``chi``.
    trust_region : float, optional
        Radius ``R`` of the trust region ``||z|| <= R`` (in Laplace sds, ``z`` the whitened
        distance to the mode) where a likelihood is bounded only there; default
        ``sqrt(d) + 10``, with ``d`` the coordinates a row's group sees in a hierarchical
        model (its own and the shared ones). Reported in the repr when used.
    chi : float, optional
        TunaMH's ``chi > 0``: larger values give acceptance closer to full-data MH at the
        cost of larger batches (expected batch ``lambda = chi C^2 M^2 + C M``). ``None``
        tunes it with the proposal scale: ``chi = kappa / (C Mbar)`` with ``kappa = 5`` and
        ``Mbar`` a running mean of ``M`` over the tuning steps, lowered if needed so that the
        expected batch ``(1 + kappa) C Mbar`` stays below N / 10. Frozen after tuning.
    proposal_scale : float, optional
        Initial random-walk scale; default ``2.38 / sqrt(ndim)`` with the Laplace proposal
        (``2.38 / sqrt(ndim * N)`` otherwise), then tuned. With pCN the ``proposal_scale``
        statistic is the noise scale ``sqrt(1 - rho^2)``. Formerly ``step_size``, still
        accepted with a ``FutureWarning``.
    proposal_cov : "laplace", None or array, default "laplace"
        Proposal covariance (or its diagonal) in the transformed space. ``"laplace"``: the
        covariance of the posterior's Laplace approximation (fitted on the full data at
        construction), with each chain starting from a draw of it; ``None``: identity. See
        :class:`~pymc_minibatch.step_methods.base.MetropolisStep`.
    target_accept : float, default 0.25
    fallback : bool, default True
        Take a full-data MH step when ``lambda >= N`` (exactness is kept, since ``lambda``
        is symmetric in the two points).
    group_moves : {"auto", True, False}, default "auto"
        On a hierarchical model (parameters that only one group's rows touch, found in the
        graph), each step is a sweep of block moves
        (:mod:`pymc_minibatch.kernels.group_sweep`): the population parameters no row
        touches by a random walk on the prior alone, every group given the shared
        parameters (each accepted on a minibatch of its own rows), then the shared
        parameters by TunaMH over all rows. A move of all parameters at once is rarely
        accepted with a thousand groups. ``"auto"`` uses them where the model has groups,
        the pCN path is taken and the prior splits by group; ``True`` raises when that is
        not so. The statistics ``group_accept``, ``shared_accept`` and
        ``population_accept`` give each kind of move's acceptance (NaN without group
        moves); ``accept`` is then the groups' mean and ``proposal_scale`` the population
        random walk's scale.
    model : pymc.Model, optional
    data : dict, optional
        Arrays to read the rows from instead of the model's data (``{name: array}``, by
        ``pm.Data`` or observed-variable name; N comes from the arrays): see
        :class:`~pymc_minibatch.MinibatchModel`.
    progressbar : bool, default True
        On data of at least a million rows, show each full-data pass of the construction
        (the Laplace fit, the bounds) in a progress bar; ``step.setup_report`` gives the
        passes and seconds of each stage either way.

    Raises
    ------
    BoundsUnavailableError
        If ``bounds="auto"`` and the likelihood is not one of the supported families.
    BoundViolationError
        During sampling, if an evaluated row breaks its bound (the result would be wrong).

    Examples
    --------
    Logistic regression; the bounds and the path are derived from the model:

    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 2)); y = (rng.random(5000) < 0.5).astype("int64")
    >>> with pm.Model() as model:
    ...     beta = pm.Normal("beta", 0, 1, shape=2)
    ...     obs = pm.Bernoulli("y", logit_p=X @ beta, observed=y)
    ...     step = pmm.TunaMH()
    ...     idata = pm.sample(step=step, draws=200, tune=200, chains=1,
    ...                       progressbar=False, random_seed=0)
    >>> step
    TunaMH(expansion_order=2, proposal='pcn', rho=tuned)
    >>> rows_per_step = float(idata["sample_stats"]["batch_size"].mean())
    >>> rows_per_step < 5000
    True

    With your own bounds (here the plain Lipschitz bounds ``c_i = ||x_i||``, as the
    log-sigmoid is 1-Lipschitz in the linear predictor; no control variates):

    >>> bounds = pmm.bounds.Bounds(np.linalg.norm(X, axis=1), metric_vars=["beta"])
    >>> step = pmm.TunaMH(bounds=bounds, model=model)
    >>> idata = pm.sample(step=step, draws=2000, chains=2, model=model)  # doctest: +SKIP
    """

    name = "tuna_mh"
    rule = staticmethod(tuna_rule)
    stats_dtypes_shapes = {
        **BoundedMinibatchStep.stats_dtypes_shapes,
        "kept": (np.int64, []),
        "fallback": (bool, []),
        "chi": (np.float64, []),
        "group_accept": (np.float64, []),
        "shared_accept": (np.float64, []),
        "population_accept": (np.float64, []),
        "group_rho": (np.float64, []),
        "group_chi": (np.float64, []),
    }
    _state_class = TunaMHState

    @renamed_arguments(step_size="proposal_scale", control_variates="expansion_order")
    def __init__(self, vars=None, *, chi=None, fallback=True, group_moves="auto", **options):
        # options: those of BoundedMinibatchStep and MetropolisStep (see the docstring)
        if not any(group_moves is choice for choice in GROUP_MOVES):
            raise ValueError(f"group_moves must be 'auto', True or False, got {group_moves!r}")
        self.fixed_chi = positive_float("chi", chi, allow_none=True)
        self.fallback = bool(fallback)
        super().__init__(vars, **options)
        self.group_moves = self._resolve_group_moves(group_moves)
        self.target_kappa = TARGET_KAPPA if self.group_moves is None else SHARED_KAPPA

    def __repr__(self):
        text = super().__repr__()
        return text if self.group_moves is None else f"{text[:-1]}, group_moves=True)"

    def _resolve_group_moves(self, group_moves):
        """The :class:`~pymc_minibatch.step_methods.group_moves.GroupMoves` of a hierarchical
        model, or None (see the ``group_moves`` parameter)."""
        if group_moves is False:
            return None
        bounds = self.bounds
        reason = None
        if not (bounds.structured and bounds.groups is not None and bounds.n_groups):
            reason = "the model has no groups (no parameter that only one group's rows touch)"
        elif self.proposal != "pcn":
            reason = "they need the pCN proposal with second-order control variates"
        if reason is None:
            structure = self.laplace.structure
            split = group_prior(self.minibatch_model, structure, np.random.default_rng(0))
            if split is None:
                reason = ("the prior does not split by group (a prior that ties groups "
                          "together, or a group's parameter in another variable's prior)")
            else:
                return GroupMoves(self, split)
        if group_moves is True:
            raise ValueError(f"group_moves=True is not possible here: {reason}")
        return None

    def reset_tuning(self):
        super().reset_tuning()
        self.chi_tuning = chi_init(self.fixed_chi, self.target_kappa, MAX_BATCH_FRACTION)
        self.sweep_tuning = None
        if self.group_moves is not None:
            model = self.group_moves.model
            sizes = (0 if block is None else block.coordinates.size
                     for block in (model.population, model.shared_block))  # fmt: skip
            self.sweep_tuning = sweep_tuning_init(*sizes, GROUP_KAPPA, self.fixed_rho)

    def stop_tuning(self):
        if self.tune and self.group_moves is not None:
            self.sweep_tuning = sweep_tuning_final(self.sweep_tuning, self.fixed_rho is None)
        super().stop_tuning()

    def kernel_params(self):
        chi = self.chi_tuning
        # a running mean of M while tuning (also seeds chi when a chain starts untuned)
        tunes_chi = self.fixed_chi is None and (self.tune or chi.chi is None)
        return super().kernel_params(chi=chi.chi, chi_tuning=chi if tunes_chi else None,
                                     fallback=self.fallback)  # fmt: skip

    def info_stats(self, info):
        return {**super().info_stats(info), "kept": info.kept, "fallback": info.fallback,
                "chi": self._chi(info),
                **dict.fromkeys(("group_accept", "shared_accept", "population_accept",
                                 "group_rho", "group_chi"), np.nan)}  # fmt: skip

    def _chi(self, info):
        """The ``chi`` a step decided with (``info`` None: no step)."""
        tuned = info is not None and info.chi_tuning is not None
        return (info.chi_tuning if tuned else self.chi_tuning).chi

    def tune_after(self, info):
        rho = self.rho
        if info.chi_tuning is not None:
            self.chi_tuning = info.chi_tuning
        super().tune_after(info)
        if self.rho != rho:  # M's scale changes with the pCN correlation: tune chi anew
            self.chi_tuning = self.chi_tuning._replace(mean_metric=None)

    def astep(self, q0: RaveledVars):
        if self.group_moves is None:
            return super().astep(q0)
        return self._sweep(q0)

    def _sweep(self, q0):
        """One step with group moves: one call of the sweep's kernel
        (:mod:`pymc_minibatch.kernels.group_sweep`)."""
        q0 = self.chain_start(q0)
        theta, model = q0.data, self.group_moves.model
        state = group_sweep.State(theta, self.current_logdensity(theta, model.logprior))
        params = self._sweep_params()
        state, info = group_sweep.step(self.rng, state, model, params, self.rule)
        self.check_bounds(info.group)
        if info.shared is not None:
            self.check_bounds(info.shared)
        self.remember(state.position, state.logdensity)
        stats = self._sweep_stats(info, params)
        if self.tune:
            self.sweep_tuning = sweep_tuning_update(self.sweep_tuning, info, params.search)
        if info.shared is not None:
            self.tune_after(info.shared)
        return RaveledVars(state.position, q0.point_map_info), [stats]

    def _sweep_params(self):
        tuning, tune = self.sweep_tuning, self.tune
        search = tune and self.fixed_rho is None and rho_searching(tuning.rho)
        return group_sweep.Params(tuning.population, tuning.rho.rho, search, tuning.chi,
                                  tuning.shift.shift, tune, self.target_accept,
                                  self.row_bounds(), self.kernel_params())  # fmt: skip

    def _sweep_stats(self, info, params):
        """A sweep's statistics: of its group move and, when there is one, its shared move."""
        group, shared_info = info.group, info.shared
        shared_rows = 0 if shared_info is None else shared_info.batch_size
        chi = self._chi(shared_info)
        return {
            "tune": self.tune,
            "accept": float(group.accept.mean()),
            "accepted": bool(group.accepted.any() or (shared_info and shared_info.accepted)),
            "proposal_scale": info.population.scale,
            "nonfinite": bool(group.nonfinite or (shared_info and shared_info.nonfinite)),
            "batch_size": group.batch_size + shared_rows,
            "expected_batch_size": group.expected_batch_size
            + (0.0 if shared_info is None else shared_info.expected_batch_size),
            "bound_ratio": max(group.bound_ratio,
                               0.0 if shared_info is None else shared_info.bound_ratio),
            "expansion_order": 2,
            "rho": self.rho,
            "outside_region": bool(shared_info and shared_info.outside_region),
            "kept": group.kept + (0 if shared_info is None else shared_info.kept),
            "fallback": bool(shared_info and shared_info.fallback),
            "chi": np.nan if chi is None else chi,
            "group_accept": float(group.accept.mean()),
            "shared_accept": np.nan if shared_info is None else shared_info.accept,
            "population_accept": info.population_accept,
            "group_rho": params.rho,
            "group_chi": info.chi.chi,
        }  # fmt: skip
