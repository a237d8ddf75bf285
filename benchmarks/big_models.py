"""What an update costs on a Bayesian neural network of the papers' size, against the floor.

What it measures
----------------
MINT's MNIST network (Li & Wong 2017, Figure 3): 784-200-10 with ReLU units, 159,010
weights and biases with ``Normal(0, 1)`` priors, ``pm.Categorical(logit_p=...)`` rows, on
60,000 rows of MNIST's shape (MNIST cannot be downloaded here: 784 standard normal inputs
labelled by a fixed random network, :func:`networks.mnist_shaped_data`), batch 100:

* **the floor**: one minibatch gradient of the same log posterior written by hand in NumPy
  (:class:`networks.HandGradient`), median of repeated calls, measured again before and
  after each sampler's runs (the mean of the two is its floor: a shared machine's speed
  drifted by a factor of two within one run of this script);
* the package's own minibatch gradient (``MinibatchModel.grad_estimate``, and the gradient
  alone, ``gradient_estimate``, which a draw's updates but its last take) and a standard
  normal vector of the network's size from NumPy and from the compiled ziggurat of
  :mod:`pymc_minibatch.kernels.noise`;
* **per update** of every stochastic-gradient preset at its defaults inside ``pm.sample``
  (``updates_per_draw=50``, one chain, no progress bar), as the difference between a run
  of 24 draws and one of 4 divided by the 1000 updates between them, so that the run's
  fixed costs cancel, and its ratio to the floor measured around the pair (the medians of
  5 such pairs); and per step of MINT and CMINT the same
  way at their defaults (a draw per epoch of 600 steps; runs of 3 and 1 draws); each
  step's construction time (the diagonal fit: Adam and the Fisher diagonal) beside it;
* the gradient noise per preconditioned coordinate with and without control variates at
  the last draws of SGLD's chain (what ``control_variates="auto"`` decides on);
* **per step of the particle methods** at their defaults (20 particles, batch 100): the
  difference between runs of 120 and 20 steps over 100, beside 20 gradients (the floor's
  part of a step), the interaction alone (the pairs' distances and the velocity from given
  gradients) and the rest of the step beside the 20 gradients, and the 20 particles'
  gradients from the graph vectorised over the particles against one call per particle
  (which the defaults use on big models).

Run it on an idle machine with one BLAS thread (the floor and the samplers alike)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/big_models.py

It writes ``benchmarks/results/big_models_cost.json`` (or ``--json``) with the machine, the
versions and the command. The rows take 376 MB; the run about ten minutes.
"""

import argparse
import time

import numpy as np
import pymc as pm
from networks import HandGradient, mnist_shaped_data, n_parameters, network_model
from run_record import RESULTS, environment, write_results

import pymc_minibatch as pmm
from pymc_minibatch.kernels import particle_velocities as velocities
from pymc_minibatch.kernels.noise import standard_normal
from pymc_minibatch.kernels.sg_chain import gradient_noise
from pymc_minibatch.model.gradients import grad_estimate_each, grad_estimator
from pymc_minibatch.particle_settings import wasserstein_weight_default

N_ROWS, HIDDEN, BATCH = 60_000, (200,), 100
SG_PRESETS = ("SGLD", "SGHMC", "SGNHT", "SGMGT", "SGMGTD")
UPDATES_PER_DRAW = 50
SHORT, LONG = 4, 24
PAIRS = 5
REPEATS = 200
PARTICLES = 20
METHODS = ("svgd", "wsgld", "wsgld_blob", "pisgld")


def median_ms(function, repeats=REPEATS):
    """Median wall milliseconds of ``function()`` after one warm-up call."""
    function()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return 1e3 * float(np.median(times))


def marginal_ms(step, model, updates_per_draw, floor, short=SHORT, long=LONG, pairs=PAIRS):
    """Milliseconds per update past a run's fixed costs (two runs, their difference), the
    floor measured around them (``floor()``, before and after) and their ratio: the medians
    over ``pairs`` such pairs, as the machine's speed drifts within minutes (one pair's
    ratio varied by a third between runs of this script); and the last longer run's draws.
    """
    per_update, floors, ratios = [], [], []
    for _ in range(pairs):
        seconds, before = {}, floor()
        for draws in (short, long):
            started = time.perf_counter()
            idata = pm.sample(step=step, draws=draws, tune=0, chains=1, progressbar=False,
                              random_seed=1, model=model, compute_convergence_checks=False)
            seconds[draws] = time.perf_counter() - started
        per_update.append(1e3 * (seconds[long] - seconds[short]) / ((long - short)
                                                                   * updates_per_draw))
        floors.append(0.5 * (before + floor()))
        ratios.append(per_update[-1] / floors[-1])
    return float(np.median(per_update)), float(np.median(floors)), float(np.median(ratios)), idata


def interaction_ms(method, theta, rng):
    """Median milliseconds of the particles' interaction in a step of ``method`` at its
    defaults (joint kernel, median bandwidth): the pairs' distances, the bandwidth and the
    velocity from given gradients; the step's other work is the gradients and O(M d) passes."""
    previous = theta + 0.01 * rng.standard_normal(theta.shape)
    grads = rng.standard_normal(theta.shape)
    gamma = wasserstein_weight_default(method, len(theta))

    def interaction():
        sq_dists = velocities.squared_distances(theta, theta)
        bandwidth = velocities.median_bandwidth(sq_dists)
        if method == "svgd":
            return velocities.svgd_velocity(theta, grads, bandwidth, sq_dists)
        if method == "wsgld_blob":
            return velocities.blob_velocity(theta, grads, bandwidth, sq_dists)
        if method == "wsgld":
            return velocities.wasserstein_velocity(theta, previous, grads, bandwidth, gamma)
        return velocities.pisgld_velocity(theta, previous, grads, bandwidth, bandwidth, gamma,
                                          sq_dists)  # fmt: skip

    return median_ms(interaction, repeats=20)


def noise_ratios(minibatch_model, fit, points, seed=0):
    """The gradient noise per preconditioned coordinate (largest over coordinates) at
    ``points``, with and without control variates around the fit's center."""
    rng = np.random.default_rng(seed)
    ratios = {}
    for name, center in (("plain", None), ("control_variates", fit.mode)):
        estimate = grad_estimator(minibatch_model, center)
        ratios[name] = gradient_noise(rng, estimate, fit.preconditioner, points,
                                      minibatch_model.n_data, BATCH)  # fmt: skip
    return ratios


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=str(RESULTS / "big_models_cost.json"),
                        help="where to write the results (with the machine and versions)")
    args = parser.parse_args(argv)
    x, y = mnist_shaped_data(N_ROWS)
    ndim = n_parameters(x.shape[1], HIDDEN, 10)
    rng = np.random.default_rng(0)
    hand = HandGradient(x, y, HIDDEN[0])

    def measure_floor():
        return median_ms(lambda: hand(rng.choice(N_ROWS, BATCH, replace=False)))

    floor = measure_floor()
    numpy_normal = median_ms(lambda: rng.standard_normal(ndim))
    compiled_normal = median_ms(lambda: standard_normal(rng, ndim))
    model = network_model(x, y, hidden=HIDDEN)
    mm = pmm.MinibatchModel(model)
    started = time.perf_counter()
    fit = mm.laplace()
    fit_seconds = time.perf_counter() - started
    theta = fit.mode
    package_gradient = median_ms(lambda: mm.grad_estimate(theta, rng.choice(N_ROWS, BATCH,
                                                                            replace=False)))
    gradient_alone = median_ms(lambda: mm.gradient_estimate(theta, rng.choice(N_ROWS, BATCH,
                                                                              replace=False)))
    print(f"784-200-10 ReLU network, {ndim} parameters, {N_ROWS} rows, batch {BATCH}")
    print(f"  floor (hand-written NumPy gradient) {floor:.3f} ms; the package's gradient "
          f"{package_gradient:.3f} ms ({package_gradient / floor:.2f}x), the gradient alone "
          f"{gradient_alone:.3f} ms ({gradient_alone / floor:.2f}x)")  # fmt: skip
    print(f"  {ndim} standard normals: NumPy {numpy_normal:.3f} ms, compiled "
          f"{compiled_normal:.3f} ms")  # fmt: skip
    print(f"  diagonal fit: {fit.updates} Adam updates, {fit_seconds:.1f} s")
    samplers, ratios = [], None
    for name in (*SG_PRESETS, "MINT", "CMINT"):
        started = time.perf_counter()
        with model:
            if name in SG_PRESETS:
                step = getattr(pmm, name)(batch_size=BATCH, updates_per_draw=UPDATES_PER_DRAW)
            else:
                step = getattr(pmm, name)(batch_size=BATCH)
        setup = time.perf_counter() - started
        per_draw = UPDATES_PER_DRAW if name in SG_PRESETS else step.steps_per_draw
        lengths = (SHORT, LONG) if name in SG_PRESETS else (1, 3)  # MINT: 600 steps a draw
        # the machine's speed drifts: the floor beside each pair of runs
        update, local_floor, over_floor, idata = marginal_ms(step, model, per_draw,
                                                             measure_floor, *lengths)
        if ratios is None:  # at the last draws of the first chain (SGLD's)
            points = [mm.theta_from_point({name: idata.posterior[name].values[0, draw]
                                           for name in mm.var_names})
                      for draw in range(-4, 0)]  # fmt: skip
            ratios = noise_ratios(mm, fit, points)
            print(f"  gradient noise per preconditioned coordinate at the last 4 draws of "
                  f"{name}'s chain: plain {ratios['plain']:.0f}, with control variates "
                  f"{ratios['control_variates']:.0f}")  # fmt: skip
        samplers.append({"sampler": name, "repr": repr(step), "setup_seconds": setup,
                         "update_ms": update, "floor_ms": local_floor,
                         "update_over_floor": over_floor})  # fmt: skip
        print(f"  {name:<7} {update:7.3f} ms per update = {over_floor:.2f} x the floor of "
              f"{local_floor:.3f} ms (medians of {PAIRS} pairs of runs; setup {setup:.1f} s) "
              f"{step!r}")  # fmt: skip
    thetas = fit.bulk_draws(rng, PARTICLES)
    particle_gradients = {
        "vectorised": median_ms(lambda: mm.grad_estimate_particles(
            thetas, rng.choice(N_ROWS, BATCH, replace=False)), repeats=5),
        "each": median_ms(lambda: grad_estimate_each(
            mm, thetas, rng.choice(N_ROWS, BATCH, replace=False)), repeats=5),
    }  # fmt: skip
    print(f"  {PARTICLES} particles' gradients: vectorised graph "
          f"{particle_gradients['vectorised']:.1f} ms, one call per particle "
          f"{particle_gradients['each']:.1f} ms")  # fmt: skip
    particles = []
    for method in METHODS:
        seconds, before = {}, measure_floor()
        for n_steps in (20, 120):  # the fit is the same in both: the difference is the steps
            idata = pmm.sample_particles(method, n_steps=n_steps, model=model, random_seed=1,
                                         progressbar=False)  # fmt: skip
            seconds[n_steps] = idata.posterior.attrs["sampling_time"]
        step_ms = 1e3 * (seconds[120] - seconds[20]) / 100
        local_floor = 0.5 * (before + measure_floor())
        interaction = interaction_ms(method, thetas, rng)
        rest = (step_ms - interaction) / (PARTICLES * local_floor)
        particles.append({"method": method, "n_particles": idata.posterior.attrs["n_particles"],
                          "step_ms": step_ms, "floor_ms": local_floor,
                          "step_over_floor": step_ms / (PARTICLES * local_floor),
                          "interaction_ms": interaction,
                          "rest_over_floor": rest})  # fmt: skip
        print(f"  {method:<10} {step_ms:7.1f} ms per step = "
              f"{step_ms / (PARTICLES * local_floor):.2f} x {PARTICLES} gradients; the "
              f"interaction {interaction:.1f} ms, the rest {rest:.2f} x {PARTICLES} "
              f"gradients")  # fmt: skip
    # w-SGLD at SGLD's step size 0.2 / (1 + r): the step at which it left floating point
    sgld_step = 0.2 / (N_ROWS / BATCH)
    try:
        pmm.sample_particles("wsgld", n_steps=120, step_size=sgld_step, model=model,
                             random_seed=1, progressbar=False)  # fmt: skip
        diverged_at = None
    except pmm.SamplerDivergenceError as error:
        diverged_at = int(str(error).split("diverged at step ")[1].split(":")[0])
    outcome = "did not diverge" if diverged_at is None else f"diverged at step {diverged_at}"
    print(f"  wsgld at SGLD's step {sgld_step:.3g}: {outcome} in 120 steps")
    write_results(args.json, {
        "environment": environment(),
        "network": {"shape": [x.shape[1], *HIDDEN, 10], "activation": "relu",
                    "parameters": ndim, "rows": N_ROWS, "batch_size": BATCH},
        "floor_ms": floor,
        "package_gradient_ms": package_gradient,
        "gradient_alone_ms": gradient_alone,
        "normal_draw_ms": {"numpy": numpy_normal, "compiled": compiled_normal},
        "diagonal_fit": {"adam_updates": fit.updates, "seconds": fit_seconds},
        "noise_ratio_on_sgld_chain": ratios,
        "samplers": samplers,
        "particle_gradients_ms": particle_gradients,
        "particles": particles,
        "wsgld_at_sgld_step": {"step_size": sgld_step, "diverged_at": diverged_at},
    })  # fmt: skip


if __name__ == "__main__":
    main()
