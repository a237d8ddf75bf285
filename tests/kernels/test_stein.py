"""The IMQ Stein kernel and KSD: against a loop over the definition, and exact expectations."""

import numpy as np
import pytest

from pymc_minibatch.kernels.stein import balanced_scale, imq_ksd, imq_stein_kernel


def _imq(x, y, c, beta):
    return (c * c + np.sum((x - y) ** 2)) ** beta


def _d_dy(x, y, c, beta, j):
    """``d k / d y_j`` by the complex step (exact to rounding)."""
    h = 1e-30
    y = y.astype(complex)
    y[j] += 1j * h
    return _imq(x.astype(complex), y, c, beta).imag / h


def _reference_stein_kernel(x, score, c, beta):
    """``k_p`` pair by pair from the definition of ``k`` alone: first derivatives by the
    complex step, ``d^2 k / dx_j dy_j`` by a sixth-order central difference of them."""
    n, d = x.shape
    h = 1e-3
    stencil = {1: 3 / 4, 2: -3 / 20, 3: 1 / 60}  # sixth-order first-derivative weights
    out = np.empty((n, n))
    for i in range(n):
        for m in range(n):
            xi, xm, si, sm = x[i], x[m], score[i], score[m]
            value = si @ sm * _imq(xi, xm, c, beta)
            for j in range(d):
                grad_y = _d_dy(xi, xm, c, beta, j)
                grad_x = _d_dy(xm, xi, c, beta, j)  # k is symmetric: d/dx_j k(x, y)
                mixed = 0.0
                for step, weight in stencil.items():
                    e = np.zeros(d)
                    e[j] = step * h
                    mixed += weight * (
                        _d_dy(xi + e, xm, c, beta, j) - _d_dy(xi - e, xm, c, beta, j)
                    )
                value += si[j] * grad_y + sm[j] * grad_x + mixed / h
            out[i, m] = value
    return out


@pytest.mark.parametrize(("c", "beta"), [(1.0, -0.5), (1.3, -0.3), (0.7, -0.9)])
def test_stein_kernel_matrix_equals_the_definition_evaluated_pair_by_pair(c, beta):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(7, 3)) + 5.0  # away from 0: checks the centring inside
    score = rng.normal(size=(7, 3))  # any vectors: the identity does not need a real score
    reference = _reference_stein_kernel(x, score, c, beta)
    np.testing.assert_allclose(imq_stein_kernel(x, score, c, beta), reference, rtol=1e-8)


def test_stein_kernel_diagonal_closed_form_and_one_dimensional_input():
    x = np.array([0.0, 1.0, -2.0])
    matrix = imq_stein_kernel(x, -x, c=2.0, beta=-0.25)
    # k_p(x, x) = |s|^2 c^(2 beta) - 2 beta d c^(2 beta - 2)
    np.testing.assert_allclose(np.diag(matrix), x**2 * 2**-0.5 + 0.5 * 2**-2.5, rtol=1e-14)
    np.testing.assert_allclose(matrix, matrix.T, rtol=1e-14)


def test_ksd_is_nonnegative_and_the_stein_kernel_matrix_positive_semidefinite():
    rng = np.random.default_rng(1)
    for _ in range(20):
        x, score = rng.normal(size=(30, 2)), rng.normal(size=(30, 2)) * 5
        assert imq_ksd(x, score) >= 0
    # the V-statistic's matrix is positive semi-definite
    assert np.linalg.eigvalsh(imq_stein_kernel(x, score)).min() > -1e-10


@pytest.mark.parametrize(
    ("name", "draw", "score", "c", "beta", "mean_sq_score"),
    [
        ("normal", lambda r, s: r.normal(size=s), lambda x: -x, 1.0, -0.5, 1.0),
        # standard logistic: score -tanh(x / 2), Fisher information 1/3
        ("logistic", lambda r, s: r.logistic(size=s), lambda x: -np.tanh(x / 2), 2.0, -0.3, 1 / 3),
    ],
)
def test_exact_samples_have_expected_squared_ksd_of_diagonal_mean_over_n(
    name, draw, score, c, beta, mean_sq_score
):
    # E[KSD_V^2] = E[k_p(x, x)] / n since E k_p(x, y) = 0 for independent exact x, y: any
    # error in an off-diagonal term adds (n - 1) E[error] / n to n KSD^2, whose replicate
    # standard deviation is about 1.3 (measured); 400 replicates give a 0.07 standard error
    n, d, replicates = 100, 2, 400
    rng = np.random.default_rng(2)
    values = []
    for _ in range(replicates):
        x = draw(rng, (n, d))
        values.append(n * imq_ksd(x, score(x), c, beta) ** 2)
    expected = d * mean_sq_score * c ** (2 * beta) - 2 * beta * d * c ** (2 * beta - 2)
    standard_error = np.std(values) / np.sqrt(replicates)
    assert abs(np.mean(values) - expected) < 4 * standard_error, name


def test_exact_samples_are_separated_from_shifted_and_narrowed_ones():
    # N(0, I), d = 2, n = 400. Over 50 seeds (measured): exact 0.096 on average, at most
    # 0.153; shifted by 0.5 sd at least 0.425; sd x 0.5 at least 0.528
    rng = np.random.default_rng(3)
    z = rng.normal(size=(400, 2))
    exact, shifted, narrow = z, z + 0.5, 0.5 * z
    assert imq_ksd(exact, -exact) < 0.25
    assert imq_ksd(shifted, -shifted) > 0.35
    assert imq_ksd(narrow, -narrow) > 0.35


def test_ksd_of_exact_samples_falls_like_one_over_root_n():
    # expected ratio (100 / 1600)^(1/2) = 0.25; over 40 seeds it ranged over 0.15 to 0.39
    rng = np.random.default_rng(4)
    small, large = rng.normal(size=(100, 2)), rng.normal(size=(1600, 2))
    ratio = imq_ksd(large, -large) / imq_ksd(small, -small)
    assert 0.12 < ratio < 0.45


def test_scale_is_the_ksd_of_standardised_coordinates():
    rng = np.random.default_rng(5)
    x, score = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    scale = np.array([0.5, 2.0, 3.0])
    assert imq_ksd(x, score, scale=scale) == pytest.approx(
        imq_ksd(x / scale, score * scale), rel=1e-12
    )
    # a Gaussian target N(0, sigma^2 I) seen in units of sigma is N(0, I)
    sigma = 0.01
    draws = sigma * x
    assert imq_ksd(draws, -draws / sigma**2, scale=sigma) == pytest.approx(
        imq_ksd(x, -x), rel=1e-10
    )


def test_balanced_scale_of_any_dispersion_of_a_gaussian_is_its_sd():
    # sd(x) / rms(score) = rho sigma / (rho / sigma) = sigma^2 for draws N(0, rho^2 sigma^2)
    z = np.random.default_rng(6).normal(size=(2000, 2))
    sigma = np.array([0.01, 3.0])
    for rho in (0.01, 0.5, 1.0, 2.0):
        x = rho * sigma * z
        np.testing.assert_allclose(balanced_scale(x, -x / sigma**2), sigma, rtol=0.03)


def test_balanced_scale_degenerate_coordinates():
    x = np.array([[1.0, 0.0, 2.0], [1.0, 0.0, 4.0], [1.0, 0.0, 6.0]])
    score = np.array([[2.0, 0.0, 0.0], [2.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    # no spread: 1 / rms score; neither: 1; no score: sd
    np.testing.assert_allclose(balanced_scale(x, score), [0.5, 1.0, 2.0])


def test_identity_scale_misranks_a_collapsed_tall_data_sample_and_balanced_scale_does_not():
    # why diagnostics.ksd defaults to the balanced scale: with posterior sd 0.01 << c the
    # IMQ kernel is flat over the draws, and in raw units collapsed or narrowed draws look
    # *better* than exact ones (measured over 30 seeds: 1.4 and 3.0 against 5.5)
    sigma, rng = 0.01, np.random.default_rng(7)
    z = rng.normal(size=(500, 2))
    samples = {rho: 3.0 + rho * sigma * z for rho in (1.0, 0.5, 0.1)}
    raw = {rho: imq_ksd(x, -(x - 3.0) / sigma**2) for rho, x in samples.items()}
    balanced = {}
    for rho, x in samples.items():
        score = -(x - 3.0) / sigma**2
        balanced[rho] = imq_ksd(x, score, scale=balanced_scale(x, score))
    assert raw[0.1] < raw[1.0] and raw[0.5] < raw[1.0]
    # exact draws: E[KSD^2] = 2 d / n, KSD ~ 0.09; narrowed and collapsed draws >= 0.5
    assert balanced[1.0] < 0.2 < 0.4 < min(balanced[0.5], balanced[0.1])


@pytest.mark.parametrize(("c", "beta"), [(0.0, -0.5), (-1.0, -0.5), (1.0, 0.0), (1.0, -1.0)])
def test_bad_kernel_parameters_are_refused(c, beta):
    x = np.zeros((3, 1))
    with pytest.raises(ValueError, match="c > 0" if c <= 0 else r"beta in \(-1, 0\)"):
        imq_ksd(x, x, c=c, beta=beta)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="same shape|shape"):
        imq_ksd(np.zeros((3, 2)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="finite"):
        imq_ksd(np.array([[0.0], [np.nan]]), np.zeros((2, 1)))
    with pytest.raises(ValueError, match="positive and finite"):
        imq_ksd(np.zeros((3, 2)), np.zeros((3, 2)), scale=[1.0, 0.0])
