"""The exact Metropolis–Hastings family as one kernel: TunaMH, TFMH, PoissonMH, full-data MH.

One transition (Metropolis et al. 1953; Hastings 1970): a proposal ``theta'`` and the log
ratio of its densities ``log q(theta | theta') - log q(theta' | theta)``; the part of the
log acceptance ratio computed exactly at every step (the prior with the Jacobians, the
control variates' remainder, or for full-data MH the whole posterior); the bounds' metric
``M(theta, theta')`` of the move; then an acceptance *rule* on the rows' part, the only
thing that differs between the samplers and a function passed in:

- :func:`pymc_minibatch.kernels.tuna.tuna_rule`: TunaMH's Poisson auxiliary variables
  (Zhang, Cooper & De Sa 2020, "Asymptotically Optimal Exact Minibatch
  Metropolis-Hastings", NeurIPS, Algorithm 2);
- :func:`pymc_minibatch.kernels.tfmh.tfmh_rule`: the truncated factorised test (Cornish et
  al. 2019, "Scalable Metropolis-Hastings for exact Bayesian inference with large
  datasets", ICML; Zhang, Cooper & De Sa 2020, Section 3);
- :func:`pymc_minibatch.kernels.poisson_mh.poisson_mh_rule`: PoissonMH's global bounds
  (Zhang, Cooper & De Sa 2020, Appendix D);
- :func:`metropolis_rule`: the MH test on the exact part alone (full-data MH, whose exact
  part is the whole posterior).

A rule is ``rule(rng, exact_log_ratio, move, params) -> Decision``. Where the bounds hold
only on a trust region, a move with a point outside it is decided on the full data
(``move.full_data``): the choice depends on the pair symmetrically, so the chain stays
exact. The proposal is a Gaussian random walk (``"rw"``), pCN in the control variates'
whitening (``"pcn"``, :mod:`pymc_minibatch.kernels.pcn`), or pCN of a block of coordinates
on a Gaussian conditional given the others (``"conditional"``, TunaMH's shared move on a
hierarchical model).
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from pymc_minibatch.kernels.exact_tuning import ChiTuning, chi_update
from pymc_minibatch.kernels.pcn import pcn_propose, shared_given_rest
from pymc_minibatch.kernels.random_walk import log_accept_to_prob
from pymc_minibatch.kernels.random_walk import propose as random_walk


class State(NamedTuple):
    position: np.ndarray
    logdensity: float
    """The exactly computed part of the log target at ``position`` (the log prior with the
    Jacobians; the log posterior for full-data MH), kept so that a rejection costs none."""


class ExactModel(NamedTuple):
    """The model, as the callables a step calls (those a sampler does not use are None)."""

    logdensity: Callable[[np.ndarray], float]
    """The exactly computed part of the log target (see :class:`State`)."""
    remainder: Callable[[np.ndarray, np.ndarray], float] | None = None
    """``remainder(theta, theta')``: the control variates' summed expansions' difference."""
    row_pair: Callable | None = None
    """``row_pair(theta, theta', idx)``: rows' terms at both points."""
    loglik: Callable | None = None
    """``loglik(theta, idx)``: rows' log-likelihoods at one point."""
    full_loglik: Callable[[np.ndarray], float] | None = None
    metrics: Callable | None = None
    """``metrics(theta, theta', whitened)``: ``M_g`` of each group of rows; ``whitened`` the
    pair's ``(z, z')`` when known, else None."""
    inside_region: Callable[[np.ndarray], bool] | None = None
    """Whether a point lies where the bounds hold (None: everywhere)."""
    whitened: Callable | None = None
    """``whitened(theta)``: ``z`` of the control variates' whitening (pCN)."""
    from_whitened: Callable[[np.ndarray], np.ndarray] | None = None
    """The point of whitened coordinates ``z`` (pCN)."""


class Conditional(NamedTuple):
    """A block of coordinates moved by pCN on a Gaussian conditional given the others
    (:func:`~pymc_minibatch.kernels.pcn.shared_given_rest`)."""

    center: np.ndarray
    precision: Any
    block: Any
    shift: np.ndarray


class Params(NamedTuple):
    """A step's settings (the rule reads those it needs)."""

    proposal: str = "rw"
    """``"rw"``, ``"pcn"`` or ``"conditional"``."""
    scale: float = 1.0
    """The random walk's scale."""
    chol: np.ndarray | None = None
    """The random walk's Cholesky factor (None: identity)."""
    rho: float = 0.0
    """pCN's correlation."""
    conditional: Conditional | None = None
    search: bool = False
    """Report the move's squared jump in whitened coordinates (pCN's ``rho`` search)."""
    rows: Any = None
    """The rows' bounds and how to draw rows (a rule's)."""
    n_data: int = 0
    fallback: bool = True
    """Decide on the full data when the expected batch reaches ``n_data`` (TunaMH, PoissonMH)."""
    chi: float | None = None
    """TunaMH's ``chi``."""
    chi_tuning: ChiTuning | None = None
    """When set, ``chi`` is first tuned on this step's metric (it replaces ``chi``)."""
    poisson_rate: float = 0.0
    """PoissonMH's Poisson rate ``lambda``."""


class Move(NamedTuple):
    """A proposed move, as a rule sees it."""

    theta: np.ndarray
    proposal: np.ndarray
    metrics: np.ndarray | None
    full_data: bool
    """A point lies outside the trust region: decide on the full data."""
    remainder: float
    model: ExactModel

    def row_pair(self, idx):
        """Rows ``idx``'s terms at the current point and at the proposal."""
        return self.model.row_pair(self.theta, self.proposal, idx)

    def full_loglik_diff(self) -> float:
        """The rows' terms' full-data difference (the remainder is in the exact part)."""
        model = self.model
        return model.full_loglik(self.proposal) - model.full_loglik(self.theta) - self.remainder


class Decision(NamedTuple):
    """What a rule decided."""

    accept: float
    accepted: bool
    batch_size: int
    """Rows evaluated (N on a full-data step)."""
    kept: int
    """Rows in the auxiliary multiset (TunaMH, PoissonMH)."""
    expected_batch_size: float
    fallback: bool
    """Decided on the full data."""
    nonfinite: bool
    """A log-density at the proposal was NaN or infinite; the proposal was rejected."""
    bound_ratio: float
    """max_i |Delta_i| / (c_i m_i) over the drawn rows: above 1 a local bound broke."""
    bound_excess: float = 0.0
    """How far a row left its global bounds, relative to its size (PoissonMH)."""


#: A step's report: its rule's :class:`Decision`, then ``outside_region`` (a point lay outside
#: the trust region), ``squared_jump`` (``||z' - z||^2`` in whitened coordinates when
#: ``params.search``, else NaN) and ``chi_tuning`` (the tuning of ``chi`` after this step's
#: metric, when ``params.chi_tuning``).
Info = NamedTuple("Info", [*Decision.__annotations__.items(), ("outside_region", bool),
                           ("squared_jump", float), ("chi_tuning", ChiTuning | None)])  # fmt: skip


Rule = Callable[[np.random.Generator, float, Move, Params], Decision]


def init(position, logdensity_fn: Callable[[np.ndarray], float]) -> State:
    """The state at ``position``."""
    return State(position, float(logdensity_fn(position)))


def propose(rng: np.random.Generator, theta, model: ExactModel, params: Params):
    """A proposal, its densities' log ratio ``log q(theta | theta') - log q(theta' |
    theta)`` and, for pCN, the whitened pair ``(z, z')`` (else None). Zero for the random
    walk (symmetric); pCN is reversible for ``pi_hat = N(center, L L')``, whose density ratio
    ``log pi_hat(theta) - log pi_hat(theta') = (||z'||^2 - ||z||^2) / 2`` it contributes."""
    if params.proposal == "rw":
        return random_walk(rng, theta, params.scale, params.chol), 0.0, None
    if params.proposal == "pcn":
        z = model.whitened(theta)
        z2 = pcn_propose(rng, z, params.rho)
        return model.from_whitened(z2), 0.5 * float(z2 @ z2 - z @ z), (z, z2)
    center, precision, block, shift = params.conditional
    delta2, log_ratio = shared_given_rest(rng, theta - center, precision, block, params.rho,
                                          shift)  # fmt: skip
    return center + delta2, log_ratio, None


def step(rng: np.random.Generator, state: State, model: ExactModel, params: Params,
         rule: Rule) -> tuple[State, Info]:  # fmt: skip
    """One exact MH transition: propose, compute the exact part of the log ratio and the
    metric, and let ``rule`` accept or reject on the rows."""
    theta = state.position
    proposal, proposal_log_ratio, whitened = propose(rng, theta, model, params)
    if whitened is None and params.search:
        whitened = model.whitened(theta), model.whitened(proposal)
    metrics = None if model.metrics is None else model.metrics(theta, proposal, whitened)
    logdensity = model.logdensity(proposal)
    remainder = 0.0 if model.remainder is None else model.remainder(theta, proposal)
    exact_log_ratio = proposal_log_ratio + logdensity - state.logdensity + remainder
    inside = model.inside_region is None or (
        model.inside_region(theta) and model.inside_region(proposal)
    )
    chi_tuning = params.chi_tuning
    if chi_tuning is not None:  # chi is tuned on the metric of the move it decides
        rows = params.rows
        chi_tuning = chi_update(chi_tuning, metrics, rows.group_totals, rows.total,
                                params.n_data)  # fmt: skip
        params = params._replace(chi=chi_tuning.chi)
    move = Move(theta, proposal, metrics, not inside, remainder, model)
    decision = rule(rng, exact_log_ratio, move, params)
    jump = np.nan
    if whitened is not None:
        difference = whitened[1] - whitened[0]
        jump = float(difference @ difference)
    new_state = State(proposal, logdensity) if decision.accepted else state
    return new_state, Info(*decision, not inside, jump, chi_tuning)


def mh_test(rng: np.random.Generator, log_ratio: float):
    """Metropolis–Hastings' test: ``(accept, accepted, nonfinite)``; a NaN or infinite ratio
    is a rejection, without a draw."""
    if not np.isfinite(log_ratio):
        return 0.0, False, True
    return log_accept_to_prob(log_ratio), bool(np.log(rng.uniform()) < log_ratio), False


def full_data_mh(rng: np.random.Generator, exact_log_ratio: float,
                 full_loglik_diff: Callable[[], float]):  # fmt: skip
    """A Metropolis–Hastings decision on all rows: ``(accept, accepted, nonfinite)``."""
    return mh_test(rng, exact_log_ratio + full_loglik_diff())


def metropolis_rule(rng: np.random.Generator, exact_log_ratio: float, move: Move,
                    params: Params) -> Decision:  # fmt: skip
    """Full-data MH: the exact part is the whole log posterior."""
    accept, accepted, nonfinite = mh_test(rng, exact_log_ratio)
    n_data = params.n_data
    return Decision(accept, accepted, n_data, n_data, float(n_data), True, nonfinite, np.nan)
