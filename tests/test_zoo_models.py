"""The model zoo: every model builds on its rows, and every reference is usable and sensible."""

import math

import numpy as np
import pytest

from tests.support.zoo import ZOO, normal_mean_reference, reference


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
