"""FlyMC kernel pieces: the quadratic bounds, their collapsed sum, the row subsets."""

import numpy as np
import pytest
from scipy import special, stats

from pymc_minibatch.kernels.flymc import (
    collapse,
    geometric_subset,
    jaakkola_jordan,
    laplace_bound,
    log_bound,
)

RNG = np.random.default_rng(0)
ETA = np.linspace(-8, 8, 401)


@pytest.mark.parametrize("y", [0, 1])
@pytest.mark.parametrize("xi", [0.2, 1.5, 4.0])
def test_jaakkola_jordan_is_a_lower_bound_tight_at_xi(y, xi):
    rows = np.zeros(ETA.size, dtype=int)
    bound = jaakkola_jordan(np.array([xi]), np.array([y]))
    loglik = y * ETA - np.logaddexp(0.0, ETA)
    assert np.all(log_bound(bound, ETA, rows) < loglik)
    for touching in (xi, -xi):
        exact = y * touching - np.logaddexp(0.0, touching)
        assert log_bound(bound, np.array([touching]), [0])[0] == pytest.approx(exact, abs=2e-6)


@pytest.mark.parametrize("xi", [0.1, 1.0, 3.0])
def test_laplace_bound_is_a_lower_bound_tight_at_xi(xi):
    y, scale = np.array([0.7]), 1.3
    rows = np.zeros(ETA.size, dtype=int)
    bound = laplace_bound(np.array([xi]), y, scale)
    loglik = stats.laplace.logpdf(y, ETA, scale)
    assert np.all(log_bound(bound, ETA, rows) < loglik)
    touching = y - xi
    assert log_bound(bound, touching, [0])[0] == pytest.approx(
        stats.laplace.logpdf(y, touching, scale)[0], abs=2e-6
    )


def test_collapsed_sum_equals_the_sum_over_rows():
    X, offset = RNG.normal(size=(500, 3)), RNG.normal(size=500)
    y = (RNG.random(500) < special.expit(offset)).astype(float)
    bound = jaakkola_jordan(RNG.gamma(2.0, size=500), y)
    collapsed = collapse(bound, offset, X, chunk_rows=128)
    for theta in RNG.normal(size=(5, 3)):
        direct = np.sum(log_bound(bound, offset + X @ theta, np.arange(500)))
        assert collapsed(theta) == pytest.approx(direct, rel=1e-12)


def test_geometric_subset_includes_each_row_with_probability_q():
    counts = np.zeros(50)
    for _ in range(4000):
        subset = geometric_subset(RNG, 50, 0.2)
        assert np.all(np.diff(subset) > 0) and subset.max(initial=0) < 50
        counts[subset] += 1
    # each count ~ Binomial(4000, 0.2): sd 25
    assert np.all(np.abs(counts - 800) < 5 * 25)
    np.testing.assert_array_equal(geometric_subset(RNG, 7, 1.0), np.arange(7))
