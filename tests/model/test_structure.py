"""Which parameters each row touches, read from the compiled model, and the exact Hessian
that this structure lets one pass compute."""

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch.model import curvature
from pymc_minibatch.model.curvature import StructureMismatchError, full_data_curvature
from pymc_minibatch.model.structure import all_shared
from tests.support.zoo_hierarchical import group_index, intercepts_logistic, slopes_normal

N_ROWS = 3000


def _groups(n_groups, seed):
    """The rows' groups of a hierarchical zoo model (its first draws from its seed)."""
    return group_index(np.random.default_rng(seed), N_ROWS, n_groups)


@pytest.mark.parametrize("centred", [True, False])
def test_varying_intercepts_have_one_local_coordinate_per_group(centred):
    mm = pmm.MinibatchModel(intercepts_logistic(40, N_ROWS, centred))
    structure = mm.structure()
    intercepts = "a" if centred else "z_a"
    np.testing.assert_array_equal(structure.local[:, 0], mm.theta_indices([intercepts]))
    np.testing.assert_array_equal(structure.shared, mm.theta_indices(["mu", "tau", "beta"]))
    np.testing.assert_array_equal(structure.row_groups, _groups(40, 31_040))
    assert structure.local_names == (intercepts,)


def test_varying_intercepts_and_slopes_on_one_grouping_are_one_block():
    mm = pmm.MinibatchModel(slopes_normal(30, N_ROWS, centred=True))
    structure = mm.structure()
    assert structure.local.shape == (30, 2)
    np.testing.assert_array_equal(structure.local, np.column_stack(
        [mm.theta_indices(["a"]), mm.theta_indices(["b"])]))  # fmt: skip
    np.testing.assert_array_equal(structure.row_groups, _groups(30, 32_030))


def _rows(seed=0):
    rng = np.random.default_rng(seed)
    return rng, rng.normal(size=N_ROWS), rng.integers(0, 50, N_ROWS), rng.integers(0, 8, N_ROWS)


def test_a_matrix_of_group_effects_is_local_along_its_group_axis():
    rng, x, group, _ = _rows()
    with pm.Model() as model:
        effects = pm.Normal("effects", 0, 1, shape=(50, 2))
        pm.Normal("y", effects[group, 0] + effects[group, 1] * x, 1.0,
                  observed=rng.normal(size=N_ROWS))  # fmt: skip
    structure = pmm.MinibatchModel(model).structure()
    np.testing.assert_array_equal(structure.local, np.arange(100).reshape(50, 2))
    np.testing.assert_array_equal(structure.row_groups, group)


def test_crossed_effects_keep_the_smaller_grouping_shared():
    rng, x, group, other = _rows(1)
    with pm.Model() as model:
        a = pm.Normal("a", 0, 1, shape=50)
        b = pm.Normal("b", 0, 1, shape=8)
        slope = pm.Normal("slope", 0, 1)
        pm.Bernoulli("y", logit_p=a[group] + b[other] + slope * x,
                     observed=rng.integers(0, 2, N_ROWS))  # fmt: skip
    mm = pmm.MinibatchModel(model)
    structure = mm.structure()
    np.testing.assert_array_equal(structure.local[:, 0], mm.theta_indices(["a"]))
    np.testing.assert_array_equal(structure.shared, mm.theta_indices(["b", "slope"]))
    theta = np.random.default_rng(2).normal(size=mm.ndim) * 0.3
    _assert_exact(mm, theta, structure)


def test_one_hot_columns_make_their_coefficients_local():
    rng, x, _, category = _rows(3)
    onehot = np.eye(8)[category]
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=8)
        slope = pm.Normal("slope", 0, 1)
        pm.Bernoulli("y", logit_p=onehot @ beta + slope * x, observed=rng.integers(0, 2, N_ROWS))
    structure = pmm.MinibatchModel(model).structure()
    assert structure.local.shape == (8, 1)
    np.testing.assert_array_equal(structure.row_groups, category)


def test_a_regression_has_every_coefficient_shared():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(N_ROWS, 3))
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=3)
        pm.Bernoulli("y", logit_p=X @ beta, observed=rng.integers(0, 2, N_ROWS))
    structure = pmm.MinibatchModel(model).structure()
    np.testing.assert_array_equal(structure.shared, np.arange(3))
    assert structure.local.size == 0 and structure.row_groups is None


def _assert_exact(mm, theta, structure):
    """The one-pass Hessian equals central differences of the full-data gradient."""
    curvature = full_data_curvature(mm, theta, structure)
    step = 1e-5
    for column in np.eye(mm.ndim):
        difference = (mm.logp_and_grad(theta + step * column)[1]
                      - mm.logp_and_grad(theta - step * column)[1]) / (2 * step)  # fmt: skip
        np.testing.assert_allclose(-curvature.precision.matvec(column), difference,
                                   rtol=1e-5, atol=1e-5 * np.abs(difference).max())  # fmt: skip
    value, gradient = mm.logp_and_grad(theta)
    np.testing.assert_allclose(curvature.value, value, rtol=1e-12)
    np.testing.assert_allclose(curvature.gradient, gradient, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("build", [intercepts_logistic, slopes_normal])
@pytest.mark.parametrize("centred", [True, False])
def test_the_structured_hessian_is_exact(build, centred):
    mm = pmm.MinibatchModel(build(12, N_ROWS, centred))
    theta = mm.initial_theta() + np.random.default_rng(5).normal(size=mm.ndim) * 0.3
    _assert_exact(mm, theta, mm.structure())


def test_a_prior_that_ties_groups_together_is_caught_and_the_hessian_made_dense():
    """Group effects with a correlated (Gaussian-process-like) prior: each row touches one
    group, but the prior couples them all; the random check direction notices, and the
    Laplace fit uses a dense Hessian instead."""
    rng, x, _, category = _rows(6)
    correlation = 0.5 + 0.5 * np.eye(8)
    with pm.Model() as model:
        effects = pm.MvNormal("effects", mu=np.zeros(8), cov=correlation)
        pm.Normal("y", effects[category] + x, 1.0, observed=rng.normal(size=N_ROWS))
    mm = pmm.MinibatchModel(model)
    structure = mm.structure()
    assert structure.local.shape == (8, 1)  # what the rows show
    with pytest.raises(StructureMismatchError, match="prior ties groups"):
        full_data_curvature(mm, mm.initial_theta(), structure)
    fit = mm.laplace()
    assert fit.is_mode and fit.structure.local.size == 0
    _assert_exact(mm, fit.mode, all_shared(mm.ndim))


@pytest.mark.parametrize("build", [intercepts_logistic, slopes_normal])
def test_linear_predictors_give_the_hessian_of_the_products_in_one_cheaper_pass(build):
    """Where every likelihood has linear predictors, the likelihood's Hessian comes from
    their designs and the families' second derivatives (forward evaluations only); it
    equals the Hessian-vector products' to rounding, in one pass either way."""
    mm = pmm.MinibatchModel(build(12, N_ROWS, True))
    theta = mm.initial_theta() + np.random.default_rng(6).normal(size=mm.ndim) * 0.3
    structure = mm.structure()
    passes = mm.full_data_passes
    designs = full_data_curvature(mm, theta, structure)
    assert mm not in curvature._WITHOUT_DESIGNS and mm.full_data_passes == passes + 1
    curvature._WITHOUT_DESIGNS.add(mm)
    products = full_data_curvature(mm, theta, structure)
    assert mm.full_data_passes == passes + 2
    expected = products.precision.to_dense()
    np.testing.assert_allclose(designs.precision.to_dense(), expected, rtol=1e-10,
                               atol=1e-10 * np.abs(expected).max())  # fmt: skip
    np.testing.assert_allclose(designs.gradient, products.gradient, rtol=1e-10, atol=1e-10)
    assert designs.value == pytest.approx(products.value, rel=1e-12)


@pytest.mark.parametrize("likelihood", ["non-linear predictor", "kink"])
def test_other_likelihoods_take_the_hessian_vector_products(likelihood):
    """A predictor that is not linear in the sampled values (a non-centred effect ``tau *
    z``, sampled as given) or a family without second derivatives (Laplace): the products,
    exact as before."""
    if likelihood == "kink":
        rng, x, _, _ = _rows(7)
        with pm.Model() as model:
            beta = pm.Normal("beta", 0.0, 1.0)
            pm.Laplace("y", beta * x, 1.0, observed=rng.normal(size=N_ROWS))
    else:
        model = intercepts_logistic(12, N_ROWS, False)
    mm = pmm.MinibatchModel(model)
    theta = mm.initial_theta() + np.random.default_rng(7).normal(size=mm.ndim) * 0.3
    _assert_exact(mm, theta, mm.structure())
    assert mm in curvature._WITHOUT_DESIGNS
