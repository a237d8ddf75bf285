"""A hierarchical model's log prior split by group, and its expansions' share per group."""

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch.model import expansions
from pymc_minibatch.model.group_prior import group_prior
from tests.support.zoo_hierarchical import group_index, intercepts_logistic, slopes_normal

N_ROWS, N_GROUPS = 3000, 12


def _moved(mm, theta, structure, groups, rng):
    proposal = theta.copy()
    coordinates = structure.local[groups].ravel()
    proposal[coordinates] += rng.normal(scale=0.2, size=coordinates.size)
    return proposal


@pytest.mark.parametrize("build", [intercepts_logistic, slopes_normal])
def test_each_groups_terms_carry_its_whole_change_of_the_prior(build):
    mm = pmm.MinibatchModel(build(N_GROUPS, N_ROWS, True))
    structure = mm.laplace().structure
    split = group_prior(mm, structure, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    theta = mm.laplace().draw(rng)
    for group in (0, 5):
        proposal = _moved(mm, theta, structure, [group], rng)
        change = split(proposal) - split(theta)
        assert np.count_nonzero(change) == 1
        np.testing.assert_allclose(change[group], mm.logprior(proposal) - mm.logprior(theta),
                                   rtol=1e-10)  # fmt: skip


def _rows(seed):
    rng = np.random.default_rng(seed)
    groups = group_index(rng, N_ROWS, 8)
    return rng, rng.normal(size=N_ROWS), groups


def test_a_group_effect_in_another_variables_prior_does_not_split():
    rng, x, groups = _rows(2)
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 1.0, shape=8)
        pm.Normal("total", a.sum(), 1.0)  # every group's effect in one more prior term
        pm.Normal("y", a[groups] + x, 1.0, observed=rng.normal(size=N_ROWS))
    mm = pmm.MinibatchModel(model)
    assert group_prior(mm, mm.laplace().structure, np.random.default_rng(0)) is None


def test_a_prior_that_ties_groups_does_not_split():
    rng, x, groups = _rows(3)
    with pm.Model() as model:
        a = pm.Normal("a", 0.0, 1.0, shape=8)
        pm.Potential("smooth", -0.5 * pm.math.sum((a[1:] - a[:-1]) ** 2))
        pm.Normal("y", a[groups] + x, 1.0, observed=rng.normal(size=N_ROWS))
    mm = pmm.MinibatchModel(model)
    assert group_prior(mm, mm.structure(), np.random.default_rng(0)) is None


def test_the_groups_shares_of_the_expansion_sum_to_its_change():
    mm = pmm.MinibatchModel(intercepts_logistic(N_GROUPS, N_ROWS, True))
    laplace = mm.laplace()
    _, expansion = expansions.second_order_bounds(mm, laplace)
    rng = np.random.default_rng(4)
    theta = laplace.draw(rng)
    proposal = _moved(mm, theta, laplace.structure, np.arange(N_GROUPS), rng)
    shares = expansion.group_quadratics(theta - laplace.mode, proposal - laplace.mode)
    np.testing.assert_allclose(shares.sum(), expansion.quadratic(proposal)
                               - expansion.quadratic(theta), rtol=1e-10)  # fmt: skip
    single = _moved(mm, theta, laplace.structure, [3], rng)
    share = expansion.group_quadratics(theta - laplace.mode, single - laplace.mode)
    np.testing.assert_allclose(share[3], expansion.quadratic(single) - expansion.quadratic(theta),
                               rtol=1e-10)  # fmt: skip
    assert np.count_nonzero(share) == 1
