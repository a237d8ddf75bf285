"""Particle velocity fields against the paper's formulas written as explicit loops."""

import numpy as np
import pytest

from pymc_minibatch.kernels import particle_velocities as velocities

RNG = np.random.default_rng(0)
THETA = RNG.normal(size=(7, 3))
PREVIOUS = THETA + 0.1 * RNG.normal(size=(7, 3))
GRADS = RNG.normal(size=(7, 3))
BANDWIDTH, LAM, GAMMA = 1.7, 0.9, 0.3


def rbf(a, b, h=BANDWIDTH):
    return np.exp(-np.sum((a - b) ** 2) / h)


def grad_first(a, b, h=BANDWIDTH):
    """Gradient of ``k(a, b)`` with respect to ``a``."""
    return -2.0 / h * (a - b) * rbf(a, b, h)


def test_svgd_velocity_matches_the_double_sum():
    m = len(THETA)
    expected = [
        sum(rbf(THETA[j], THETA[i]) * GRADS[j] + grad_first(THETA[j], THETA[i]) for j in range(m))
        / m
        for i in range(m)
    ]
    np.testing.assert_allclose(
        velocities.svgd_velocity(THETA, GRADS, BANDWIDTH), expected, rtol=1e-12
    )


def test_coordinate_svgd_velocity_matches_the_double_sum_per_coordinate(monkeypatch):
    m, d = THETA.shape
    bandwidths = velocities.coordinate_bandwidths(THETA)
    upper = np.triu_indices(m, k=1)
    for j in range(d):
        pairs = (THETA[:, None, j] - THETA[None, :, j])[upper] ** 2
        assert np.isclose(bandwidths[j], np.median(pairs) / np.log(m + 1))
    expected = np.array([
        [sum(rbf(THETA[k, j], THETA[i, j], bandwidths[j]) * GRADS[k, j]
             + grad_first(THETA[k, j], THETA[i, j], bandwidths[j]) for k in range(m)) / m
         for j in range(d)]
        for i in range(m)
    ])  # fmt: skip
    single = {"rtol": 1e-5, "atol": 1e-6 * np.abs(expected).max()}  # float32 weights
    velocity = velocities.coordinate_svgd_velocity(THETA, GRADS, bandwidths)
    np.testing.assert_allclose(velocity, expected, **single)
    assert velocity.dtype == THETA.dtype
    monkeypatch.setattr(velocities, "COORDINATE_CHUNK", m * m)  # one coordinate at a time
    np.testing.assert_allclose(velocities.coordinate_svgd_velocity(THETA, GRADS, bandwidths),
                               expected, **single)  # fmt: skip
    np.testing.assert_allclose(velocities.coordinate_bandwidths(THETA), bandwidths, rtol=1e-12)


def test_linear_svgd_velocity_matches_the_double_sum_per_coordinate():
    m, d = THETA.shape
    mean, variance, weight = THETA.mean(axis=0), THETA.var(axis=0), 0.7

    def kernel_and_gradient(a, b, j):  # the linear kernel and its gradient in a
        return (weight * (1.0 + (a - mean[j]) * (b - mean[j]) / variance[j]),
                weight * (b - mean[j]) / variance[j])  # fmt: skip

    expected = np.array([
        [sum(kernel_and_gradient(THETA[k, j], THETA[i, j], j)[0] * GRADS[k, j]
             + kernel_and_gradient(THETA[k, j], THETA[i, j], j)[1] for k in range(m)) / m
         for j in range(d)]
        for i in range(m)
    ])  # fmt: skip
    np.testing.assert_allclose(velocities.linear_svgd_velocity(THETA, GRADS, weight), expected,
                               rtol=1e-12)  # fmt: skip


def test_blocked_linear_svgd_velocity_matches_the_double_sum_per_coordinate():
    """Blocks ``{0, 2}`` and ``{3, 1}``; coordinate 4 outside any block keeps its diagonal
    kernel."""
    theta, grads = RNG.normal(size=(7, 5)), RNG.normal(size=(7, 5))
    blocks = np.array([[0, 2], [3, 1]])
    m, d = theta.shape
    mean, variance, weight = theta.mean(axis=0), theta.var(axis=0), 0.7

    def kernel_and_gradient(a, b, j):  # K_j(a, b) and its gradient in a_j
        block = blocks[np.nonzero(blocks == j)[0][0]] if j in blocks else [j]
        features = (a[block] - mean[block]) * (b[block] - mean[block]) / variance[block]
        return weight * (1.0 + features.sum()), weight * (b[j] - mean[j]) / variance[j]

    expected = np.array([
        [sum(kernel_and_gradient(theta[k], theta[i], j)[0] * grads[k, j]
             + kernel_and_gradient(theta[k], theta[i], j)[1] for k in range(m)) / m
         for j in range(d)]
        for i in range(m)
    ])  # fmt: skip
    velocity = velocities.linear_svgd_velocity(theta, grads, weight, blocks=blocks)
    np.testing.assert_allclose(velocity, expected, rtol=1e-12)
    single = velocities.linear_svgd_velocity(theta, grads, weight, blocks=blocks.reshape(-1, 1))
    assert np.array_equal(single, velocities.linear_svgd_velocity(theta, grads, weight))


def _paired_normal_moments(blocked, n_pairs=25, correlation=0.6):
    """Per-coordinate SVGD with its linear part on 25 pairs of correlation 0.6, 100
    particles started independent (exact gradients, 1500 steps of 0.05): the particles'
    variance averaged over the coordinates and covariance averaged over the pairs."""
    covariance = np.kron(np.eye(n_pairs), [[1.0, correlation], [correlation, 1.0]])
    precision = np.linalg.inv(covariance)
    pairs = np.arange(2 * n_pairs).reshape(n_pairs, 2)
    theta = np.random.default_rng(1).normal(size=(100, 2 * n_pairs))
    for step in range(1500):
        grads = -theta @ precision
        if step % 10 == 0:
            bandwidths = velocities.coordinate_bandwidths(theta)
        velocity = velocities.coordinate_svgd_velocity(theta, grads, bandwidths)
        velocity += velocities.linear_svgd_velocity(theta, grads, blocks=pairs if blocked else None)
        theta = theta + 0.05 * velocity
    moments = np.cov(theta.T)
    return np.diagonal(moments).mean(), moments[pairs[:, 0], pairs[:, 1]].mean()


def test_blocks_let_the_particles_build_the_correlation_within_a_block():
    """Without blocks the particles keep their start's correlation (near 0) and settle at
    the conditional variance 1 - 0.6^2 = 0.64 (measured 0.633 and -0.015); with the pairs
    as blocks at 1.004 and 0.602. The bounds are 3 standard errors of 100 independent
    draws' moments averaged over the 50 coordinates (0.06) and the 25 pairs (0.07)."""
    variance, covariance = _paired_normal_moments(blocked=True)
    assert abs(variance - 1.0) < 0.06 and abs(covariance - 0.6) < 0.07
    assert abs(variance - 1.004) < 0.01 and abs(covariance - 0.602) < 0.01
    variance, covariance = _paired_normal_moments(blocked=False)
    assert variance < 1.0 - 0.06 and abs(variance - 0.633) < 0.01
    assert covariance < 0.6 - 0.07 and abs(covariance + 0.015) < 0.01


@pytest.mark.parametrize(("linear_weight", "low", "high"), [(0.0, 0.955, 0.969),
                                                           (None, 0.99, 0.997),
                                                           (1.0, 0.996, 0.9995)])  # fmt: skip
def test_the_linear_kernel_restores_the_particles_variance(linear_weight, low, high):
    """``LINEAR_WEIGHT``'s figures: N(0, I_50), 100 particles from exact draws, 1500 steps of
    0.05 with exact gradients; the variance ratio averaged over the 50 coordinates (sd of
    that average about 0.0004) is 0.962 without the linear part, 0.994 with the default
    weight and 0.998 with weight 1."""
    theta = np.random.default_rng(0).normal(size=(100, 50))
    for step in range(1500):
        if step % 10 == 0:
            bandwidths = velocities.coordinate_bandwidths(theta)
        velocity = velocities.coordinate_svgd_velocity(theta, -theta, bandwidths)
        velocity += velocities.linear_svgd_velocity(theta, -theta, linear_weight)
        theta = theta + 0.05 * velocity
    assert low < theta.var(axis=0).mean() < high


def test_in_more_dimensions_than_particles_the_joint_kernel_collapses_and_the_coordinates_not():
    """N(0, I_100) with 25 particles started from it, 1000 steps of 0.05 (the defaults of
    ``sample_particles``): the joint kernel's repulsion fades and the particles' sds shrink
    (to 0.48; Ba et al. 2021); one kernel per coordinate keeps them at 0.94."""
    rng = np.random.default_rng(8)
    start = rng.normal(size=(25, 100))
    spreads = {}
    for name in ("joint", "coordinates"):
        theta = start.copy()
        for _ in range(1000):
            if name == "joint":
                bandwidth = 4.0 * velocities.median_bandwidth(
                    velocities.squared_distances(theta, theta)
                )
                velocity = velocities.svgd_velocity(theta, -theta, bandwidth)
            else:
                velocity = velocities.coordinate_svgd_velocity(
                    theta, -theta, velocities.coordinate_bandwidths(theta)
                )
            theta = theta + 0.05 * velocity
        spreads[name] = np.sqrt(np.mean(theta.var(axis=0)))
    assert spreads["joint"] < 0.6
    assert abs(spreads["coordinates"] - 1.0) < 0.1, spreads


def test_blob_velocity_matches_paper_eq_22():
    m = len(THETA)
    density = [sum(rbf(THETA[i], THETA[k]) for k in range(m)) for i in range(m)]
    expected = [
        GRADS[i]
        - sum(grad_first(THETA[i], THETA[j]) / density[j] for j in range(m))
        - sum(grad_first(THETA[i], THETA[j]) / density[i] for j in range(m))
        for i in range(m)
    ]
    np.testing.assert_allclose(
        velocities.blob_velocity(THETA, GRADS, BANDWIDTH), expected, rtol=1e-12
    )


def test_wasserstein_velocity_matches_paper_eq_21():
    def term(i, j):
        d = np.sum((THETA[i] - PREVIOUS[j]) ** 2)
        return (d / LAM - 1.0) * np.exp(-d / LAM) * (PREVIOUS[j] - THETA[i])

    expected = [GRADS[i] + GAMMA * sum(term(i, j) for j in range(len(THETA))) for i in range(7)]
    velocity = velocities.wasserstein_velocity(THETA, PREVIOUS, GRADS, LAM, GAMMA)
    np.testing.assert_allclose(velocity, expected, rtol=1e-12)


def test_pisgld_velocity_averages_svgd_and_blob_plus_the_wasserstein_term():
    expected = 0.5 * (
        velocities.svgd_velocity(THETA, GRADS, BANDWIDTH)
        + velocities.blob_velocity(THETA, GRADS, BANDWIDTH)
        + GAMMA * (velocities.wasserstein_velocity(THETA, PREVIOUS, GRADS, LAM, 1.0) - GRADS)
    )
    velocity = velocities.pisgld_velocity(THETA, PREVIOUS, GRADS, BANDWIDTH, LAM, GAMMA)
    np.testing.assert_allclose(velocity, expected, rtol=1e-12)


@pytest.mark.parametrize(("distance", "direction"), [(0.5, -1.0), (2.0, 1.0)])
def test_wasserstein_term_repels_within_sqrt_lambda_and_attracts_beyond(distance, direction):
    """Paper, after eq. (21): pushed away when ``d < lambda``, pulled close when ``d > lambda``."""
    theta = np.array([[0.0]])
    previous = np.array([[distance]])
    velocity = velocities.wasserstein_velocity(theta, previous, np.zeros((1, 1)), 1.0, 1.0)
    assert np.sign(velocity[0, 0]) == direction


def test_median_bandwidth():
    points = np.array([[0.0], [1.0], [3.0]])  # squared distances 1, 9, 4: median 4
    assert velocities.median_bandwidth(
        velocities.squared_distances(points, points)
    ) == pytest.approx(4.0 / np.log(4.0))
    coincident = np.zeros((5, 2))
    assert velocities.median_bandwidth(velocities.squared_distances(coincident, coincident)) == 1.0


def test_squared_distances_are_the_differences_summed_over_blocks_of_columns():
    """Over several blocks of ``DISTANCE_BLOCK`` columns, each pair of a set once (zero
    diagonal, symmetric) and every pair between two sets; exact where the expanded
    ``|a|^2 + |b|^2 - 2 a.b`` cancels: particles far from the origin next to their previous
    positions, whose distances it gets wrong by far more than they are."""
    rng = np.random.default_rng(4)
    theta = 1e3 + rng.normal(size=(5, 2 * velocities.DISTANCE_BLOCK + 3))
    previous = theta + 1e-6 * rng.normal(size=theta.shape)
    for a, b in ((theta, theta), (theta, previous)):
        exact = np.sum((a[:, None] - b[None]) ** 2, axis=2)
        np.testing.assert_allclose(velocities.squared_distances(a, b), exact, rtol=1e-12)
    itself = velocities.squared_distances(theta, theta)
    assert np.all(np.diag(itself) == 0) and np.array_equal(itself, itself.T)
    norms = np.sum(theta**2, axis=1)
    expanded = norms[:, None] + np.sum(previous**2, axis=1)[None] - 2 * theta @ previous.T
    exact = np.sum((theta - previous) ** 2, axis=1)
    assert np.max(np.abs(np.diag(expanded) / exact - 1)) > 1e-3


def test_velocities_are_translation_equivariant():
    shift = np.array([3.0, -2.0, 1.0])
    for velocity in (
        lambda t, p: velocities.svgd_velocity(t, GRADS, BANDWIDTH),
        lambda t, p: velocities.blob_velocity(t, GRADS, BANDWIDTH),
        lambda t, p: velocities.wasserstein_velocity(t, p, GRADS, LAM, GAMMA),
    ):
        np.testing.assert_allclose(
            velocity(THETA + shift, PREVIOUS + shift), velocity(THETA, PREVIOUS), atol=1e-12
        )


def _svgd_on_standard_normal(ndim, n_particles, repulsion=True, steps=1500, step_size=0.05):
    """Final SVGD particles (bandwidth scale 4) on N(0, I) from a shifted, narrow start."""
    theta = 1.0 + 0.3 * np.random.default_rng(1).normal(size=(n_particles, ndim))
    for _ in range(steps):
        bandwidth = 4.0 * velocities.median_bandwidth(velocities.squared_distances(theta, theta))
        if repulsion:
            velocity = velocities.svgd_velocity(theta, -theta, bandwidth)
        else:  # the kernel-smoothed gradient alone
            kernel = np.exp(-velocities.squared_distances(theta, theta) / bandwidth)
            velocity = kernel @ -theta / n_particles
        theta = theta + step_size * velocity
    return theta


@pytest.mark.slow
def test_svgd_recovers_a_5d_standard_normal_and_fails_without_repulsion():
    """The 20% variance check can fail: without the kernel-gradient term the particles
    collapse onto the mode."""
    theta = _svgd_on_standard_normal(5, 200)
    assert np.max(np.abs(theta.mean(axis=0))) < 0.1
    assert np.max(np.abs(theta.var(axis=0) - 1.0)) < 0.2
    collapsed = _svgd_on_standard_normal(5, 200, repulsion=False)
    assert np.max(np.abs(collapsed.var(axis=0) - 1.0)) > 0.2


@pytest.mark.parametrize("velocity", ["blob", "pisgld"])
def test_blob_narrows_with_the_dimension_at_the_median_heuristic(velocity):
    """On N(0, I_d) with 100 particles and bandwidth scale 1 the root mean variance settles
    near 0.83 for d = 5 but 0.39 for d = 29 (the zoo's varying_intercepts dimension): the
    median heuristic ``h ~ 2 d sd^2 / log(M + 1)`` widens the kernel with ``d``, which
    weakens the blob's repulsion. ``DOCUMENTED_SD_RATIO``'s lower bound 0.35 rests on this."""
    spreads = {}
    for ndim in (5, 29):
        theta = np.random.default_rng(2).normal(size=(100, ndim))  # the Laplace start
        previous = theta
        for _ in range(400):
            bandwidth = velocities.median_bandwidth(velocities.squared_distances(theta, theta))
            grads = -theta
            if velocity == "blob":
                move = velocities.blob_velocity(theta, grads, bandwidth)
            else:
                move = velocities.pisgld_velocity(theta, previous, grads, bandwidth, bandwidth, 0.0)
            previous, theta = theta, theta + 0.05 * move
        assert np.max(np.abs(theta.mean(axis=0))) < 0.1
        spreads[ndim] = np.sqrt(np.mean(theta.var(axis=0)))
    assert 0.75 < spreads[5] < 0.9
    assert 0.35 < spreads[29] < 0.45


@pytest.mark.parametrize("shared", [[0], [0, 2]])
def test_group_spread_velocity_matches_the_double_sum_per_coordinate(shared):
    theta, grads = RNG.normal(size=(7, 4)), RNG.normal(size=(7, 4))
    local = np.setdiff1d(np.arange(4), shared)
    mean, variance, weight = theta.mean(axis=0), theta.var(axis=0), 0.7
    u = (theta[:, shared] - mean[shared]) / np.sqrt(variance[shared])

    def kernel_and_gradient(k, i, j):  # K_j(theta_k, theta_i) and its gradient in theta_kj
        across = weight * (theta[i, j] - mean[j]) / variance[j] * (u[k] @ u[i])
        return across * (theta[k, j] - mean[j]), across

    expected = np.zeros_like(theta)
    for i in range(7):
        for j in local:
            expected[i, j] = sum(kernel_and_gradient(k, i, j)[0] * grads[k, j]
                                 + kernel_and_gradient(k, i, j)[1] for k in range(7)) / 7
    velocity = velocities.group_spread_velocity(theta, grads, shared, local, weight)
    np.testing.assert_allclose(velocity, expected, rtol=1e-12, atol=1e-15)
    assert np.all(velocity[:, shared] == 0)


def test_group_spread_velocity_is_zero_without_shared_or_local_coordinates():
    empty = np.array([], dtype=np.int64)
    for shared, local in ((empty, np.arange(3)), (np.arange(3), empty)):
        assert not velocities.group_spread_velocity(THETA, GRADS, shared, local).any()


def _funnel_scale_sd(group_spread, n_groups=50, scale_sd=0.1):
    """Per-coordinate SVGD (with its linear part) on ``s ~ N(0, scale_sd)``, ``a_g | s ~
    N(0, exp(s))``: the particles' sd of ``s`` over ``scale_sd``."""
    rng = np.random.default_rng(1)
    theta = np.column_stack([rng.normal(0, 0.05, 200), rng.normal(size=(200, n_groups))])
    shared, local = np.array([0]), np.arange(1, n_groups + 1)
    for step in range(1500):
        scale, effects = theta[:, 0], theta[:, 1:]
        precision = np.exp(-2 * scale)
        grads = np.column_stack([
            -scale / scale_sd**2 - n_groups + np.sum(effects**2, axis=1) * precision,
            -effects * precision[:, None],
        ])  # fmt: skip
        if step % 10 == 0:
            bandwidths = velocities.coordinate_bandwidths(theta)
        velocity = velocities.coordinate_svgd_velocity(theta, grads, bandwidths)
        velocity += velocities.linear_svgd_velocity(theta, grads)
        if group_spread:
            velocity += velocities.group_spread_velocity(theta, grads, shared, local)
        theta = theta + 0.01 * velocity
    return theta[:, 0].std() / scale_sd


def test_the_group_spread_kernel_restores_a_funnels_scale():
    """Without it the effects' spread ignores each particle's scale, so the 50 effects
    inform the scale as if observed and its sd comes out 0.71 of the exact one; with it
    1.03. The bound is 4 standard errors of an sd over 200 independent draws (0.2)."""
    bound = 4 / np.sqrt(2 * 200)
    with_spread, without = _funnel_scale_sd(True), _funnel_scale_sd(False)
    assert abs(with_spread - 1.0) < bound and abs(with_spread - 1.03) < 0.01
    assert without < 1.0 - bound and abs(without - 0.71) < 0.01
