"""The diagonal fit of models too big for the exact curvature (networks): its estimators
against exact sums, and the samplers that take it instead of refusing the model."""

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch.exceptions import BoundsUnavailableError
from pymc_minibatch.model import diagonal_fit
from pymc_minibatch.model.curvature import MAX_SHARED
from pymc_minibatch.model.diagonal_fit import DiagonalFit, fisher_diagonal, prior_precision
from pymc_minibatch.step_methods.mint import BIG_MODEL_LANGEVIN_STEP
from tests.support.networks import N_PARAMETERS, accuracy, labelled_rows, network


@pytest.fixture(scope="module")
def network_model():
    return network()


@pytest.fixture(scope="module")
def network_fit(network_model):
    mm = pmm.MinibatchModel(network_model)
    return mm, mm.laplace()


def _logistic(n_rows, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, 3))
    y = (rng.random(n_rows) < 1.0 / (1.0 + np.exp(-x @ [1.0, -0.5, 0.2]))).astype(int)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 2.0, shape=3)
        pm.Bernoulli("y", logit_p=x @ beta, observed=y)
    return model, x, y


def test_fisher_diagonal_matches_the_rows_centred_sum_of_squares(monkeypatch):
    """The spread of minibatch gradients (400 rows, batches of 100 without replacement, so
    the finite-population factor 0.75 matters) gives ``sum_i (g_i - mean g)^2`` of the
    rows' gradients: within 4 standard errors of the estimate (20,000 batches: a relative
    sd of sqrt(2 / 19999) = 1% per coordinate). The same spread read without the
    finite-population factor misses by about 25%, far beyond that tolerance."""
    monkeypatch.setattr(diagonal_fit, "FISHER_BATCHES", 20_000)
    model, x, y = _logistic(400)
    mm = pmm.MinibatchModel(model)
    theta = np.array([0.8, -0.3, 0.4])
    rows = (y - 1.0 / (1.0 + np.exp(-x @ theta)))[:, None] * x  # each row's gradient
    exact = np.sum((rows - rows.mean(axis=0)) ** 2, axis=0)
    estimate = fisher_diagonal(mm, theta, 100, np.random.default_rng(1))
    tolerance = 4 * np.sqrt(2 / 19_999)
    np.testing.assert_allclose(estimate, exact, rtol=tolerance)
    without_correction = estimate * (400 - 100) / (400 - 1)  # variance * B / N^2 * N
    assert np.all(np.abs(without_correction / exact - 1) > 3 * tolerance)


def test_prior_precision_is_exact_for_independent_priors():
    model, _, _ = _logistic(50)
    mm = pmm.MinibatchModel(model)
    precision = prior_precision(mm, np.array([0.1, 2.0, -3.0]), np.random.default_rng(0))
    np.testing.assert_allclose(precision, 0.25)


def test_whitened_stiffness_is_the_largest_eigenvalue_of_the_whitened_curvature():
    """On a linear regression with equicorrelated features (every row used, so the
    Hessian-vector products are exact) power iteration finds the top eigenvalue of
    ``S (X'X / sigma^2 + I / 4) S``, which a diagonal precision misses by the factor the
    correlation gives (about 4.6 here)."""
    rng = np.random.default_rng(0)
    shared = rng.normal(size=(500, 1))
    x = np.sqrt(0.1) * rng.normal(size=(500, 5)) + np.sqrt(0.9) * shared
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 2.0, shape=5)
        pm.Normal("y", x @ beta, 0.5, observed=x @ np.ones(5) + 0.5 * rng.normal(size=500))
    mm = pmm.MinibatchModel(model)
    precision = x.T @ x / 0.25 + np.eye(5) / 4
    scale = 1.0 / np.sqrt(np.diag(precision))
    expected = np.linalg.eigvalsh(scale[:, None] * precision * scale[None, :]).max()
    stiffness = diagonal_fit.whitened_stiffness(mm, np.zeros(5), scale, rng)
    assert expected > 4
    assert stiffness == pytest.approx(expected, rel=1e-6)


def test_a_network_gets_the_diagonal_fit(network_model, network_fit):
    """Above MAX_SHARED weights the exact fit is out of reach: Adam finds a center that
    classifies held-out rows far better than chance (1/3; the labelling network itself
    scores 0.86 there), with a finite positive scale for
    every weight, and no full-data pass."""
    mm, fit = network_fit
    assert mm.ndim == N_PARAMETERS > MAX_SHARED and not mm.laplace_is_exact()
    assert isinstance(fit, DiagonalFit) and not fit.exact and not fit.is_mode
    assert fit.passes == 0 and mm.full_data_passes == 0
    scale = fit.preconditioner.scale
    assert np.all(np.isfinite(scale)) and np.all(scale > 0)
    assert np.isfinite(fit.stiffness) and fit.stiffness > 1  # the weights are correlated
    x_test, y_test = labelled_rows(1000, seed=1)
    assert accuracy(mm.point_from_theta(fit.mode), x_test, y_test) > 0.75
    assert mm.logp_and_grad(fit.mode)[0] > mm.logp_and_grad(mm.initial_theta())[0]
    np.testing.assert_array_equal(fit.start(np.random.default_rng(0)), fit.mode)


def test_particles_start_around_the_center(network_fit):
    """Draws of the fit shrunk by PARTICLE_SPREAD: centred on the center, at a tenth of its
    sds (200 particles: the sd of each coordinate's sample sd is about 5% of it)."""
    _, fit = network_fit
    starts = fit.bulk_draws(np.random.default_rng(2), 200)
    spread = (starts - fit.mode).std(axis=0) / fit.preconditioner.scale
    assert starts.shape == (200, fit.mode.size)
    assert abs(np.median(spread) - diagonal_fit.PARTICLE_SPREAD) < 0.005
    offset = (starts - fit.mode).mean(axis=0) / fit.preconditioner.scale
    assert np.abs(offset).max() < 5 * diagonal_fit.PARTICLE_SPREAD / np.sqrt(200)


@pytest.mark.parametrize("preset", ["SGLD", "SGHMC", "SGNHT", "SGMGT", "SGMGTD"])
def test_sg_presets_run_on_a_network_at_their_defaults(network_model, network_fit, preset):
    """No refusal: preconditioned by the diagonal fit, without control variates (the
    Adam center is no mode to expand around), the chains start at the center, their step
    set by the gradient noise measured near it, and keep classifying held-out rows well."""
    with network_model:
        step = getattr(pmm, preset)(batch_size=100, updates_per_draw=10)
        assert repr(step).endswith(
            "control_variates=False, precondition='diagonal', updates_per_draw=10)"
        )
        # measured near the center: below N / B - 1, the plain estimate's noise in the
        # whitened coordinates of an exact fit, which the stiffness scaling shrinks
        assert 0 < step.noise_ratio < 2000 / 100 - 1
        idata = pm.sample(step=step, draws=20, tune=0, chains=1, progressbar=False,
                          random_seed=1, compute_convergence_checks=False)  # fmt: skip
    last = {name: idata.posterior[name].values[0, -1] for name in ("w1", "b1", "w2", "b2")}
    x_test, y_test = labelled_rows(1000, seed=1)
    assert accuracy(last, x_test, y_test) > 0.6


def test_mint_on_a_network_proposes_small_langevin_steps(network_model):
    """The paper's proposal for networks: Langevin steps preconditioned by the diagonal fit,
    from its center, of the fixed size BIG_MODEL_LANGEVIN_STEP (tuning leaves it alone),
    a draw per epoch (20 steps); most steps are accepted and the draws keep classifying
    held-out rows well. The random walk is still there on request, tuned as on small
    models."""
    with network_model:
        step = pmm.MINT(batch_size=100)
        assert repr(step).endswith("proposal='sgld', proposal_cov='diagonal')")
        assert step.steps_per_draw == 20
        idata = pm.sample(step=step, draws=4, tune=4, chains=1, progressbar=False,
                          random_seed=1, compute_convergence_checks=False,
                          discard_tuned_samples=False)  # fmt: skip
        walk = pmm.MINT(batch_size=100, proposal="rw")
    assert repr(walk).endswith("proposal='rw', proposal_cov='diagonal')")
    assert walk.tunes_proposal_scale and not step.tunes_proposal_scale
    stats = idata.warmup_sample_stats
    np.testing.assert_array_equal(stats["proposal_scale"].values, np.sqrt(BIG_MODEL_LANGEVIN_STEP))
    assert float(stats["accept"].mean()) > 0.5
    last = {name: idata.posterior[name].values[0, -1] for name in ("w1", "b1", "w2", "b2")}
    x_test, y_test = labelled_rows(1000, seed=1)
    assert accuracy(last, x_test, y_test) > 0.6


def test_tunamh_on_a_model_too_big_for_the_exact_fit_has_no_control_variates():
    """A logistic regression with 3001 coefficients: plain bounds (order 0) by default, and a
    clear refusal of control variates, which need the exact curvature."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, MAX_SHARED + 1)) / np.sqrt(MAX_SHARED)
    y = rng.integers(0, 2, size=300)
    with pm.Model():
        beta = pm.Normal("beta", 0.0, 1.0, shape=MAX_SHARED + 1)
        pm.Bernoulli("y", logit_p=x @ beta, observed=y)
        assert repr(pmm.TunaMH()) == "TunaMH(expansion_order=0, proposal='rw')"
        with pytest.raises(BoundsUnavailableError, match="exact curvature"):
            pmm.TunaMH(expansion_order=2)


@pytest.mark.parametrize("method", ["svgd", "wsgld", "wsgld_blob", "pisgld"])
def test_particles_run_on_a_network_at_their_defaults(network_model, method):
    """20 particles, batches of 100 rows, no control variates; the ensemble classifies
    held-out rows well."""
    idata = pmm.sample_particles(method, n_steps=300, model=network_model, random_seed=1,
                                 progressbar=False)  # fmt: skip
    attrs = idata.posterior.attrs
    assert (attrs["n_particles"], attrs["batch_size"], attrs["control_variates"]) == (20, 100, 0)
    # SGLD's rule, BIG_MODEL_STEP_SCALE / (1 + r) with r = N / B - 1 = 19, throughout
    np.testing.assert_allclose(idata.sample_stats["step_size"].values, 0.2 / 20)
    if method == "wsgld":
        assert attrs["wasserstein_weight"] == pytest.approx(1 / 20)
    x_test, y_test = labelled_rows(1000, seed=1)
    votes = np.zeros((len(y_test), 3))
    for particle in range(20):
        point = {name: idata.posterior[name].values[0, particle]
                 for name in ("w1", "b1", "w2", "b2")}  # fmt: skip
        hidden = np.tanh(x_test @ point["w1"] + point["b1"])
        logits = hidden @ point["w2"] + point["b2"]
        votes[np.arange(len(y_test)), np.argmax(logits, axis=1)] += 1
    assert np.mean(np.argmax(votes, axis=1) == y_test) > 0.75
