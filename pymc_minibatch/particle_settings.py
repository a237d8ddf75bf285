"""The settings of :func:`~pymc_minibatch.sample_particles` and the checks of its result.

Its defaults with the measurements behind them, the automatic choices (kernel, momentum,
step-size schedule, starting particles), the checks of its arguments, and the two checks
of the final particles: that they had settled (:class:`ParticlesNotSettledWarning`) and
that they are close to the posterior by Stein's identities (:mod:`pymc_minibatch.answer_check`).
"""

import warnings

import numpy as np
from pymc.initial_point import make_initial_point_fn

from pymc_minibatch.answer_check import AnswerCheckWarning, SteinCheck
from pymc_minibatch.kernels import stein_check
from pymc_minibatch.kernels.batches import checked_batch_size
from pymc_minibatch.kernels.particles import METHODS
from pymc_minibatch.kernels.schedules import as_schedule, hold_then_decay

KERNELS = ("auto", "joint", "coordinates")

DEFAULT_BANDWIDTH_SCALE = {"svgd": 4.0, "wsgld": 1.0, "wsgld_blob": 1.0, "pisgld": 1.0}
"""Multiples of the median heuristic ``med^2 / log(M + 1)`` used for the RBF bandwidth.

Section (d) of ``benchmarks/particles.py`` prints the particles' sd / the target's after
1000 steps of 0.05 with exact gradients from N(0, I) draws (what ``sample_particles`` does
at its defaults on a target whose Laplace approximation is exact); the figures here are for
the default 100 particles. SVGD's plain heuristic (scale 1) is too narrow in five or more
dimensions: on N(0, I_5) 0.84 at scale 1, 0.92 at 2, 0.97 at 4 and 0.99 at 8 (on
N(0, I_29) 0.65, 0.78, 0.89 and 0.93). A wider kernel also reaches across the modes of a
multimodal target and unbalances their weights: on the equal mixture of N(-3 e_1, I_5) and
N(3 e_1, I_5), over five starting draws, the fraction of particles in one mode is
0.46-0.56 at scale 1, 0.33-0.60 at 4 and 0.27-0.78 at 8, while the modes' widths come out
0.88-0.89, 0.99-1.01 and 1.00-1.05 of the exact ones. Scale 4 is the compromise.

The blob's and pi-SGLD's sds are largest at scale 1 (0.84 and 0.83 on N(0, I_5), 0.39 on
N(0, I_29)); a wider kernel narrows them (0.74 at 2, 0.60-0.63 at 4 on N(0, I_5)), and so
does a narrower one in 29 dimensions (0.08 at 0.5). On the mixture both shrink each mode
to a point at every scale from 1 (to 0.80 of its width at 0.5). w-SGLD gathers the
particles at the mode at every scale.
"""

MEASURED_SD_RATIO = {
    "svgd": (0.9619, 0.0051),
    "wsgld": (0.0, 0.0),
    "wsgld_blob": (0.8355, 0.0013),
    "pisgld": (0.8339, 0.00078),
}
"""Marginal sd ratio (particle sd / exact posterior sd) of each method at its defaults, as
``(mean, sd)`` over the random seeds 0-4.

Measured on ``GAUSSIAN_5D`` of ``tests/statistical/test_particles_target.py``: a conjugate
Gaussian linear regression with five correlated coefficients and 500 rows (all of them in
every step at the default batch size, so the gradients are exact), with 100 particles and
1000 steps of 0.05 from the Laplace approximation (exact here); the ratio is averaged over
the five coefficients. Per seed: SVGD 0.9654, 0.9615, 0.9575, 0.9565, 0.9685; w-SGLD-B
0.8355, 0.8343, 0.8365, 0.8341, 0.8371; pi-SGLD 0.8340, 0.8329, 0.8340, 0.8334, 0.8350.
w-SGLD's particles coincide at the mode (ratio 2e-14, i.e. rounding), recorded as 0. All
four recover the means within 0.02 sd. ``test_sd_ratio_at_the_defaults_is_the_measured_one``
asserts the ratio of seed 0 within four of these sds of the mean (``0.962 +- 0.020`` for
SVGD, ``0.836 +- 0.005`` for w-SGLD-B, ``0.834 +- 0.003`` for pi-SGLD, below ``1e-12`` for
w-SGLD); section (e) of ``benchmarks/particles.py`` prints every number here. With 200
particles the ratios are 0.974 (SVGD), 0.863 (w-SGLD-B) and 0.861 (pi-SGLD) at twice the
cost.
"""

DOCUMENTED_SD_RATIO = {"wsgld": (0.0, 0.75), "wsgld_blob": (0.35, 1.0), "pisgld": (0.35, 1.0)}
"""Range of the marginal sd ratio (particle sd / reference sd) that the zoo check
(``tests/support/zoo_samplers.py``) accepts from w-SGLD, w-SGLD-B and pi-SGLD at their
defaults on the model zoo (10^5 rows, 1 to 29 parameters; SVGD is held to the SG-MCMC
samplers' 0.75 to 1.25). It is a range because the ratio depends on the dimension: the
median-heuristic bandwidth weakens the blob's repulsion as the dimension grows (see
``DEFAULT_BANDWIDTH_SCALE``). ``benchmarks/zoo.py`` prints each cell's smallest and largest
ratio: w-SGLD-B and pi-SGLD 0.81-0.99 with up to five parameters and 0.36-0.43 on the 29 of
``varying_intercepts``; w-SGLD gathers the particles at the mode (below 1e-12). On one
fixed problem the ratios are measured and asserted tightly: ``MEASURED_SD_RATIO``.

Where a marginal is skewed, the narrowed methods' means are pulled towards the joint mode in
the transformed space: on ``varying_intercepts`` w-SGLD-B and pi-SGLD miss the posterior
mean of the group scale ``sigma_a`` by 0.29 sd and w-SGLD by 0.35 sd (``benchmarks/zoo.py``),
beyond the zoo's 0.25 sd (``tests/statistical/test_zoo.py`` lists these cells as known
deviations)."""

DEFAULT_STEP_SIZE = 0.05
"""Initial step size in preconditioned units (posterior sd and curvature about 1)."""

NOISE_BUDGET = 0.005
"""Final ``step_size * r`` with minibatches (``r = N / B - 1``): the shared batch's gradient
noise moves the particles' mean by about ``sqrt(step_size * r / 2)`` posterior sds."""

DEFAULT_BATCH_SIZE = 1000
"""Rows per step by default (all rows when there are fewer)."""

DEFAULT_PARTICLES = 100
"""Particles by default (``n_particles="auto"``), except SVGD's on models of many groups."""

BIG_MODEL_PARTICLES = 20
"""Particles by default on a model too big for the exact Laplace fit (a network; see
:mod:`pymc_minibatch.model.diagonal_fit`): each step costs ``M`` minibatch gradients, and
``M`` networks are an ensemble whose predictions average over modes."""

BIG_MODEL_BATCH_SIZE = 100
"""Rows per step by default on such a model: the batch of the networks of Chen et al.
(2018) and Li & Wong (2017), at which a step costs ``M`` gradients of a hundred rows."""

BIG_MODEL_STEP_SCALE = 0.2
"""Step size times ``1 + r`` on such a model: SGLD's default rule (``r = N / B - 1``
without control variates). On the 784-200-10 network of ``benchmarks/big_models.py``,
w-SGLD's particles ran at it without leaving floating point; the constant 0.05 of the
exact fit's models is far larger than it there."""

BIG_MODEL_KERNEL = "joint"
"""SVGD's kernel by default on such a model (``kernel="auto"``), whatever its dimension.

The kernel per coordinate
(:func:`~pymc_minibatch.kernels.particle_velocities.coordinate_svgd_velocity`) is chosen
elsewhere for its fixed points, which match each coordinate's marginal score: right where
the preconditioner leaves the posterior close to independent, as the exact Laplace fit
does. The diagonal fit rescales each coordinate alone and leaves a network's weights as
dependent as they are, so that reason does not hold there, while the kernel per coordinate
costs ``M^2 d`` exponentials per step and, every ``COORDINATE_BANDWIDTH_EVERY`` steps, a
median over the ``M (M - 1) / 2`` pairs in each coordinate: on a network's 10^5 weights,
more than the ``M`` gradients themselves (``benchmarks/big_models.py`` prints a step's
cost beside them). The joint kernel's interaction is the pairs' distances and a few ``M x M``
by ``M x d`` matrix products. Its repulsion fades as the dimension grows past ``M`` (Ba,
Erdogdu, Ghassemi, Sun, Suzuki, Wu & Zhang 2021, "Understanding the variance collapse of
SVGD in high dimensions", ICLR): the particles stay close to the diagonal fit's center."""

GROUP_PARTICLES = 200
"""SVGD's particles by default on a hierarchical model of at least ``MANY_GROUPS`` groups.

There the kernel per coordinate leaves a group scale low by a bias that shrinks with the
particles, while the group effects' sds come out right on average (their sd ratios to
NUTS's average 0.990-0.998 over the groups). On the hierarchical zoo's two 1000-group
models (10^5 rows; ``benchmarks/particle_defaults.py --stratify false``, seeds 7, 8 and 9,
uniform batches) the group scale's mean came 0.144 posterior sd low on average with 100
particles (standard error 0.018 over the seeds) and 0.066 (0.006) with 200 on the varying
intercepts; ``tau_b`` of the varying slopes 0.188 (0.013) and 0.093 (0.007). 200 particles
cost about three times as much (the interactions grow as ``M^2``) and bring the group
scales within the 0.1 sd the SG-MCMC presets reach; with the default batches stratified by
group (``benchmarks/particle_defaults.py``) they came within 0.097 sd."""

MANY_GROUPS = 500
"""Groups from which SVGD takes ``GROUP_PARTICLES`` by default: the 100-group models of the
zoo are held to NUTS's answer with ``DEFAULT_PARTICLES``
(``tests/statistical/test_hierarchical.py``)."""

GROUP_MOMENTUM = 0.95
"""SVGD's heavy-ball momentum on hierarchical models by default (``momentum="auto"``).

A hierarchical model's group scale and the spread of its weakly identified groups' effects
relax together, slowly: each can move only as far as the other has (the slow mixing of
the centred parametrisation, Papaspiliopoulos, Roberts & Sköld 2007, seen in a gradient
flow). The Laplace start puts the scale at the joint mode, several sds below its posterior
mean with many groups, and plain steps carry it up slowly. Momentum ``beta`` carries
a drift that persists ``1 / (1 - beta)`` times as far per step (Polyak 1964, "Some methods
of speeding up the convergence of iteration methods", USSR Comput. Math. Math. Phys.
4(5); for particle methods Liu, Zhuo, Cheng, Zhang & Zhu 2019, "Understanding and
accelerating particle-based variational inference", ICML). On the hierarchical zoo's
1000-group varying-intercept model (10^5 rows, ``benchmarks/particle_momentum.py``;
``benchmarks/results/particle_momentum_1000.json`` for plain steps) the group scale's
mean came 0.150 posterior sd low after the default 1000 steps without momentum and 0.139
with 0.95; after 3000 steps 0.110 without, 0.120 at 0.95 and 0.037 at 0.98. That little
difference is owed to the kernel's linear part
(:func:`~pymc_minibatch.kernels.particle_velocities.linear_svgd_velocity`), which moves the
groups' spread directly; before it, 1000 plain steps left the scale far lower, and 0.98 overshot
it by several sds with the answer check quiet (a scale and its groups' spread wrong
together look consistent to each coordinate's score). On a linear
mode of rate ``lambda`` (its velocity ``-lambda`` times its offset) the heavy ball decays
by ``sqrt(beta)`` per step (within tens of steps at 0.95) when ``lambda`` exceeds
``(1 - sqrt(beta))^2 / step_size``, and ``1 / (1 - beta)`` times as fast as plain steps
below. It does not move the fixed points (a zero velocity keeps a zero momentum)."""

MOMENTUM_NOISE_LIMIT = 100
"""The largest ``N / B - 1`` (rows over batch rows, less one) at which ``momentum="auto"``
gives SVGD ``GROUP_MOMENTUM``; beyond it, plain steps.

The heavy ball carries the minibatch gradients' noise ``1 / (1 - beta)`` times as far as
their drift. At 99 (the zoo's 10^5 rows, batches of 1000) it was measured above; at 999
(the 1000-group model of ``benchmarks/hierarchical.py`` on 10^6 rows,
``benchmarks/particle_tall.py``) the particles ran away with it, to a root mean variance of
7.185 preconditioned units and a group scale of 7.040, where plain steps kept them at 1.032
and 0.785, and the answer check warned of a group's sd 23 times the posterior's."""

MOMENTUM_FRACTION = 0.8
"""Share of the steps that carry momentum; the rest are plain steps, over which the
coordinates that relax quickly shed the gradient noise that momentum amplifies."""

CHECK_BATCHES = 4
"""Fresh batches whose gradient estimates, averaged, score the final particles for the
answer check (at least; see ``CHECK_ROWS_PER_GROUP``)."""

CHECK_ROWS_PER_GROUP = 20
"""Rows per group, on average, that the answer check's batches hold together in a
hierarchical model. A group's particles are judged by its rows' curvature, and batches
that hold none of a group's rows leave the prior's curvature alone, by which the check
takes the group's particles for far too narrow: ``CHECK_BATCHES`` batches of 1000 rows
among 10^5 miss every row of a group of a hundred rows with probability ``exp(-4)``, so
with a thousand groups a dozen or more are missed each time. With twenty rows per group
on average a group of a hundred is missed with probability ``exp(-20)``."""

SETTLED_DRIFT = 1.0
"""Largest mean velocity of the particles (sds per unit of step) at the end of a settled run:
at a stationary point of the particle flow it is zero up to minibatch noise."""

SETTLED_RATE = 0.5
"""Largest relative rate of change of the particles' spread (per unit of step) at the end of
a settled run."""


class ParticlesNotSettledWarning(UserWarning):
    """The particles were still moving when ``sample_particles`` stopped.

    Over the last tenth of the steps the particles' mean was still being pushed, or their
    spread still changing, beyond the minibatch noise: the result may not be the method's
    fixed point yet. Pass more ``n_steps`` and check that the answer no longer changes.

    Examples
    --------
    Turn it into an error:

    >>> import warnings, pymc_minibatch as pmm
    >>> warnings.simplefilter("error", pmm.ParticlesNotSettledWarning)
    >>> warnings.resetwarnings()
    """


def check_batch_count(minibatch_model, batch_size):
    """Batches for the answer check: ``CHECK_BATCHES``, or in a hierarchical model enough
    for ``CHECK_ROWS_PER_GROUP`` rows per group on average (one when a batch holds every
    row)."""
    if batch_size == minibatch_model.n_data:
        return 1
    n_groups = minibatch_model.structure().n_groups  # found by the Laplace fit
    return max(CHECK_BATCHES, -(-CHECK_ROWS_PER_GROUP * n_groups // batch_size))


def default_schedule(n_steps, noise_ratio, exact_fit=True):
    """``DEFAULT_STEP_SIZE`` for the first half of the steps, then a geometric decay to
    ``NOISE_BUDGET / noise_ratio`` if that is smaller (``noise_ratio = N / B - 1``, 0 with
    control variates). Without the exact Laplace fit (a network),
    ``BIG_MODEL_STEP_SCALE / (1 + noise_ratio)`` throughout: the diagonal fit's whitened
    curvature is at most about 1, but the plain estimate's noise there is about
    ``noise_ratio``, not 0."""
    if not exact_fit:
        return as_schedule(BIG_MODEL_STEP_SCALE / (1.0 + noise_ratio))
    final = DEFAULT_STEP_SIZE if noise_ratio <= 0 else min(DEFAULT_STEP_SIZE,
                                                            NOISE_BUDGET / noise_ratio)  # fmt: skip
    return hold_then_decay(DEFAULT_STEP_SIZE, final, n_steps)


def checked_settings(method, n_particles, n_steps, bandwidth_scale, wasserstein_weight,
                     entropic_reg):  # fmt: skip
    """Checked settings, with the method's defaults for those not given."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    automatic = isinstance(n_particles, str) and n_particles == "auto"
    for name, value, least in (("n_particles", n_particles, 2), ("n_steps", n_steps, 1)):
        if name == "n_particles" and automatic:
            continue
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
            auto = " or 'auto'" if name == "n_particles" else ""
            raise ValueError(f"{name} must be an integer of at least {least}{auto}, "
                             f"got {value!r}")  # fmt: skip
    # w-SGLD's default, 1 / M (its sum over M previous particles scaled as SVGD's mean), is
    # set once M is known (wasserstein_weight_default)
    weight = 0.0 if wasserstein_weight is None else wasserstein_weight
    settings = {
        "bandwidth_scale": DEFAULT_BANDWIDTH_SCALE[method],
        "wasserstein_weight": weight,
        "entropic_reg": entropic_reg,
    }
    if bandwidth_scale is not None:
        settings["bandwidth_scale"] = bandwidth_scale
    for name in ("bandwidth_scale", "entropic_reg"):
        _check_positive(name, settings[name])
    if not (isinstance(weight, int | float | np.number) and np.isfinite(weight) and weight >= 0):
        raise ValueError(f"wasserstein_weight must be a non-negative finite number, got {weight!r}")
    return settings


def momentum_beta(momentum, method, minibatch_model=None, fit=None, batch_size=None):
    """The heavy ball's ``beta``: ``momentum`` checked, or the default of ``"auto"``:
    ``GROUP_MOMENTUM`` for SVGD on a hierarchical model whose batches hold at least one row
    in ``MOMENTUM_NOISE_LIMIT + 1``, else 0 (also without a Laplace fit, which finds the
    model's groups)."""
    if isinstance(momentum, str) and momentum == "auto":
        hierarchical = fit is not None and minibatch_model.structure().n_groups > 0
        quiet = hierarchical and minibatch_model.n_data / batch_size - 1 <= MOMENTUM_NOISE_LIMIT
        return GROUP_MOMENTUM if method == "svgd" and quiet else 0.0
    if isinstance(momentum, bool) or not (
        isinstance(momentum, int | float | np.number) and 0 <= momentum < 1
    ):
        raise ValueError(f"momentum must be 'auto' or a number in [0, 1), got {momentum!r}")
    return float(momentum)


def particle_count(n_particles, method, minibatch_model):
    """``n_particles`` (checked by :func:`checked_settings`), or the default of ``"auto"``:
    ``BIG_MODEL_PARTICLES`` on a model too big for the exact Laplace fit,
    ``GROUP_PARTICLES`` for SVGD on a model of at least ``MANY_GROUPS`` groups, else
    ``DEFAULT_PARTICLES``."""
    if not (isinstance(n_particles, str) and n_particles == "auto"):
        return int(n_particles)
    if not minibatch_model.laplace_is_exact():
        return BIG_MODEL_PARTICLES
    many_groups = method == "svgd" and minibatch_model.structure().n_groups >= MANY_GROUPS
    return GROUP_PARTICLES if many_groups else DEFAULT_PARTICLES


def chosen_kernel(kernel, method, n_particles, minibatch_model):
    """The kernel SVGD uses (``"joint"`` for the other methods); ``"auto"``: the joint
    kernel on a model too big for the exact Laplace fit (``BIG_MODEL_KERNEL``), else the
    kernel per coordinate on a model of more coordinates than particles."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if method != "svgd":
        if kernel == "coordinates":
            raise ValueError(f"kernel='coordinates' is SVGD's; {method!r} uses the joint kernel")
        return "joint"
    if kernel == "auto":
        if not minibatch_model.laplace_is_exact():
            return BIG_MODEL_KERNEL
        return "coordinates" if minibatch_model.ndim > n_particles else "joint"
    return kernel


def _check_positive(name, value):
    if value is not None and not (
        isinstance(value, int | float | np.number) and np.isfinite(value) and value > 0
    ):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def wasserstein_weight_default(method, n_particles):
    """The weight of the eq. (21) term when none is given: ``1 / M`` for w-SGLD (its sum
    over the ``M`` previous particles scaled as SVGD's mean), 0 for pi-SGLD."""
    return 1.0 / n_particles if method == "wsgld" else 0.0


def chosen_batch_size(batch_size, minibatch_model):
    """``batch_size`` checked, or ``min(N, DEFAULT_BATCH_SIZE)`` (``BIG_MODEL_BATCH_SIZE``
    on a model too big for the exact Laplace fit)."""
    n_data = minibatch_model.n_data
    if batch_size is not None:
        return checked_batch_size(batch_size, n_data)
    default = DEFAULT_BATCH_SIZE if minibatch_model.laplace_is_exact() else BIG_MODEL_BATCH_SIZE
    return min(n_data, default)


def initial_particles(init, minibatch_model, n_particles, rng, centring):
    """Flat transformed starting values ``(n_particles, ndim)`` (an array ``init`` is in
    the layout of the user's model, mapped to the centred one by ``centring`` if given)."""
    if isinstance(init, str):
        if init not in ("prior", "jitter"):
            raise ValueError(f"init must be 'laplace', 'prior', 'jitter' or an array, got {init!r}")
        model = minibatch_model.model
        draw = make_initial_point_fn(
            model=model,
            jitter_rvs=set(model.free_RVs) if init == "jitter" else set(),
            default_strategy="prior" if init == "prior" else "support_point",
        )
        seeds = rng.integers(2**31, size=n_particles)
        return np.stack([minibatch_model.theta_from_point(draw(int(s))) for s in seeds])
    thetas = np.asarray(init, dtype=np.float64)
    expected = (n_particles, minibatch_model.ndim)
    if thetas.shape != expected:
        raise ValueError(f"init must have shape {expected} (flat transformed values), got "
                         f"{thetas.shape}")  # fmt: skip
    if not np.all(np.isfinite(thetas)):
        raise ValueError("init contains non-finite values")
    if centring is not None:
        return np.stack([minibatch_model.theta_from_point(centring.to_centred(
            centring.user_point(theta))) for theta in thetas])  # fmt: skip
    return thetas.copy()


def settled_window(n_steps):
    """The last steps of a run that :func:`warn_if_unsettled` averages over: a tenth of
    them, at least two (all of them in a run of fewer)."""
    return min(n_steps, max(2, n_steps // 10))


def warn_if_unsettled(method, drifts, rates, z, preconditioned):
    """Warn when, averaged over the last :func:`settled_window` steps, the particles were
    still being pushed: the mean of their velocities (``drifts``, one row for each of those
    steps) beyond ``SETTLED_DRIFT`` (in sds of the Laplace approximation when
    ``preconditioned``, else of the final particles ``z``) per unit of step, or their
    spread's relative rate of change (``rates``, one a step of the run) beyond
    ``SETTLED_RATE``, in either case by more than four standard errors of the per-step
    values (minibatch noise; for the drifts, at least ``sqrt(2 log(2 d))``, the largest of
    ``d`` coordinates' chance deviations). Velocities are used rather than moves because
    the default schedule shrinks the moves, which would hide a run that stopped far from
    the posterior."""
    window = drifts.shape[0]
    if window < 2:
        return
    drift, drift_se = _window_mean(drifts)
    rate, rate_se = _window_mean(rates[-window:])
    scale = np.ones(z.shape[1]) if preconditioned else np.std(z, axis=0)
    scale = np.where(scale > 0, scale, np.inf)
    errors = max(4.0, np.sqrt(2.0 * np.log(2.0 * z.shape[1])))
    pushed = (np.abs(drift) / scale > SETTLED_DRIFT) & (np.abs(drift) > errors * drift_se)
    spreading = abs(rate) > SETTLED_RATE and abs(rate) > 4 * rate_se
    if np.any(pushed) or spreading:
        warnings.warn(
            f"sample_particles({method!r}) had not settled: over its last {window} "
            f"steps the particles' mean was pushed at {np.max(np.abs(drift) / scale):.3g} "
            f"sds and their spread at {100 * rate:.3g}% per unit of step. The result may "
            "be far from the posterior: pass more n_steps or start from the Laplace "
            "approximation (init='laplace')",
            ParticlesNotSettledWarning,
            stacklevel=4,  # this check, sample_particles, its renamed_arguments wrapper
        )


def _window_mean(values):
    """Mean over the first axis and its naive standard error."""
    return values.mean(axis=0), values.std(axis=0) / np.sqrt(values.shape[0])


def warn_if_far(fit, minibatch_model, method, thetas, scores):
    """Warn when the particles are far from the posterior by Stein's identities (see
    :mod:`pymc_minibatch.answer_check`; too narrow only for SVGD), given unbiased estimates
    of the scores at the particles."""
    narrowing = method in DOCUMENTED_SD_RATIO  # their narrowed spread is documented
    check = SteinCheck(
        fit, minibatch_model.coordinate_names(), f"sample_particles({method!r})",
        "Pass more n_particles, a smaller step_size or a larger batch_size; or sample "
        "exactly with pmm.TunaMH.",
        spread_range=(0.0, stein_check.SPREAD_LIMIT) if narrowing else None,
    )  # fmt: skip
    message = check.check_all(thetas, scores, "(the particles)")
    if message is not None:
        warnings.warn(message, AnswerCheckWarning, stacklevel=4)
