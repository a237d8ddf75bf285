"""Preconditioned Crank–Nicolson proposals, reversible for a Gaussian approximation.

``theta' = mu + rho (theta - mu) + sqrt(1 - rho^2) L xi`` with ``xi ~ N(0, I)`` and
``0 <= rho < 1`` leaves ``N(mu, L L')`` invariant and is reversible for it (Cotter, Roberts,
Stuart & White 2013, "MCMC methods for functions: modifying old algorithms to make them
faster", Statistical Science 28(3), eq. 4.2): ``pi_hat(theta) q(theta' | theta)`` is
symmetric. So with a target ``pi = pi_hat exp(R)`` the MH log-ratio is ``R(theta') -
R(theta)``; ``rho = 0`` is the independence sampler from ``pi_hat``. In whitened coordinates
``z = L^-1 (theta - mu)``, ``log pi_hat(theta) = -||z||^2 / 2 + const``.

``rho`` is chosen while tuning: each candidate runs for blocks of ``TRIAL_STEPS`` steps, in
turn, and the one with the largest expected squared jump distance in ``z`` per unit of cost
wins (Pasarica & Gelman 2010, "Adaptively scaling the Metropolis algorithm using expected
squared jumped distance", Statistica Sinica 20) among those accepted at a rate of at least
``MIN_SEARCH_ACCEPT``: a near-independence proposal owes a high squared jump to a few long
jumps at a low rate, and a chain that lands where the posterior outweighs its Laplace
approximation sticks there (seen on a varying-intercept model with 1000 groups, where
``rho = 0`` won on rare jumps and then was almost never accepted). A step costs
``1 + n_rows / OVERHEAD_ROWS`` units: the evaluations of the prior and the proposal cost about
as much as ``OVERHEAD_ROWS`` rows of likelihood. The cost model, not a clock, keeps the choice
reproducible under a seed.
"""

import math
from typing import NamedTuple

import numpy as np

#: pCN correlations tried while tuning (0.99 for a thousand groups and more: every group moves
#: at each step, and the mismatch of each to the Laplace approximation adds up).
RHO_CANDIDATES = (0.0, 0.5, 0.8, 0.95, 0.99)
#: Steps per block of one candidate while searching.
TRIAL_STEPS = 25
#: Blocks per candidate before the best is kept (the search takes
#: ``len(RHO_CANDIDATES) * TRIAL_STEPS * SEARCH_ROUNDS`` tuning steps).
SEARCH_ROUNDS = 4
#: Smallest mean acceptance probability of a candidate that may win the search (unless none
#: reaches it).
MIN_SEARCH_ACCEPT = 0.15
#: Rows of likelihood that cost about as much as a step's fixed work.
OVERHEAD_ROWS = 200.0


def pcn_propose(rng: np.random.Generator, z, rho: float):
    """``rho z + sqrt(1 - rho^2) xi``, ``xi ~ N(0, I)``: the move in whitened coordinates
    ``z = L^-1 (theta - mean)``, where it is reversible for ``N(0, I)`` (in ``theta``,
    ``mean + rho (theta - mean) + sqrt(1 - rho^2) L xi``, reversible for ``N(mean, L L')``)."""
    return rho * z + math.sqrt(1.0 - rho * rho) * rng.standard_normal(z.shape)


def cubic_metric(z, z2) -> float:
    """``||z2 - z|| (a^2 + a a2 + a2^2)`` with ``a = ||z||``, ``a2 = ||z2||``: the metric of the
    second-order control-variate bounds (:mod:`pymc_minibatch.model.taylor`)."""
    a, a2 = math.sqrt(z @ z), math.sqrt(z2 @ z2)
    jump = z2 - z
    return math.sqrt(jump @ jump) * (a * a + a * a2 + a2 * a2)


class RhoSearch(NamedTuple):
    """Sums per candidate ``rho``: expected squared jumps, cost units, steps and acceptance
    probabilities."""

    jumps: np.ndarray
    cost: np.ndarray
    steps: np.ndarray
    accepts: np.ndarray


def rho_search_init(n_candidates: int = len(RHO_CANDIDATES)) -> RhoSearch:
    return RhoSearch(*(np.zeros(n_candidates) for _ in range(4)))


def rho_search_candidate(search: RhoSearch) -> int | None:
    """Index of the candidate to run next, or None once the search is over."""
    done = int(search.steps.sum())
    n_candidates = search.steps.size
    if done >= n_candidates * TRIAL_STEPS * SEARCH_ROUNDS:
        return None
    return (done // TRIAL_STEPS) % n_candidates


def rho_search_update(search: RhoSearch, index: int, accept: float, squared_jump: float,
                      n_rows: float) -> RhoSearch:  # fmt: skip
    """Adds one step of candidate ``index``: acceptance probability, ``||z' - z||^2`` of the
    proposal, and rows evaluated."""
    jumps, cost, steps, accepts = (array.copy() for array in search)
    jumps[index] += accept * squared_jump
    cost[index] += 1.0 + n_rows / OVERHEAD_ROWS
    steps[index] += 1
    accepts[index] += accept
    return RhoSearch(jumps, cost, steps, accepts)


def rho_search_best(search: RhoSearch) -> int:
    """Index of the candidate with the most squared jump per cost among those accepted at a
    mean rate of ``MIN_SEARCH_ACCEPT`` or more (all tried ones if none is; untried ones never
    win)."""
    tried = search.steps > 0
    rate = search.accepts / np.maximum(search.steps, 1.0)
    eligible = tried & (rate >= MIN_SEARCH_ACCEPT)
    eligible = eligible if eligible.any() else tried
    score = np.where(eligible, search.jumps / np.maximum(search.cost, 1e-300), -np.inf)
    return int(np.argmax(score))


def group_conditional_means(delta, factor):
    """The Gaussian approximation's conditional mean of every group's local coordinates
    given the shared ones, as an offset from the mode, shape ``(G, k)``.

    ``delta = theta - mode``; ``factor`` the :class:`~pymc_minibatch.kernels.arrowhead.
    ArrowheadFactor` of the approximation's precision ``P``. Given ``delta_S``, group ``g``'s
    coordinates have mean ``-A_g^-1 B_g delta_S = -L_g^-T W_g delta_S`` (``A_g = L_g L_g^T``,
    ``B_g = L_g W_g``), independently across groups.
    """
    left = np.transpose(factor.local_chol_inverse, (0, 2, 1))  # L_g^-T
    return -np.einsum("gab,gbs,s->ga", left, factor.coupling, delta[factor.shared])


def stacked_pcn(rng: np.random.Generator, position, mean, precision_chol, rho: float):
    """pCN moves of ``G`` independent blocks, each reversible for ``N(mean_g, A_g^-1)``
    with ``A_g = C_g C_g^T`` (``precision_chol``, lower, shape ``(G, k, k)``).

    Returns the proposal (shape ``(G, k)``) and each block's ``log N(x_g) - log N(x'_g)``,
    the reference densities' ratio that enters its acceptance ratio.
    """
    xi = rng.standard_normal(position.shape)
    noise = np.linalg.solve(np.transpose(precision_chol, (0, 2, 1)), xi[..., None])[..., 0]
    proposal = mean + rho * (position - mean) + np.sqrt(1.0 - rho * rho) * noise

    def half_square(x):  # ||C_g^T (x_g - mean_g)||^2 / 2
        whitened = np.einsum("gba,gb->ga", precision_chol, x - mean)
        return 0.5 * np.sum(whitened**2, axis=1)

    return proposal, half_square(proposal) - half_square(position)


class SharedBlock(NamedTuple):
    """A block of shared coordinates and the Gaussian approximation's conditional of it
    given every other coordinate (:func:`shared_block`)."""

    coordinates: np.ndarray
    """Positions in ``theta``."""
    columns: np.ndarray
    """Their positions among the matrix's shared coordinates."""
    others: np.ndarray
    """The other shared coordinates' positions among them."""
    covariance_chol: np.ndarray
    """Lower Cholesky factor of the conditional covariance ``P_TT^-1``."""
    covariance: np.ndarray


def shared_block(precision, coordinates) -> SharedBlock:
    """The :class:`SharedBlock` of ``coordinates`` (shared ones of the
    :class:`~pymc_minibatch.kernels.arrowhead.ArrowheadMatrix` ``precision``)."""
    columns = np.flatnonzero(np.isin(precision.shared, coordinates))
    others = np.setdiff1d(np.arange(precision.shared.size), columns)
    covariance = np.linalg.inv(precision.shared_block[np.ix_(columns, columns)])
    covariance = 0.5 * (covariance + covariance.T)
    return SharedBlock(precision.shared[columns], columns, others,
                       np.linalg.cholesky(covariance), covariance)  # fmt: skip


def shared_conditional_mean(delta, precision, block: SharedBlock):
    """``-P_TT^-1 P_T,rest delta_rest``: the Gaussian approximation's conditional mean of
    ``block``'s coordinates given all the others, as an offset from the mode (``P_T,rest
    delta_rest`` summed over the other shared coordinates and every group's coupling)."""
    pull = precision.shared_block[np.ix_(block.columns, block.others)] @ delta[
        precision.shared[block.others]
    ] + np.einsum("gat,ga->t", precision.coupling[:, :, block.columns], delta[precision.local])
    return -block.covariance @ pull


def shared_given_rest(rng: np.random.Generator, delta, precision, block: SharedBlock,
                      rho: float, shift=0.0):  # fmt: skip
    """A pCN move of ``block``'s coordinates on a Gaussian conditional given all the
    others: ``N(shared_conditional_mean + shift, P_TT^-1)`` (``shift`` a constant, such as
    the mean gap between the draws and the approximation's conditional mean, measured
    while tuning).

    Returns the proposed ``delta`` and the Gaussian's ``log N(x) - log N(x')``, which enters
    the acceptance ratio (the whole approximation's density ratio only when ``shift`` is
    zero)."""
    mean = shared_conditional_mean(delta, precision, block) + shift
    current = delta[block.coordinates]
    noise = block.covariance_chol @ rng.standard_normal(block.coordinates.size)
    moved = mean + rho * (current - mean) + np.sqrt(1.0 - rho * rho) * noise
    proposal = delta.copy()
    proposal[block.coordinates] = moved
    precision_block = precision.shared_block[np.ix_(block.columns, block.columns)]

    def half_square(x):
        return 0.5 * float((x - mean) @ precision_block @ (x - mean))

    return proposal, half_square(moved) - half_square(current)
