"""TunaMH at its defaults on the 1000-group varying-intercept-and-slope Normal regressions of
the hierarchical zoo (2000 group effects, a sampled noise scale), centred and non-centred,
against NUTS's stored reference, with the tolerance of
``tests/support/hierarchical_checks.py``.

2500 draws per chain, half the other files': the shared parameters' move often falls back
to a full-data step on the noise scale's trust region, and 5000 draws took about 4 minutes
per model. Marked ``slow``.
"""

import pytest

import pymc_minibatch as pmm
from tests.support.hierarchical_checks import assert_matches_reference, run_sampler


@pytest.mark.slow
@pytest.mark.parametrize("form", ["centred", "noncentred"])
def test_tunamh_defaults_are_exact_on_a_thousand_varying_slopes(form):
    name = f"slopes_normal_G1000_{form}"
    step, idata = run_sampler(pmm.TunaMH, seed=9, name=name, draws=2500)
    assert (step.recentring is None) == (form == "centred")
    assert_matches_reference(idata, name)
