"""``MinibatchModel.grad_estimate_particles``: one vectorised call for M particles.

Its values and gradients must equal :meth:`MinibatchModel.grad_estimate` at each particle
on the same rows (the per-particle loop it replaces) on models with transformed variables,
a hierarchy, a mixture, a Poisson likelihood and ``pm.Data`` with dims; a parameter
outside its support must give ``-inf`` at that particle alone; ops without a batched form
(run as ``Blockwise``), shared variables, pickling and the control-variate estimate must
work through it.
"""

import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pytensor.graph.traversal import applys_between
from pytensor.tensor.blockwise import Blockwise

import pymc_minibatch as pmm
from pymc_minibatch.model.builders import vectorised_over_theta
from pymc_minibatch.model.control_variates import ControlVariateGradients
from pymc_minibatch.model.gradients import grad_estimate_each, grad_estimator

N_ROWS = 400
RTOL = 1e-10


# ---- small versions of the zoo's models (tests/support/zoo.py) -------------------------
def linear_regression(rng):
    """Transformed variable: ``sigma ~ HalfNormal`` is sampled as ``log(sigma)``."""
    X = rng.normal([1.0, 1.5, 2.0], 1.0, size=(N_ROWS, 3))
    y = 3.0 + X @ [1.0, -2.0, 0.5] + rng.normal(0.0, 2.0, size=N_ROWS)
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 5.0, shape=3)
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.Normal("y", alpha + X @ beta, sigma, observed=y)
    return model


def varying_intercepts(rng):
    """Hierarchical: centred group intercepts indexed by each row's group."""
    g = rng.integers(0, 6, size=N_ROWS)
    x = rng.normal(size=N_ROWS)
    y = rng.normal(2.0, 1.5, size=6)[g] - 0.8 * x + rng.normal(size=N_ROWS)
    with pm.Model() as model:
        mu_a = pm.Normal("mu_a", 0.0, 10.0)
        sigma_a = pm.HalfNormal("sigma_a", 5.0)
        a = pm.Normal("a", mu_a, sigma_a, shape=6)
        b = pm.Normal("b", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.Normal("y", a[g] + b * x, sigma, observed=y)
    return model


def mixture(rng):
    """Two-component Normal mixture with ordered means (Beta, ordered, log transforms)."""
    first = rng.random(N_ROWS) < 0.3
    y = np.where(first, rng.normal(-1.0, 1.0, N_ROWS), rng.normal(3.0, 0.7, N_ROWS))
    with pm.Model() as model:
        w = pm.Beta("w", 2.0, 2.0)
        mu = pm.Normal(
            "mu", 0.0, 10.0, shape=2, transform=pm.distributions.transforms.ordered,
            initval=[-1.0, 1.0],
        )  # fmt: skip
        sigma = pm.HalfNormal("sigma", 2.0, shape=2)
        pm.NormalMixture("y", w=pm.math.stack([w, 1.0 - w]), mu=mu, sigma=sigma, observed=y)
    return model


def poisson_regression(rng):
    X = rng.normal([0.5, 1.0], 1.0, size=(N_ROWS, 2))
    counts = rng.poisson(np.exp(1.0 + X @ [0.3, -0.2]))
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 5.0)
        beta = pm.Normal("beta", 0.0, 2.0, shape=2)
        pm.Poisson("counts", pm.math.exp(alpha + X @ beta), observed=counts)
    return model


def data_dims_two_observed(rng):
    """``pm.Data`` and named dims (shared variables in the graph), two observed variables."""
    X = rng.normal(size=(N_ROWS, 2))
    y_cont = X @ [1.0, -2.0] + rng.normal(0.0, 1.5, size=N_ROWS)
    y_bin = (rng.random(N_ROWS) < 1.0 / (1.0 + np.exp(-0.5 - X @ [0.7, -0.4]))).astype("int64")
    with pm.Model(coords={"obs": np.arange(N_ROWS), "coef": ["a", "b"]}) as model:
        X_data = pm.Data("X", X, dims=("obs", "coef"))
        beta = pm.Normal("beta", 0.0, 5.0, dims="coef")
        gamma = pm.Normal("gamma", 0.0, 5.0, dims="coef")
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y_cont", X_data @ beta, sigma, observed=y_cont, dims="obs")
        pm.Bernoulli("y_bin", logit_p=0.5 + X_data @ gamma, observed=y_bin, dims="obs")
    return model


BUILDERS = {
    build.__name__: build
    for build in (
        linear_regression, varying_intercepts, mixture, poisson_regression,
        data_dims_two_observed,
    )
}  # fmt: skip


#: The model the default tier checks (transformed, ``pm.Data`` with dims, two observed
#: variables); the other models compile for minutes on a cold cache and run in the slow tier.
DEFAULT_MODEL = "data_dims_two_observed"


class _Adapters(dict):
    """Each model's ``MinibatchModel``, built on first use and kept (with its compiled
    functions) for the module."""

    def __missing__(self, name):
        seed = 31 + list(BUILDERS).index(name)
        adapter = self[name] = pmm.MinibatchModel(BUILDERS[name](np.random.default_rng(seed)))
        return adapter


@pytest.fixture(scope="module")
def adapters():
    return _Adapters()


def one_at_a_time(mm, thetas, idx):
    """The per-particle loop that the vectorised call replaces."""
    estimates = [mm.grad_estimate(theta, idx) for theta in thetas]
    return np.array([value for value, _ in estimates]), np.array([grad for _, grad in estimates])


def jittered_thetas(mm, n_particles, rng):
    return mm.initial_theta() + rng.normal(scale=0.3, size=(n_particles, mm.ndim))


# ---- equality with the per-particle loop ------------------------------------------------------
@pytest.mark.parametrize(("n_particles", "batch_size"), [(6, 40), (1, 40), (6, 1)])
@pytest.mark.parametrize(
    "name",
    [name if name == DEFAULT_MODEL else pytest.param(name, marks=pytest.mark.slow)
     for name in BUILDERS],
)  # fmt: skip
def test_vectorised_equals_one_particle_at_a_time(adapters, name, n_particles, batch_size):
    mm = adapters[name]
    rng = np.random.default_rng([n_particles, batch_size])
    thetas = jittered_thetas(mm, n_particles, rng)
    idx = rng.integers(0, N_ROWS, size=batch_size)  # with replacement: repeats included
    values, grads = mm.grad_estimate_particles(thetas, idx)
    expected_values, expected_grads = one_at_a_time(mm, thetas, idx)
    assert values.shape == (n_particles,)
    assert grads.shape == (n_particles, mm.ndim)
    assert np.all(np.isfinite(values)) and np.all(np.isfinite(grads))
    np.testing.assert_allclose(values, expected_values, rtol=RTOL)
    np.testing.assert_allclose(grads, expected_grads, rtol=RTOL)


@pytest.mark.parametrize("batch_size", [40, 1])
def test_weighted_rows_equal_one_particle_at_a_time(adapters, batch_size):
    """Stratified batches weigh each row on its own (``weights``), one row included."""
    mm = adapters[DEFAULT_MODEL]
    rng = np.random.default_rng(batch_size)
    thetas = jittered_thetas(mm, 5, rng)
    idx = rng.integers(0, N_ROWS, size=batch_size)
    weights = rng.uniform(1.0, 30.0, size=batch_size)
    values, grads = mm.grad_estimate_particles(thetas, idx, weights)
    for value, grad, theta in zip(values, grads, thetas, strict=True):
        expected_value, expected_grad = mm.grad_estimate(theta, idx, weights)
        assert value == pytest.approx(expected_value, rel=RTOL)
        np.testing.assert_allclose(grad, expected_grad, rtol=RTOL)
    uniform_values, _ = mm.grad_estimate_particles(thetas, idx)
    assert not np.allclose(values, uniform_values)


def test_each_particle_in_turn_equals_the_vectorised_call(adapters):
    """The estimator big models use (one call per particle, rows gathered once) gives the
    vectorised call's values, with weights too, and refuses the same bad shapes."""
    mm = adapters[DEFAULT_MODEL]
    rng = np.random.default_rng(5)
    thetas = jittered_thetas(mm, 4, rng)
    idx = rng.integers(0, N_ROWS, size=30)
    weights = rng.uniform(1.0, 30.0, size=30)
    for row_weights in (None, weights):
        each = grad_estimator(mm, particles=True, vectorised=False)(thetas, idx, row_weights)
        vectorised = mm.grad_estimate_particles(thetas, idx, row_weights)
        np.testing.assert_allclose(each[0], vectorised[0], rtol=RTOL)
        np.testing.assert_allclose(each[1], vectorised[1], rtol=RTOL)
    with pytest.raises(ValueError, match="shape"):
        grad_estimate_each(mm, np.zeros(mm.ndim), np.arange(10))
    with pytest.raises(ValueError, match="at least one row"):
        grad_estimate_each(mm, thetas, np.array([], dtype=np.int64))


def test_no_particles_give_empty_results(adapters):
    mm = adapters[DEFAULT_MODEL]
    values, grads = mm.grad_estimate_particles(np.empty((0, mm.ndim)), np.arange(10))
    assert values.shape == (0,)
    assert grads.shape == (0, mm.ndim)


def test_bad_arguments_are_refused(adapters):
    mm = adapters[DEFAULT_MODEL]
    with pytest.raises(ValueError, match="shape"):
        mm.grad_estimate_particles(np.zeros(mm.ndim), np.arange(10))
    with pytest.raises(ValueError, match="shape"):
        mm.grad_estimate_particles(np.zeros((3, mm.ndim + 1)), np.arange(10))
    with pytest.raises(ValueError, match="at least one row"):
        mm.grad_estimate_particles(np.zeros((3, mm.ndim)), np.array([], dtype=np.int64))


# ---- parameter checks are per particle --------------------------------------------------------
@pytest.mark.parametrize("check_bounds", [True, False])
def test_a_particle_outside_the_support_affects_only_itself(check_bounds):
    """``sigma`` is sampled untransformed, so a particle can make it negative: that particle
    alone gets ``-inf`` (``check_bounds=True``) or NaN (no check), as one at a time."""
    y = np.random.default_rng(3).normal(size=N_ROWS)
    with pm.Model(check_bounds=check_bounds) as model:
        mu = pm.Normal("mu")
        sigma = pm.Normal("sigma", 1.0, 0.1)
        pm.Normal("y", mu, sigma, observed=y)
    mm = pmm.MinibatchModel(model)
    thetas = np.array([[0.0, 1.0], [0.1, -0.5], [0.2, 0.9]])
    idx = np.arange(50)
    values, grads = mm.grad_estimate_particles(thetas, idx)
    expected_values, expected_grads = one_at_a_time(mm, thetas, idx)
    assert np.isfinite(values[[0, 2]]).all()
    if check_bounds:
        assert values[1] == -np.inf
    else:
        assert np.isnan(values[1])
    np.testing.assert_allclose(values, expected_values, rtol=RTOL)
    np.testing.assert_allclose(grads, expected_grads, rtol=RTOL)


# ---- ops without a batched form ---------------------------------------------------------------
def test_ops_without_a_batched_form_are_vectorised_as_blockwise():
    """A linear solve on a matrix built from ``theta`` becomes ``Blockwise`` over particles
    (the compiled graph may rewrite it further); the results equal the loop's."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(N_ROWS, 2))
    y = X @ [0.5, -0.3] + rng.normal(size=N_ROWS)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=2)
        A = pt.stack([pt.stack([1.0 + beta[0] ** 2, 0.3]), pt.stack([0.3, 1.0 + beta[1] ** 2])])
        coef = pt.linalg.solve(A, np.array([1.0, -1.0]))
        pm.Normal("y", X @ coef, 1.0, observed=y)
    mm = pmm.MinibatchModel(model)
    graph = mm.theta_graph
    inputs, outputs = vectorised_over_theta([graph.theta, *graph.rows], [graph.loglik], True)
    assert any(isinstance(node.op, Blockwise) for node in applys_between(inputs, outputs))

    thetas = rng.normal(size=(5, 2))
    idx = rng.integers(0, N_ROWS, size=40)
    values, grads = mm.grad_estimate_particles(thetas, idx)
    expected_values, expected_grads = one_at_a_time(mm, thetas, idx)
    np.testing.assert_allclose(values, expected_values, rtol=RTOL)
    np.testing.assert_allclose(grads, expected_grads, rtol=RTOL)


# ---- compilation, shared variables, pickling --------------------------------------------------
def test_compiled_on_first_use_only_and_once():
    mm = pmm.MinibatchModel(linear_regression(np.random.default_rng(5)))
    theta, idx = mm.initial_theta(), np.arange(20)
    mm.grad_estimate(theta, idx)
    assert "grad_estimate_particles" not in mm.functions
    mm.grad_estimate_particles(np.stack([theta, theta]), idx)
    function = mm.functions["grad_estimate_particles"]
    mm.grad_estimate_particles(np.stack([theta, theta, theta]), idx)
    assert mm.functions["grad_estimate_particles"] is function


def test_shared_variables_are_read_at_each_call():
    """With ``vars`` a subset, the other variables are shared: a step method's update of
    them must reach the vectorised function as it reaches ``grad_estimate``."""
    model = linear_regression(np.random.default_rng(6))
    mm = pmm.MinibatchModel(model, vars=[model["alpha"], model["beta"]])
    (sigma_log,) = mm.shared.values()
    rng = np.random.default_rng(7)
    thetas = jittered_thetas(mm, 4, rng)
    idx = rng.integers(0, N_ROWS, size=30)
    first = mm.grad_estimate_particles(thetas, idx)[0]
    sigma_log.set_value(np.asarray(0.7))
    values, grads = mm.grad_estimate_particles(thetas, idx)
    assert not np.allclose(values, first)
    expected_values, expected_grads = one_at_a_time(mm, thetas, idx)
    np.testing.assert_allclose(values, expected_values, rtol=RTOL)
    np.testing.assert_allclose(grads, expected_grads, rtol=RTOL)


def test_pickle_round_trip_after_use(adapters):
    mm = adapters[DEFAULT_MODEL]
    rng = np.random.default_rng(8)
    thetas = jittered_thetas(mm, 5, rng)
    idx = rng.integers(0, N_ROWS, size=25)
    values, grads = mm.grad_estimate_particles(thetas, idx)
    restored = cloudpickle.loads(cloudpickle.dumps(mm))
    restored_values, restored_grads = restored.grad_estimate_particles(thetas, idx)
    np.testing.assert_allclose(restored_values, values, rtol=1e-14)
    np.testing.assert_allclose(restored_grads, grads, rtol=1e-14)


# ---- control variates -------------------------------------------------------------------------
def test_control_variate_particles_equal_one_point_at_a_time(adapters):
    mm = adapters[DEFAULT_MODEL]
    rng = np.random.default_rng(9)
    estimate = ControlVariateGradients(mm, jittered_thetas(mm, 1, rng)[0])
    thetas = jittered_thetas(mm, 5, rng)
    idx = rng.integers(0, N_ROWS, size=30)
    values, grads = estimate.particles(thetas, idx)
    for value, grad, theta in zip(values, grads, thetas, strict=True):
        expected_value, expected_grad = estimate(theta, idx)
        assert value == pytest.approx(expected_value, rel=RTOL)
        np.testing.assert_allclose(grad, expected_grad, rtol=1e-9, atol=1e-9)
