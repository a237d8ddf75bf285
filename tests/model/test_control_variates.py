"""Control-variate estimates of the log posterior and its gradient (Baker et al. 2019)."""

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch.model.control_variates import ControlVariateGradients, use_control_variates

N_ROWS = 2000
RNG = np.random.default_rng(5)
X = np.column_stack([np.ones(N_ROWS), RNG.normal(size=(N_ROWS, 2))])
Y = (RNG.random(N_ROWS) < 1 / (1 + np.exp(-X @ np.array([-1.5, 0.8, 0.4])))).astype("int64")


@pytest.fixture(scope="module")
def logistic():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 5, shape=3)
        pm.Bernoulli("y", logit_p=pm.math.dot(X, beta), observed=Y)
    mm = pmm.MinibatchModel(model)
    return mm, ControlVariateGradients(mm, mm.laplace().mode)


def test_the_difference_is_the_estimate_minus_the_centers_likelihood_part(logistic):
    mm, estimate = logistic
    theta, center, rows = np.array([-1.4, 0.7, 0.5]), estimate.center, np.arange(10, 60)
    value, grad = mm.grad_estimate_difference(theta, center, rows)
    scale = N_ROWS / rows.size
    expected_value = mm.logprior(theta) + scale * (
        mm.loglik(theta, rows).sum() - mm.loglik(center, rows).sum()
    )
    expected_grad = mm.grad_estimate(theta, rows)[1] - scale * mm.grad_loglik(center, rows)
    assert value == pytest.approx(expected_value, rel=1e-12)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-10)


def test_the_gradient_alone_is_the_estimates_gradient(logistic):
    mm, estimate = logistic
    theta, rows, weights = np.array([-1.4, 0.7, 0.5]), np.arange(10, 60), np.full(50, 7.0)
    for given in (None, weights):
        np.testing.assert_allclose(estimate.gradient(theta, rows, given),
                                   estimate(theta, rows, given)[1], rtol=1e-12)  # fmt: skip
        np.testing.assert_allclose(mm.gradient_estimate(theta, rows, given),
                                   mm.grad_estimate(theta, rows, given)[1], rtol=1e-12)  # fmt: skip
    with pytest.raises(ValueError, match="at least one row"):
        mm.gradient_estimate(theta, np.array([], dtype=int))


def test_at_the_center_every_batch_gives_the_full_gradient(logistic):
    """The noise is zero at the center: the batch terms cancel exactly."""
    mm, estimate = logistic
    full_value, full_grad = mm.logp_and_grad(estimate.center)
    for seed in range(5):
        rows = np.random.default_rng(seed).choice(N_ROWS, size=20, replace=False)
        value, grad = estimate(estimate.center, rows)
        assert value == pytest.approx(full_value, rel=1e-12)
        np.testing.assert_allclose(grad, full_grad, rtol=1e-9, atol=1e-9)


def test_the_estimate_is_unbiased_away_from_the_centre(logistic):
    """Averaged over 2000 batches of 20 rows, the estimate equals the full-data log
    posterior and gradient within 4 Monte Carlo standard errors; a plain minibatch estimate
    on the same batches has standard errors several times larger."""
    mm, estimate = logistic
    theta = estimate.center + np.array([0.3, -0.2, 0.25])  # several posterior sds away
    full_value, full_grad = mm.logp_and_grad(theta)
    rng = np.random.default_rng(11)
    batches = [rng.choice(N_ROWS, size=20, replace=False) for _ in range(2000)]
    values, grads = zip(*(estimate(theta, rows) for rows in batches), strict=True)
    values, grads = np.array(values), np.array(grads)
    mcse = grads.std(axis=0, ddof=1) / np.sqrt(len(batches))
    assert np.all(np.abs(grads.mean(axis=0) - full_grad) < 4 * mcse)
    value_mcse = values.std(ddof=1) / np.sqrt(len(batches))
    assert abs(values.mean() - full_value) < 4 * value_mcse
    plain = np.array([mm.grad_estimate(theta, rows)[1] for rows in batches[:200]])
    assert np.all(plain.std(axis=0) > 3 * grads.std(axis=0))


def test_particles_match_one_point_at_a_time(logistic):
    _, estimate = logistic
    thetas = estimate.center + np.random.default_rng(2).normal(scale=0.1, size=(4, 3))
    rows = np.arange(100, 180)
    weights = np.linspace(1.0, 20.0, rows.size)  # as a stratified batch weighs its rows
    for row_weights in (None, weights):
        values, grads = estimate.particles(thetas, rows, row_weights)
        for k, theta in enumerate(thetas):
            value, grad = estimate(theta, rows, row_weights)
            assert values[k] == pytest.approx(value, rel=1e-10)
            np.testing.assert_allclose(grads[k], grad, rtol=1e-9)


@pytest.mark.parametrize(
    ("argument", "batch_size", "expected"),
    [("auto", 10, True), ("auto", 100, False), (True, 100, True), (False, 10, False)],
)
def test_auto_is_on_unless_every_batch_holds_all_rows(argument, batch_size, expected):
    assert use_control_variates(argument, batch_size, 100) is expected


@pytest.mark.parametrize("argument", ["yes", 1, None])
def test_other_arguments_are_refused(argument):
    with pytest.raises(ValueError, match="control_variates must be"):
        use_control_variates(argument, 10, 100)


def test_the_former_spelling_centre_is_accepted_with_a_warning(logistic):
    mm, _ = logistic
    theta, rows = np.array([0.2, -0.1, 0.4]), np.arange(20)
    with pytest.warns(FutureWarning, match="'centre' was renamed 'center'"):
        former = mm.grad_estimate_difference(theta, centre=np.zeros(3), idx=rows)
    value, grad = mm.grad_estimate_difference(theta, np.zeros(3), rows)
    assert former[0] == value
    np.testing.assert_array_equal(former[1], grad)
