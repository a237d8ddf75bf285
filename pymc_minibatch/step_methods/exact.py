"""The PyMC wiring of the exact MH kernel (:mod:`pymc_minibatch.kernels.exact_mh`)."""

from pymc.blocking import RaveledVars

from pymc_minibatch.kernels import exact_mh
from pymc_minibatch.step_methods.base import MetropolisStep


class ExactMHStep(MetropolisStep):
    """A Metropolis step whose transition is one call of the exact MH kernel.

    A subclass sets ``rule`` (the kernel's acceptance rule), builds the
    :class:`~pymc_minibatch.kernels.exact_mh.ExactModel` of its model's callables
    (``make_exact_model``; built once, as ``exact_model``), and gives the step's
    :class:`~pymc_minibatch.kernels.exact_mh.Params` (``kernel_params``) and its statistics
    beyond the Metropolis ones (``info_stats``).
    """

    rule = staticmethod(exact_mh.metropolis_rule)

    def astep(self, q0: RaveledVars):
        q0 = self.chain_start(q0)
        theta, model = q0.data, self.exact_model
        state = exact_mh.State(theta, self.current_logdensity(theta, model.logdensity))
        state, info = exact_mh.step(self.rng, state, model, self.kernel_params(), self.rule)
        self.check_bounds(info)
        if info.accepted:
            self.remember(state.position, state.logdensity)
        stats = {**self.metropolis_stats(info), "batch_size": info.batch_size,
                 **self.info_stats(info)}  # fmt: skip
        self.tune_after(info)
        return RaveledVars(state.position, q0.point_map_info), [stats]

    def reset_tuning(self):
        super().reset_tuning()
        # the model's callables do not change along a chain: built once, not at every step
        self.exact_model = self.make_exact_model()

    def make_exact_model(self) -> exact_mh.ExactModel:
        """The kernel's model: the callables of the step's model."""
        raise NotImplementedError

    def kernel_params(self, **settings) -> exact_mh.Params:
        """The kernel's settings for the next step (a Gaussian random walk by default);
        a subclass adds its own as keywords (one construction per step)."""
        return exact_mh.Params(scale=self.proposal_scale, chol=self.proposal_chol,
                               n_data=self.minibatch_model.n_data, **settings)  # fmt: skip

    def check_bounds(self, info):
        """Raise when an evaluated row broke the bounds the rule relied on."""

    def info_stats(self, info) -> dict:
        """Statistics of a step beyond the Metropolis ones and ``batch_size``."""
        return {}

    def tune_after(self, info):
        """Tuning between steps: the random walk's scale by dual averaging."""
        self.adapt_proposal_scale(info.accept)
