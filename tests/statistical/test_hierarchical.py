"""TunaMH, SGLD and SVGD at their defaults on a hierarchical zoo model, against NUTS's
stored reference.

``intercepts_logistic_G100_centred`` (``tests/support/zoo_hierarchical.py``): 100 groups of very
unequal sizes (5 empty, 10 with fewer than 10 rows) on 10^5 rows, 106 parameters. Every
scalar, the 100 group effects included, is held to the exact samplers' tolerance: its mean
within ``Z`` combined Monte Carlo standard errors of NUTS's (``Z`` = 4, or the two-sided
Bonferroni quantile for a family-wise error of 0.001 over the scalars if larger: 4.4 for
106), its sd within 10% of NUTS's plus ``Z`` standard errors of the sd.

SGLD's default step keeps its bias near 2.5% in sd (:class:`pymc_minibatch.SGLD`), inside
the 10%; its batches are stratified by group (:mod:`pymc_minibatch.kernels.strata`).

SVGD's ``M`` particles (100 at its defaults here) are independent draws at best: each
mean is held within ``Z`` of its standard error (``sd / sqrt(M)`` combined with the
reference's), each sd within 15% plus ``Z`` standard errors; and the answer check must stay
quiet, while it reports the collapse of the joint kernel on the same model. SVGD is held so
on ``intercepts_logistic_G1000_centred`` too (1000 groups, 1006 parameters, where its
defaults take 200 particles: ``pmm.particles.GROUP_PARTICLES``) and on
``slopes_normal_G100_centred`` (a Normal likelihood, 100 groups with an intercept and a
slope each, 207 parameters) and its non-centred form (moved centred, its ``z_a`` and ``z_b``
held to the reference too).

Marked ``slow`` (about 30 s each: the setup, then 2 x 6000 steps or 1000 particle steps;
SVGD on 1000 groups, with 200 particles, about 2 minutes).
The other models of the zoo are in ``test_hierarchical_forms.py``.
"""

import warnings

import numpy as np
import pytest

import pymc_minibatch as pmm
from tests.support.hierarchical_checks import (
    assert_matches_reference,
    run_sampler,
    z_limit,
)
from tests.support.zoo import scalar_draws
from tests.support.zoo_hierarchical import HIERARCHICAL_ZOO, hierarchical_reference

MODEL = "intercepts_logistic_G100_centred"


@pytest.mark.slow
@pytest.mark.parametrize("group_moves", ["auto", False])
def test_tunamh_defaults_are_exact_on_a_varying_intercept_model(group_moves):
    step, idata = run_sampler(lambda: pmm.TunaMH(group_moves=group_moves), seed=7, name=MODEL)
    assert step.bounds.n_groups == 100  # a metric per group, rows drawn within groups
    assert (step.group_moves is not None) == (group_moves == "auto")
    assert_matches_reference(idata, MODEL)


@pytest.mark.slow
def test_tunamh_defaults_are_exact_on_a_thousand_groups():
    name = "intercepts_logistic_G1000_centred"
    step, idata = run_sampler(pmm.TunaMH, seed=8, name=name)
    assert step.group_moves is not None
    assert_matches_reference(idata, name)


@pytest.mark.slow
def test_sgld_defaults_match_nuts_on_a_varying_intercept_model():
    """Stratified batches: with uniform ones the groups of a few rows set the gradient
    noise, hence a step too small for 5000 draws to reach the effective draws asserted."""
    step, idata = run_sampler(lambda: pmm.SGLD(batch_size=1000), seed=7, name=MODEL)
    assert step.strata is not None and step.noise_ratio < 0.25
    assert_matches_reference(idata, MODEL)


def _svgd(kernel, name=MODEL):
    model = HIERARCHICAL_ZOO[name].build()
    return pmm.sample_particles("svgd", kernel=kernel, model=model, random_seed=7,
                                progressbar=False)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        MODEL,
        "intercepts_logistic_G1000_centred",
        "slopes_normal_G100_centred",
        "slopes_normal_G100_noncentred",
    ],
)
def test_svgd_defaults_match_nuts_on_hierarchical_models(name):
    """With 1000 groups the group scale starts several sds low (the joint mode) and relaxes
    slowly with the spread of the small groups' effects: the default momentum carries it
    (``pmm.particles.GROUP_MOMENTUM``), and the answer check's batches hold enough rows of
    each group not to mistake a group missing from them for particles far too narrow."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", pmm.AnswerCheckWarning)
        idata = _svgd("auto", name)
    attrs = idata["posterior"].attrs
    assert attrs["kernel"] == "coordinates"  # more coordinates than the particles
    assert attrs["momentum"] == pmm.particles.GROUP_MOMENTUM
    expected = pmm.particles.GROUP_PARTICLES if "G1000" in name else 100  # MANY_GROUPS
    assert attrs["n_particles"] == expected
    reference = hierarchical_reference(name)
    draws = scalar_draws(idata)
    limit = z_limit(len(reference))
    for label, ref in reference.items():
        values = draws[label]
        n = values.size
        mean_error = abs(values.mean() - ref["mean"]) / np.hypot(ref["sd"] / np.sqrt(n),
                                                                  ref["mcse_mean"])  # fmt: skip
        assert mean_error < limit, (label, mean_error)
        sd_excess = max(abs(values.std() - ref["sd"]) - 0.15 * ref["sd"], 0.0)
        assert sd_excess < limit * ref["sd"] / np.sqrt(2 * (n - 1)), (label, values.std())


@pytest.mark.slow
def test_the_joint_mode_puts_the_group_scale_far_below_its_posterior_mean():
    """Why the answer check uses Stein's identities and not the Laplace approximation: with
    1000 groups, exact draws of the scale sit more than 5 Laplace sds from the mode."""
    name = "intercepts_logistic_G1000_centred"
    minibatch_model = pmm.MinibatchModel(HIERARCHICAL_ZOO[name].build())
    fit = minibatch_model.laplace()
    tau = minibatch_model.coordinate_names().index("tau_log__")
    reference = hierarchical_reference(name)["tau"]
    offset = (np.log(reference["mean"]) - fit.mode[tau]) / np.sqrt(fit.covariance_diagonal()[tau])
    assert fit.is_mode and offset > 5.0


@pytest.mark.slow
def test_the_joint_kernels_collapse_is_reported():
    with pytest.warns(pmm.AnswerCheckWarning, match="far from the posterior"):
        _svgd("joint")
