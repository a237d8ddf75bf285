"""SGHMC at its defaults on the hierarchical zoo models with 1000 groups and on a
non-centred varying-slopes model, against NUTS's stored reference, with the approximate
samplers' tolerance of ``tests/support/hierarchical_checks.py`` (a bias of at most 0.1
posterior sd in a mean and 15% in an sd, beyond the Monte Carlo error); the chain's check
of the answer must stay quiet.

SGHMC first: at the same step its momentum moves further per update, and on 1000 groups
SGLD's 5000 draws leave the slowest group effects with too few effective draws to hold a
mean to 0.1 sd. SGLD is held to the same tolerance on the 1000-group varying intercepts
with 20,000 draws per chain (about 20 s), and to NUTS's answer on the 100-group model in
``test_hierarchical.py``.

The 1000-group varying slopes take ``batch_size=5000`` (about 5 rows per group; with one,
the gradient noise of a group's intercept and slope cuts the default step tenfold) and
10,000 draws. Marked ``slow`` (15-50 s each).
"""

import pytest

import pymc_minibatch as pmm
from tests.support.hierarchical_checks import APPROXIMATE, assert_matches_reference, run_sampler
from tests.support.zoo_samplers import logged_checks


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "batch_size", "draws"),
    [
        ("intercepts_logistic_G1000_centred", 1000, 5000),
        ("intercepts_logistic_G1000_noncentred", 1000, 5000),
        ("slopes_normal_G100_noncentred", 1000, 5000),
        ("slopes_normal_G1000_noncentred", 5000, 10_000),
    ],
)
def test_sghmc_defaults_match_nuts_on_hierarchical_models(name, batch_size, draws):
    with logged_checks() as messages:
        step, idata = run_sampler(lambda: pmm.SGHMC(batch_size=batch_size), seed=7, name=name,
                                  draws=draws)  # fmt: skip
    assert step.strata is not None  # batches stratified by group
    assert (step.recentring is None) == name.endswith("_centred")
    assert messages == []
    assert_matches_reference(idata, name, allowed_bias=APPROXIMATE)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["intercepts_logistic_G1000_centred", "intercepts_logistic_G1000_noncentred"]
)
def test_sgld_defaults_match_nuts_on_1000_groups_with_more_draws(name):
    with logged_checks() as messages:
        step, idata = run_sampler(lambda: pmm.SGLD(batch_size=1000), seed=7, name=name,
                                  draws=20_000)  # fmt: skip
    assert step.strata is not None
    assert messages == []
    assert_matches_reference(idata, name, allowed_bias=APPROXIMATE)
