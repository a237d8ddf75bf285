"""FlyMC as a PyMC step method: an exact baseline for logistic regression."""

import numpy as np
from pymc.blocking import RaveledVars
from pymc.step_methods.state import dataclass_state
from pytensor.tensor.random.basic import BernoulliRV, LaplaceRV

from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.exceptions import BoundsUnavailableError, BoundViolationError
from pymc_minibatch.kernels import flymc as flymc_kernel
from pymc_minibatch.kernels.flymc import (
    FlyMCTarget,
    collapse,
    jaakkola_jordan,
    laplace_bound,
    log_bound,
)
from pymc_minibatch.model.lipschitz import linear_predictors
from pymc_minibatch.step_methods.base import MetropolisStep, MetropolisStepState


@dataclass_state
class FlyMCState(MetropolisStepState):
    bright: np.ndarray | None


class FlyMC(MetropolisStep):
    """Firefly Monte Carlo for Bernoulli-logit and Laplace-location likelihoods (exact).

    Augments each row with a binary variable; a random-walk move of ``theta`` evaluates only
    the "bright" rows, the product of quadratic lower bounds (Jaakkola–Jordan for logistic
    rows) over all rows being collapsed into sufficient statistics (Maclaurin & Adams 2014,
    UAI; kernel in :mod:`pymc_minibatch.kernels.flymc`). Each step first updates the row
    variables (each dark row is proposed bright with probability ``resample_fraction``),
    then ``theta``.

    Parameters
    ----------
    vars : list of variables, optional
        Must cover every continuous free variable: the auxiliary row variables are only
        valid while all parameters move with them.
    xi : "map" or float, default "map"
        Where the bound is tight: ``"map"`` tunes it per row at the MAP (``|eta_n|``, or the
        absolute residual for Laplace rows, at the mode: the paper's "MAP-tuned" FlyMC; one
        L-BFGS fit on the full data at construction); a float uses the same ``xi`` for every
        row (the reference code's logistic setting is 1.5).
    resample_fraction : float, default 0.1
        Probability ``q`` with which each dark row is proposed to turn bright per step.
    proposal_scale, proposal_cov, target_accept, model
        As for :class:`~pymc_minibatch.FullMH`.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 2)); y = (rng.random(2000) < 0.5).astype("int64")
    >>> with pm.Model() as model:
    ...     beta = pm.Normal("beta", 0, 1, shape=2)
    ...     obs = pm.Bernoulli("y", logit_p=X @ beta, observed=y)
    ...     step = pmm.FlyMC()
    >>> idata = pm.sample(step=step, draws=2000, chains=2, model=model)  # doctest: +SKIP
    """

    name = "flymc"
    stats_dtypes_shapes = {
        **MetropolisStep.stats_dtypes_shapes,
        "batch_size": (np.int64, []),
        "n_bright": (np.int64, []),
    }
    _state_class = FlyMCState
    setup_passes_per_chain = 1  # every row's brightness, drawn at the chain's first point

    @renamed_arguments(step_size="proposal_scale")
    def __init__(self, vars=None, *, xi="map", resample_fraction=0.1, **options):
        # options: those of MetropolisStep (see the docstring)
        if not (xi == "map" if isinstance(xi, str) else np.isfinite(xi) and xi > 0):
            raise ValueError(f"xi must be 'map' or a positive number, got {xi!r}")
        if not 0.0 < resample_fraction <= 1.0:
            raise ValueError(f"resample_fraction must lie in (0, 1], got {resample_fraction}")
        self.resample_fraction = float(resample_fraction)
        super().__init__(vars, **options)
        mm = self.minibatch_model
        if mm.shared:
            raise ValueError(
                "FlyMC must sample every continuous free variable (its row variables are "
                f"only valid jointly with all of them); {sorted(mm.shared)} are left out"
            )
        _refuse_unsupported_likelihoods(mm)
        (predictor,) = linear_predictors(
            mm, remedy="FlyMC takes no user bounds: sample this model with another step method"
        )
        self.offset, self.design = predictor.offset, predictor.design
        if isinstance(xi, str):  # "map"
            eta = self.offset + self.design @ mm.find_map()
            is_laplace = predictor.family is LaplaceRV
            xi_rows = predictor.observed - eta if is_laplace else eta
        else:
            xi_rows = np.full(mm.n_data, float(xi))
        if predictor.family is LaplaceRV:
            # for Laplace, L_i = 1 / b: the fixed scale is read back from the predictor
            self.bound = laplace_bound(xi_rows, predictor.observed, 1.0 / predictor.lipschitz)
        else:
            self.bound = jaakkola_jordan(xi_rows, predictor.observed)
        self.collapsed_bound = collapse(self.bound, self.offset, self.design)

    def reset_tuning(self):
        super().reset_tuning()
        self.bright = None  # redrawn from its conditional at the chain's first point

    def astep(self, q0: RaveledVars):
        q0 = self.chain_start(q0)
        mm = self.minibatch_model
        target = FlyMCTarget(
            mm.loglik, mm.loglik_pair, self._log_bounds, self.collapsed_bound, mm.logprior
        )
        if self.bright is None:
            state = flymc_kernel.init(self.rng, target, q0.data, mm.n_data)
        else:
            state = flymc_kernel.State(q0.data, self.bright)
        state, info = flymc_kernel.step(
            self.rng,
            state,
            target,
            self.resample_fraction,
            self.proposal_scale,
            self.proposal_chol,
        )
        self.bright = state.bright
        if info.bound_violated:
            raise BoundViolationError("FlyMC: a row's lower bound exceeds its likelihood")
        stats = {
            **self.metropolis_stats(info),
            "batch_size": info.batch_size,
            "n_bright": info.n_bright,
        }
        self.adapt_proposal_scale(info.accept)
        return RaveledVars(state.position, q0.point_map_info), [stats]

    def _log_bounds(self, theta, idx):
        return log_bound(self.bound, self.offset[idx] + self.design[idx] @ theta, idx)


def _refuse_unsupported_likelihoods(minibatch_model):
    """FlyMC needs exactly one likelihood with a collapsible lower bound."""
    graph = minibatch_model.row_graph
    needed = (
        "FlyMC needs one Bernoulli(logit_p=eta) or Laplace(mu=eta, b) likelihood with eta "
        "linear in the parameters and b fixed (collapsible quadratic lower bounds)"
    )
    if len(graph.row_rvs) != 1:
        raise BoundsUnavailableError(
            f"{needed}; the model has {len(graph.row_rvs)} observed variables on the rows "
            f"({', '.join(repr(name) for name in graph.row_term_names)})"
        )
    (name,), (rv,) = graph.row_term_names, graph.row_rvs
    if not isinstance(rv.owner.op, BernoulliRV | LaplaceRV):
        raise BoundsUnavailableError(
            f"{needed}; observed variable '{name}' is {type(rv.owner.op).__name__}"
        )
