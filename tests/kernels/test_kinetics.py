"""Monomial-gamma kinetics: derivatives, stiff limit, and exact draws from exp(-K_c)."""

import numpy as np
import pytest
from scipy import integrate, special, stats

from pymc_minibatch.kernels.kinetics import GaussianKinetics, MonomialKinetics, make_kinetics

POINTS = np.array([-7.3, -2.0, -0.61, -0.05, 0.013, 0.2, 0.9, 3.3, 11.0])


def _central_difference(f, p, rel=1e-6):
    delta = rel * np.maximum(1.0, np.abs(p))
    return (f(p + delta) - f(p - delta)) / (2 * delta)


@pytest.mark.parametrize("a", [1, 2])
@pytest.mark.parametrize("c", [0.5, 3.0, 10.0])
def test_gradient_and_hessian_match_finite_differences(a, c):
    kinetics = MonomialKinetics(a, c)
    np.testing.assert_allclose(
        kinetics.grad(POINTS), _central_difference(kinetics.energy, POINTS), rtol=1e-6, atol=1e-9
    )
    np.testing.assert_allclose(
        kinetics.hess_diag(POINTS),
        _central_difference(kinetics.grad, POINTS),
        rtol=1e-5,
        atol=1e-8,
    )


def test_closed_forms_of_the_paper():
    p = POINTS
    c = 3.0
    k1 = MonomialKinetics(1, c)
    sigmoid = special.expit(c * p)
    np.testing.assert_allclose(k1.energy(p), -p + (2 / c) * np.log1p(np.exp(c * p)))
    np.testing.assert_allclose(
        k1.hess_diag(p), 2 * c * sigmoid * (1 - sigmoid), rtol=1e-12, atol=1e-15
    )
    k2 = MonomialKinetics(2, c)
    s = np.sqrt(np.abs(p))
    np.testing.assert_allclose(k2.energy(p), s + 4 / (c * (1 + np.exp(c * s))), rtol=1e-12)


@pytest.mark.parametrize("a", [1, 2])
def test_softened_kinetics_tends_to_the_stiff_one(a):
    p = POINTS
    stiff = np.abs(p) ** (1 / a)
    gaps = []
    for c in [1.0, 10.0, 100.0, 1e4]:
        kinetics = MonomialKinetics(a, c)
        gap = kinetics.energy(p) - stiff
        assert np.all(gap >= 0)  # K_c >= K: the rejection sampler is valid
        assert np.all(gap <= 2 / c + 1e-15)
        gaps.append(np.max(gap))
    assert gaps == sorted(gaps, reverse=True)
    far = np.abs(p) > 0.01
    np.testing.assert_allclose(
        MonomialKinetics(a, 1e4).grad(p[far]),
        np.sign(p[far]) * np.abs(p[far]) ** (1 / a - 1) / a,
        rtol=1e-6,
    )
    np.testing.assert_allclose(MonomialKinetics(a, np.inf).energy(p), stiff)


def test_a2_hessian_is_singular_at_zero():
    """K_c ~ 2/c + c^2 |p|^(3/2) / 12 near 0 (a = 2): the paper's "smooth" claim fails."""
    c = 4.0
    kinetics = MonomialKinetics(2, c)
    p = np.array([1e-10, 1e-8, 1e-6])
    np.testing.assert_allclose(kinetics.energy(p), 2 / c + c**2 * p**1.5 / 12, rtol=1e-6)
    np.testing.assert_allclose(kinetics.hess_diag(p), c**2 / (16 * np.sqrt(p)), rtol=1e-4)
    assert kinetics.grad(np.array([0.0]))[0] == 0.0
    assert np.isinf(kinetics.hess_diag(np.array([0.0]))[0])


def _quadrature_cdf(kinetics, grid):
    density = np.exp(-kinetics.energy(grid))
    cdf = integrate.cumulative_trapezoid(density, grid, initial=0.0)
    return cdf / cdf[-1]


@pytest.mark.parametrize(("a", "c"), [(1, 1.0), (1, 10.0), (2, 1.0), (2, 10.0)])
def test_momentum_draws_follow_exp_minus_kc(a, c):
    kinetics = MonomialKinetics(a, c)
    draw = kinetics.sample(np.random.default_rng(3), (4000,))
    limit = 60.0 if a == 1 else 3600.0  # exp(-K) below 1e-26 beyond
    grid = np.concatenate([-np.geomspace(limit, 1e-9, 40000), np.geomspace(1e-9, limit, 40000)])
    cdf = _quadrature_cdf(kinetics, grid)
    result = stats.kstest(draw.momentum, lambda x: np.interp(x, grid, cdf))
    assert result.pvalue > 0.01
    # acceptance rate = Z_c / Z with Z = 2 Gamma(a + 1), the stiff normaliser
    z_c = integrate.trapezoid(np.exp(-kinetics.energy(grid)), grid)
    expected = z_c / (2 * special.gamma(a + 1))
    proposed = draw.momentum.size / draw.accept_rate
    assert abs(draw.accept_rate - expected) < 4 * np.sqrt(expected * (1 - expected) / proposed)


def test_stiff_draws_without_rejection_fail_the_same_check():
    """Calibration: the released code's draws (stiff law, no rejection) are detected at c = 1."""
    kinetics = MonomialKinetics(2, 1.0)
    rng = np.random.default_rng(3)
    stiff = np.where(rng.random(4000) < 0.5, -1, 1) * rng.gamma(2, 1.0, 4000) ** 2
    grid = np.concatenate([-np.geomspace(3600, 1e-9, 40000), np.geomspace(1e-9, 3600, 40000)])
    cdf = _quadrature_cdf(kinetics, grid)
    assert stats.kstest(np.abs(stiff), lambda x: 2 * np.interp(x, grid, cdf) - 1).pvalue < 0.01


def test_gaussian_kinetics_is_a_half():
    kinetics = make_kinetics(0.5, 10.0)
    assert isinstance(kinetics, GaussianKinetics)
    np.testing.assert_allclose(kinetics.energy(POINTS), POINTS**2 / 2)
    np.testing.assert_allclose(kinetics.grad(POINTS), POINTS)
    np.testing.assert_allclose(kinetics.hess_diag(POINTS), 1.0)
    draw = kinetics.sample(np.random.default_rng(0), (3000,))
    assert stats.kstest(draw.momentum, "norm").pvalue > 0.01


@pytest.mark.parametrize(("a", "c"), [(3, 1.0), (0, 1.0), (1, 0.0), (2, -1.0)])
def test_bad_kinetics_parameters_raise(a, c):
    with pytest.raises(ValueError, match="a must be|c must be"):
        make_kinetics(a, c)
