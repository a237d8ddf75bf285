"""Every sampler on every zoo model with defaults: it refuses up front or lands, and the
approximate samplers' check against the Laplace approximation stays quiet.

The cells and tolerances are defined in ``tests/support/zoo_samplers.py``; ``python
benchmarks/zoo.py`` prints the same table. Marked ``zoo`` (run in CI on one Python
version, see ``.ci/run``): the whole table takes tens of minutes.

The zoo's network (``tests/support/zoo_network.py``) is judged by its posterior predictive,
the probabilities of class 1 at 16 held-out inputs, which every copy of its multimodal
posterior shares, against references of the posterior (NUTS) and of MINT's tempered target
(random-walk Metropolis: NUTS diverged there).
Per probability, a sampler's mean must lie within its allowed bias plus 4 combined Monte
Carlo standard errors (the sampler's, from its effective sample size, and the reference's)
of the reference mean, and its sd within its allowed range widened by 4 combined standard
errors of the sd. The allowed biases are the zoo's: 0.25 reference sd in a mean and 25% in
an sd for the SG-MCMC presets (their step's bias and gradient noise; on the other zoo models
their chains mix fast enough that the zoo leaves their Monte Carlo error out, not on the
network) and SVGD; 0.25 sd and the documented sd range for
w-SGLD, w-SGLD-B and pi-SGLD; for MINT and CMINT, against the tempered target, 0.1 sd (its
widening) and 20%. The particles' Monte Carlo error is part of their allowance, as in the
rest of the zoo. A chain's Monte Carlo error is only trusted from 100 effective draws of
every probability on (``MIN_ESS``; the allowance is then at most 0.4 sd), so a run with
fewer is not ``ok``: the SG-MCMC presets run 8000 draws per chain there, where SGLD had 25
at 4000. Every cell must also run at its defaults with no refusal and no error (a
divergence raises one), and the answer check must stay quiet. ``tests/test_zoo_models.py``
shows that the check rejects the prior predictive and the labelling network's own
predictions (a point estimate).
"""

import pytest

from tests.support.zoo import ZOO
from tests.support.zoo_network import NETWORK, NETWORK_SAMPLERS, run_network_cell
from tests.support.zoo_samplers import EXACT, SAMPLERS, run_cell

#: Samplers that need bounds on the likelihood, so may refuse a model up front.
MAY_REFUSE = set(EXACT) - {"FullMH"}

_MODE_SEEKING = (
    "gathers the particles near the mode (sd ratio 0-0.43 here, inside the documented range; "
    "the same 0.39 on N(0, I_29)): sigma_a's posterior mean lies 0.34 sd above its value at "
    "the mode of the log-transformed posterior, and its mean misses by 0.29-0.35 sd, as the "
    "posterior tempered to the same width does, beyond the 0.25 sd the issue asks; the "
    "other 28 scalars are within 0.07 sd. 400 particles, 3000 steps, full-data gradients or "
    "a 5x smaller step leave it at 0.27-0.35 sd"
)
_SLOW_MU_A = (
    "tempering the prior too leaves mu_a close to its tempered prior (sd 344 in the NUTS "
    "reference, 346 by a grid integral), 27 times the sqrt(T)-scaled Laplace sd (12.9) that "
    "sets the random-walk proposal: moving 3-4 per step (MINT's tuned step size 0.21-0.31, "
    "where CMINT's schedule starts), the chains do not cross mu_a's tempered range. "
)
#: Cells that miss their tolerance for a documented reason. They are not run here: an
#: expected failure passes whatever the cell gives, so a run would only cost CI time;
#: ``python benchmarks/zoo.py`` runs them and prints their outcome with the others.
KNOWN_DEVIATIONS = {
    ("w-SGLD", "varying_intercepts"): _MODE_SEEKING,
    ("w-SGLD-B", "varying_intercepts"): _MODE_SEEKING,
    ("pi-SGLD", "varying_intercepts"): _MODE_SEEKING,
    ("MINT", "varying_intercepts"): _SLOW_MU_A
    + "mu_a: ESS 3, sd 121 (ratio 0.35, 26 mcse beyond the 20% allowed) in 2 x 2000 draws; "
    "ratio 0.46 and ESS 4 even in 2 x 40000. The other 28 scalars are within tolerance",
    ("CMINT", "varying_intercepts"): _SLOW_MU_A
    + "mu_a: ESS 2, sd 108 (ratio 0.31, 15 mcse beyond the 20% allowed) over the 2 x 10000 "
    "draws of its schedule. The other 28 scalars are within tolerance, some only through "
    "their large mcse (ESS 3-17; a[7]: sd ratio 0.47, 3.4 mcse)",
}
CELLS = [
    pytest.param(
        sampler, model_name,
        marks=[pytest.mark.xfail(run=False, reason=KNOWN_DEVIATIONS[sampler, model_name])]
        if (sampler, model_name) in KNOWN_DEVIATIONS else [],
        id=f"{sampler}-{model_name}",
    )
    for model_name in ZOO
    for sampler in SAMPLERS
]  # fmt: skip


@pytest.mark.zoo
@pytest.mark.parametrize(("sampler", "model_name"), CELLS)
def test_sampler_refuses_up_front_or_lands(sampler, model_name):
    cell = run_cell(sampler, model_name)
    if cell.outcome == "refused":
        assert sampler in MAY_REFUSE, cell.message
        observed = [rv.name for rv in ZOO[model_name].build().observed_RVs]
        assert any(f"'{name}'" in cell.message for name in observed), cell.message
        return
    assert cell.outcome in ("ok", "unchecked"), (
        f"{cell.outcome}: mean error {cell.mean_error:.3g} sd "
        f"({cell.mean_error_mcse:.3g} mcse), sd ratio {cell.sd_ratio}; {cell.message}"
    )
    # the approximate samplers' check (Stein's identities) is quiet where they land
    assert cell.answer_check == ""


_TEMPERED_NETWORK = (
    "the tempered target's weights spread over tens (the tempered prior's sd is sqrt(T) = "
    "12.8 at T = 164), where the random walk, its covariance T times the Laplace fit's at "
    "one mode and tuned to acceptance 0.3, moves slowly: "
)
#: Network cells that miss their tolerance for a measured reason (seed 1; not run, as
#: above: MINT's and CMINT's runs, and w-SGLD's, would cost about 30 s of the CI's two cores
#: for an outcome that ``python benchmarks/zoo.py --models network_classifier`` records).
NETWORK_DEVIATIONS = {
    "w-SGLD": "gathers its particles at one point, as documented (sd ratio below 1e-13, "
    "inside its documented 0-0.75): their predictions are a mode's, 0.434 reference sd "
    "from the posterior predictive mean (p[1]), beyond the 0.25 sd allowed by 11.9 mcse "
    "of the reference",
    "MINT": _TEMPERED_NETWORK + "smallest ESS of a predicted probability 5 in 2 x 2000 draws "
    "(r_hat up to 1.35), below the 100 needed to judge; its mean then 0.47 tempered sd off "
    "and an sd ratio of 0.59 (4.3 mcse beyond 20%). At 2 x 20000 draws: ESS 51-214, means "
    "within 0.32 sd, sd ratios 0.75-0.99",
    "CMINT": _TEMPERED_NETWORK + "smallest ESS 3 over the 2 x 2500 draws of its schedule "
    "(r_hat up to 1.85); means up to 0.96 tempered sd off (8.7 mcse beyond 0.1 sd), sd "
    "ratios 0.33-1.44",
}
NETWORK_CELLS = [
    pytest.param(
        sampler,
        marks=[pytest.mark.xfail(run=False, reason=NETWORK_DEVIATIONS[sampler])]
        if sampler in NETWORK_DEVIATIONS else [],
        id=f"{sampler}-{NETWORK.name}",
    )
    for sampler in NETWORK_SAMPLERS
]  # fmt: skip


@pytest.mark.zoo
@pytest.mark.parametrize("sampler", NETWORK_CELLS)
def test_sampler_predicts_as_the_network_posterior(sampler):
    cell = run_network_cell(sampler)
    assert cell.outcome == "ok", (
        f"{cell.outcome}: mean error {cell.mean_error:.3g} sd ({cell.mean_error_mcse:.3g} "
        f"mcse beyond the allowed bias), sd ratio {cell.sd_ratio} ({cell.sd_error_mcse:.3g} "
        f"mcse beyond the allowed range); {cell.message}"
    )
    assert cell.answer_check == ""
