"""A diagonal Gaussian approximation of the posterior, for models too large for the exact one.

The exact Laplace fit (:mod:`pymc_minibatch.model.laplace`) takes one Hessian-vector product
per coordinate that every row touches, and keeps a dense block of their squared number: a
network of 10^5 weights is out of its reach. Past
:data:`~pymc_minibatch.model.curvature.MAX_SHARED` such coordinates
the samplers that start from the fit and are preconditioned by it (the stochastic-gradient
presets, MINT and CMINT, the particle methods) get this one instead, at the cost of a few
epochs of minibatch gradients and ``O(d)`` memory:

1. **A center** by Adam (Kingma & Ba 2015, "Adam: a method for stochastic optimization",
   ICLR) on minibatch estimates of the log posterior: :data:`EPOCHS` epochs of
   :data:`BATCH_SIZE` rows (at least :data:`MIN_UPDATES` and at most :data:`MAX_UPDATES`
   updates), step size :data:`LEARNING_RATE` decaying linearly to a tenth of it, from the
   model's initial point plus Gaussian jitter of sd :data:`JITTER` (a network's all-zero
   start is a saddle whose symmetry no gradient breaks). In a non-convex model this is a
   local mode, and not certified as one: :attr:`DiagonalFit.is_mode` is False.
2. **A diagonal precision** there: the prior's Hessian diagonal from Hutchinson's
   estimator ``E[v * (H v)]`` with Rademacher ``v`` (exact after one probe for a prior
   whose Hessian is diagonal, as independent priors on the weights), plus the likelihood's
   empirical Fisher diagonal ``F_jj = sum_i (d l_i / d theta_j)^2`` from the spread of
   :data:`FISHER_BATCHES` minibatch gradients: for ``B`` of ``N`` rows drawn without
   replacement, the variance of ``(N / B) sum_(i in S) d l_i / d theta_j`` is
   ``N^2 (N - B) / (B (N - 1)) sigma_j^2``, with ``sigma_j^2`` the rows' variance, about
   ``F_jj / N`` where the rows' mean gradient is small (at a mode). No per-row gradient is
   ever formed: each batch is one backward pass of the summed log-likelihood.

3. **The stiffest direction**: a diagonal misses the correlations between weights, and the
   whitened curvature ``S H S`` (``S = precision^(-1/2)``, ``H`` minus the Hessian of the
   log posterior) can have eigenvalues far above 1. Its largest in absolute value,
   ``lambda``, by :data:`POWER_ITERATIONS` steps of power iteration with Hessian-vector
   products on :data:`STIFFNESS_ROWS` rows (scaled to all rows), multiplies the precision
   where it exceeds 1, so that the samplers' step-size rules, stated for unit curvature,
   hold in the stiffest direction. On the digits network of
   ``benchmarks/networks_digits.py`` (which records it) ``lambda`` is about a thousand:
   SGLD's Euler step ``h`` is stable along a direction of curvature ``lambda`` only while
   ``h lambda < 4``, and its default ``h`` there is above 0.01.

The preconditioner is ``theta = scale * z`` with ``scale = precision^(-1/2)`` (a diagonal
mass matrix, the Laplace fit's ``L`` restricted to its diagonal), fixed for the whole run:
unlike the running average of preconditioned SGLD (Li, Chen, Carlson & Carin 2016,
"Preconditioned stochastic gradient Langevin dynamics for deep neural networks", AAAI),
which adds a bias when its ``Gamma`` term is dropped, a fixed mass matrix leaves the
target unchanged.
"""

import time
from typing import NamedTuple

import numpy as np

from pymc_minibatch.kernels.preconditioning import DiagonalPreconditioner
from pymc_minibatch.model.curvature import (
    MAX_SHARED,
    block_hessian_product,
    prior_hessian_product,
)
from pymc_minibatch.model.structure import ParameterStructure

#: Epochs of Adam toward the center...
EPOCHS = 5
#: ...but at least this many updates (more epochs on small data)...
MIN_UPDATES = 1000
#: ...and at most this many (fewer epochs on tall data).
MAX_UPDATES = 5000
#: Rows per Adam update and per batch of the Fisher estimate.
BATCH_SIZE = 100
#: Adam's initial step size, in the units of ``theta``.
LEARNING_RATE = 1e-2
#: Adam's decay rates of its first and second moments, and its guard.
ADAM_BETAS = (0.9, 0.999)
ADAM_EPSILON = 1e-8
#: Sd of the Gaussian jitter added to the initial point.
JITTER = 0.01
#: Minibatch gradients whose spread gives the Fisher diagonal.
FISHER_BATCHES = 32
#: Rademacher probes of the prior's Hessian diagonal.
PRIOR_PROBES = 4
#: Smallest precision kept, relative to the median one (a coordinate no row informs and
#: whose prior is flat would otherwise get an infinite scale).
MIN_RELATIVE_PRECISION = 1e-8
#: Power iterations for the whitened curvature's largest eigenvalue.
POWER_ITERATIONS = 20
#: Rows (a fixed batch, scaled to all rows) of those Hessian-vector products.
STIFFNESS_ROWS = 1000
#: Fraction of the approximation's sds by which particles start around the center.
PARTICLE_SPREAD = 0.1
#: Seed of the jitter, the batches and the probes when no generator is given.
SEED = 20261207


class DiagonalFit(NamedTuple):
    """A center found by Adam and a diagonal precision there (see the module docstring).

    It stands where a :class:`~pymc_minibatch.model.laplace.LaplaceFit` does for the samplers
    that only start from the fit and precondition with it."""

    mode: np.ndarray
    """The center: where Adam ended (a local mode at best)."""
    preconditioner: DiagonalPreconditioner
    """``theta - mode = scale * z``."""
    structure: ParameterStructure
    """Which parameters each row touches."""
    stiffness: float
    """The largest eigenvalue (in absolute value) of the curvature whitened by the diagonal
    before it was scaled by it (see the module docstring)."""
    updates: int
    """Adam updates made."""
    passes: int
    """Full-data passes spent (none: every estimate is a minibatch)."""
    seconds: float

    is_mode = False
    """Adam's end point is not certified as a mode (a minibatch optimiser stops near one)."""
    repaired = False
    exact = False
    """Not the exact curvature: samplers that need it (TunaMH's control variates, its
    Laplace-reversible proposal) refuse this fit."""

    def draw(self, rng, size=None):
        """Draws from ``N(mode, diag(scale^2))``, shape ``size + (d,)``."""
        shape = (self.mode.size,) if size is None else (size, self.mode.size)
        return self.mode + self.preconditioner.to_theta(rng.standard_normal(shape))

    def start(self, rng):
        """Where a chain starts: the center. A draw of the diagonal approximation ignores the
        correlations between a network's weights and lands far outside the posterior, where
        the network predicts far worse than at the center."""
        return self.mode.copy()

    def bulk_draws(self, rng, size):
        """``size`` points near the center, where particles start and the gradient noise is
        measured: draws of the approximation shrunk by :data:`PARTICLE_SPREAD` (unshrunk,
        they can put a ReLU network's logits beyond floating point; see :meth:`start`)."""
        return self.mode + PARTICLE_SPREAD * self.preconditioner.to_theta(
            rng.standard_normal((size, self.mode.size))
        )

    def covariance_diagonal(self):
        """The variances of the approximation."""
        return self.preconditioner.covariance_diagonal()


def needs_diagonal_fit(structure):
    """Whether the exact curvature is out of reach for ``structure``: more than
    :data:`~pymc_minibatch.model.curvature.MAX_SHARED` coordinates touched by rows of more
    than one group (one Hessian-vector product each per pass, a dense block of their
    square)."""
    return structure.shared.size > MAX_SHARED


def fit_diagonal(minibatch_model, structure, rng=None):
    """The :class:`DiagonalFit` of ``minibatch_model``'s posterior.

    Parameters
    ----------
    minibatch_model : MinibatchModel
    structure : ParameterStructure
    rng : numpy.random.Generator, optional
        Draws the jitter, the batches and the probes (default: one seeded with
        :data:`SEED`, so that the fit is a function of the model).

    Returns
    -------
    DiagonalFit

    Raises
    ------
    ValueError
        If the model has fewer than two rows, or if the log posterior's estimate is not
        finite anywhere on Adam's path.
    """
    mm = minibatch_model
    started = time.perf_counter()
    rng = np.random.default_rng(SEED) if rng is None else rng
    if mm.n_data < 2:
        raise ValueError("the diagonal fit needs at least two rows")
    batch_size = min(BATCH_SIZE, mm.n_data // 2)
    start = mm.initial_theta() + JITTER * rng.standard_normal(mm.ndim)
    center, updates = adam_center(mm, start, batch_size, rng)
    precision = prior_precision(mm, center, rng) + fisher_diagonal(mm, center, batch_size, rng)
    positive = precision[precision > 0]
    floor = MIN_RELATIVE_PRECISION * (np.median(positive) if positive.size else 1.0)
    precision = np.maximum(precision, floor)
    stiffness = whitened_stiffness(mm, center, 1.0 / np.sqrt(precision), rng)
    precision = precision * max(1.0, stiffness)
    return DiagonalFit(
        mode=center,
        preconditioner=DiagonalPreconditioner(1.0 / np.sqrt(precision)),
        structure=structure,
        stiffness=stiffness,
        updates=updates,
        passes=0,
        seconds=time.perf_counter() - started,
    )


def adam_center(minibatch_model, start, batch_size, rng):
    """``(theta, updates)``: Adam's end point from ``start`` on uniform epochs of
    ``batch_size`` rows (see the module docstring)."""
    mm = minibatch_model
    per_epoch = mm.n_data // batch_size
    total = int(np.clip(EPOCHS * per_epoch, MIN_UPDATES, MAX_UPDATES))
    theta = np.array(start, dtype=np.float64)
    first, second = np.zeros_like(theta), np.zeros_like(theta)
    beta1, beta2 = ADAM_BETAS
    permutation = rng.permutation(mm.n_data)
    for t in range(total):
        slot = t % per_epoch
        if slot == 0 and t:
            permutation = rng.permutation(mm.n_data)
        idx = permutation[slot * batch_size : (slot + 1) * batch_size]
        value, gradient = mm.grad_estimate(theta, idx)
        if not (np.isfinite(value) and np.all(np.isfinite(gradient))):
            where = "where it starts" if t == 0 else f"after {t} updates"
            raise ValueError(
                f"the diagonal fit's Adam search met a non-finite log posterior {where}: give "
                "initial values inside the support (initval=...), or a step_size and "
                "precondition=False to sample without the fit"
            )
        first = beta1 * first + (1 - beta1) * gradient
        second = beta2 * second + (1 - beta2) * gradient**2
        rate = LEARNING_RATE * (1.0 - 0.9 * t / total)
        corrected = first / (1 - beta1 ** (t + 1))
        theta = theta + rate * corrected / (np.sqrt(second / (1 - beta2 ** (t + 1))) + ADAM_EPSILON)
    return theta, total


def prior_precision(minibatch_model, theta, rng):
    """Minus the log prior's Hessian diagonal at ``theta``, by Hutchinson's estimator with
    :data:`PRIOR_PROBES` Rademacher probes (exact for a diagonal Hessian)."""
    mm = minibatch_model
    prior = mm.prior_function("prior_hessian_product", prior_hessian_product)
    total = np.zeros(mm.ndim)
    for _ in range(PRIOR_PROBES):
        probe = rng.choice([-1.0, 1.0], size=mm.ndim)
        total -= probe * prior(theta, probe)[2]
    return total / PRIOR_PROBES


def whitened_stiffness(minibatch_model, theta, scale, rng):
    """The largest eigenvalue in absolute value of ``-S H S`` at ``theta`` (``S =
    diag(scale)``, ``H`` the log posterior's Hessian estimated on :data:`STIFFNESS_ROWS`
    rows) by :data:`POWER_ITERATIONS` steps of power iteration from a random direction."""
    mm = minibatch_model
    idx = rng.choice(mm.n_data, size=min(STIFFNESS_ROWS, mm.n_data), replace=False)
    rows, weight = mm.gather_rows(idx), mm.n_data / idx.size
    likelihood = mm.graph_function("block_hessian_product", block_hessian_product)
    prior = mm.prior_function("prior_hessian_product", prior_hessian_product)

    def whitened_product(direction):
        theta_direction = scale * direction
        product = weight * likelihood(theta, theta_direction, *rows)[2]
        return -scale * (product + prior(theta, theta_direction)[2])

    direction = rng.standard_normal(mm.ndim)
    eigenvalue = 0.0
    for _ in range(POWER_ITERATIONS):
        direction /= np.linalg.norm(direction)
        image = whitened_product(direction)
        eigenvalue = abs(float(direction @ image))
        if not np.all(np.isfinite(image)) or not np.any(image):
            break
        direction = image
    return eigenvalue if np.isfinite(eigenvalue) else 1.0


def fisher_diagonal(minibatch_model, theta, batch_size, rng):
    """The likelihood's empirical Fisher diagonal at ``theta`` from the spread of
    :data:`FISHER_BATCHES` minibatch gradient estimates (see the module docstring)."""
    mm = minibatch_model
    n = mm.n_data
    gradients = np.empty((FISHER_BATCHES, mm.ndim))
    for b in range(FISHER_BATCHES):
        idx = rng.choice(n, size=batch_size, replace=False)
        gradients[b] = mm.grad_estimate(theta, idx)[1]
    variance = gradients.var(axis=0, ddof=1)
    return variance * batch_size * (n - 1) / (n * (n - batch_size))
