"""TunaMH at its defaults on the other hierarchical zoo models: non-centred group effects
and varying slopes with a sampled noise scale, against NUTS's stored reference.

The non-centred models are sampled in their centred form
(:mod:`pymc_minibatch.model.recentring`) and their draws of ``z`` mapped back; the
reference holds ``z`` and ``a`` (and ``b``) alike. The tolerance is that of
``tests/statistical/hierarchical_checks.py`` (the exact samplers'). The 1000-group
varying-slopes models are in ``test_hierarchical_slopes.py`` (a file per worker under
``--dist loadfile``).

Marked ``slow`` (30-90 s each).
"""

import pytest

import pymc_minibatch as pmm
from tests.statistical.hierarchical_checks import assert_matches_reference, run_sampler


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
