"""The log prior of a hierarchical model group by group.

A move of some groups' local parameters (the shared ones held) changes the log prior only
through the terms that involve those groups: in ``a ~ Normal(mu, tau, shape=G)``, the
``G`` elementwise terms ``log N(a_g | mu, tau)``. :class:`GroupPrior` evaluates them and
sums them by group, so that each group's move can be accepted on its own prior term
(:mod:`pymc_minibatch.kernels.group_tuna`).

The terms are PyMC's elementwise log-densities of the variables that hold local coordinates
(``model.logp(vars, sum=False, jacobian=True)``), one per element of a variable's batch
shape (the support dimensions of a multivariate prior belong to one element). Each element
is assigned the group of its coordinates. :func:`group_prior` then checks the split
numerically: moving a random half of the groups must leave the other groups' terms
unchanged and change the model's whole log prior by the sum of the moved groups' terms.
A prior that ties groups together (a random walk over groups, a zero-sum constraint), or a
local variable that another variable's prior depends on, fails the check, and no split is
returned.
"""

import numpy as np

#: Relative tolerance of the check (the terms are exact up to rounding).
CHECK_RTOL = 1e-8
#: Random moves the check makes.
CHECK_MOVES = 2


class GroupPrior:
    """``theta -> (G,)`` log prior terms of each group's local parameters (built by
    :func:`group_prior`). Compiled on first call; it pickles with its adapter and
    compiles again where it is unpickled."""

    def __init__(self, minibatch_model, rv_names, element_groups, n_groups):
        self.minibatch_model = minibatch_model
        self.rv_names = rv_names
        self.element_groups = element_groups
        self.n_groups = n_groups
        self._function = None

    def __call__(self, theta):
        if self._function is None:
            model = self.minibatch_model.model
            terms = model.logp(vars=[model[name] for name in self.rv_names], sum=False,
                               jacobian=True)  # fmt: skip
            self._function = self.minibatch_model.theta_function(terms)
        values = np.concatenate([np.ravel(v) for v in self._function(theta)])
        return np.bincount(self.element_groups, values, minlength=self.n_groups)

    def __getstate__(self):
        return {**self.__dict__, "_function": None}


def group_prior(minibatch_model, structure, rng):
    """The :class:`GroupPrior` of ``minibatch_model`` with ``structure``'s groups, or None
    when its prior does not split by group (see the module docstring).

    Parameters
    ----------
    minibatch_model : MinibatchModel
    structure : ParameterStructure
        With local coordinates.
    rng : numpy.random.Generator
        Draws the check's moves (around a draw of the Laplace approximation).
    """
    mm = minibatch_model
    model = mm.model
    coordinate_group = np.full(mm.ndim, -1, dtype=np.int64)
    for g, coordinates in enumerate(structure.local):
        coordinate_group[coordinates] = g
    rvs, element_groups = [], []
    for rv in model.free_RVs:
        value = model.rvs_to_values[rv]
        if value.name not in mm.var_names:
            continue
        indices = mm.theta_indices([value.name])
        groups = coordinate_group[indices]
        if np.all(groups < 0):
            continue
        if np.any(groups < 0):
            return None  # a variable partly local, partly shared
        shape = np.shape(mm.point_from_theta(mm.initial_theta())[value.name])
        support = rv.owner.op.ndim_supp
        per_element = groups.reshape(*shape[: len(shape) - support], -1)
        if np.any(per_element != per_element[..., :1]):
            return None  # one element's support spans several groups
        rvs.append(rv)
        element_groups.append(per_element[..., 0].ravel())
    if not rvs:
        return None
    split = GroupPrior(mm, [rv.name for rv in rvs], np.concatenate(element_groups),
                       structure.n_groups)  # fmt: skip
    return split if _splits(split, mm, structure, rng) else None


def _splits(split, minibatch_model, structure, rng):
    """Whether moving a random half of the groups changes only their terms, by as much as
    the whole log prior changes."""
    mm = minibatch_model
    laplace = mm.laplace()
    sds = np.sqrt(laplace.covariance_diagonal())
    for _ in range(CHECK_MOVES):
        theta = laplace.draw(rng)
        moved = rng.random(structure.n_groups) < 0.5
        proposal = theta.copy()
        coordinates = structure.local[moved].ravel()
        proposal[coordinates] += rng.normal(scale=0.1, size=coordinates.size) * sds[coordinates]
        try:
            before, after = split(theta), split(proposal)
        except ValueError:  # an element count that does not match the variable's
            return False
        if before.size != structure.n_groups:
            return False
        change = after - before
        at_theta = mm.logprior(theta)
        whole = mm.logprior(proposal) - at_theta
        scale = CHECK_RTOL * (np.abs(before).sum() + abs(at_theta) + 1.0)
        if not np.all(np.isfinite(change)) or np.any(np.abs(change[~moved]) > scale):
            return False
        if abs(change.sum() - whole) > scale:
            return False
    return True
