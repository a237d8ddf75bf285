"""The model zoo: every model builds on its rows, and every reference is usable and sensible."""

import json
import math

import numpy as np
import pytest

from pymc_minibatch.kernels.mint import tempering_settings
from tests.support.zoo import ZOO, normal_mean_reference, reference
from tests.support.zoo_network import BATCH_SIZE as NETWORK_BATCH_SIZE
from tests.support.zoo_network import (
    N_HELD_OUT,
    NETWORK,
    NETWORK_SAMPLERS,
    class_probabilities,
    judge_predictions,
    network_data,
    network_reference,
    predictive_draws,
    prior_weights,
    true_weights,
)
from tests.support.zoo_network import REFERENCE_PATH as NETWORK_REFERENCE_PATH


def scalar_labels(model):
    """Labels of the scalars of each free variable, by variable, as the references use them."""
    shapes = model.eval_rv_shapes()
    return {
        rv.name: [
            rv.name + (str(list(index)) if index else "")
            for index in np.ndindex(tuple(int(n) for n in shapes[rv.name]))
        ]
        for rv in model.free_RVs
    }


@pytest.mark.parametrize("name", list(ZOO))
def test_builder_makes_a_model_on_n_rows(name):
    entry = ZOO[name]
    model = entry.build()
    assert entry.name == name and entry.description
    assert model.observed_RVs
    for rv in model.observed_RVs:
        assert model.rvs_to_values[rv].data.shape[0] == entry.n_rows


@pytest.mark.parametrize("name", list(ZOO))
def test_reference_covers_every_free_scalar_with_finite_summaries(name):
    summaries = reference(name)
    model = ZOO[name].build()
    expected = [label for labels in scalar_labels(model).values() for label in labels]
    assert list(summaries) == expected
    for summary in summaries.values():
        assert math.isfinite(summary["mean"])
        assert summary["sd"] > 0
        assert 0 <= summary["mcse_mean"] < 0.1 * summary["sd"]
        assert 0 <= summary["mcse_sd"] < 0.1 * summary["sd"]


def test_normal_mean_closed_form_matches_the_models_log_density():
    """The log posterior of ``normal_mean`` is quadratic: three values fix its mean and sd."""
    logp = ZOO["normal_mean"].build().compile_logp()
    ref = normal_mean_reference()["mu"]
    center = ref["mean"] + 0.01  # off the mode, so the slope is not zero
    low, mid, high = (logp({"mu": center + step}) for step in (-1.0, 0.0, 1.0))
    variance = -1.0 / (high - 2.0 * mid + low)
    assert math.sqrt(variance) == pytest.approx(ref["sd"], rel=1e-6)
    mean = center + variance * (high - low) / 2.0
    assert mean == pytest.approx(ref["mean"], abs=1e-6 * ref["sd"])


@pytest.mark.parametrize("name", ["normal_mean", "logistic_regression"])
def test_log_density_is_flat_at_the_reference_mean(name):
    """At the posterior mean, the gradient in sd units is far below one (no transforms here)."""
    model = ZOO[name].build()
    summaries = reference(name)
    by_variable = scalar_labels(model)
    point = {  # value variables are the free variables themselves: no transforms
        var: np.reshape([summaries[label]["mean"] for label in by_variable[var]], np.shape(start))
        for var, start in model.initial_point().items()
    }
    grad = model.compile_dlogp()(point)
    sds = [summaries[label]["sd"] for var in point for label in by_variable[var]]
    assert np.all(np.abs(grad) * sds < 0.5)


def test_network_builder_makes_a_model_on_n_rows_with_balanced_labels():
    model = NETWORK.build()
    assert NETWORK.description
    assert model.rvs_to_values[model["y"]].data.shape[0] == NETWORK.n_rows
    _, y = network_data()
    assert 0.4 < y.mean() < 0.6  # both classes well represented


def test_network_predictions_are_the_models_likelihood():
    """``class_probabilities`` (which the predictive scalars use) gives the model's own
    Bernoulli log-likelihood at random weights."""
    model = NETWORK.build()
    # Python's implementation of the graph: no C compilation for three evaluations
    loglik = model.compile_fn(model.logp(vars=model.observed_RVs), mode="FAST_COMPILE")
    x, y = network_data()
    rng = np.random.default_rng(3)
    for _ in range(3):
        point = {name: rng.normal(size=np.shape(v)) for name, v in model.initial_point().items()}
        p = class_probabilities(*(point[name] for name in ("w1", "b1", "w2", "b2")), x)
        expected = np.sum(np.where(y == 1, np.log(p), np.log1p(-p)))
        assert float(loglik(point)) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("target", ["posterior", "tempered"])
def test_network_reference_is_clean_and_covers_every_held_out_input(target):
    summaries, temperature = network_reference(target)
    assert list(summaries) == [f"p[{k}]" for k in range(N_HELD_OUT)]
    for summary in summaries.values():
        assert 0 < summary["mean"] < 1
        assert summary["sd"] > 0
        assert 0 <= summary["mcse_mean"] < 0.1 * summary["sd"]
        assert 0 <= summary["mcse_sd"] < 0.1 * summary["sd"]
    run = json.loads(NETWORK_REFERENCE_PATH.read_text())[target]["run"]
    assert run["divergences"] == 0 and run["r_hat_max"] < 1.01
    if target == "posterior":  # NUTS's chains settled in different modes and predicted alike
        assert run["chain_mean_spread_max_sd"] < 0.25
    if target == "tempered":
        assert temperature == pytest.approx(
            tempering_settings(NETWORK.n_rows, NETWORK_BATCH_SIZE, 0.99).temperature
        )


@pytest.mark.parametrize("sampler", NETWORK_SAMPLERS)
@pytest.mark.parametrize(
    "weights", [prior_weights, true_weights], ids=["prior predictive", "point estimate"]
)
def test_network_check_rejects_the_prior_and_a_point_estimate(sampler, weights):
    """Negative controls of the network cells' check: draws of the prior, and the labelling
    network itself (its predictions carry no posterior spread) are ``inaccurate`` for every
    sampler's tolerance."""
    target = "tempered" if sampler in ("MINT", "CMINT") else "posterior"
    reference, _ = network_reference(target)
    cell = judge_predictions(sampler, predictive_draws(weights()), reference)
    assert cell.outcome == "inaccurate"


def test_network_check_accepts_the_reference_law_and_needs_effective_draws():
    """Two chains of independent normal draws with the reference's means and sds are ``ok``
    for SGLD's tolerance; the same law drawn as a slowly mixing AR(1) chain (ESS about 20)
    is not, whatever its means."""
    reference, _ = network_reference()
    rng = np.random.default_rng(5)
    noise = rng.standard_normal((2, 4000, N_HELD_OUT))
    slow = np.empty_like(noise)
    slow[:, 0] = noise[:, 0]
    rho = 0.995
    for t in range(1, noise.shape[1]):
        slow[:, t] = rho * slow[:, t - 1] + np.sqrt(1.0 - rho**2) * noise[:, t]
    for z, outcome in [(noise, "ok"), (slow, "inaccurate")]:
        draws = {label: ref["mean"] + ref["sd"] * z[..., k]
                 for k, (label, ref) in enumerate(reference.items())}  # fmt: skip
        cell = judge_predictions("SGLD", draws, reference)
        assert cell.outcome == outcome, cell
    assert "below 100" in cell.message
