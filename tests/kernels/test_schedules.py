"""Step-size schedules: closed forms and argument checks."""

import numpy as np
import pytest

from pymc_minibatch.kernels import schedules
from pymc_minibatch.kernels.schedules import as_schedule


def test_schedules_follow_their_formulas():
    t = np.arange(0, 25)
    np.testing.assert_allclose(schedules.constant(0.3)(t), 0.3)
    np.testing.assert_allclose(
        schedules.polynomial_decay(0.5, b=10.0, power=0.55)(t), 0.5 * (10.0 + t) ** -0.55
    )
    cyclic = schedules.cyclical(0.2, cycle_length=10)(t)
    np.testing.assert_allclose(cyclic[[0, 10, 20]], 0.2)
    np.testing.assert_allclose(cyclic[[5, 15]], 0.1)
    np.testing.assert_allclose(cyclic[:10], cyclic[10:20])
    assert np.all(np.diff(cyclic[:10]) < 0) and np.all(cyclic > 0)


def test_as_schedule_accepts_numbers_and_schedules():
    assert as_schedule(0.1) == schedules.constant(0.1)
    decay = schedules.polynomial_decay(1.0)
    assert as_schedule(decay) is decay


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: schedules.constant(0.0), "positive"),
        (lambda: schedules.constant(np.inf), "positive"),
        (lambda: schedules.polynomial_decay(0.1, b=0.0), "b must be"),
        (lambda: schedules.polynomial_decay(0.1, power=1.5), "power must"),
        (lambda: schedules.cyclical(0.1, cycle_length=0), "cycle_length must be positive"),
        (lambda: schedules.cyclical(0.1, cycle_length=2.5), "cycle_length must be an integer"),
        (lambda: as_schedule("0.1"), "step_size must be"),
        (lambda: as_schedule(-0.1), "positive"),
    ],
)
def test_bad_schedules_raise(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()
