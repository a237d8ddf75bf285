"""Every sampler on every zoo model with defaults: it refuses up front or lands, and the
approximate samplers' check against the Laplace approximation stays quiet.

The cells and tolerances are defined in ``tests/support/zoo_samplers.py``; ``python
benchmarks/zoo.py`` prints the same table. Marked ``zoo`` (run in CI on one Python
version, see ``.ci/run``): the whole table takes tens of minutes.
"""

import pytest

from tests.support.zoo import ZOO
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
