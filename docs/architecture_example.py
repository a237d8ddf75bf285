"""The worked example of the docs page "Architecture": a new sampler in one kernel module and
about 30 lines of PyMC wiring.

The sampler is the Metropolis-adjusted Langevin algorithm on the full data (Roberts &
Tweedie 1996, "Exponential convergence of Langevin distributions and their discrete
approximations", Bernoulli 2(4), eq. 2.2 and the MH correction of Section 1.4): the proposal
``theta' = theta + (h^2 / 2) g(theta) + h z`` with ``g`` the gradient of the log posterior,
``z ~ N(0, I)``, accepted with the Metropolis–Hastings ratio of the Gaussian proposal
densities. ``tests/test_architecture_example.py`` checks it against an analytic posterior.
In the package, the first part would be ``pymc_minibatch/kernels/mala.py`` and the second a
class in ``pymc_minibatch/step_methods/``.
"""

# --- kernel: pure NumPy, the protocol of pymc_minibatch.kernels.base ----------------------
from collections.abc import Callable
from typing import NamedTuple

import numpy as np


class State(NamedTuple):
    position: np.ndarray
    logdensity: float
    gradient: np.ndarray


class Info(NamedTuple):
    accept: float
    accepted: bool
    nonfinite: bool


def init(position, logdensity_and_grad: Callable) -> State:
    """The state at ``position``: the log posterior and its gradient there."""
    value, gradient = logdensity_and_grad(position)
    return State(position, float(value), gradient)


def _log_proposal(to, start: State, step_size):
    mean = start.position + 0.5 * step_size**2 * start.gradient
    return -0.5 * np.sum((to - mean) ** 2) / step_size**2


def step(rng: np.random.Generator, state: State, logdensity_and_grad: Callable,
         step_size: float) -> tuple[State, Info]:  # fmt: skip
    """One MALA transition; a proposal whose log posterior is not finite is rejected."""
    noise = rng.standard_normal(state.position.shape)
    position = state.position + 0.5 * step_size**2 * state.gradient + step_size * noise
    proposal = init(position, logdensity_and_grad)
    if not (np.isfinite(proposal.logdensity) and np.all(np.isfinite(proposal.gradient))):
        return state, Info(0.0, False, True)
    log_ratio = (proposal.logdensity - state.logdensity
                 + _log_proposal(state.position, proposal, step_size)
                 - _log_proposal(proposal.position, state, step_size))  # fmt: skip
    accepted = bool(np.log(rng.uniform()) < log_ratio)
    info = Info(float(np.exp(min(log_ratio, 0.0))), accepted, False)
    return (proposal if accepted else state), info


# --- wiring: a PyMC step method --------------------------------------------------------
from pymc.blocking import RaveledVars  # noqa: E402
from pymc.step_methods.state import dataclass_state  # noqa: E402

from pymc_minibatch.step_methods.base import MetropolisStep, MetropolisStepState  # noqa: E402


@dataclass_state
class MALAState(MetropolisStepState):
    kernel_state: State | None


class MALA(MetropolisStep):
    """Full-data MALA with a step size tuned toward 57% acceptance (Roberts & Rosenthal
    1998); ``proposal_cov=None``: the proposal is not preconditioned."""

    name = "mala"
    _state_class = MALAState

    def __init__(self, vars=None, *, target_accept=0.57, **options):
        super().__init__(vars, proposal_cov=None, target_accept=target_accept, **options)

    def reset_tuning(self):
        super().reset_tuning()
        self.kernel_state = None  # computed at the chain's first point

    def astep(self, q0: RaveledVars):
        logp_and_grad = self.minibatch_model.logp_and_grad
        state = self.kernel_state
        if state is None or not np.array_equal(state.position, q0.data):
            state = init(q0.data, logp_and_grad)
        state, info = step(self.rng, state, logp_and_grad, self.proposal_scale)
        self.kernel_state = state
        stats = self.metropolis_stats(info)
        self.adapt_proposal_scale(info.accept)
        return RaveledVars(state.position, q0.point_map_info), [stats]
