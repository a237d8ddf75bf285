"""``sample_particles``: SVGD, w-SGLD, w-SGLD-B and pi-SGLD on a PyMC model.

The particle methods of Chen, Zhang, Wang, Li & Chen (2018), "A unified particle-optimization
framework for scalable Bayesian sampling", UAI, with minibatch gradients. They move all
particles together, so they run outside ``pm.sample``; the result is nevertheless
``pm.sample``'s result type with the particles as the draws of one chain.
"""

import time
import warnings
from contextlib import contextmanager

import numpy as np
import pymc as pm
import xarray as xr
from pymc.initial_point import make_initial_point_fn
from pymc.vartypes import continuous_types

from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.answer_check import AnswerCheckWarning, SteinCheck
from pymc_minibatch.exceptions import SamplerDivergenceError
from pymc_minibatch.kernels import particles as kernels
from pymc_minibatch.kernels import stein_check
from pymc_minibatch.kernels.batches import checked_batch_size, next_epoch_batch
from pymc_minibatch.kernels.preconditioning import (
    DiagonalPreconditioner,
    identity_preconditioner,
)
from pymc_minibatch.kernels.schedules import as_schedule
from pymc_minibatch.model import control_variates as cv
from pymc_minibatch.model.adapter import MinibatchModel
from pymc_minibatch.model.gradients import grad_estimator
from pymc_minibatch.model.recentring import recentring
from pymc_minibatch.results import draws_to_result

METHODS = ("svgd", "wsgld", "wsgld_blob", "pisgld")
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
(``tests/zoo_samplers.py``) accepts from w-SGLD, w-SGLD-B and pi-SGLD at their defaults on
the model zoo (10^5 rows, 1 to 29 parameters; SVGD is held to the SG-MCMC samplers' 0.75 to
1.25). It is a range because the ratio depends on the dimension: the median-heuristic
bandwidth weakens the blob's repulsion as the dimension grows (see
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
(:func:`~pymc_minibatch.kernels.particles.linear_svgd_velocity`), which moves the groups'
spread directly; before it, 1000 plain steps left the scale far lower, and 0.98 overshot
it by several sds with the answer check quiet (a scale and its groups' spread wrong
together look consistent to each coordinate's score). On a linear
mode of rate ``lambda`` (its velocity ``-lambda`` times its offset) the heavy ball decays
by ``sqrt(beta)`` per step (within tens of steps at 0.95) when ``lambda`` exceeds
``(1 - sqrt(beta))^2 / step_size``, and ``1 / (1 - beta)`` times as fast as plain steps
below. It does not move the fixed points (a zero velocity keeps a zero momentum)."""

MOMENTUM_FRACTION = 0.8
"""Share of the steps that carry momentum; the rest are plain steps, over which the
coordinates that relax quickly shed the gradient noise that momentum amplifies."""

COORDINATE_BANDWIDTH_EVERY = 10
"""Steps between updates of the per-coordinate kernel's bandwidths (``kernel="coordinates"``):
their medians over the ``M (M - 1) / 2`` pairs in every coordinate cost more than the
velocity itself, while the particles' spread, which they follow, changes little in ten
steps. The joint kernel's single median is updated every step."""

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
RUNAWAY_DISTANCE = 1e4
"""Preconditioned units from the start beyond which a particle has diverged."""

ADAGRAD_DECAY, ADAGRAD_FUDGE = 0.9, 1e-6

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


@renamed_arguments(gamma="wasserstein_weight", lam="entropic_reg")
def sample_particles(
    method="svgd",
    *,
    n_particles=100,
    n_steps=1000,
    batch_size=None,
    step_size=None,
    bandwidth_scale=None,
    kernel="auto",
    wasserstein_weight=None,
    entropic_reg=None,
    adagrad=False,
    momentum="auto",
    precondition=True,
    init="laplace",
    control_variates="auto",
    random_seed=None,
    model=None,
    data=None,
    progressbar=True,
):
    """Approximate the posterior by interacting particles moved with minibatch gradients.

    Every step draws one batch of rows (shared by all particles; epochs without
    replacement), estimates ``g_i = grad log p(theta_i)`` at each particle with the
    rows' log-likelihood scaled by ``N / batch_size`` (with control variates by default,
    see ``control_variates``), and moves every particle by ``step_size * v_i`` (Chen et al.
    2018; see :mod:`pymc_minibatch.kernels.particles`):

    - ``"svgd"`` (the default, and the recommended method: its variances come out closest
      to the posterior's, see ``MEASURED_SD_RATIO``): Stein variational gradient descent (Liu
      & Wang 2016, "Stein variational gradient descent: a general purpose Bayesian inference
      algorithm", NeurIPS, eq. 8), a kernel-smoothed gradient plus kernel repulsion.
    - ``"wsgld"``: ``g_i`` plus the entropy-regularised Wasserstein term of the paper's
      eq. (21) to the previous step's particles, with constants ``entropic_reg`` (the
      paper's lambda) and ``wasserstein_weight`` (its gamma). It
      finds modes but does not reproduce variances (the paper's own observation): with
      the defaults particles gather close to the modes, see the notes below.
    - ``"wsgld_blob"``: ``g_i`` plus the blob approximation of the entropy gradient
      (paper eq. 22, after Carrillo et al. 2019).
    - ``"pisgld"``: the average of the SVGD velocity and a w-SGLD velocity made of the blob
      velocity plus ``wasserstein_weight`` times the eq. (21) term; with its default 0 it
      is the pi-SGLD of the paper's authors' public code (github.com/thu-ml/fpovi).

    Parameters
    ----------
    method : {"svgd", "wsgld", "wsgld_blob", "pisgld"}, default "svgd"
    n_particles : int, default 100
        Number of particles ``M`` (at least 2). Each step costs ``M`` gradient calls on
        ``batch_size`` rows plus ``O(M^2 d)`` for the interactions. The default is 100
        rather than 200: on the problem of ``MEASURED_SD_RATIO`` (whose figures are at this
        default) 200 particles take about twice as long and widen the sds by only 0.013
        (SVGD) to 0.027 (w-SGLD-B, pi-SGLD) of the posterior's. With many groups the kernel
        per coordinate (see ``kernel``) dominates the cost, which grows as ``M^2``: on the
        1000-group model of ``benchmarks/particle_momentum.py``, 3000 steps took 144.5-164.8
        s with 100 particles and 555.3 s with 200 (without the kernel's linear part, which
        does more for the group scale than 200 particles did: 0.134 posterior sd low with
        200 particles, 0.316 with 100, 0.120 with 100 and the linear part).
    n_steps : int, default 1000
    batch_size : int, optional
        Rows per step; default ``min(N, 1000)``.
    step_size : float or schedule, optional
        A positive float or a schedule from :mod:`pymc_minibatch.schedules`, in
        preconditioned units when ``precondition=True``. Default: 0.05, constant with
        control variates or all rows; without control variates 0.05 for the first half of
        the steps, then a geometric decay to ``min(0.05, 0.005 / r)`` with
        ``r = N / batch_size - 1``, so that the minibatch noise moves the final particles'
        mean by about 0.05 posterior sd if the steps suffice (the decay outruns the
        particles' relaxation once the step falls below the decay rate per step, which
        leaves the mean about ``sqrt(rate * r / 2)`` sds off: prefer control variates).
    bandwidth_scale : float, optional
        The RBF bandwidth is ``bandwidth_scale * med^2 / log(M + 1)`` with ``med^2`` the
        median squared distance between particles, recomputed every step. Default 4 for
        SVGD, 1 (Liu & Wang's heuristic) for the others; the reasons are measured in
        ``DEFAULT_BANDWIDTH_SCALE``. With ``kernel="coordinates"`` the bandwidth is per
        coordinate (``med_j^2`` over the coordinate's pairs), recomputed every
        ``COORDINATE_BANDWIDTH_EVERY`` steps, and the default scale 1.
    kernel : {"auto", "joint", "coordinates"}, default "auto"
        SVGD's kernel. ``"joint"``: the RBF on the whole vector. ``"coordinates"``: one RBF
        per coordinate (see :func:`~pymc_minibatch.kernels.particles.coordinate_svgd_velocity`),
        whose repulsion does not fade with the dimension. ``"auto"``: ``"coordinates"``
        when the model has more coordinates than ``n_particles``, where the joint kernel's
        particles collapse towards the mode, else ``"joint"``. On the hierarchical models
        of ``benchmarks/hierarchical.py`` (``benchmarks/results/hierarchical_N1e5_G*.json``)
        the joint kernel's sds came out 0.64-0.89 of nutpie's with 106 parameters and
        0.50-0.87 with 1006 (a mean 4.2 sds off); the coordinate kernel's 0.91-1.03 and
        0.87-1.10, with means within 0.09 sd and 0.82 sd (the group scale, which plain
        steps carry up from the Laplace start too slowly: see ``momentum``). The kernel
        per coordinate has a linear part that restores the particles' variance in each
        coordinate (:func:`~pymc_minibatch.kernels.particles.linear_svgd_velocity`,
        applied outside the momentum). ``tests/statistical/test_hierarchical.py`` holds it,
        with its default momentum, to NUTS with 106 and 1006 parameters. The other methods
        use the joint kernel.
    wasserstein_weight : float, optional
        Weight ``gamma`` of the Wasserstein term: default ``1 / M`` for w-SGLD, 0 for
        pi-SGLD. Formerly ``gamma``, still accepted with a ``FutureWarning``.
    entropic_reg : float, optional
        Entropic regularisation ``lambda`` of the Wasserstein term; default the bandwidth.
        Formerly ``lam``, still accepted with a ``FutureWarning``.
    adagrad : bool, default False
        Divide each coordinate of the velocity by the root of an exponential average of its
        squares (decay 0.9, as in Liu & Wang's SVGD code).
    momentum : float or "auto", default "auto"
        Heavy-ball momentum ``beta`` in ``[0, 1)``: each move is ``step_size`` times
        ``m_t = beta m_(t-1) + v_t``, over the first 80% of the steps (plain steps after,
        ``MOMENTUM_FRACTION``). It speeds up slow directions without moving the fixed
        points. ``"auto"``: ``GROUP_MOMENTUM`` (0.95) for SVGD on a hierarchical model
        (rows that touch one group's parameters each, as the Laplace fit finds them),
        whose group scale relaxes slowly from the Laplace start, else 0 (also when no fit
        is made: ``precondition=False``, another ``init`` and no control variates).
    precondition : bool, default True
        Run in ``z`` with ``theta = L z``, where ``L`` whitens the curvature of the log
        posterior at the mode (the Cholesky factor of the exact full-data curvature, block
        arrowhead in a hierarchical model). The isotropic kernel then suits correlated
        posteriors and one step size suits every model. The mode is found by Newton's
        method with the exact full-data Hessian from the model's initial point (see
        :meth:`MinibatchModel.laplace`).
    control_variates : {"auto", True, False}, default "auto"
        Estimate the gradients as ``g_S(theta) - g_S(theta_hat) + grad log p(theta_hat)``
        with ``g_S`` the minibatch estimate on the step's batch and ``theta_hat`` the mode
        of the Laplace approximation, where the full-data gradient is computed once (Baker,
        Fearnhead, Fox & Nemeth 2019, "Control variates for stochastic gradient MCMC",
        Statistics and Computing). Unbiased, and its noise shrinks with the distance to the
        mode instead of growing with ``N / batch_size``. The batch is shared, so the extra
        gradient at ``theta_hat`` costs one call per step for all particles. ``"auto"``:
        on unless every step uses all rows.
    init : {"laplace", "prior", "jitter"} or array, default "laplace"
        ``"laplace"``: draws from the Laplace approximation at the mode (the normal with
        the curvature used for preconditioning), which start the particles in the bulk
        of the posterior; ``"prior"``: independent prior draws, which let particles find
        separate modes of a multimodal posterior (but start far out for tall data);
        ``"jitter"``: the model's initial point plus uniform(-1, 1) jitter in the
        transformed space, as ``pm.sample``'s "jitter"; or an array ``(n_particles, ndim)``
        of flat transformed values (see :class:`MinibatchModel`).
    random_seed : int or numpy.random.Generator, optional
    model : pymc.Model, optional
    data : dict, optional
        Arrays to read the rows from instead of the model's data (``{name: array}``, by
        ``pm.Data`` or observed-variable name; N comes from the arrays): see
        :class:`MinibatchModel`.
    progressbar : bool, default True
        Show the particle steps, and on data of at least a million rows the full-data
        passes of the Laplace fit, in progress bars.

    Returns
    -------
    arviz.InferenceData (PyMC 5) or xarray.DataTree (PyMC 6)
        The final particles as the draws of one chain (constrained values and
        Deterministics). ``sample_stats`` holds ``minibatch_logp`` per particle (estimated
        on the last step's batch, before its move) and, over the dimension ``step``, the
        history of ``step_size``, ``bandwidth``, ``mean_grad_norm`` (of ``theta``-space
        gradients), ``mean_velocity_norm`` and ``spread`` (the root mean particle variance
        in preconditioned units). The posterior's attrs record the settings.

    Warns
    -----
    ParticlesNotSettledWarning
        When, averaged over the last tenth of the steps, the particles' mean velocity
        exceeds one sd per unit of step in some coordinate, or their spread changes at more
        than 50% per unit of step (beyond minibatch noise): the run stopped before the
        particles settled.

    Raises
    ------
    ValueError, TypeError
        For bad arguments, discrete free variables, or an ``init`` of the wrong shape.
    NonFactorizableError
        If the likelihood does not factorise over rows.
    SamplerDivergenceError
        When a log density or gradient becomes non-finite or particles run away; the
        message names the step and suggests a smaller step size or a larger batch.

    Notes
    -----
    Deterministic particle methods are biased for finite ``M``, and w-SGLD, w-SGLD-B and
    pi-SGLD, implemented as Chen et al. (2018) state them, keep that paper's biases: they
    under-disperse. At the defaults on a conjugate 5-D Gaussian regression (measured over
    five seeds and asserted by the tests: ``MEASURED_SD_RATIO``) all four recover the means
    within 0.02 posterior sd; the marginal sds come out 0.96 of the posterior's for SVGD,
    0.84 for w-SGLD-B and 0.83 for pi-SGLD, and w-SGLD gathers the particles at the mode.
    The blob methods narrow further as the dimension grows (``DEFAULT_BANDWIDTH_SCALE``,
    ``DOCUMENTED_SD_RATIO``). SVGD widens a too-narrow start slowly, which the Laplace start
    avoids. Where the posterior is skewed, a narrowed approximation is also a shifted one:
    the means of w-SGLD, w-SGLD-B and pi-SGLD lie between the mode (in the transformed
    space) and the posterior mean, e.g. 0.29-0.35 posterior sd from the mean of a
    hierarchical scale with 25 groups (``DOCUMENTED_SD_RATIO``). On multimodal densities
    w-SGLD-B and pi-SGLD can shrink each mode to a point or a curve, as the
    median-heuristic bandwidth is then set by the distances between modes
    (``benchmarks/particles.py``, sections (a) and (d)).

    Non-centred group effects (``a = pm.Deterministic("a", mu + tau * z)``, ``z ~
    Normal(0, 1)``) are moved in the model's centred form and reported as the model writes
    them (:mod:`pymc_minibatch.model.recentring`); an effect written inline (``mu + tau *
    z[g]``) is reported as ``z_effect`` beside ``z``.

    Examples
    --------
    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> X = np.random.default_rng(0).normal(size=(2000, 3))
    >>> with pm.Model() as model:
    ...     beta = pm.Normal("beta", 0, 1, shape=3)
    ...     obs = pm.Normal("y", X @ beta, 1, observed=X @ [1.0, -1.0, 0.5])
    ...     idata = pmm.sample_particles("svgd", n_particles=20, n_steps=100,
    ...                                  batch_size=200, random_seed=1, progressbar=False)
    >>> idata["posterior"]["beta"].shape
    (1, 20, 3)

    A multimodal posterior: start from the prior so that particles can find separate modes.

    >>> with model:
    ...     idata = pmm.sample_particles("wsgld_blob", n_particles=200, init="prior",
    ...                                  random_seed=1)  # doctest: +SKIP
    """
    model = pm.modelcontext(model)
    settings = _validate(
        method, n_particles, n_steps, bandwidth_scale, wasserstein_weight, entropic_reg
    )
    _momentum(momentum, method)  # refuse a bad value before the Laplace fit
    discrete = sorted(v.name for v in model.value_vars if v.dtype not in continuous_types)
    if discrete:
        raise ValueError(
            f"particle methods move continuous variables only; the model has discrete free "
            f"variables {discrete}"
        )
    centring = recentring(model)  # non-centred group effects move centred, as in pm.sample
    minibatch_model = MinibatchModel(model if centring is None else centring.model, data=data,
                                     progressbar=progressbar)  # fmt: skip
    settings["kernel"] = _kernel(kernel, method, n_particles, minibatch_model.ndim)
    if bandwidth_scale is None and settings["kernel"] == "coordinates":
        settings["bandwidth_scale"] = 1.0
    n_data = minibatch_model.n_data
    batch_size = _batch_size(batch_size, n_data)
    rng = np.random.default_rng(random_seed)
    laplace = isinstance(init, str) and init == "laplace"
    use_control_variates = cv.use_control_variates(control_variates, batch_size, n_data)
    started = time.perf_counter()
    fit = minibatch_model.laplace() if (precondition or laplace or use_control_variates) else None
    thetas = (
        fit.draw(rng, n_particles)
        if laplace
        else _initial_particles(init, minibatch_model, n_particles, rng, centring)
    )
    noise_ratio = 0.0 if use_control_variates else n_data / batch_size - 1.0
    schedule = (
        _default_schedule(n_steps, noise_ratio) if step_size is None else as_schedule(step_size)
    )
    gradients = grad_estimator(minibatch_model, fit.mode if use_control_variates else None,
                               particles=True)  # fmt: skip
    preconditioner = (
        fit.preconditioner if precondition else identity_preconditioner(minibatch_model.ndim)
    )
    momentum = _momentum(momentum, method, minibatch_model, fit)  # checked above
    run = _ParticleRun(method, settings, gradients, preconditioner, schedule,
                       _Batches(n_data, batch_size, rng), adagrad=bool(adagrad),
                       momentum=momentum,
                       coordinate_names=minibatch_model.coordinate_names())  # fmt: skip
    thetas, logp, history = run.run(thetas, n_steps, progressbar)
    elapsed = time.perf_counter() - started
    if fit is not None and fit.is_mode:
        _check_answer(fit, minibatch_model, method, thetas, run)

    stats = xr.Dataset(
        {
            "minibatch_logp": (("chain", "draw"), logp[None]),
            **{name: (("step",), values) for name, values in history.items()},
        },
        coords={"chain": [0], "draw": np.arange(n_particles), "step": np.arange(n_steps)},
    )
    attrs = {
        "sampler": f"pymc_minibatch.sample_particles({method!r})",
        "n_particles": n_particles,
        "n_steps": n_steps,
        "batch_size": batch_size,
        "bandwidth_scale": settings["bandwidth_scale"],
        "kernel": settings["kernel"],
        "precondition": int(precondition),
        "control_variates": int(use_control_variates),
        "adagrad": int(bool(adagrad)),
        "momentum": momentum,
        "sampling_time": elapsed,
    }
    if method in ("wsgld", "pisgld"):
        attrs["wasserstein_weight"] = settings["wasserstein_weight"]
    return draws_to_result(minibatch_model, thetas, sample_stats=stats, attrs=attrs)


def _check_answer(fit, minibatch_model, method, thetas, run):
    """Warn when the particles are far from the posterior by Stein's identities (see
    :mod:`pymc_minibatch.answer_check`; too narrow only for SVGD), with their gradients
    averaged over fresh batches (an unbiased estimate; see :func:`_check_batch_count`)."""
    count = _check_batch_count(minibatch_model, run.batches.batch_size)
    grads = sum(run.gradients(thetas, run.batches.next())[1] for _ in range(count))
    narrowing = method in DOCUMENTED_SD_RATIO  # their narrowed spread is documented
    check = SteinCheck(
        fit, minibatch_model.coordinate_names(), f"sample_particles({method!r})",
        "Pass more n_particles, a smaller step_size or a larger batch_size; or sample "
        "exactly with pmm.TunaMH.",
        spread_range=(0.0, stein_check.SPREAD_LIMIT) if narrowing else None,
    )  # fmt: skip
    message = check.check_all(thetas, grads / count, "(the particles)")
    if message is not None:
        warnings.warn(message, AnswerCheckWarning, stacklevel=4)


class _ParticleRun:
    """The particle loop in preconditioned coordinates ``z`` (``theta = z L^T`` row-wise)."""

    def __init__(self, method, settings, gradients, preconditioner, schedule, batches,
                 adagrad, momentum, coordinate_names):  # fmt: skip
        self.method = method
        self.gradients = gradients
        self.coordinate_names = coordinate_names
        self.schedule = schedule
        self.batches = batches
        self.adagrad = adagrad
        self.momentum = momentum
        self.bandwidth_scale = settings["bandwidth_scale"]
        self.coordinate_kernel = settings["kernel"] == "coordinates"
        self.wasserstein_weight = settings["wasserstein_weight"]
        self.entropic_reg = settings["entropic_reg"]
        self.preconditioner = preconditioner
        self.preconditioned = not isinstance(preconditioner, DiagonalPreconditioner)

    def run(self, thetas, n_steps, progressbar):
        """Move the particles ``n_steps`` times; returns the final particles in ``theta``
        space, their last minibatch log posteriors and the per-step history."""
        to_theta = self.preconditioner.to_theta
        z = self.preconditioner.to_z(thetas)
        anchor, previous, squares = z.copy(), z.copy(), None
        carried = np.zeros_like(z)  # the heavy ball's momentum
        momentum_steps = int(MOMENTUM_FRACTION * n_steps) if self.momentum else 0
        history = {name: np.empty(n_steps) for name in ("step_size", "bandwidth",
                   "mean_grad_norm", "mean_velocity_norm", "spread")}  # fmt: skip
        drifts, rates = np.empty((n_steps, z.shape[1])), np.empty(n_steps)
        with _progress(progressbar, n_steps, self.method) as advance:
            for step in range(n_steps):
                step_size = float(self.schedule(step))
                logp, grads = self.gradients(to_theta(z), self.batches.next())
                self._check_finite(step, step_size, logp, grads)
                grads_z = self.preconditioner.gradient_to_z(grads)
                if not self.coordinate_kernel:
                    bandwidth = self.bandwidth_scale * kernels.median_bandwidth(
                        kernels.squared_distances(z, z)
                    )
                elif step % COORDINATE_BANDWIDTH_EVERY == 0:
                    bandwidth = self.bandwidth_scale * kernels.coordinate_bandwidths(z)
                lam = bandwidth if self.entropic_reg is None else self.entropic_reg
                velocity = self._velocity(z, previous, grads_z, bandwidth, lam)
                if self.adagrad:
                    squares = velocity**2 if squares is None else (
                        ADAGRAD_DECAY * squares + (1 - ADAGRAD_DECAY) * velocity**2
                    )  # fmt: skip
                    velocity = velocity / (ADAGRAD_FUDGE + np.sqrt(squares))
                move = velocity
                if step < momentum_steps:
                    carried = self.momentum * carried + velocity
                    move = carried
                if self.coordinate_kernel:
                    # the moment-matching part, outside the heavy ball, which would amplify
                    # its pull on a coordinate whose particles are close together
                    linear = kernels.linear_svgd_velocity(z, grads_z)
                    move, velocity = move + linear, velocity + linear
                previous, z = z, z + step_size * move
                self._check_runaway(step, step_size, z, anchor)
                history["step_size"][step] = step_size
                history["bandwidth"][step] = np.median(bandwidth)  # over coordinates
                history["mean_grad_norm"][step] = np.mean(np.linalg.norm(grads, axis=1))
                history["mean_velocity_norm"][step] = np.mean(np.linalg.norm(velocity, axis=1))
                history["spread"][step] = np.sqrt(np.mean(np.var(previous, axis=0)))
                drifts[step], rates[step] = _drift_and_spread_rate(previous, velocity)
                advance()
        self._warn_if_unsettled(drifts, rates, z)
        return to_theta(z), logp, history

    def _warn_if_unsettled(self, drifts, rates, z):
        """Warn when, averaged over the last tenth of the steps, the particles were still
        being pushed: the mean of their velocities beyond ``SETTLED_DRIFT`` (in sds of the
        Laplace approximation when preconditioned, else of the particles) per unit of step,
        or their spread's relative rate of change beyond ``SETTLED_RATE``, in either case by
        more than four standard errors of the per-step values (minibatch noise). Velocities
        are used rather than moves because the default schedule shrinks the moves, which
        would hide a run that stopped far from the posterior."""
        window = max(2, drifts.shape[0] // 10)
        if drifts.shape[0] < window:
            return
        drift, drift_se = _window_mean(drifts[-window:])
        rate, rate_se = _window_mean(rates[-window:])
        scale = np.ones(z.shape[1]) if self.preconditioned else np.std(z, axis=0)
        scale = np.where(scale > 0, scale, np.inf)
        pushed = (np.abs(drift) / scale > SETTLED_DRIFT) & (np.abs(drift) > 4 * drift_se)
        spreading = abs(rate) > SETTLED_RATE and abs(rate) > 4 * rate_se
        if np.any(pushed) or spreading:
            warnings.warn(
                f"sample_particles({self.method!r}) had not settled: over its last {window} "
                f"steps the particles' mean was pushed at {np.max(np.abs(drift) / scale):.3g} "
                f"sds and their spread at {100 * rate:.3g}% per unit of step. The result may "
                "be far from the posterior: pass more n_steps or start from the Laplace "
                "approximation (init='laplace')",
                ParticlesNotSettledWarning,
                stacklevel=5,  # this check, run, sample_particles, its renamed_arguments wrapper
            )

    def _velocity(self, z, previous, grads, bandwidth, lam):
        gamma = self.wasserstein_weight
        if self.coordinate_kernel:
            return kernels.coordinate_svgd_velocity(z, grads, bandwidth)
        if self.method == "svgd":
            return kernels.svgd_velocity(z, grads, bandwidth)
        if self.method == "wsgld_blob":
            return kernels.blob_velocity(z, grads, bandwidth)
        if self.method == "wsgld":
            return kernels.wasserstein_velocity(z, previous, grads, lam, gamma)
        return kernels.pisgld_velocity(z, previous, grads, bandwidth, lam, gamma)

    def _check_finite(self, step, step_size, logp, grads):
        bad = ~(np.isfinite(logp) & np.all(np.isfinite(grads), axis=1))
        if bad.any():
            raise SamplerDivergenceError(
                f"sample_particles({self.method!r}) diverged at step {step}: the log density "
                f"or its gradient is not finite at {int(bad.sum())} of {len(bad)} particles "
                f"(step size {step_size:g}). Pass a smaller step_size (e.g. "
                f"{step_size / 10:g}) or a larger batch_size, or start elsewhere (init)."
            )

    def _check_runaway(self, step, step_size, z, anchor):
        distance = float(np.max(np.abs(z - anchor)))
        if not distance <= RUNAWAY_DISTANCE:
            # name the parameter that moved furthest, in its own (preconditioned) sds
            scale = np.sqrt(self.preconditioner.covariance_diagonal())
            moves = np.max(np.abs(self.preconditioner.to_theta(z - anchor)), axis=0) / scale
            worst = int(np.argmax(np.where(np.isnan(moves), np.inf, moves)))
            raise SamplerDivergenceError(
                f"sample_particles({self.method!r}) diverged at step {step}: particles moved "
                f"{distance:.3g} preconditioned units from their start, the furthest in "
                f"'{self.coordinate_names[worst]}' ({moves[worst]:.3g} of its sds), with step "
                f"size {step_size:g}. Pass a smaller step_size (e.g. {step_size / 10:g}) or a "
                "larger batch_size."
            )


def _drift_and_spread_rate(z, velocity):
    """The particles' mean velocity and the relative rate at which their spread changes,
    ``d log(rms distance to their mean) / dt``."""
    centred, centred_velocity = z - z.mean(axis=0), velocity - velocity.mean(axis=0)
    spread = np.sum(centred**2)
    rate = np.sum(centred * centred_velocity) / spread if spread > 0 else 0.0
    return velocity.mean(axis=0), rate


def _window_mean(values):
    """Mean over the first axis and its naive standard error."""
    return values.mean(axis=0), values.std(axis=0) / np.sqrt(values.shape[0])


def _check_batch_count(minibatch_model, batch_size):
    """Batches for the answer check: ``CHECK_BATCHES``, or in a hierarchical model enough
    for ``CHECK_ROWS_PER_GROUP`` rows per group on average (one when a batch holds every
    row)."""
    if batch_size == minibatch_model.n_data:
        return 1
    n_groups = minibatch_model.structure().n_groups  # found by the Laplace fit
    return max(CHECK_BATCHES, -(-CHECK_ROWS_PER_GROUP * n_groups // batch_size))


class _Batches:
    """Row batches of a fixed size from epochs without replacement (all rows: no shuffling)."""

    def __init__(self, n_data, batch_size, rng):
        self.n_data, self.batch_size, self.rng = n_data, batch_size, rng
        self.permutation, self.cursor = None, 0

    def next(self):
        if self.batch_size == self.n_data:
            return np.arange(self.n_data)
        rows, self.permutation, self.cursor = next_epoch_batch(
            self.rng, self.n_data, self.batch_size, self.permutation, self.cursor
        )
        return rows


class _DefaultSchedule:
    """``initial`` for the first half of the steps, then geometric decay to ``final``."""

    def __init__(self, n_steps, initial, final):
        self.half, self.initial = n_steps // 2, initial
        self.rate = (final / initial) ** (1.0 / max(n_steps - 1 - self.half, 1))

    def __call__(self, step):
        return self.initial * self.rate ** max(step - self.half, 0)


def _default_schedule(n_steps, noise_ratio):
    final = DEFAULT_STEP_SIZE if noise_ratio <= 0 else min(DEFAULT_STEP_SIZE,
                                                            NOISE_BUDGET / noise_ratio)  # fmt: skip
    return _DefaultSchedule(n_steps, DEFAULT_STEP_SIZE, final)


def _validate(method, n_particles, n_steps, bandwidth_scale, wasserstein_weight, entropic_reg):
    """Checked settings, with the method's defaults for those not given."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    for name, value, least in (("n_particles", n_particles, 2), ("n_steps", n_steps, 1)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
            raise ValueError(f"{name} must be an integer of at least {least}, got {value!r}")
    weight = wasserstein_weight
    if weight is None:  # w-SGLD's sum over M previous particles, scaled as SVGD's mean
        weight = 1.0 / n_particles if method == "wsgld" else 0.0
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


def _momentum(momentum, method, minibatch_model=None, fit=None):
    """The heavy ball's ``beta``: ``momentum`` checked, or the default of ``"auto"`` (0
    without a Laplace fit, which finds the model's groups)."""
    if isinstance(momentum, str) and momentum == "auto":
        hierarchical = fit is not None and minibatch_model.structure().n_groups > 0
        return GROUP_MOMENTUM if method == "svgd" and hierarchical else 0.0
    if isinstance(momentum, bool) or not (
        isinstance(momentum, int | float | np.number) and 0 <= momentum < 1
    ):
        raise ValueError(f"momentum must be 'auto' or a number in [0, 1), got {momentum!r}")
    return float(momentum)


def _kernel(kernel, method, n_particles, ndim):
    """The kernel SVGD uses (``"joint"`` for the other methods)."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if method != "svgd":
        if kernel == "coordinates":
            raise ValueError(f"kernel='coordinates' is SVGD's; {method!r} uses the joint kernel")
        return "joint"
    if kernel == "auto":
        return "coordinates" if ndim > n_particles else "joint"
    return kernel


def _check_positive(name, value):
    if value is not None and not (
        isinstance(value, int | float | np.number) and np.isfinite(value) and value > 0
    ):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def _batch_size(batch_size, n_data):
    return (
        min(n_data, DEFAULT_BATCH_SIZE)
        if batch_size is None
        else checked_batch_size(batch_size, n_data)
    )


def _initial_particles(init, minibatch_model, n_particles, rng, centring):
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


@contextmanager
def _progress(enabled, total, method):
    if not enabled:
        yield lambda: None
        return
    from rich.progress import Progress

    with Progress(transient=True) as progress:
        task = progress.add_task(f"{method}: particle steps", total=total)
        yield lambda: progress.advance(task)
