"""The particle kernel ``init`` / ``step`` of :mod:`pymc_minibatch.kernels.particles`.

As BlackJAX tests its diffusions: with the interaction removed (w-SGLD with no Wasserstein
term moves every particle by its own gradient) the update is the formula written out
(plain, with momentum, with AdaGrad, in preconditioned coordinates); with the interaction
it is the velocity field of the method; and a step is a function of the generator's state.
"""

import numpy as np
import pytest

from pymc_minibatch.kernels import particle_velocities as velocities
from pymc_minibatch.kernels import particles as kernel
from pymc_minibatch.kernels.batches import next_epoch_batch
from pymc_minibatch.kernels.preconditioning import DiagonalPreconditioner
from pymc_minibatch.kernels.schedules import constant
from pymc_minibatch.kernels.sg_chain import RUNAWAY_DISTANCE
from pymc_minibatch.kernels.strata import draw, stratify

N_DATA, BATCH = 60, 20
MEAN = np.array([1.0, -2.0, 0.5])
START = np.random.default_rng(0).normal(size=(6, 3))


def gaussian(thetas, rows):
    """N(MEAN, I), with a log density that depends on the rows (to see which were used)."""
    return -0.5 * np.sum((thetas - MEAN) ** 2, axis=1) + rows.sum(), MEAN - thetas


def settings(method="wsgld", **changes):
    base = kernel.ParticleSettings(method=method, kernel="joint", bandwidth_scale=1.0,
                                   schedule=constant(0.1), preconditioner=_identity(),
                                   n_data=N_DATA, batch_size=BATCH)  # fmt: skip
    return base._replace(**changes)


def _identity():
    return DiagonalPreconditioner(np.ones(3))


def run(config, n_steps, seed=1, estimate=gaussian, start=START):
    rng = np.random.default_rng(seed)
    state = kernel.init(start, config.preconditioner)
    infos = []
    for _ in range(n_steps):
        state, info = kernel.step(rng, state, estimate, config)
        infos.append(info)
    return state, infos


def test_the_module_exports_the_kernel_protocol():
    assert kernel.State is kernel.ParticleState and kernel.Info is kernel.ParticleInfo
    assert callable(kernel.init) and callable(kernel.step)


def test_without_interaction_a_step_is_gradient_ascent():
    """w-SGLD with ``gamma = 0``: ``z' = z + h grad log p(z)``, and in preconditioned
    coordinates ``theta = s z``: ``z' = z + h s grad_theta log p(s z)``."""
    state, (info,) = run(settings(wasserstein_weight=0.0), 1)
    np.testing.assert_allclose(state.position, START + 0.1 * (MEAN - START), rtol=1e-14)
    np.testing.assert_allclose(state.previous, START)
    assert info.step_size == 0.1 and info.divergence is None
    np.testing.assert_allclose(info.drift, np.mean(MEAN - START, axis=0), rtol=1e-14)
    scale = np.array([2.0, 0.5, 3.0])
    config = settings(wasserstein_weight=0.0, preconditioner=DiagonalPreconditioner(scale))
    state, _ = run(config, 1)
    z = START / scale
    np.testing.assert_allclose(state.position, z + 0.1 * scale * (MEAN - START), rtol=1e-14)


def test_the_heavy_ball_carries_momentum_over_its_steps_only():
    """``m_t = beta m_(t-1) + v_t`` and ``z_(t+1) = z_t + h m_t`` over ``momentum_steps``;
    plain steps ``z_(t+1) = z_t + h v_t`` after (the carried momentum is dropped)."""
    config = settings(wasserstein_weight=0.0, momentum=0.9, momentum_steps=3)
    state, _ = run(config, 5)
    z, carried = START.copy(), np.zeros_like(START)
    for t in range(5):
        velocity = MEAN - z
        if t < 3:
            carried = 0.9 * carried + velocity
            z = z + 0.1 * carried
        else:
            z = z + 0.1 * velocity
    np.testing.assert_allclose(state.position, z, rtol=1e-13)
    np.testing.assert_allclose(state.momentum, carried, rtol=1e-13)


def test_adagrad_divides_by_the_root_mean_square_of_the_velocities():
    config = settings(wasserstein_weight=0.0, adagrad=True)
    state, _ = run(config, 2)
    z, squares = START.copy(), None
    for _ in range(2):
        velocity = MEAN - z
        squares = velocity**2 if squares is None else 0.9 * squares + 0.1 * velocity**2
        z = z + 0.1 * velocity / (kernel.ADAGRAD_FUDGE + np.sqrt(squares))
    np.testing.assert_allclose(state.position, z, rtol=1e-13)
    np.testing.assert_allclose(state.squares, squares, rtol=1e-13)


@pytest.mark.parametrize("method", kernel.METHODS)
def test_a_step_moves_by_the_methods_velocity(method):
    """SVGD (Liu & Wang 2016) and w-SGLD, w-SGLD-B, pi-SGLD (Chen et al. 2018) with the
    median-heuristic bandwidth of the current particles."""
    config = settings(method, bandwidth_scale=2.0, wasserstein_weight=0.3)
    state, _ = run(config, 2)
    first, _ = run(config, 1)
    z, previous = first.position, START
    grads = MEAN - z
    h = 2.0 * velocities.median_bandwidth(velocities.squared_distances(z, z))
    velocity = {
        "svgd": lambda: velocities.svgd_velocity(z, grads, h),
        "wsgld": lambda: velocities.wasserstein_velocity(z, previous, grads, h, 0.3),
        "wsgld_blob": lambda: velocities.blob_velocity(z, grads, h),
        "pisgld": lambda: velocities.pisgld_velocity(z, previous, grads, h, h, 0.3),
    }[method]()
    np.testing.assert_allclose(state.position, z + 0.1 * velocity, rtol=1e-13)


def test_a_steps_reports_are_numpys_formulas_over_blocks_of_columns():
    """The compiled moments (over several blocks of ``MOMENT_BLOCK`` columns) against NumPy:
    the spread, the mean velocity, the spread's rate and the mean norms; w-SGLD without its
    Wasserstein term, whose velocity is the gradient."""
    rng = np.random.default_rng(3)
    width = 2 * kernel.MOMENT_BLOCK + 5
    mean, start = rng.normal(size=width), 3.0 + rng.normal(size=(6, width))
    config = settings("wsgld", preconditioner=DiagonalPreconditioner(np.ones(width)))
    _, (info,) = run(
        config, 1, start=start, estimate=lambda thetas, rows: (np.zeros(len(thetas)), mean - thetas)
    )
    velocity = mean - start
    centred, centred_velocity = start - start.mean(axis=0), velocity - velocity.mean(axis=0)
    np.testing.assert_allclose(info.spread, np.sqrt(np.mean(np.var(start, axis=0))), rtol=1e-12)
    np.testing.assert_allclose(info.drift, velocity.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(
        info.spread_rate, np.sum(centred * centred_velocity) / np.sum(centred**2), rtol=1e-12
    )
    norm = np.mean(np.linalg.norm(velocity, axis=1))
    np.testing.assert_allclose([info.mean_velocity_norm, info.mean_grad_norm], norm, rtol=1e-12)


def test_the_coordinate_kernel_keeps_its_bandwidths_and_adds_the_linear_part():
    """Bandwidths from the particles of every ``COORDINATE_BANDWIDTH_EVERY``-th step; the
    linear part is added outside the heavy ball."""
    config = settings("svgd", kernel="coordinates", momentum=0.5, momentum_steps=100)
    state = kernel.init(START, config.preconditioner)
    rng = np.random.default_rng(2)
    for t in range(kernel.COORDINATE_BANDWIDTH_EVERY + 1):
        z, carried = state.position, state.momentum
        if t % kernel.COORDINATE_BANDWIDTH_EVERY == 0:
            bandwidths = velocities.coordinate_bandwidths(z)
        state, info = kernel.step(rng, state, gaussian, config)
        np.testing.assert_array_equal(state.bandwidths, bandwidths)
        carried = 0.5 * carried + velocities.coordinate_svgd_velocity(z, MEAN - z, bandwidths)
        expected = z + 0.1 * (carried + velocities.linear_svgd_velocity(z, MEAN - z))
        np.testing.assert_allclose(state.position, expected, rtol=1e-12)
        np.testing.assert_allclose(state.momentum, carried, rtol=1e-12)
        assert info.bandwidth == np.median(bandwidths)


def minibatch(thetas, rows):
    """``gaussian`` with a gradient noise that depends on the batch."""
    logp, grads = gaussian(thetas, rows)
    return logp, grads + (rows.mean() - (N_DATA - 1) / 2) / BATCH


def test_a_step_is_a_function_of_the_generators_state():
    config = settings("pisgld", wasserstein_weight=0.2)
    (first, infos), (again, infos_again) = (run(config, 7, seed=3, estimate=minibatch)
                                            for _ in range(2))  # fmt: skip
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(infos, infos_again, strict=True):
        np.testing.assert_array_equal(a.log_density, b.log_density)
        assert a.bandwidth == b.bandwidth and a.spread_rate == b.spread_rate
    other, _ = run(config, 7, seed=4, estimate=minibatch)
    assert not np.array_equal(first.position, other.position)


def test_batches_are_the_epochs_of_the_sg_chain():
    """The rows of each step are those of ``next_epoch_batch`` from the same generator
    (epochs without replacement); with every row in the batch, nothing is drawn."""
    seen = []

    def recording(thetas, rows):
        seen.append(rows.copy())
        return gaussian(thetas, rows)

    state, _ = run(settings(), 6, seed=5, estimate=recording)
    rng, permutation, cursor = np.random.default_rng(5), None, 0
    for rows in seen:
        expected, permutation, cursor = next_epoch_batch(rng, N_DATA, BATCH, permutation, cursor)
        np.testing.assert_array_equal(rows, expected)
    assert np.unique(np.concatenate(seen[:3])).size == N_DATA
    np.testing.assert_array_equal(state.permutation, permutation)
    assert state.cursor == cursor
    rng = np.random.default_rng(6)
    before = rng.bit_generator.state
    kernel.step(rng, kernel.init(START, _identity()), recording, settings(batch_size=N_DATA))
    np.testing.assert_array_equal(seen[-1], np.arange(N_DATA))
    assert rng.bit_generator.state == before


def test_stratified_batches_are_drawn_from_the_strata():
    """With ``strata`` set, each step's rows are :func:`strata.draw`'s from the same
    generator: the small groups whole in every batch, the large ones sampled."""
    row_groups = np.repeat([0, 1, 2], [2, 28, 30])  # one small group, two large
    layout = stratify(row_groups, BATCH)
    seen = []

    def recording(thetas, rows):
        seen.append(rows.copy())
        return gaussian(thetas, rows)

    run(settings(strata=layout), 4, seed=7, estimate=recording)
    rng = np.random.default_rng(7)
    for rows in seen:
        np.testing.assert_array_equal(rows, draw(rng, layout))
        assert set(np.flatnonzero(row_groups == 0)) <= set(rows)
        assert rows.size == layout.batch_size <= BATCH


def test_a_non_finite_estimate_stops_before_the_move():
    def broken(thetas, rows):
        logp, grads = gaussian(thetas, rows)
        grads[[1, 4], 0] = np.nan
        return logp, grads

    state, (info,) = run(settings(), 1, estimate=broken)
    np.testing.assert_array_equal(state.position, START)
    assert info.divergence.reason == "non-finite" and info.divergence.particles == 2


def test_particles_that_run_away_are_reported_with_the_furthest_coordinate():
    def pushing(thetas, rows):  # pushes the third coordinate out, far
        grads = np.zeros_like(thetas)
        grads[:, 2] = 10 * RUNAWAY_DISTANCE
        return np.zeros(len(thetas)), grads

    scale = np.array([1.0, 1.0, 4.0])
    config = settings(wasserstein_weight=0.0, preconditioner=DiagonalPreconditioner(scale))
    state, (info,) = run(config, 1, estimate=pushing)
    divergence = info.divergence
    assert divergence.reason == "ran away" and divergence.coordinate == 2
    assert divergence.distance == pytest.approx(0.1 * 4.0 * 10 * RUNAWAY_DISTANCE)
    assert divergence.sds == pytest.approx(divergence.distance)
    np.testing.assert_allclose(state.position, START / scale + [0, 0, divergence.distance])
