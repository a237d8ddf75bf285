"""``sample_particles``: SVGD, w-SGLD, w-SGLD-B and pi-SGLD on a PyMC model.

The particle methods of Chen, Zhang, Wang, Li & Chen (2018), "A unified particle-optimization
framework for scalable Bayesian sampling", UAI, with minibatch gradients. They move all
particles together, so they run outside ``pm.sample``; the result is nevertheless
``pm.sample``'s result type with the particles as the draws of one chain.

This module settles the run (the model adapter, the Laplace fit, the preconditioner and the
defaults of :mod:`pymc_minibatch.particle_settings`), steps the pure kernel
:mod:`pymc_minibatch.kernels.particles` and collects its reports into the result.
"""

import functools
import time
from contextlib import contextmanager

import numpy as np
import pymc as pm
import xarray as xr
from pymc.vartypes import continuous_types

from pymc_minibatch._deprecation import renamed_arguments
from pymc_minibatch.exceptions import SamplerDivergenceError
from pymc_minibatch.kernels import particles as particle_kernel
from pymc_minibatch.kernels import sg_chain
from pymc_minibatch.kernels.preconditioning import (
    DiagonalPreconditioner,
    identity_preconditioner,
)
from pymc_minibatch.kernels.schedules import as_schedule
from pymc_minibatch.model import control_variates as cv
from pymc_minibatch.model.adapter import MinibatchModel
from pymc_minibatch.model.batch_layout import checked_stratify, chosen_strata
from pymc_minibatch.model.gradients import grad_estimator
from pymc_minibatch.model.recentring import recentring
from pymc_minibatch.particle_settings import (
    CHECK_BATCHES,
    CHECK_ROWS_PER_GROUP,
    DEFAULT_BANDWIDTH_SCALE,
    DEFAULT_BATCH_SIZE,
    DEFAULT_PARTICLES,
    DEFAULT_STEP_SIZE,
    DOCUMENTED_SD_RATIO,
    GROUP_MOMENTUM,
    GROUP_PARTICLES,
    KERNELS,
    MANY_GROUPS,
    MEASURED_SD_RATIO,
    MOMENTUM_FRACTION,
    MOMENTUM_NOISE_LIMIT,
    NOISE_BUDGET,
    SETTLED_DRIFT,
    SETTLED_RATE,
    ParticlesNotSettledWarning,
    checked_settings,
    chosen_batch_size,
    chosen_kernel,
    default_schedule,
    initial_particles,
    momentum_beta,
    particle_count,
    settled_window,
    warn_if_far,
    warn_if_unsettled,
    wasserstein_weight_default,
)
from pymc_minibatch.particle_settings import check_batch_count as _check_batch_count
from pymc_minibatch.results import draws_to_result

METHODS = particle_kernel.METHODS
COORDINATE_BANDWIDTH_EVERY = particle_kernel.COORDINATE_BANDWIDTH_EVERY
ADAGRAD_DECAY, ADAGRAD_FUDGE = particle_kernel.ADAGRAD_DECAY, particle_kernel.ADAGRAD_FUDGE
RUNAWAY_DISTANCE = sg_chain.RUNAWAY_DISTANCE

__all__ = [
    "ADAGRAD_DECAY",
    "ADAGRAD_FUDGE",
    "CHECK_BATCHES",
    "CHECK_ROWS_PER_GROUP",
    "COORDINATE_BANDWIDTH_EVERY",
    "DEFAULT_BANDWIDTH_SCALE",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_PARTICLES",
    "DEFAULT_STEP_SIZE",
    "DOCUMENTED_SD_RATIO",
    "GROUP_MOMENTUM",
    "GROUP_PARTICLES",
    "KERNELS",
    "MANY_GROUPS",
    "MEASURED_SD_RATIO",
    "METHODS",
    "MOMENTUM_FRACTION",
    "MOMENTUM_NOISE_LIMIT",
    "NOISE_BUDGET",
    "RUNAWAY_DISTANCE",
    "SETTLED_DRIFT",
    "SETTLED_RATE",
    "ParticlesNotSettledWarning",
    "sample_particles",
]

HISTORY = ("step_size", "bandwidth", "mean_grad_norm", "mean_velocity_norm", "spread")
"""The per-step reports of the kernel kept in ``sample_stats`` over ``step``."""


@renamed_arguments(gamma="wasserstein_weight", lam="entropic_reg")
def sample_particles(
    method="svgd",
    *,
    n_particles="auto",
    n_steps=1000,
    batch_size=None,
    stratify="auto",
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
    replacement, or stratified by group: see ``stratify``), estimates ``g_i = grad log
    p(theta_i)`` at each particle with the rows' log-likelihood scaled by ``N /
    batch_size`` (or the stratified weights; with control variates by default, see
    ``control_variates``), and moves every particle by ``step_size * v_i`` (Chen et al.
    2018; see :mod:`pymc_minibatch.kernels.particle_velocities`):

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
    n_particles : int or "auto", default "auto"
        Number of particles ``M`` (at least 2). Each step costs ``M`` gradient calls on
        ``batch_size`` rows plus ``O(M^2 d)`` for the interactions. ``"auto"``:
        ``BIG_MODEL_PARTICLES`` (20) on a model too big for the exact Laplace fit (a
        network: see :mod:`pymc_minibatch.model.diagonal_fit`), else
        ``DEFAULT_PARTICLES`` (100), and for SVGD on a hierarchical model of at least
        ``MANY_GROUPS`` (500) groups ``GROUP_PARTICLES`` (200), where 100 particles leave a
        group scale low by more than 0.1 posterior sd (measured in ``GROUP_PARTICLES``).
        100 rather than 200 elsewhere: on the problem of ``MEASURED_SD_RATIO`` (whose figures
        are at 100) 200 particles take about twice as long and widen the sds by only 0.013
        (SVGD) to 0.027 (w-SGLD-B, pi-SGLD) of the posterior's. With many groups the kernel
        per coordinate (see ``kernel``) dominates the cost, which grows as ``M^2``.
    n_steps : int, default 1000
    batch_size : int, optional
        Rows per step (at most, with stratified batches); default ``min(N, 1000)``, and
        ``min(N, 100)`` on a model too big for the exact Laplace fit.
    stratify : {"auto", True, False}, default "auto"
        Batches stratified by group in a hierarchical model (rows that touch the parameters
        of one group each, as the Laplace fit finds them): every group of at most ``m``
        rows in each batch whole, ``m`` rows drawn from each larger group and weighted by
        its size over ``m``, with ``m`` the most that ``batch_size`` allows (see
        :mod:`pymc_minibatch.kernels.strata`). A uniform batch holds no row of most small
        groups, whose effects then get rare, large gradient kicks. ``"auto"``: stratified
        when the model has groups, ``batch_size`` is less than ``N`` and holds a row of
        each non-empty group, and the Laplace fit is made; ``True`` refuses a model or
        ``batch_size`` where it does not apply; ``False``: epochs of uniform batches.
    step_size : float or schedule, optional
        A positive float or a schedule from :mod:`pymc_minibatch.schedules`, in
        preconditioned units when ``precondition=True``. Default: on a model too big for
        the exact Laplace fit, ``0.2 / (1 + r)`` throughout (SGLD's rule; ``r = N /
        batch_size - 1``); else 0.05, constant with control variates or all rows;
        without control variates 0.05 for the first half of the steps, then a geometric
        decay to ``min(0.05, 0.005 / r)`` with
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
        per coordinate (see
        :func:`~pymc_minibatch.kernels.particle_velocities.coordinate_svgd_velocity`), whose
        repulsion does not fade with the dimension. ``"auto"``: ``"coordinates"``
        when the model has more coordinates than ``n_particles``, where the joint kernel's
        particles collapse towards the mode, else ``"joint"``; but ``"joint"`` on a model
        too big for the exact Laplace fit (a network), whose diagonal fit does not make the
        coordinates independent, as the kernel per coordinate needs, and where that
        kernel's ``M^2 d`` exponentials cost more than the gradients (``BIG_MODEL_KERNEL``).
        On the hierarchical models of ``benchmarks/hierarchical.py``
        (``benchmarks/results/hierarchical_N1e5_G*.json``) the joint kernel's sds came out
        0.64-0.89 of nutpie's with 106 parameters and 0.50-0.87 with 1006 (a mean 4.2 sds
        off); the coordinate kernel's 0.91-1.03 and 0.87-1.10, with means within 0.09 sd
        and 0.82 sd (the group scale, which plain steps carry up from the Laplace start too
        slowly: see ``momentum``). The kernel
        per coordinate has a linear part that restores the particles' variance in each
        coordinate
        (:func:`~pymc_minibatch.kernels.particle_velocities.linear_svgd_velocity`, applied
        outside the momentum), and on a hierarchical model matches the covariances within
        each group (a group's intercept and slope) and has a part that lets the groups'
        spread follow the shared coordinates, as a group scale's posterior needs
        (:func:`~pymc_minibatch.kernels.particle_velocities.group_spread_velocity`).
        ``tests/statistical/test_hierarchical.py`` holds it, with its default momentum, to
        NUTS with 106, 207 and 1006 parameters. The other methods use the joint kernel.
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
        whose group scale relaxes slowly from the Laplace start, if each batch holds at
        least one row in 101 (``MOMENTUM_NOISE_LIMIT``: with noisier gradients the heavy
        ball carried the particles away on 10^6 rows), else 0 (also when no fit is made:
        ``precondition=False``, another ``init`` and no control variates).
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
        on unless every step uses all rows or the model is too big for the exact Laplace
        fit (its center is then a local mode found by Adam, see
        :func:`~pymc_minibatch.model.control_variates.use_control_variates`).
    init : {"laplace", "prior", "jitter"} or array, default "laplace"
        ``"laplace"``: draws from the Laplace approximation at the mode (the normal with
        the curvature used for preconditioning), which start the particles in the bulk
        of the posterior (on a model too big for it, around the diagonal fit's center:
        :meth:`~pymc_minibatch.model.diagonal_fit.DiagonalFit.bulk_draws`);
        ``"prior"``: independent prior draws, which let particles find separate modes of a
        multimodal posterior (but start far out for tall data);
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
    settings = checked_settings(
        method, n_particles, n_steps, bandwidth_scale, wasserstein_weight, entropic_reg
    )
    momentum_beta(momentum, method)  # refuse a bad value before the Laplace fit
    checked_stratify(stratify)
    discrete = sorted(v.name for v in model.value_vars if v.dtype not in continuous_types)
    if discrete:
        raise ValueError(
            f"particle methods move continuous variables only; the model has discrete free "
            f"variables {discrete}"
        )
    centring = recentring(model)  # non-centred group effects move centred, as in pm.sample
    minibatch_model = MinibatchModel(model if centring is None else centring.model, data=data,
                                     progressbar=progressbar)  # fmt: skip
    n_particles = particle_count(n_particles, method, minibatch_model)
    settings["kernel"] = chosen_kernel(kernel, method, n_particles, minibatch_model)
    if bandwidth_scale is None and settings["kernel"] == "coordinates":
        settings["bandwidth_scale"] = 1.0
    n_data = minibatch_model.n_data
    batch_size = chosen_batch_size(batch_size, minibatch_model)
    if wasserstein_weight is None:
        settings["wasserstein_weight"] = wasserstein_weight_default(method, n_particles)
    rng = np.random.default_rng(random_seed)
    laplace = isinstance(init, str) and init == "laplace"
    exact_fit = minibatch_model.laplace_is_exact()  # else the diagonal fit of big models
    use_control_variates = cv.use_control_variates(
        control_variates, batch_size, n_data, lambda: exact_fit
    )
    started = time.perf_counter()
    fit = minibatch_model.laplace() if (precondition or laplace or use_control_variates) else None
    thetas = (
        fit.bulk_draws(rng, n_particles)
        if laplace
        else initial_particles(init, minibatch_model, n_particles, rng, centring)
    )
    noise_ratio = 0.0 if use_control_variates else n_data / batch_size - 1.0
    estimate = grad_estimator(minibatch_model, fit.mode if use_control_variates else None,
                              particles=True,
                              vectorised=exact_fit)  # fmt: skip
    preconditioner = (
        fit.preconditioner if precondition else identity_preconditioner(minibatch_model.ndim)
    )
    strata = (
        chosen_strata(stratify, minibatch_model, batch_size, fit is not None)
        if batch_size < n_data or stratify is True
        else None
    )
    if strata is not None:  # the layout's weights are fixed: the kernel passes rows only
        estimate = functools.partial(estimate, weights=strata.weights)
    beta = momentum_beta(momentum, method, minibatch_model, fit, batch_size)  # checked above
    run = particle_kernel.ParticleSettings(
        method, settings["kernel"], settings["bandwidth_scale"],
        default_schedule(n_steps, noise_ratio, exact_fit)
        if step_size is None
        else as_schedule(step_size),
        preconditioner, n_data, batch_size, wasserstein_weight=settings["wasserstein_weight"],
        entropic_reg=settings["entropic_reg"], adagrad=bool(adagrad), momentum=beta,
        momentum_steps=int(MOMENTUM_FRACTION * n_steps) if beta else 0,
        groups=_groups(preconditioner) if settings["kernel"] == "coordinates" else None,
        strata=strata,
    )  # fmt: skip
    state, logp, history, drifts, rates = _run(
        rng, particle_kernel.init(thetas, preconditioner), estimate, run, n_steps, progressbar,
        minibatch_model.coordinate_names(),
    )  # fmt: skip
    warn_if_unsettled(method, drifts, rates, state.position,
                      not isinstance(preconditioner, DiagonalPreconditioner))  # fmt: skip
    thetas = preconditioner.to_theta(state.position)
    elapsed = time.perf_counter() - started
    if fit is not None and fit.is_mode:
        # the particles' scores averaged over fresh batches (an unbiased estimate)
        count, scores = _check_batch_count(minibatch_model, batch_size), 0
        for _ in range(count):
            idx, state = particle_kernel.next_idx(rng, state, run)
            scores = scores + estimate(thetas, idx)[1]
        warn_if_far(fit, minibatch_model, method, thetas, scores / count)

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
        "stratified": int(strata is not None),
        "bandwidth_scale": settings["bandwidth_scale"],
        "kernel": settings["kernel"],
        "precondition": int(precondition),
        "control_variates": int(use_control_variates),
        "adagrad": int(bool(adagrad)),
        "momentum": beta,
        "sampling_time": elapsed,
    }
    if method in ("wsgld", "pisgld"):
        attrs["wasserstein_weight"] = settings["wasserstein_weight"]
    return draws_to_result(minibatch_model, thetas, sample_stats=stats, attrs=attrs)


def _groups(preconditioner):
    """``(shared, local)`` coordinates of a preconditioner that whitens a hierarchical
    model's curvature group by group (an arrowhead factor with groups; ``local`` of shape
    ``(G, k)``, a group's coordinates in a row), else ``None``."""
    local = getattr(preconditioner, "local", None)
    if local is None or not np.size(local):
        return None
    return np.asarray(preconditioner.shared), np.asarray(local)


def _run(rng, state, estimate, settings, n_steps, progressbar, coordinate_names):
    """``n_steps`` steps of the kernel: the final state, the last step's minibatch log
    densities, the ``HISTORY`` per step and the drifts and spread rates (for
    :func:`~pymc_minibatch.particle_settings.warn_if_unsettled`)."""
    history = {name: np.empty(n_steps) for name in HISTORY}
    # the drifts of the last steps only: (n_steps, d) would take gigabytes for a network
    window = settled_window(n_steps)
    drifts, rates = np.empty((window, state.position.shape[1])), np.empty(n_steps)
    with _progress(progressbar, n_steps, settings.method) as advance:
        for index in range(n_steps):
            state, info = particle_kernel.step(rng, state, estimate, settings)
            if info.divergence is not None:
                raise _divergence_error(settings.method, index, info, coordinate_names)
            for name in HISTORY:
                history[name][index] = getattr(info, name)
            rates[index] = info.spread_rate
            if index >= n_steps - window:
                drifts[index - n_steps + window] = info.drift
            advance()
    return state, info.log_density, history, drifts, rates


def _divergence_error(method, index, info, coordinate_names):
    """The error for a step whose ``info`` reports a divergence: it names the step and what
    to change."""
    divergence, step_size = info.divergence, info.step_size
    if divergence.reason == "non-finite":
        return SamplerDivergenceError(
            f"sample_particles({method!r}) diverged at step {index}: the log density or its "
            f"gradient is not finite at {divergence.particles} of {len(info.log_density)} "
            f"particles (step size {step_size:g}). Pass a smaller step_size (e.g. "
            f"{step_size / 10:g}) or a larger batch_size, or start elsewhere (init)."
        )
    return SamplerDivergenceError(
        f"sample_particles({method!r}) diverged at step {index}: particles moved "
        f"{divergence.distance:.3g} preconditioned units from their start, the furthest in "
        f"'{coordinate_names[divergence.coordinate]}' ({divergence.sds:.3g} of its sds), with "
        f"step size {step_size:g}. Pass a smaller step_size (e.g. {step_size / 10:g}) or a "
        "larger batch_size."
    )


@contextmanager
def _progress(enabled, total, method):
    if not enabled:
        yield lambda: None
        return
    from rich.progress import Progress

    with Progress(transient=True) as progress:
        task = progress.add_task(f"{method}: particle steps", total=total)
        yield lambda: progress.advance(task)
