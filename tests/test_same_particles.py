"""``pmm.sample_particles`` gives the particles recorded in ``tests/same_particles/``
(:mod:`tests.same_particles`): a refactor of the particle loop keeps its random stream, its
arithmetic, its warnings and its errors, or re-records the fixture and says why.

The values are compared to 1e-9 relative, not to the bit: the recording machine and the
test's may round the last bit differently (another CPU's BLAS kernels); a changed random
stream or a changed decision moves a particle by its posterior's scale.
"""

import numpy as np
import pytest

from tests.same_particles import FIXTURE, build_models, cases, particles
from tests.support.recorded import load_recorded


@pytest.fixture(scope="module")
def recorded():
    return load_recorded(FIXTURE, "python -m tests.same_particles")


@pytest.fixture(scope="module")
def models():
    return build_models()


def test_the_fixture_holds_every_case(recorded):
    assert {key.split("|")[0] for key in recorded} == set(cases())


@pytest.mark.parametrize("case", list(cases()))
def test_the_particles_are_the_recorded_ones(recorded, models, case):
    model, kwargs = cases()[case]
    draws, stats, notes = particles(models[model], kwargs)
    assert notes == str(recorded[f"{case}|notes"])
    if draws is None:  # the run diverged, as recorded
        assert f"{case}|draws" not in recorded
        return
    np.testing.assert_allclose(draws, recorded[f"{case}|draws"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(stats, recorded[f"{case}|stats"], rtol=1e-9, atol=1e-12)
