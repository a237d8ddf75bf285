"""SVGD, w-SGLD, w-SGLD-B and pi-SGLD (Chen et al. 2018, UAI) on toy densities and data.

The particle samplers of :func:`pymc_minibatch.sample_particles` and
:mod:`pymc_minibatch.kernels.particle_velocities`, in the spirit of the experiments of Chen, Zhang,
Wang, Li & Chen (2018), "A unified particle-optimization framework for scalable Bayesian
sampling". All randomness is seeded; every number comes from one seed, except where (d)
and (e) say otherwise.

(a) Four unnormalised 2-D densities on the box [-4, 4]^2, driven through the pure-NumPy
    velocity kernels with hand-written gradients (full, exact gradients; no PyMC):
    "ring", "wave" and "two waves" are the potentials U1, U2 and U3 of Rezende & Mohamed
    (2015), "Variational inference with normalizing flows", ICML, Table 1; U2 and U3 are
    improper along z1, so both get an extra factor N(z1; 0, 1.5^2) (0.8% of their mass
    then lies outside the box). "8 Gaussians" is the usual equal mixture of eight
    N(mu_k, 0.35^2 I) with mu_k on the circle of radius 2.5 (e.g. Grathwohl et al. 2019,
    FFJORD). M particles (500; 200 with ``--quick``) start from one common N(0, I) draw
    and move ``theta += h * v`` with the driver's default bandwidths (``scale * median
    heuristic``, scale ``DEFAULT_BANDWIDTH_SCALE[method]``), the driver's default gamma
    (1/M for w-SGLD, 0 for pi-SGLD), lambda = the bandwidth, for 1000 steps (500 with
    ``--quick``) at h = 0.03 (of 0.01, 0.03 and 0.1 tried, the best compromise over
    methods); the baseline "SGLD" runs the same particles as independent Langevin chains
    ``theta += h g + sqrt(2h) N(0, I)``.
    The exact density is a 200 x 200 grid normalised on the box; reference samples are
    grid cells drawn by mass and jittered uniformly within the cell. Table: squared energy
    distance (Szekely & Rizzo; V-statistic, ``2E|X-Y| - E|X-X'| - E|Y-Y'|``) between the
    final particles (none clipped) and 2000 reference samples; the row "i.i.d. (floor)" is
    the mean over 10 independent grid samples of size M, i.e. what an exact sampler gets.
    Second table: fraction of particles outside the box (reference: the density's mass
    outside, from a 400 x 400 grid on [-8, 8]^2).
(b) Bayesian logistic regression on scikit-learn's breast-cancer data: 70/30 split (fixed
    seed, stratified), features standardised with training statistics, an intercept,
    beta ~ N(0, I_31), Bernoulli-logit likelihood on the 398 training rows. Every method
    runs ``sample_particles(method, n_particles=100, n_steps=n, batch_size=50)`` with its
    defaults (Laplace init, preconditioning, default step-size schedule), for n in
    (50, 100, 200, 500, 1000). The API returns final particles only, so each n is a
    separate run with its own schedule (0.05 for the first half, then a geometric decay),
    not a checkpoint of one run. Table: test accuracy of the particle-averaged predictive
    probability, test log predictive likelihood (the log of the particle-averaged
    probability of the test label, averaged over test rows), the mean over coefficients
    of the particles' sd / NUTS sd, and wall seconds (mode search included). NUTS
    (1000 draws after 1000 tuning steps, 2 chains) is the reference row.
(c) pi-SGLD on the same model at n_steps = 500: n_particles in (10, 30, 100, 300) with the
    default gamma (0), then gamma in (0, 1/M, 10/M, 100/M) with M = 100; same columns.
(d) The bandwidth scale s (``h = s * med^2 / log(M + 1)``) in (0.5, 1, 2, 4, 8), per
    method, through the velocity kernels with exact gradients: M particles (100 and 200)
    start from an N(0, I) draw and take 1000 steps of 0.05, the driver's defaults for a
    target whose Laplace approximation is exact (so that its preconditioning is the
    identity and its start such a draw); gamma and lambda as in (a). Table: the mean over
    coordinates of the particles' sd / the target's, on N(0, I_5) and on N(0, I_29) (the
    dimension of the zoo's ``varying_intercepts``; 100 particles only) from the draw of
    seed 0, and within the modes of the equal mixture of N(-3 e_1, I_5) and N(3 e_1, I_5)
    (particles split at z_1 = 0; the exact sd of z_1 within a mode by quadrature), with
    the fraction of particles in the mode z_1 > 0, as the smallest and largest over the
    draws of seeds 0-4 (whether the blob methods keep a mode's width depends on the draw).
    These are the figures of ``DEFAULT_BANDWIDTH_SCALE``.
(e) ``sample_particles(method)`` at its defaults on ``GAUSSIAN_5D`` of
    ``tests/statistical/test_particles_target.py`` (a conjugate Gaussian regression with
    an exact posterior, all 500 rows in every step) for the seeds 0-4, with the default
    100 particles and with 200: the mean over coefficients of particle sd / posterior sd
    per seed, its mean and sd over the seeds, four sds (the test's tolerance), the largest
    mean error in posterior sds and the seconds per run. These are the figures of
    ``MEASURED_SD_RATIO``.

A run that raises ``SamplerDivergenceError`` is printed as "diverged".

Run ``python benchmarks/particles.py`` (about 10 minutes on 2 cores; ``--quick``: 200
particles and 500 steps in (a), n in (50, 200, 500) in (b), 3 values in each sweep of (c) at
300 steps, NUTS with 500 + 500, 100 particles only in (d) and (e), seeds 0-2 in (e));
``--sections d e`` runs only those.
Writes ``--json`` (by default ``benchmarks/results/particles.json``, committed: the machine,
versions and command beside the tables) and, when (a) and (b) ran, ``--plot`` (PNG, by
default beside it; not committed).
"""

import argparse
import logging
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pymc as pm
from bench_data import breast_cancer_data
from run_record import RESULTS, environment, write_results
from scipy import integrate, special
from scipy.spatial.distance import cdist

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior
from pymc_minibatch.kernels import particle_velocities as velocities
from pymc_minibatch.particles import DEFAULT_BANDWIDTH_SCALE, DEFAULT_STEP_SIZE

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import tests.statistical

from tests.statistical.test_particles_target import (  # noqa: E402
    GAUSSIAN_5D,
    SD_RATIO_SEEDS,
    conjugate_regression,
    sd_ratio_at_defaults,
)

METHODS = ("svgd", "wsgld", "wsgld_blob", "pisgld")
LABELS = {"svgd": "SVGD", "wsgld": "w-SGLD", "wsgld_blob": "w-SGLD-B", "pisgld": "pi-SGLD",
          "sgld": "SGLD"}  # fmt: skip
BOX = 4.0
GRID_POINTS = 200
REFERENCE_SIZE = 2000
FLOOR_REPEATS = 10
ENVELOPE_SD = 1.5  # the N(z1; 0, 1.5^2) factor that makes U2 and U3 proper
EIGHT_RADIUS, EIGHT_SD = 2.5, 0.35
EIGHT_MEANS = EIGHT_RADIUS * np.column_stack(
    [np.cos(np.arange(8) * np.pi / 4), np.sin(np.arange(8) * np.pi / 4)]
)
SWEEP_SCALES = (0.5, 1.0, 2.0, 4.0, 8.0)
SWEEP_STEPS, SWEEP_STEP_SIZE = 1000, DEFAULT_STEP_SIZE  # sample_particles' defaults
MODE_OFFSET = 3.0  # two_modes: N(+-3 e_1, I)
MODE_SEEDS = (0, 1, 2, 3, 4)  # the starting draws for two_modes
SECTIONS = ("a", "b", "c", "d", "e")


# --- (a) toy densities: log density and its gradient, vectorised over rows of z (n, 2) ---


def _softmax_pair(a, b):
    """Weights of ``a`` and ``b`` in ``log(exp(a) + exp(b))`` and that log."""
    top = np.maximum(a, b)
    ea, eb = np.exp(a - top), np.exp(b - top)
    return ea / (ea + eb), eb / (ea + eb), top + np.log(ea + eb)


def ring(z):
    """Rezende & Mohamed U1: a ring of radius 2 with two modes at z1 = +-2."""
    z1 = z[:, 0]
    radius = np.sqrt(np.sum(z**2, axis=1)) + 1e-12
    a, b = -0.5 * ((z1 - 2) / 0.6) ** 2, -0.5 * ((z1 + 2) / 0.6) ** 2
    wa, wb, lse = _softmax_pair(a, b)
    logp = -0.5 * ((radius - 2) / 0.4) ** 2 + lse
    grad = -((radius - 2) / 0.16 / radius)[:, None] * z
    grad[:, 0] += wa * -(z1 - 2) / 0.36 + wb * -(z1 + 2) / 0.36
    return logp, grad


def _wave(z1):
    """``w1(z1) = sin(pi z1 / 2)`` and its derivative."""
    return np.sin(np.pi * z1 / 2), np.pi / 2 * np.cos(np.pi * z1 / 2)


def wave(z):
    """Rezende & Mohamed U2 times N(z1; 0, 1.5^2): a sine-shaped ridge."""
    z1, z2 = z[:, 0], z[:, 1]
    w1, dw1 = _wave(z1)
    residual = (z2 - w1) / 0.16
    logp = -0.5 * (z2 - w1) ** 2 / 0.16 - 0.5 * (z1 / ENVELOPE_SD) ** 2
    grad = np.column_stack([residual * dw1 - z1 / ENVELOPE_SD**2, -residual])
    return logp, grad


def two_waves(z):
    """Rezende & Mohamed U3 times N(z1; 0, 1.5^2): a ridge that splits in two near z1 = 1."""
    z1, z2 = z[:, 0], z[:, 1]
    w1, dw1 = _wave(z1)
    w2 = 3 * np.exp(-0.5 * ((z1 - 1) / 0.6) ** 2)
    dw2 = -w2 * (z1 - 1) / 0.36
    first, second = z2 - w1, z2 - w1 + w2
    wa, wb, lse = _softmax_pair(-0.5 * first**2 / 0.1225, -0.5 * second**2 / 0.1225)
    logp = lse - 0.5 * (z1 / ENVELOPE_SD) ** 2
    d_z1 = wa * first * dw1 / 0.1225 + wb * second * (dw1 - dw2) / 0.1225
    d_z2 = -(wa * first + wb * second) / 0.1225
    return logp, np.column_stack([d_z1 - z1 / ENVELOPE_SD**2, d_z2])


def eight_gaussians(z):
    """Equal mixture of N(mu_k, 0.35^2 I), mu_k on the circle of radius 2.5."""
    difference = EIGHT_MEANS[None, :, :] - z[:, None, :]  # (n, 8, 2)
    logits = -0.5 * np.sum(difference**2, axis=2) / EIGHT_SD**2
    logp = special.logsumexp(logits, axis=1)
    weights = np.exp(logits - logp[:, None])
    return logp, np.einsum("nk,nkd->nd", weights, difference) / EIGHT_SD**2


DENSITIES = {"ring": ring, "wave": wave, "two waves": two_waves, "8 Gaussians": eight_gaussians}


def standard_normal(z):
    """N(0, I_d), unnormalised."""
    return -0.5 * np.sum(z**2, axis=1), -z


def two_modes(z):
    """Equal mixture of N(-3 e_1, I_d) and N(3 e_1, I_d), unnormalised."""
    shift = np.zeros(z.shape[1])
    shift[0] = MODE_OFFSET
    a, b = -0.5 * np.sum((z - shift) ** 2, axis=1), -0.5 * np.sum((z + shift) ** 2, axis=1)
    wa, wb, lse = _softmax_pair(a, b)
    return lse, (wa - wb)[:, None] * shift - z


def check_gradients(seed=0):
    """Central finite differences against the hand-written gradients (a cheap self-test)."""
    z = np.random.default_rng(seed).uniform(-BOX, BOX, size=(50, 2))
    for name, density in {**DENSITIES, "N(0, I)": standard_normal, "two modes": two_modes}.items():
        numeric = np.empty_like(z)
        for k in range(2):
            shift = np.zeros(2)
            shift[k] = 1e-6
            numeric[:, k] = (density(z + shift)[0] - density(z - shift)[0]) / 2e-6
        error = np.max(np.abs(numeric - density(z)[1]) / (1 + np.abs(numeric)))
        assert error < 1e-5, f"gradient of {name} is off by {error:.2g}"


def grid_density(density, half_width, points):
    """Cell centres (points^2, 2), cell area and the normalised cell masses on the box."""
    edges = np.linspace(-half_width, half_width, points + 1)
    centres = 0.5 * (edges[1:] + edges[:-1])
    z1, z2 = np.meshgrid(centres, centres, indexing="ij")
    cells = np.column_stack([z1.ravel(), z2.ravel()])
    logp = density(cells)[0]
    mass = np.exp(logp - logp.max())
    return cells, edges[1] - edges[0], mass / mass.sum()


def grid_samples(cells, width, mass, size, rng):
    """Cells drawn by mass, jittered uniformly within the cell."""
    picked = rng.choice(len(cells), size=size, p=mass)
    return cells[picked] + rng.uniform(-width / 2, width / 2, size=(size, 2))


def energy_distance(x, y, yy=None):
    """Squared energy distance ``2E|X-Y| - E|X-X'| - E|Y-Y'|`` (V-statistics)."""
    yy = cdist(y, y).mean() if yy is None else yy
    return float(2 * cdist(x, y).mean() - cdist(x, x).mean() - yy)


def run_particles(method, density, init, n_steps, step_size, seed, bandwidth_scale=None):
    """Final particles of one method from ``init``; None if they became non-finite.
    ``bandwidth_scale`` defaults to the driver's, ``DEFAULT_BANDWIDTH_SCALE[method]``."""
    scale = DEFAULT_BANDWIDTH_SCALE.get(method) if bandwidth_scale is None else bandwidth_scale
    rng = np.random.default_rng(seed)
    theta = init.copy()
    previous = theta.copy()
    gamma = 1.0 / len(theta) if method == "wsgld" else 0.0  # the driver's defaults
    for _ in range(n_steps):
        grads = density(theta)[1]
        if method == "sgld":
            velocity = grads + np.sqrt(2.0 / step_size) * rng.standard_normal(theta.shape)
        else:
            # cdist gives velocities.squared_distances(theta, theta) about 5x faster in 2-D
            bandwidth = scale * velocities.median_bandwidth(cdist(theta, theta, "sqeuclidean"))
            if method == "svgd":
                velocity = velocities.svgd_velocity(theta, grads, bandwidth)
            elif method == "wsgld_blob":
                velocity = velocities.blob_velocity(theta, grads, bandwidth)
            elif method == "wsgld":
                velocity = velocities.wasserstein_velocity(theta, previous, grads, bandwidth, gamma)
            else:
                velocity = velocities.pisgld_velocity(
                    theta, previous, grads, bandwidth, bandwidth, gamma
                )
        previous, theta = theta, theta + step_size * velocity
        if not np.all(np.isfinite(theta)) or np.max(np.abs(theta)) > 1e4:
            return None
    return theta


def run_toy(n_particles, n_steps, step_size, seed=0):
    """Energy distances, fractions outside the box and the final particles per density."""
    rng = np.random.default_rng(seed)
    init = rng.standard_normal((n_particles, 2))
    results, finals, grids = {}, {}, {}
    for name, density in DENSITIES.items():
        cells, width, mass = grid_density(density, BOX, GRID_POINTS)
        grids[name] = (cells, mass)
        reference = grid_samples(cells, width, mass, REFERENCE_SIZE, rng)
        yy = cdist(reference, reference).mean()
        floors = [
            energy_distance(grid_samples(cells, width, mass, n_particles, rng), reference, yy)
            for _ in range(FLOOR_REPEATS)
        ]
        wide_cells, _, wide_mass = grid_density(density, 2 * BOX, 2 * GRID_POINTS)
        outside_mass = float(wide_mass[np.max(np.abs(wide_cells), axis=1) > BOX].sum())
        row = {"iid_floor": float(np.mean(floors)), "iid_floor_sd": float(np.std(floors)),
               "mass_outside_box": outside_mass, "methods": {}}  # fmt: skip
        finals[name] = {}
        for method in (*METHODS, "sgld"):
            start = time.perf_counter()
            theta = run_particles(method, density, init, n_steps, step_size, seed + 1)
            cell = {"seconds": time.perf_counter() - start, "status": "ok"}
            if theta is None:
                cell |= {"status": "diverged", "energy": np.nan, "outside": np.nan}
            else:
                cell["energy"] = energy_distance(theta, reference, yy)
                cell["outside"] = float(np.mean(np.max(np.abs(theta), axis=1) > BOX))
            row["methods"][method] = cell
            finals[name][method] = theta
        results[name] = row
    return results, finals, grids


def print_toy(results):
    names = list(results)
    header = f"  {'method':16}" + "".join(f"{name:>13}" for name in names)
    for title, key, digits, extra_rows in (
        ("squared energy distance to the grid reference (lower is better)", "energy", 4,
         (("i.i.d. (floor)", "iid_floor"), ("  floor sd", "iid_floor_sd"))),
        ("fraction of particles outside the box [-4, 4]^2", "outside", 3,
         (("exact mass", "mass_outside_box"),)),
    ):  # fmt: skip
        print(f"  {title}")
        print(header)
        for method in (*METHODS, "sgld"):
            cells = [results[name]["methods"][method] for name in names]
            print(f"  {LABELS[method]:16}" + "".join(
                f"{'diverged':>13}" if c["status"] == "diverged" else f"{c[key]:13.{digits}f}"
                for c in cells))  # fmt: skip
        for label, field in extra_rows:
            print(f"  {label:16}" + "".join(f"{results[n][field]:13.{digits}f}" for n in names))
    seconds = {
        LABELS[m]: sum(results[n]["methods"][m]["seconds"] for n in names)
        for m in (*METHODS, "sgld")
    }
    print("  seconds (4 densities): " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))


# --- (d) bandwidth scale: N(0, I_d) and a bimodal mixture, exact gradients ---


def half_mixture_sd():
    """The sd of ``z_1`` in one mode of ``two_modes`` (``z_1 > 0``), by quadrature."""

    def density(x):
        return np.exp(-0.5 * (x - MODE_OFFSET) ** 2) + np.exp(-0.5 * (x + MODE_OFFSET) ** 2)

    mass = integrate.quad(density, 0, np.inf)[0]
    first = integrate.quad(lambda x: x * density(x), 0, np.inf)[0] / mass
    second = integrate.quad(lambda x: x**2 * density(x), 0, np.inf)[0] / mass
    return float(np.sqrt(second - first**2))


def mode_widths(theta, exact_sd):
    """Particle sd / exact sd within each mode of ``two_modes`` (split at ``z_1 = 0``),
    averaged over coordinates and both modes, and the fraction of particles with ``z_1 > 0``."""
    ratios = []
    for side in (theta[:, 0] > 0, theta[:, 0] <= 0):
        if side.sum() < 2:
            return np.nan, float(np.mean(theta[:, 0] > 0))
        ratios.append(theta[side].std(axis=0) / exact_sd)
    return float(np.mean(ratios)), float(np.mean(theta[:, 0] > 0))


def run_bandwidth_sweep(particle_counts, seed=0):
    """The mean over coordinates of the particles' sd / the target's after ``SWEEP_STEPS``
    steps of ``SWEEP_STEP_SIZE`` from an N(0, I) draw (the same for every method and scale),
    per method, M and bandwidth scale: on N(0, I_5) and on N(0, I_29) (with the first of
    ``particle_counts`` only, the costliest) from the draw of ``seed``, and within the modes
    of ``two_modes`` in 5-D from the draws of ``MODE_SEEDS`` (where the blob methods keep or
    lose a mode's width depending on the draw), with the fraction of particles in the mode
    ``z_1 > 0``. Each cell is the list of its values over the draws."""
    exact_sd = np.ones(5)
    exact_sd[0] = half_mixture_sd()
    problems = [("N(0, I_5)", standard_normal, 5, particle_counts, (seed,)),
                ("two modes, 5-D", two_modes, 5, particle_counts, MODE_SEEDS),
                ("N(0, I_29)", standard_normal, 29, particle_counts[:1], (seed,))]  # fmt: skip
    results = {}
    for name, density, ndim, counts, draws in problems:
        results[name] = {}
        for n_particles in counts:
            inits = [np.random.default_rng(d).standard_normal((n_particles, ndim)) for d in draws]
            for method in METHODS:
                cells = {}
                for scale in SWEEP_SCALES:
                    cell = {"sd_ratio": [], "right_mode": []}
                    for init in inits:
                        theta = run_particles(method, density, init, SWEEP_STEPS,
                                              SWEEP_STEP_SIZE, seed + 1, scale)  # fmt: skip
                        if theta is None:
                            ratio, right = np.nan, np.nan
                        elif density is two_modes:
                            ratio, right = mode_widths(theta, exact_sd)
                        else:
                            ratio, right = float(np.mean(theta.std(axis=0))), np.nan
                        cell["sd_ratio"].append(ratio)
                        cell["right_mode"].append(right)
                    cells[scale] = cell
                results[name][f"{method} M={n_particles}"] = cells
                print(".", end="", flush=True)
    print()
    return results


def _value_or_range(values):
    """One value, or the smallest and largest of several (``nan`` for a diverged run)."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{np.min(values):.2f}-{np.max(values):.2f}"


def print_bandwidth_sweep(results):
    header = f"  {'method':10}{'M':>5}" + "".join(f"{f's={s:g}':>12}" for s in SWEEP_SCALES)
    for name, rows in results.items():
        bimodal = name.startswith("two modes")
        print(f"  {name}: " + (f"smallest-largest over the draws {MODE_SEEDS} of the sd / "
                               "exact sd within the modes, and (of the fraction of particles "
                               "in the mode z_1 > 0)" if bimodal else "sd / exact sd"))  # fmt: skip
        print(header)
        for key, cells in rows.items():
            method, n_particles = key.split(" M=")
            ratios = (_value_or_range(c["sd_ratio"]) for c in cells.values())
            print(f"  {LABELS[method]:10}{n_particles:>5}" + "".join(f"{r:>12}" for r in ratios))
            if bimodal:
                fractions = (f"({_value_or_range(c['right_mode'])})" for c in cells.values())
                print(f"  {'':15}" + "".join(f"{f:>12}" for f in fractions))


# --- (e) the defaults on the conjugate 5-D regression of the statistical tests ---


def run_conjugate(particle_counts, seeds):
    """``sd_ratio_at_defaults`` of the tests on ``GAUSSIAN_5D`` per method, M and seed."""
    problem = conjugate_regression(**GAUSSIAN_5D)
    results = {}
    for n_particles in particle_counts:
        for method in METHODS:
            runs = []
            for seed in seeds:
                start = time.perf_counter()
                mean_error, ratio = sd_ratio_at_defaults(problem, method, seed,
                                                         n_particles=n_particles)  # fmt: skip
                runs.append({"seed": seed, "sd_ratio": ratio, "mean_error": mean_error,
                             "seconds": time.perf_counter() - start})  # fmt: skip
                print(".", end="", flush=True)
            results[f"{method} M={n_particles}"] = runs
    print()
    return results


def print_conjugate(results, seeds):
    print(f"  {'method':10}{'M':>5}" + "".join(f"{f'seed {s}':>11}" for s in seeds)
          + f"{'mean':>11}{'sd':>11}{'4 sd':>11}{'mean err':>10}{'s/run':>7}")  # fmt: skip
    for key, runs in results.items():
        method, n_particles = key.split(" M=")
        ratios = np.array([run["sd_ratio"] for run in runs])
        spread = ratios.std(ddof=1) if len(ratios) > 1 else np.nan
        print(f"  {LABELS[method]:10}{n_particles:>5}"
              + "".join(f"{r:11.4g}" for r in ratios)
              + f"{ratios.mean():11.4g}{spread:11.2g}{4 * spread:11.2g}"
              + f"{max(run['mean_error'] for run in runs):10.2g}"
              + f"{np.mean([run['seconds'] for run in runs]):7.1f}")  # fmt: skip


# --- (b), (c) logistic regression ---


def predictive_scores(draws, x_test, y_test):
    """Test accuracy and mean log predictive likelihood of the draw-averaged probability."""
    probability = special.expit(x_test @ draws.T).mean(axis=1)
    likelihood = np.where(y_test == 1, probability, 1 - probability)
    return {
        "accuracy": float(np.mean((probability > 0.5) == y_test)),
        "test_ll": float(np.mean(np.log(likelihood))),
    }


def run_particle_config(model, data, nuts_sd, method, **kwargs):
    """One ``sample_particles`` run; its scores, sd ratio and seconds (or 'diverged')."""
    x_test, y_test = data
    start = time.perf_counter()
    try:
        idata = pmm.sample_particles(method, model=model, progressbar=False, **kwargs)
    except pmm.SamplerDivergenceError as error:
        return {"status": "diverged", "message": str(error).split(" Pass a smaller")[0],
                "seconds": time.perf_counter() - start}  # fmt: skip
    seconds = time.perf_counter() - start
    draws = posterior(idata)["beta"].values[0]
    if not np.all(np.isfinite(draws)):
        return {"status": "diverged", "message": "non-finite particles", "seconds": seconds}
    return {
        "status": "ok",
        "seconds": seconds,
        "sd_ratio": float(np.mean(draws.std(axis=0) / nuts_sd)),
        **predictive_scores(draws, x_test, y_test),
    }


def logistic_model(x, y):
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=x.shape[1])
        pm.Bernoulli("y", logit_p=pm.math.dot(x, beta), observed=y)
    return model


def run_nuts(model, data, draws, tune, seed):
    start = time.perf_counter()
    with model:
        idata = pm.sample(draws=draws, tune=tune, chains=2, random_seed=seed,
                          progressbar=False, compute_convergence_checks=False)  # fmt: skip
    seconds = time.perf_counter() - start
    samples = posterior(idata)["beta"].values.reshape(-1, data[0].shape[1])
    row = {"status": "ok", "seconds": seconds, "sd_ratio": 1.0,
           **predictive_scores(samples, *data)}  # fmt: skip
    return row, samples.std(axis=0)


def run_convergence(model, data, nuts_sd, step_counts, seed):
    results = {}
    for method in METHODS:
        results[method] = {}
        for n_steps in step_counts:
            results[method][n_steps] = run_particle_config(
                model, data, nuts_sd, method, n_particles=100, n_steps=n_steps,
                batch_size=50, random_seed=seed,
            )  # fmt: skip
            print(".", end="", flush=True)
    print()
    return results


def run_pisgld_sweeps(model, data, nuts_sd, particle_counts, gamma_multiples, n_steps, seed):
    by_particles, by_gamma = {}, {}
    for n_particles in particle_counts:
        by_particles[n_particles] = run_particle_config(
            model, data, nuts_sd, "pisgld", n_particles=n_particles, n_steps=n_steps,
            batch_size=50, random_seed=seed,
        )  # fmt: skip
        print(".", end="", flush=True)
    for multiple in gamma_multiples:
        by_gamma[multiple] = run_particle_config(
            model, data, nuts_sd, "pisgld", n_particles=100, n_steps=n_steps,
            batch_size=50, wasserstein_weight=multiple / 100, random_seed=seed,
        )  # fmt: skip
        print(".", end="", flush=True)
    print()
    return by_particles, by_gamma


def _cells(row):
    if row["status"] == "diverged":
        return f"{'diverged':>9}{'':>9}{'':>11}{row['seconds']:9.1f}"
    return (f"{row['accuracy']:9.3f}{row['test_ll']:9.4f}{row['sd_ratio']:11.2f}"
            f"{row['seconds']:9.1f}")  # fmt: skip


COLUMNS = f"{'accuracy':>9}{'test LL':>9}{'sd/NUTS sd':>11}{'seconds':>9}"


def print_convergence(results, nuts):
    print(f"  {'method':10}{'n_steps':>8}" + COLUMNS)
    for method, rows in results.items():
        for n_steps, row in rows.items():
            print(f"  {LABELS[method]:10}{n_steps:8d}" + _cells(row))
    print(f"  {'NUTS':10}{'':>8}" + _cells(nuts))


def print_sweep(rows, label, formatter):
    print(f"  {label:>12}" + COLUMNS)
    for key, row in rows.items():
        print(f"  {formatter(key):>12}" + _cells(row))


def print_divergences(named_rows):
    failed = {name: row["message"] for name, row in named_rows if row["status"] == "diverged"}
    if failed:
        print("  SamplerDivergenceError:")
        for name, message in failed.items():
            print(f"    {name}: {message}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer particles, steps, runs")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=SECTIONS,
                        help="which of (a)-(e) to run (default all)")  # fmt: skip
    parser.add_argument("--json", default=str(RESULTS / "particles.json"))
    parser.add_argument("--plot", default=str(RESULTS / "particles.png"))
    args = parser.parse_args()
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    started = time.perf_counter()
    seed = 0
    toy_particles, toy_steps, toy_step_size = (200, 500, 0.03) if args.quick else (500, 1000, 0.03)
    step_counts = [50, 200, 500] if args.quick else [50, 100, 200, 500, 1000]
    particle_counts = [10, 30, 100] if args.quick else [10, 30, 100, 300]
    gamma_multiples = [0.0, 1.0, 10.0] if args.quick else [0.0, 1.0, 10.0, 100.0]
    sweep_steps = 300 if args.quick else 500
    nuts_draws, nuts_tune = (500, 500) if args.quick else (1000, 1000)
    sweep_particles = [100] if args.quick else [100, 200]
    conjugate_seeds = SD_RATIO_SEEDS[:3] if args.quick else SD_RATIO_SEEDS
    output = {"environment": environment()}

    if "a" in args.sections:
        check_gradients()
        print(f"=== (a) 2-D densities on [-4, 4]^2: {toy_particles} particles from one N(0, I) "
              f"draw, {toy_steps} steps of h = {toy_step_size:g}, exact gradients")  # fmt: skip
        toy, finals, grids = run_toy(toy_particles, toy_steps, toy_step_size, seed)
        print_toy(toy)
        output["toy"] = {"n_particles": toy_particles, "n_steps": toy_steps,
                         "step_size": toy_step_size, "densities": toy}  # fmt: skip

    if "b" in args.sections or "c" in args.sections:
        (x, y), data = breast_cancer_data(seed)
        model = logistic_model(x, y)
        if "b" in args.sections:
            print(f"\n=== (b) logistic regression, breast cancer: {len(y)} train / "
                  f"{len(data[1])} test rows, 31 coefficients, 100 particles, batch 50, one "
                  "run per n_steps")  # fmt: skip
        nuts, nuts_sd = run_nuts(model, data, nuts_draws, nuts_tune, seed)
    if "b" in args.sections:
        convergence = run_convergence(model, data, nuts_sd, step_counts, seed)
        print(f"  NUTS: {nuts_draws} draws after {nuts_tune} tuning steps, 2 chains")
        print_convergence(convergence, nuts)
        print_divergences(
            (f"{LABELS[m]} n_steps={n}", row) for m, rows in convergence.items()
            for n, row in rows.items()
        )  # fmt: skip
        output["logistic"] = {"nuts": nuts, "nuts_sd": nuts_sd.tolist(),
                              "by_n_steps": convergence}  # fmt: skip

    if "c" in args.sections:
        print(f"\n=== (c) pi-SGLD on the same model, {sweep_steps} steps, batch 50", flush=True)
        by_particles, by_gamma = run_pisgld_sweeps(
            model, data, nuts_sd, particle_counts, gamma_multiples, sweep_steps, seed
        )
        print("  by n_particles (default gamma = 0)")
        print_sweep(by_particles, "n_particles", str)
        print("  by gamma (M = 100)")
        print_sweep(by_gamma, "gamma", lambda g: "0" if g == 0 else f"{g:g}/M")
        print_divergences(
            [(f"M={m}", row) for m, row in by_particles.items()]
            + [(f"gamma={g:g}/M", row) for g, row in by_gamma.items()]
        )
        output["pisgld"] = {"n_steps": sweep_steps, "by_n_particles": by_particles,
                            "by_gamma_times_M": by_gamma}  # fmt: skip

    if "d" in args.sections:
        print(f"\n=== (d) bandwidth scale s (h = s med^2 / log(M + 1)): {SWEEP_STEPS} steps of "
              f"h = {SWEEP_STEP_SIZE:g} from N(0, I) draws, exact gradients; defaults: "
              "SVGD 4, the others 1")  # fmt: skip
        sweep = run_bandwidth_sweep(sweep_particles, seed)
        print_bandwidth_sweep(sweep)
        output["bandwidth_sweep"] = {"scales": SWEEP_SCALES, "by_target": sweep}

    if "e" in args.sections:
        print(f"\n=== (e) defaults on GAUSSIAN_5D ({GAUSSIAN_5D['n_rows']} rows, "
              f"{GAUSSIAN_5D['ndim']} coefficients, all rows per step): mean over coefficients "
              "of sd / exact posterior sd, largest mean error in sds", flush=True)  # fmt: skip
        conjugate = run_conjugate(sweep_particles, conjugate_seeds)
        print_conjugate(conjugate, conjugate_seeds)
        output["conjugate_5d"] = conjugate

    total = time.perf_counter() - started
    output["total_seconds"] = total
    write_results(args.json, output)
    written = args.json
    if "a" in args.sections and "b" in args.sections:
        os.makedirs(os.path.dirname(os.path.abspath(args.plot)), exist_ok=True)
        _plot(args.plot, finals, grids, toy, convergence, nuts, step_counts)
        written += f" and {args.plot}"
    print(f"\nwrote {written}; total {total:.0f} s")


def _plot(path, finals, grids, toy, convergence, nuts, step_counts):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = (*METHODS, "sgld")
    fig = plt.figure(figsize=(3.0 * len(methods), 3.0 * len(finals) + 3.2))
    grid = fig.add_gridspec(len(finals) + 1, len(methods), height_ratios=[1] * len(finals) + [1.1])
    centres = np.linspace(-BOX, BOX, GRID_POINTS + 1)
    centres = 0.5 * (centres[1:] + centres[:-1])
    for i, (name, particles) in enumerate(finals.items()):
        mass = grids[name][1].reshape(GRID_POINTS, GRID_POINTS)
        for j, method in enumerate(methods):
            ax = fig.add_subplot(grid[i, j])
            ax.contour(centres, centres, mass.T, levels=6, colors="0.5", linewidths=0.6)
            cell = toy[name]["methods"][method]
            theta = particles[method]
            if theta is not None:
                ax.scatter(theta[:, 0], theta[:, 1], s=2, color="C3", alpha=0.6)
                title = f"{LABELS[method]}: E={cell['energy']:.3f}, out {cell['outside']:.2f}"
            else:
                title = f"{LABELS[method]}: diverged"
            ax.set(xlim=(-BOX, BOX), ylim=(-BOX, BOX), xticks=[], yticks=[], aspect="equal")
            ax.set_title(title, fontsize=8)
            if j == 0:
                ax.set_ylabel(name)
    for k, (key, label) in enumerate((("accuracy", "test accuracy"), ("test_ll", "test LL"))):
        ax = fig.add_subplot(grid[-1, 2 * k : 2 * k + 2])
        for method, rows in convergence.items():
            values = [rows[n].get(key, np.nan) for n in step_counts]
            ax.plot(step_counts, values, marker="o", label=LABELS[method])
        ax.axhline(nuts[key], color="k", ls="--", label="NUTS")
        ax.set(xscale="log", xlabel="n_steps (separate runs)", ylabel=label,
               title=f"(b) logistic regression: {label}")  # fmt: skip
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
