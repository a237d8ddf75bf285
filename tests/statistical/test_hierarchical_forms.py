"""TunaMH at its defaults on the other hierarchical zoo models: non-centred group effects
and varying slopes with a sampled noise scale, against NUTS's stored reference.

The non-centred models are sampled in their centred form
(:mod:`pymc_minibatch.model.recentring`) and their draws of ``z`` mapped back; the
reference holds ``z`` and ``a`` (and ``b``) alike. The tolerance is that of
``tests/support/hierarchical_checks.py`` (the exact samplers'). The 1000-group
varying-slopes models are in ``test_hierarchical_slopes.py`` (a file per worker under
``--dist loadfile``).

Marked ``slow`` (30-90 s each).
"""

import pytest

import pymc_minibatch as pmm
from tests.support.hierarchical_checks import assert_matches_reference, run_sampler
from tests.support.zoo_hierarchical import N_ROWS, intercepts_logistic


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "intercepts_logistic_G100_noncentred",
        "intercepts_logistic_G1000_noncentred",
        "slopes_normal_G100_centred",
        "slopes_normal_G100_noncentred",
    ],
)
def test_tunamh_defaults_are_exact_on_centred_and_non_centred_forms(name):
    step, idata = run_sampler(pmm.TunaMH, seed=9, name=name)
    assert (step.recentring is None) == name.endswith("_centred")
    assert step.group_moves is not None
    assert_matches_reference(idata, name)


@pytest.mark.slow
def test_tunamh_defaults_are_exact_on_an_inline_non_centred_predictor():
    """``logit_p = mu + tau * z_a[g] + X @ beta`` with no deterministic ``a``: recentred inline
    (``z_a_effect``), the posterior of the non-centred zoo model, ``a = mu + tau * z_a``
    computed from the draws."""
    name = "intercepts_logistic_G100_noncentred"
    model = intercepts_logistic(100, N_ROWS, centred=False, inline=True)
    step, idata = run_sampler(pmm.TunaMH, seed=9, name=name, model=model)
    assert [e.name for e in step.recentring.effects] == ["z_a_effect"]
    posterior = idata["posterior"]
    assert "z_a_effect" not in posterior
    posterior["a"] = posterior["mu"] + posterior["tau"] * posterior["z_a"]
    assert_matches_reference(idata, name)
