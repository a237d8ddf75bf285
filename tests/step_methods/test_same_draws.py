"""Every registered step method gives the draws recorded in ``tests/step_methods/same_draws/``
(:mod:`tests.step_methods.same_draws`): a refactor of a transition keeps its random stream
and its arithmetic, or re-records the fixture and says why.

The draws are compared to 1e-6 relative (1e-9 absolute), not to the bit: the recording
machine and the test's may round the last bit differently (another CPU's BLAS kernels), and
TunaMH's tuning on the free-scale varying-intercept model amplifies such a difference to
about 1e-9 relative over its 200 steps (measured between PyMC 6 runs that compiled their
functions in another order); a changed random stream or a changed decision moves a draw by
its posterior's scale, 1e-2 or more here.
"""

import numpy as np
import pytest

from tests.step_methods.same_draws import FIXTURE, build_models, cases, draws
from tests.support.recorded import load_recorded


@pytest.fixture(scope="module")
def recorded():
    return load_recorded(FIXTURE, "python -m tests.step_methods.same_draws")


@pytest.fixture(scope="module")
def models():
    return build_models()


def test_the_fixture_holds_every_case(recorded):
    assert set(recorded) == {f"{name}/{model}" for name, model in cases()}


@pytest.mark.parametrize(("name", "model"), cases(), ids=[f"{n}/{m}" for n, m in cases()])
def test_the_draws_are_the_recorded_ones(recorded, models, name, model):
    expected = recorded[f"{name}/{model}"]
    got = draws(name, models[model])
    if expected.dtype.kind == "U":  # a refusal
        assert got == str(expected)
        return
    assert not isinstance(got, str), got
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9)
