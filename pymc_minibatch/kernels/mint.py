"""MINT-MCMC: Metropolis–Hastings on a minibatch estimate, sampling a tempered posterior.

Li & Wong (2017), "Mini-batch Tempered MCMC", arXiv:1707.09705
(the docs page "MINT and CMINT: tempered minibatch MH" states it). With ``n`` rows and
batches of ``m = n^(2 tau)`` rows drawn without replacement, ``lambda = alpha tau`` and
``mu_S(theta) = mean_{j in S} l_j(theta)``, the state is ``(theta, mu_S(theta))``: the
estimate is stored with the point and never recomputed. One step proposes ``theta'``,
draws a fresh batch ``S'`` and accepts with

    log r = n^lambda (mu_S'(theta') - mu_S(theta)) + E(theta') - E(theta)
            + log q(theta | theta') - log q(theta' | theta)

where ``E`` is the prior term: ``log p(theta)``, or with a tempered prior
``(log p(theta) - log J(theta)) / T + log J(theta)`` (the prior of the constrained values
raised to ``1 / T``, the transform Jacobian ``J`` left as it is). This is a pseudo-marginal
MH chain: its invariant ``theta``-marginal is exactly
``f*(theta) ∝ exp(E(theta)) E_S[exp(n^lambda mu_S(theta))]``, close to
``exp(E) exp(n^lambda mu(theta) + eps^2 s^2(theta) (1 - m/n) / 2)`` with
``eps = n^(lambda - tau)`` and ``s^2`` the variance of the rows' log-likelihoods, i.e. the
posterior raised to ``1 / T``, ``T = n^(1 - lambda)``, slightly widened.

- :func:`mint_evaluate`: the state at ``theta`` on a fresh batch (every proposal; the
  chain's start is :func:`init`).
- :func:`step`: one transition: proposal (Gaussian random walk, or SGLD on the
  minibatch gradient of the tempered target), its evaluation, :func:`mint_decide`.

CMINT (the cyclic variant, Section 3.2.3 of the paper) multiplies the step size by ``decay``
every ``decay_every`` epochs and by ``raise_factor`` at the end of every round of
``round_epochs`` epochs, taking a snapshot of ``theta`` just before each raise
(:func:`cyclic_step_sizes` gives the schedule, :func:`cyclic_draw` a draw's place in it).
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.noise import standard_normal
from pymc_minibatch.kernels.random_walk import propose


class TemperingSettings(NamedTuple):
    tau: float
    """``tau = log m / (2 log n)``."""
    tempering_exponent: float
    """``lambda = alpha tau``."""
    scale: float
    """``n^lambda``, the factor on the minibatch mean."""
    temperature: float
    """``T = n^(1 - lambda)``: the likelihood enters as ``exp(sum_i l_i / T)``."""
    epsilon: float
    """``eps = n^(lambda - tau)``, the size of the widening term."""


def tempering_settings(n_data: int, batch_size: int, alpha: float) -> TemperingSettings:
    """MINT's constants for ``n`` rows, batches of ``m`` rows and ``lambda = alpha tau``."""
    if not 1 <= batch_size <= n_data:
        raise ValueError(f"batch_size must lie in [1, {n_data}], got {batch_size}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if n_data < 2:
        raise ValueError("MINT needs at least two rows")
    tau = 0.5 * np.log(batch_size) / np.log(n_data)
    exponent = alpha * tau
    return TemperingSettings(
        tau=float(tau),
        tempering_exponent=float(exponent),
        scale=float(n_data**exponent),
        temperature=float(n_data ** (1.0 - exponent)),
        epsilon=float(n_data ** (exponent - tau)),
    )


class State(NamedTuple):
    position: np.ndarray
    estimate: float
    """``mu_S(theta)``: the mean log-likelihood on the batch drawn when ``theta`` was accepted."""
    prior_term: float
    """``E(theta)``: the exact (tempered) prior term at ``theta``."""
    gradient: np.ndarray | None
    """Minibatch gradient of the tempered log target at ``theta`` on the same batch (SGLD)."""


class Info(NamedTuple):
    accept: float
    accepted: bool
    nonfinite: bool
    """The proposal's estimate or prior term was NaN or infinite; it was rejected."""


def sgld_proposal(rng: np.random.Generator, position, gradient, step_size: float,
                  preconditioner=None):  # fmt: skip
    """``theta + (h / 2) L L^T g + sqrt(h) L xi``, ``xi ~ N(0, I)``: the Langevin step of
    Welling & Teh (2011) in the coordinates ``z = L^-1 theta`` of ``preconditioner`` (a
    :mod:`~pymc_minibatch.kernels.preconditioning` map; ``None``: ``L = I``)."""
    noise = standard_normal(rng, position.shape)
    if preconditioner is None:
        return position + 0.5 * step_size * gradient + np.sqrt(step_size) * noise
    drift = 0.5 * step_size * preconditioner.gradient_to_z(gradient)
    return position + preconditioner.to_theta(drift + np.sqrt(step_size) * noise)


def sgld_log_density(to, start, gradient, step_size: float, preconditioner=None) -> float:
    """``log q(to | start)`` of :func:`sgld_proposal`, up to a constant shared by both
    directions (``log |L|`` among it)."""
    if preconditioner is None:
        diff = to - start - 0.5 * step_size * gradient
    else:
        drift = 0.5 * step_size * preconditioner.gradient_to_z(gradient)
        diff = preconditioner.to_z(to - start) - drift
    return float(-(diff @ diff) / (2.0 * step_size))


def mint_decide(
    rng: np.random.Generator,
    state: State,
    proposal: State,
    scale: float,
    log_proposal_ratio: float = 0.0,
) -> tuple[State, Info]:
    """Accept or reject ``proposal`` (its estimate on a fresh batch); returns the new state.

    ``log_proposal_ratio`` is ``log q(theta | theta') - log q(theta' | theta)`` (zero for a
    symmetric random walk).
    """
    finite = np.isfinite([proposal.estimate, proposal.prior_term, log_proposal_ratio])
    if not np.all(finite):
        return state, Info(0.0, False, True)
    log_ratio = (
        scale * (proposal.estimate - state.estimate)
        + proposal.prior_term
        - state.prior_term
        + log_proposal_ratio
    )
    if np.isnan(log_ratio):
        return state, Info(0.0, False, True)
    accepted = bool(np.log(rng.uniform()) < log_ratio)
    accept = float(np.exp(min(log_ratio, 0.0)))
    return (proposal if accepted else state), Info(accept, accepted, False)


class MintTarget(NamedTuple):
    """The model, as a MINT step evaluates it (gradients for the ``"sgld"`` proposal only)."""

    loglik: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray | None]]
    """``loglik(theta, idx)``: the log-likelihoods of the rows of indices ``idx`` and the
    gradient of their sum (``None`` for ``"rw"``)."""
    logprior: Callable[[np.ndarray], tuple[float, np.ndarray | None]]
    """``logprior(theta)``: ``log p(theta)``, transform Jacobians included, and its gradient
    (``None`` for ``"rw"``)."""
    log_jacobian: Callable[[np.ndarray], tuple[float, np.ndarray]] | None = None
    """``log_jacobian(theta)``: the transforms' log Jacobian (the part of ``logprior`` left
    untempered) and its gradient; called only with a tempered prior."""


class MintConfig(NamedTuple):
    """What stays fixed along a MINT chain."""

    tempering: TemperingSettings
    n_data: int
    batch_size: int
    """Rows per batch ``m``, drawn without replacement."""
    proposal: str = "rw"
    """``"rw"``: Gaussian random walk; ``"sgld"``: Langevin step on the minibatch gradient."""
    temper_prior: bool = True
    """Raise the prior to ``1 / T`` too (else only the likelihood is tempered)."""


def tempered_prior(position, target: MintTarget, config: MintConfig):
    """``(E(theta), its gradient)``; the gradient is ``None`` when ``target`` gives none."""
    logprior, prior_grad = target.logprior(position)
    if not config.temper_prior:
        return logprior, prior_grad
    log_jacobian, jacobian_grad = target.log_jacobian(position)
    inverse_t = 1.0 / config.tempering.temperature
    term = (logprior - log_jacobian) * inverse_t + log_jacobian
    if prior_grad is None:
        return term, None
    return term, (prior_grad - jacobian_grad) * inverse_t + jacobian_grad


def mint_evaluate(
    rng: np.random.Generator, position, target: MintTarget, config: MintConfig
) -> State:
    """``(theta, mu_S(theta), E(theta), gradient)`` on a fresh batch ``S``.

    For ``"sgld"`` the gradient is that of the tempered target on the same batch,
    ``n^lambda / m * sum_{j in S} grad l_j(theta) + grad E(theta)``.
    """
    idx = rng.choice(config.n_data, size=config.batch_size, replace=False)
    prior_term, prior_grad = tempered_prior(position, target, config)
    loglik, grad_sum = target.loglik(position, idx)
    gradient = None
    if config.proposal == "sgld":
        gradient = config.tempering.scale * grad_sum / config.batch_size + prior_grad
    return State(position, float(np.mean(loglik)), prior_term, gradient)


def init(rng: np.random.Generator, position, target: MintTarget, config: MintConfig) -> State:
    """The chain's state at ``position``: the estimate on a fresh batch, as for a proposal."""
    return mint_evaluate(rng, position, target, config)


def step(
    rng: np.random.Generator,
    state: State,
    target: MintTarget,
    config: MintConfig,
    proposal_scale: float,
    chol=None,
) -> tuple[State, Info]:
    """One MINT transition from ``state``; returns the new state and the decision.

    ``"rw"`` proposes ``theta + proposal_scale * chol @ z``; ``"sgld"`` proposes with
    :func:`sgld_proposal` at ``h = proposal_scale^2`` (noise of sd ``proposal_scale`` in the
    coordinates of ``chol``, a preconditioner or ``None``) and enters the reverse density
    into the ratio. The proposal is
    evaluated on a fresh batch (:func:`mint_evaluate`) and accepted by :func:`mint_decide`;
    a rejection keeps ``state``, estimate included.
    """
    theta = state.position
    if config.proposal == "rw":
        candidate = mint_evaluate(rng, propose(rng, theta, proposal_scale, chol), target, config)
        log_q_ratio = 0.0
    else:
        h = proposal_scale**2
        position = sgld_proposal(rng, theta, state.gradient, h, chol)
        candidate = mint_evaluate(rng, position, target, config)
        log_q_ratio = sgld_log_density(
            theta, position, candidate.gradient, h, chol
        ) - sgld_log_density(position, theta, state.gradient, h, chol)
    return mint_decide(rng, state, candidate, config.tempering.scale, log_q_ratio)


class CyclicSchedule(NamedTuple):
    step_sizes: np.ndarray
    """Step size of each epoch: epoch ``e`` (counting from 1) uses ``step_sizes[e - 1]``."""
    snapshot_epochs: list[int]
    """The epochs ending in a snapshot."""


class CyclicDraw(NamedTuple):
    epoch: int
    """The draw's epoch, counting from 1."""
    step_size: float
    snapshot: bool
    """The draw is the last step of a snapshot epoch: a member of the ensemble."""


def cyclic_step_sizes(
    initial: float,
    n_epochs: int,
    *,
    decay: float,
    decay_every: int,
    raise_factor: float,
    round_epochs: int,
    n_rounds: int,
) -> CyclicSchedule:
    """CMINT's step size for each epoch, and the epochs that end with a snapshot.

    At the end of epoch ``e`` (counting from 1): if ``e`` is a multiple of ``decay_every``
    the step size is multiplied by ``decay``; if ``e`` is a multiple of ``round_epochs`` and
    at most ``n_rounds * round_epochs``, a snapshot is taken and, unless this was the last
    round, the step size is multiplied by ``raise_factor``. After the last round the step
    size stays where it is.

    Returns ``(step_sizes, snapshot_epochs)``: an array of ``n_epochs`` step sizes (epoch
    ``e`` uses ``step_sizes[e - 1]``) and the 1-based epochs ending in a snapshot.
    """
    sizes = np.empty(n_epochs)
    size = float(initial)
    last_epoch = n_rounds * round_epochs
    snapshots = []
    for epoch in range(1, n_epochs + 1):
        sizes[epoch - 1] = size
        if epoch > last_epoch:
            continue
        if epoch % decay_every == 0:
            size *= decay
        if epoch % round_epochs == 0:
            snapshots.append(epoch)
            if epoch < last_epoch:
                size *= raise_factor
    return CyclicSchedule(sizes, snapshots)


def cyclic_draw(schedule: CyclicSchedule, steps_per_epoch: int, draw: int) -> CyclicDraw:
    """Draw ``draw``'s (counting from 0, after tuning) place in ``schedule``.

    Epochs are ``steps_per_epoch`` consecutive draws; a draw is a snapshot when it is the
    last of an epoch in ``schedule.snapshot_epochs``. Draws past the schedule keep its last
    step size.
    """
    epoch = draw // steps_per_epoch + 1
    step_size = float(schedule.step_sizes[min(epoch, schedule.step_sizes.size) - 1])
    snapshot = (draw + 1) % steps_per_epoch == 0 and epoch in schedule.snapshot_epochs
    return CyclicDraw(epoch, step_size, snapshot)
