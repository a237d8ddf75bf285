"""The zoo's small Bayesian neural network, judged by its posterior predictive.

``network_classifier`` is a 2-3-1 tanh network on ``N_ROWS`` binary labels drawn from a
network of the same shape. Its weights' posterior is multimodal: every permutation of the
hidden units and every sign flip of a unit (``w1[:, j], b1[j], w2[j]`` negated together)
gives the same function, so chains sit in different copies of one mode and parameter means
say nothing. What every copy shares is the posterior predictive: the probabilities
``p[k] = P(y = 1 | x_k, weights)`` at ``N_HELD_OUT`` fixed held-out inputs ``x_k``, whose
posterior mean and sd are the scalars a sampler is judged on (labelled ``"p[0]"``, ...).

References (``tests/support/zoo_network_reference.json``, written by
``benchmarks/zoo_network_reference.py``) summarise these scalars over long runs on the full
data: NUTS on the posterior (``"posterior"``) and random-walk Metropolis on MINT's tempered
target, the posterior raised to ``1/T`` with ``T`` set by batches of ``BATCH_SIZE`` rows
(``"tempered"``; NUTS diverged there). Each gives
``mean``, ``sd``, ``mcse_mean`` and ``mcse_sd`` per scalar, as ``tests.support.zoo.reference``
does for parameters.

How a sampler is run and judged (:func:`run_network_cell`; the tolerances and why are in
``tests/statistical/test_zoo.py``): every minibatch sampler with ``BATCH_SIZE`` rows per
batch, the particles with ``pmm.sample_particles``'s defaults (whose batch is the same 1000
rows), chains as long as in the rest of the zoo (``tests/support/zoo_samplers.py``) but
for the SG-MCMC presets, which all run ``SG_NETWORK_LENGTH``.
"""

import json
import time
import warnings
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pymc_minibatch as pmm
from pymc_minibatch._compat import posterior, sample_stats
from tests.support.mcse import ess, mcse_mean, mcse_sd
from tests.support.zoo import ZooModel
from tests.support.zoo_samplers import (
    EXACT,
    MONOMIAL_GAMMA_LENGTH,
    PARTICLES,
    REFUSALS,
    STOCHASTIC_GRADIENT,
    TEMPERED,
    TEMPERED_BIAS,
    Cell,
    logged_checks,
    sample_cell,
)

#: Rows of the network's likelihood.
N_ROWS = 5000
#: Held-out inputs at which the predictive is compared.
N_HELD_OUT = 16
#: Rows per batch of every minibatch sampler on the network: the SG-MCMC presets' 1000 rows
#: of the rest of the zoo, and the particles' default (``min(N, 1000)``). MINT and CMINT
#: take it too (temperature ``T = 164``; 5% of the rows, their share in the rest of the
#: zoo, would give 325).
BATCH_SIZE = 1000
#: The labelling network: inputs x 3 hidden units (unit vectors at 20, 140 and 260 degrees,
#: times 2, so that each unit's boundary crosses the inputs in its own direction), the
#: hidden biases, the output weights and bias.
TRUE_W1 = 2.0 * np.array(
    [np.cos(np.deg2rad([20.0, 140.0, 260.0])), np.sin(np.deg2rad([20.0, 140.0, 260.0]))]
)
TRUE_B1 = np.array([0.5, -0.5, 0.3])
TRUE_W2 = np.array([2.0, -2.0, 2.0])
TRUE_B2 = -0.3
#: The samplers whose cells ``tests/statistical/test_zoo.py`` runs on the network: those
#: built for models like it (``benchmarks/zoo.py`` runs every sampler; TunaMH, TFMH, FlyMC
#: and PoissonMH refuse it up front, as its linear predictor is not linear in the weights).
NETWORK_SAMPLERS = [*TEMPERED, *STOCHASTIC_GRADIENT, *PARTICLES]
#: ``pm.sample`` lengths (draws, tune) of every SG-MCMC preset on the network, two chains:
#: the monomial-gamma presets' of the rest of the zoo. The network's chains mix more slowly
#: than the everyday models': at the zoo's 4000 draws SGLD's smallest ESS of a predictive
#: scalar was 25-40 (seeds 1-3) and SGHMC's 70-94 (seeds 1-2), against 117-229 at 8000.
SG_NETWORK_LENGTH = MONOMIAL_GAMMA_LENGTH
#: Fewest effective draws (summed over the chains) of every predictive scalar for a chain's
#: cell to be judged: the allowance for Monte Carlo error, 4 mcse, is then at most 0.4 sd.
#: With fewer it grows past that (2 sd at ESS 5: the labelling network's mean would pass), and
#: the ESS estimate it rests on is itself unreliable (Vehtari et al. 2021,
#: "Rank-normalization, folding, and localization", ask for 100 per chain before trusting
#: it; this floor is half theirs, for two chains of CI's length).
MIN_ESS = 100
#: Reference summaries of the network's predictive.
REFERENCE_PATH = Path(__file__).with_name("zoo_network_reference.json")


def class_probabilities(w1, b1, w2, b2, x):
    """``P(y = 1 | x)`` of networks with weights of any leading shape ``S`` at inputs ``x``.

    Parameters
    ----------
    w1, b1, w2, b2 : numpy.ndarray
        Shapes ``S + (2, 3)``, ``S + (3,)``, ``S + (3,)`` and ``S``.
    x : numpy.ndarray
        Inputs, shape ``(K, 2)``.

    Returns
    -------
    numpy.ndarray
        Shape ``S + (K,)``.
    """
    hidden = np.tanh(np.einsum("kd,...dh->...kh", x, w1) + np.expand_dims(b1, -2))
    logits = np.einsum("...kh,...h->...k", hidden, w2) + np.expand_dims(b2, -1)
    return 1.0 / (1.0 + np.exp(-logits))


def network_data(n_rows=N_ROWS, seed=20):
    """``(x, y)``: standard normal inputs and labels drawn from the labelling network."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, 2))
    p = class_probabilities(TRUE_W1, TRUE_B1, TRUE_W2, np.float64(TRUE_B2), x)
    return x, (rng.random(n_rows) < p).astype("int64")


def held_out_inputs():
    """The ``N_HELD_OUT`` inputs of the predictive scalars (from the inputs' law, own seed)."""
    return np.random.default_rng(21).normal(size=(N_HELD_OUT, 2))


def network_classifier():
    """Bayesian neural network: 2 inputs, 3 tanh hidden units, binary labels.

    ``y ~ Bernoulli(logit_p = tanh(x @ w1 + b1) @ w2 + b2)`` with ``Normal(0, 1)`` priors on
    every weight and bias (13 parameters). The labels come from ``TRUE_W1``, ``TRUE_B1``,
    ``TRUE_W2``, ``TRUE_B2``, 57% of them ones.
    """
    x, y = network_data()
    with pm.Model() as model:
        w1 = pm.Normal("w1", 0.0, 1.0, shape=(2, 3))
        b1 = pm.Normal("b1", 0.0, 1.0, shape=3)
        w2 = pm.Normal("w2", 0.0, 1.0, shape=3)
        b2 = pm.Normal("b2", 0.0, 1.0)
        pm.Bernoulli("y", logit_p=pt.tanh(x @ w1 + b1) @ w2 + b2, observed=y)
    return model


NETWORK = ZooModel(
    "network_classifier", network_classifier, N_ROWS,
    network_classifier.__doc__.splitlines()[0],
)  # fmt: skip


def predictive_draws(weights):
    """The predictive scalars ``"p[k]"`` of draws of the network's weights.

    Parameters
    ----------
    weights : arviz.InferenceData, xarray.DataTree or dict
        A result of ``pm.sample`` or ``pmm.sample_particles`` (PyMC 5 or 6), or a dict of
        arrays ``{"w1", "b1", "w2", "b2"}`` with leading dims ``(chain, draw)``.

    Returns
    -------
    dict of {str : numpy.ndarray}
        ``"p[k]"`` -> ``(chain, draw)`` array of ``P(y = 1 | x_k)``.
    """
    if not isinstance(weights, dict):
        draws = posterior(weights)
        weights = {name: draws[name].transpose("chain", "draw", ...).values
                   for name in ("w1", "b1", "w2", "b2")}  # fmt: skip
    arrays = [np.asarray(weights[name], dtype=float) for name in ("w1", "b1", "w2", "b2")]
    p = class_probabilities(*arrays, held_out_inputs())
    return {f"p[{k}]": p[..., k] for k in range(N_HELD_OUT)}


def prior_weights(n_draws=4000, seed=0):
    """Draws of the weights from the model's prior, as one chain (a negative control)."""
    rng = np.random.default_rng(seed)
    shapes = {"w1": (2, 3), "b1": (3,), "w2": (3,), "b2": ()}
    return {name: rng.normal(size=(1, n_draws, *shape)) for name, shape in shapes.items()}


def true_weights(n_draws=4000):
    """The labelling network repeated as one chain: a point estimate (a negative control)."""
    true = {"w1": TRUE_W1, "b1": TRUE_B1, "w2": TRUE_W2, "b2": np.float64(TRUE_B2)}
    return {name: np.broadcast_to(value, (1, n_draws, *np.shape(value)))
            for name, value in true.items()}  # fmt: skip


def network_reference(target="posterior"):
    """Reference summaries of the predictive scalars, and the target's temperature.

    Parameters
    ----------
    target : {"posterior", "tempered"}
        The posterior, or MINT's tempered target for batches of ``BATCH_SIZE`` rows.

    Returns
    -------
    summaries : dict of {str : dict of {str : float}}
        ``"p[k]"`` -> ``{"mean", "sd", "mcse_mean", "mcse_sd"}``.
    temperature : float
        1 for the posterior.
    """
    entry = json.loads(REFERENCE_PATH.read_text())[target]
    return entry["predictions"], entry.get("temperature", 1.0)


def run_network_cell(sampler, random_seed=1):
    """Run ``sampler`` (a name in ``tests.support.zoo_samplers.SAMPLERS``) on the network;
    return a Cell (``refused``, ``ok``, ``inaccurate`` or ``error``, as in the zoo).

    The cell's errors are those of the predictive scalars (:func:`judge_predictions`);
    MINT and CMINT are judged against the tempered reference.
    """
    started = time.perf_counter()
    model = network_classifier()
    try:
        with logged_checks() as messages, model, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("ignore")
            warnings.simplefilter("always", pmm.AnswerCheckWarning)
            idata = sample_cell(sampler, random_seed, mint_batch_size=BATCH_SIZE,
                                sg_batch_size=BATCH_SIZE, sg_length=SG_NETWORK_LENGTH)
    except REFUSALS as err:
        return Cell(sampler, NETWORK.name, "refused", time.perf_counter() - started,
                    f"{type(err).__name__}: {err}")  # fmt: skip
    except Exception as err:  # noqa: BLE001 - every other failure is an "error" cell
        return Cell(sampler, NETWORK.name, "error", time.perf_counter() - started,
                    f"{type(err).__name__}: {err}")  # fmt: skip
    target = "tempered" if sampler in TEMPERED else "posterior"
    reference, temperature = network_reference(target)
    cell = judge_predictions(sampler, predictive_draws(idata), reference)
    if sampler in TEMPERED:
        ran_at = float(np.asarray(sample_stats(idata)["temperature"]).flat[0])
        if not np.isclose(ran_at, temperature, rtol=1e-9, atol=0.0):
            cell.outcome = "error"
            cell.message = f"ran at T = {ran_at:.6g}; the tempered reference's is {temperature:.6g}"
    cell.seconds = time.perf_counter() - started
    cell.answer_check = " ".join(messages + [str(w.message) for w in caught])
    return cell


def monte_carlo_error(values, sampler):
    """Monte Carlo standard errors ``(of the mean, of the sd)`` of one scalar's draws.

    For chains, from their effective sample size (``tests/support/mcse.py``; 0 for draws
    that do not move). For particles 0: their error (from the start and the batches) is
    part of the zoo's allowance for them, as on the other zoo models.
    """
    if sampler in PARTICLES or np.ptp(values) == 0.0:
        return 0.0, 0.0
    return mcse_mean(values), mcse_sd(values)


def judge_predictions(sampler, draws, reference):
    """Compare predictive draws with reference summaries; return a Cell.

    ``mean_error`` is the largest ``|mean - reference mean|`` in reference sds,
    ``mean_error_mcse`` the largest excess over the sampler's allowed bias in combined
    Monte Carlo standard errors, ``sd_ratio`` the smallest and largest sd / reference sd and
    ``sd_error_mcse`` the largest excess of an sd outside its allowed range, in combined
    Monte Carlo standard errors of the sd. The outcome is ``ok`` when both excesses are
    below 4 (:func:`allowed_bias` gives the allowances) and, for chains, every scalar has at
    least ``MIN_ESS`` effective draws (the message gives the smallest), else ``inaccurate``.
    """
    mean_bias, (sd_low, sd_high) = allowed_bias(sampler)
    mean_errors, mean_excess, sd_ratios, sd_excess = [], [], [], []
    fewest = (np.inf, "")
    for label, summary in reference.items():
        values = np.asarray(draws[label], dtype=float)
        if sampler not in PARTICLES and np.ptp(values) > 0.0:
            fewest = min(fewest, (ess(values), label))
        error_of_mean, error_of_sd = monte_carlo_error(values, sampler)
        mean_error = abs(values.mean() - summary["mean"])
        mean_errors.append(mean_error / summary["sd"])
        excess = max(mean_error - mean_bias * summary["sd"], 0.0)
        mean_excess.append(_in_errors(excess, error_of_mean, summary["mcse_mean"]))
        sd, ref_sd = values.std(), summary["sd"]
        sd_ratios.append(sd / ref_sd)
        excess = max(sd - sd_high * ref_sd, sd_low * ref_sd - sd, 0.0)
        sd_excess.append(_in_errors(excess, error_of_sd, summary["mcse_sd"]))
    finite = all(np.all(np.isfinite(values)) for values in draws.values())
    cell = Cell(
        sampler, NETWORK.name, "ok", 0.0,
        mean_error=float(np.max(mean_errors)), mean_error_mcse=float(np.max(mean_excess)),
        sd_ratio=(float(np.min(sd_ratios)), float(np.max(sd_ratios))),
        sd_error_mcse=float(np.max(sd_excess)),
    )  # fmt: skip
    mixed = fewest[0] >= MIN_ESS
    if np.isfinite(fewest[0]):
        cell.message = f"smallest ESS {fewest[0]:.0f} ({fewest[1]})"
        if not mixed:
            cell.message += f", below {MIN_ESS}: too few effective draws to judge"
    if not (finite and mixed and cell.mean_error_mcse < 4.0 and cell.sd_error_mcse < 4.0):
        cell.outcome = "inaccurate"
    return cell


def _in_errors(excess, own, reference):
    """``excess`` in combined standard errors (infinite where both are 0 and excess is not)."""
    combined = np.hypot(own, reference)
    if excess == 0.0:
        return 0.0
    return float(excess / combined) if combined > 0.0 else float("inf")


def allowed_bias(sampler):
    """``(mean bias in reference sds, (lowest, highest) sd ratio))`` a sampler is allowed.

    The zoo's allowances (``tests/support/zoo_samplers.py``): none for the exact samplers
    (their sd is not checked), 0.25 sd and 25% in sd for the SG-MCMC presets and SVGD,
    0.25 sd and the documented sd range (``pmm.particles.DOCUMENTED_SD_RATIO``) for w-SGLD,
    w-SGLD-B and pi-SGLD, and for MINT and CMINT, against their tempered target,
    ``TEMPERED_BIAS`` (its widening) and 20%.
    """
    if sampler in EXACT:
        return 0.0, (0.0, np.inf)
    if sampler in TEMPERED:
        return TEMPERED_BIAS, (0.8, 1.2)
    if sampler in PARTICLES and PARTICLES[sampler] != "svgd":
        return 0.25, pmm.particles.DOCUMENTED_SD_RATIO[PARTICLES[sampler]]
    return 0.25, (0.75, 1.25)
