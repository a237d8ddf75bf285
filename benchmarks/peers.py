"""Time to the answer on a tall logistic regression: this package against PyMC, nutpie, numpyro.

The model, the same in PyMC and in numpyro: ``beta ~ Normal(0, 1)`` (``d`` coefficients, the
first of them an intercept), ``y ~ Bernoulli(logit_p = X @ beta)``, on data drawn with a fixed
seed (the true ``beta`` from ``Normal(0, 0.5)``), for every ``--rows`` N and ``--dims`` d of
the grid. Two designs (``--design``):

- ``logistic``: a column of ones and ``d - 1`` standard normal columns;
- ``onehot``: a design as users build it from a data frame of flights: up to three
  categorical columns with skewed level frequencies, one-hot encoded with
  ``pd.get_dummies(...).to_numpy(float)`` (the first with all its levels, standing in for the
  intercept, the others without their first level), and two numeric columns, put together
  with ``np.column_stack``: a column-major (Fortran-ordered) array of ``d`` columns.

Samplers (``--samplers`` picks some, default all), 2 chains each, ``--draws`` tuning steps
and as many kept draws per chain (default 1000) for every MCMC sampler:

- ``nuts``: PyMC's NUTS, ``pm.sample`` at its defaults; it compiles inside ``pm.sample``, so
  its compilation counts as sampling;
- ``nutpie``: nutpie's NUTS (``nutpie.compile_pymc_model`` then ``nutpie.sample``); the
  compilation is its setup;
- ``numpyro``: numpyro's NUTS at its defaults on the model written in numpyro, in float64
  as PyMC, chains one after the other (``chain_method="sequential"``); its JIT compilation
  happens inside the run and counts as sampling;
- ``hmcecs``: numpyro's HMCECS (Dang, Quiroz, Kohn, Tran & Villani 2019, "Hamiltonian Monte
  Carlo with energy conserving subsampling", JMLR 20) around numpyro's NUTS, on subsamples
  of 1000 rows (``numpyro.plate(..., subsample_size=1000)``) updated in 100 blocks, with
  the second-order Taylor proxy at the MAP, which is also NUTS's start. The MAP (scipy's
  L-BFGS-B on the full data) is its setup; the proxy's full-data gradient and Hessian at
  the MAP are computed inside numpyro's run and count as sampling;
- ``tunamh``: ``pmm.TunaMH()`` at its defaults in ``pm.sample``; building the step (Laplace
  fit, bounds) is its setup;
- ``sgld``: ``pmm.SGLD(batch_size=1000)`` (or N rows if fewer) at its defaults, the same;
- ``svgd``: ``pmm.sample_particles("svgd")`` at its defaults; its particles are the draws, so
  it has no ESS, only an accuracy. Its setup is the model's adapter; the Laplace fit and
  the particle steps are its sampling.

HMCECS, SGLD and SVGD are approximate: their accuracy columns say by how much here. NUTS and
TunaMH are exact.

Every sampler (and the reference) runs in a fresh process of its own (this script with
``--worker``, the data passed in a temporary ``.npz`` file), so no sampler benefits from
another's imports, JIT or compilation caches, and with its thread pools set to one thread:
each runs on one core. JAX is imported only in the numpyro processes. A peer that is not
installed is skipped, with a line saying so.

Per row: setup seconds; sampling seconds; their sum (``total``; process start and imports
excluded, they are in the JSON's ``process_s``); the minimum bulk ESS over the coefficients;
ESS per second of the total; the time to 1000 effective draws, ``setup + sampling * 1000 /
min ESS``; rows evaluated per effective draw over the kept draws (tuning excluded): N times
the leapfrog steps for the NUTS rows (the n_steps statistic of PyMC and nutpie, numpyro's
``num_steps``), 1000 times the leapfrog steps for HMCECS (its subsample updates not
counted), the summed ``batch_size`` statistic for TunaMH, 1000 per step for SGLD; and
against the reference the largest |mean error| in reference sds over the coefficients and the
range of sd / reference sd. For TunaMH and SGLD the JSON also has the full-data passes of the
setup (``setup_passes``; ``laplace_passes`` of them in the Laplace fit); for HMCECS the
full-data evaluations of its MAP search and the acceptance rate of its subsample updates.
``layouts`` records, per (N, d), whether the design was column-major (the ``onehot`` design
is, from d = 4 on).

The reference, per (N, d), is a separate nutpie run (PyMC's NUTS if nutpie is missing) with
``--reference-draws`` kept draws per chain (default 1000, after ``--draws`` tuning steps),
2 chains, a seed of its own, in its own process.

``--extrapolate-rows N`` (default 10^6): at N rows and above, PyMC's NUTS and nutpie are
not run; each of their rows is extrapolated from the largest N that ran at the same d, its
sampling time and rows per effective draw scaled in proportion to N (every gradient reads
every row; PyMC's compilation, inside its sampling time, is scaled too, an overestimate that
is small at the N where one extrapolates), its ESS kept. These rows are marked ``*`` in the
table and ``"extrapolated": true`` in the JSON. numpyro's NUTS runs there and its draws are
the reference (``--draws`` per chain).

``--jobs`` (default 2) workers run at once, each on its own core. The runs of the whole grid
share them, those that read every row (the references and the NUTS samplers) first, the
larger ``N d`` the earlier: the longest run (numpyro's NUTS at the largest cell) starts at
once and the others fill the other workers around it. The table is printed cell by cell in
the grid's order.

Results go to ``--json`` (default ``benchmarks/results/peers.json``, rewritten after every
row) with the machine, the versions and the command. The committed results
(d = 10 at both N; d = 50 at 10^5) came from::

    python benchmarks/peers.py --dims 10 --jobs 1 --json benchmarks/results/peers.json
    python benchmarks/peers.py --rows 100000 --dims 50 \
        --json benchmarks/results/peers_N1e5_d50.json

and the whole default grid from::

    python benchmarks/peers.py --json benchmarks/results/peers_grid.json

``--design onehot`` runs the data-frame design. The grid's wall time is printed at the end
and recorded as ``grid_s``.

(``pip install -e ".[bench]"`` installs nutpie and numpyro.)
"""

import argparse
import functools
import importlib.util
import json
import logging
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from run_record import RESULTS, environment, write_results  # noqa: E402

SAMPLERS = ("nuts", "nutpie", "numpyro", "hmcecs", "tunamh", "sgld", "svgd")
#: The NUTS rows extrapolated at ``--extrapolate-rows`` and above (numpyro's NUTS still
#: runs there, and is the reference).
EXTRAPOLATED = ("nuts", "nutpie")
#: The runs whose cost grows with N d (every gradient reads every row): run first.
FULL_DATA = ("reference", "nuts", "nutpie", "numpyro")
REQUIRES = {"nutpie": ("nutpie",), "numpyro": ("numpyro", "jax"), "hmcecs": ("numpyro", "jax")}
CHAINS, SEED, REFERENCE_SEED, DATA_SEED = 2, 1, 2, 0
SUBSAMPLE, HMCECS_BLOCKS, SG_BATCH, EFFECTIVE_DRAWS = 1000, 100, 1000, 1000
# one thread in every pool a worker may start: BLAS, OpenMP, numba, nutpie (rayon), XLA
ONE_CORE = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "NUMBA_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}  # fmt: skip


def logistic_data(n_rows, n_dims, design):
    """Seeded data of the benchmark's logistic regression.

    Parameters
    ----------
    n_rows, n_dims : int
        Rows N and coefficients d.
    design : {"logistic", "onehot"}
        Standard normal columns after an intercept, or `onehot_design`.

    Returns
    -------
    X : numpy.ndarray
        ``(N, d)`` design.
    y : numpy.ndarray
        ``(N,)`` int64 outcomes.
    """
    rng = np.random.default_rng([DATA_SEED, n_rows, n_dims])
    if design == "logistic":
        X = np.column_stack([np.ones(n_rows), rng.standard_normal((n_rows, n_dims - 1))])
    else:
        X = onehot_design(rng, n_rows, n_dims)
    beta = rng.normal(0.0, 0.5, size=n_dims)
    y = (rng.random(n_rows) < 1.0 / (1.0 + np.exp(-(X @ beta)))).astype(np.int64)
    return X, y


def onehot_design(rng, n_rows, n_dims):
    """A flights-like design from a data frame, laid out by columns as users hold it.

    Parameters
    ----------
    rng : numpy.random.Generator
    n_rows : int
    n_dims : int
        Columns, at least 3: ``d - 2`` one-hot columns of up to three categorical variables
        and two numeric ones.

    Returns
    -------
    numpy.ndarray
        ``(N, d)``, Fortran-ordered.
    """
    n_dummies = n_dims - 2
    sizes = [len(part) for part in np.array_split(np.arange(n_dummies), min(3, n_dummies))]
    # the first variable keeps every level (its columns sum to the intercept), the others
    # drop their first, so that the design has full rank
    levels = [sizes[0]] + [size + 1 for size in sizes[1:]]
    frame = pd.DataFrame({
        f"c{j}": pd.Categorical(rng.choice(k, size=n_rows, p=_skewed(k)))
        for j, k in enumerate(levels)
    })  # fmt: skip
    encoded = pd.concat([pd.get_dummies(frame[name], prefix=name, drop_first=j > 0)
                         for j, name in enumerate(frame)], axis=1).to_numpy(float)  # fmt: skip
    distance = np.log(rng.lognormal(6.5, 0.6, size=n_rows))
    return np.column_stack([encoded, (distance - distance.mean()) / distance.std(),
                            rng.standard_normal(n_rows)])  # fmt: skip


def _skewed(k):
    weights = 1.0 / np.arange(1, k + 1)  # a few frequent levels and a tail, as carriers
    return weights / weights.sum()


# ---------------------------------------------------------------- workers (one per process)


def pymc_model(X, y):
    """The PyMC model.

    Parameters
    ----------
    X : numpy.ndarray
    y : numpy.ndarray

    Returns
    -------
    pymc.Model
    """
    import pymc as pm

    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=X.shape[1])
        pm.Bernoulli("y", logit_p=X @ beta, observed=y)
    return model


def numpyro_model():
    """The numpyro model, the same as `pymc_model`.

    Returns
    -------
    callable
        ``model(X, y, subsample_size=None)``; with ``subsample_size`` its likelihood is
        evaluated on that many rows (HMCECS's subsamples).
    """
    import numpyro
    import numpyro.distributions as dist

    def model(X, y, subsample_size=None):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("N", X.shape[0], subsample_size=subsample_size):
            rows = numpyro.subsample(X, event_dim=1)
            numpyro.sample("y", dist.Bernoulli(logits=rows @ beta),
                           obs=numpyro.subsample(y, event_dim=0))  # fmt: skip

    return model


def _pm_sample(model, step, draws, tune, seed):
    import pymc as pm

    return pm.sample(step=step, draws=draws, tune=tune, chains=CHAINS, cores=1,
                     random_seed=seed, progressbar=False, compute_convergence_checks=False,
                     model=model)  # fmt: skip


def _beta_draws(idata):
    from pymc_minibatch._compat import posterior

    return np.asarray(posterior(idata)["beta"].transpose("chain", "draw", ...).values, float)


def run_pymc_nuts(X, y, draws, tune, seed):
    """PyMC's NUTS at its defaults.

    Parameters
    ----------
    X, y : numpy.ndarray
        The data.
    draws, tune, seed : int
        Kept draws and tuning steps per chain, and the random seed.

    Returns
    -------
    dict
        ``setup_s``, ``sampling_s``, ``beta`` (``(chain, draw, d)`` draws), ``rows`` (rows
        evaluated over the kept draws) and the sampler's own ``extra`` entries.
    """
    from pymc_minibatch._compat import sample_stats

    started = time.perf_counter()
    model = pymc_model(X, y)
    setup = time.perf_counter() - started
    idata = _pm_sample(model, None, draws, tune, seed)
    steps = float(sample_stats(idata)["n_steps"].sum())
    return {"setup_s": setup, "sampling_s": time.perf_counter() - started - setup,
            "beta": _beta_draws(idata), "rows": X.shape[0] * steps, "extra": {}}  # fmt: skip


def run_nutpie(X, y, draws, tune, seed):
    """nutpie's NUTS on the PyMC model; parameters and return as `run_pymc_nuts`."""
    import nutpie

    from pymc_minibatch._compat import sample_stats

    started = time.perf_counter()
    compiled = nutpie.compile_pymc_model(pymc_model(X, y))
    setup = time.perf_counter() - started
    idata = nutpie.sample(compiled, draws=draws, tune=tune, chains=CHAINS, cores=1, seed=seed,
                          progress_bar=False)  # fmt: skip
    steps = float(sample_stats(idata)["n_steps"].sum())
    return {"setup_s": setup, "sampling_s": time.perf_counter() - started - setup,
            "beta": _beta_draws(idata), "rows": X.shape[0] * steps, "extra": {}}  # fmt: skip


def _numpyro_on_cpu():
    """Import numpyro on one CPU device in float64 (as PyMC); before any JAX array exists."""
    import numpyro

    numpyro.set_platform("cpu")
    numpyro.set_host_device_count(1)
    numpyro.enable_x64()
    return numpyro


def run_numpyro_nuts(X, y, draws, tune, seed):
    """numpyro's NUTS at its defaults; parameters and return as `run_pymc_nuts`."""
    _numpyro_on_cpu()
    import jax
    from numpyro.infer import MCMC, NUTS

    started = time.perf_counter()
    mcmc = MCMC(NUTS(numpyro_model()), num_warmup=tune, num_samples=draws, num_chains=CHAINS,
                chain_method="sequential", progress_bar=False)  # fmt: skip
    mcmc.run(jax.random.PRNGKey(seed), X, y, extra_fields=("num_steps",))
    beta = np.asarray(mcmc.get_samples(group_by_chain=True)["beta"])
    steps = float(np.sum(mcmc.get_extra_fields()["num_steps"]))
    return {"setup_s": 0.0, "sampling_s": time.perf_counter() - started, "beta": beta,
            "rows": X.shape[0] * steps, "extra": {}}  # fmt: skip


def numpyro_map(model, X, y):
    """The MAP of ``model`` on the full data, by scipy's L-BFGS-B with JAX gradients.

    Parameters
    ----------
    model : callable
        From `numpyro_model`.
    X, y : numpy.ndarray

    Returns
    -------
    beta : numpy.ndarray
        The mode.
    evaluations : int
        Full-data evaluations of the objective and its gradient.
    success : bool
        Whether L-BFGS-B reported convergence.
    """
    import jax
    from numpyro.infer.util import potential_energy
    from scipy.optimize import minimize

    # the data are arguments, not constants folded into the compiled program
    objective = jax.jit(jax.value_and_grad(
        lambda beta, X, y: potential_energy(model, (X, y), {}, {"beta": beta})))  # fmt: skip
    X, y = jax.numpy.asarray(X), jax.numpy.asarray(y)

    def value_and_grad(beta):
        value, grad = objective(beta, X, y)
        return float(value), np.asarray(grad)

    # not from 0: there every logit is 0, where the JAX gradient of numpyro's Bernoulli
    # log-density (written with |logit| and max(logit, 0)) is wrong and the line search fails
    fit = minimize(value_and_grad, np.full(X.shape[1], 0.01), jac=True, method="L-BFGS-B")
    return fit.x, int(fit.nfev), bool(fit.success)


def run_hmcecs(X, y, draws, tune, seed):
    """numpyro's HMCECS with NUTS inside; parameters and return as `run_pymc_nuts`."""
    _numpyro_on_cpu()
    import jax
    from numpyro.infer import HMCECS, MCMC, NUTS, init_to_value

    started = time.perf_counter()
    model = numpyro_model()
    mode, evaluations, success = numpyro_map(model, X, y)
    reference = {"beta": jax.numpy.asarray(mode)}
    setup = time.perf_counter() - started
    subsample = min(SUBSAMPLE, X.shape[0])
    kernel = HMCECS(NUTS(model, init_strategy=init_to_value(values=reference)),
                    num_blocks=HMCECS_BLOCKS, proxy=HMCECS.taylor_proxy(reference))  # fmt: skip
    mcmc = MCMC(kernel, num_warmup=tune, num_samples=draws, num_chains=CHAINS,
                chain_method="sequential", progress_bar=False)  # fmt: skip
    mcmc.run(jax.random.PRNGKey(seed), X, y, subsample_size=subsample,
             extra_fields=("hmc_state.num_steps", "accept_prob"))  # fmt: skip
    beta = np.asarray(mcmc.get_samples(group_by_chain=True)["beta"])
    fields = mcmc.get_extra_fields()
    steps = float(np.sum(fields["hmc_state.num_steps"]))
    return {"setup_s": setup, "sampling_s": time.perf_counter() - started - setup,
            "beta": beta, "rows": subsample * steps,
            "extra": {"map_evaluations": evaluations, "map_success": success,
                      "subsample": subsample,
                      "subsample_accept": float(np.mean(fields["accept_prob"]))}}  # fmt: skip


def run_minibatch_step(name, X, y, draws, tune, seed):
    """TunaMH or SGLD of this package in ``pm.sample``; return as `run_pymc_nuts`.

    Parameters
    ----------
    name : {"tunamh", "sgld"}
    X, y, draws, tune, seed
        As in `run_pymc_nuts`.
    """
    import pymc_minibatch as pmm
    from pymc_minibatch._compat import sample_stats

    started = time.perf_counter()
    model = pymc_model(X, y)
    with model:
        step = pmm.TunaMH() if name == "tunamh" else pmm.SGLD(batch_size=min(SG_BATCH, len(y)))
    setup = time.perf_counter() - started
    extra = {"step": repr(step), "setup_passes": int(step.minibatch_model.full_data_passes),
             "laplace_passes": int(step.laplace.passes)}  # fmt: skip
    idata = _pm_sample(model, step, draws, tune, seed)
    stats = sample_stats(idata)
    if name == "tunamh":
        rows = float(stats["batch_size"].sum())
        extra["accept"] = float(stats["accepted"].mean())
    else:
        rows = float(step.batch_size * step.updates_per_draw * draws * CHAINS)
    return {"setup_s": setup, "sampling_s": time.perf_counter() - started - setup,
            "beta": _beta_draws(idata), "rows": rows, "extra": extra}  # fmt: skip


def run_svgd(X, y, draws, tune, seed):
    """SVGD of this package at its defaults; ``draws`` and ``tune`` are not used.

    Returns
    -------
    dict
        As `run_pymc_nuts`, without ``rows``; ``beta`` holds the particles as one chain.
    """
    import pymc_minibatch as pmm
    from pymc_minibatch._compat import posterior

    started = time.perf_counter()
    idata = pmm.sample_particles("svgd", model=pymc_model(X, y), random_seed=seed,
                                 progressbar=False)  # fmt: skip
    total = time.perf_counter() - started
    attrs = posterior(idata).attrs
    sampling = float(attrs["sampling_time"])  # the Laplace fit and the particle steps
    extra = {"n_particles": int(attrs["n_particles"]),
             "rows_read": int(attrs["n_steps"]) * int(attrs["batch_size"])}
    return {"setup_s": total - sampling, "sampling_s": sampling, "beta": _beta_draws(idata),
            "extra": extra}


WORKERS = {"nuts": run_pymc_nuts, "nutpie": run_nutpie, "numpyro": run_numpyro_nuts,
           "hmcecs": run_hmcecs, "svgd": run_svgd,
           "tunamh": functools.partial(run_minibatch_step, "tunamh"),
           "sgld": functools.partial(run_minibatch_step, "sgld")}  # fmt: skip


def worker(args):
    """Run one sampler on the data file and write its summary as JSON.

    Parameters
    ----------
    args : argparse.Namespace
        ``worker`` (the sampler), ``data`` (the ``.npz``), ``out`` (the JSON to write),
        ``draws``, ``tune`` and ``seed``.
    """
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    from tests.support.mcse import ess

    with np.load(args.data) as data:
        X, y = data["X"], data["y"]
    run = WORKERS[args.worker](X, y, args.draws, args.tune, args.seed)
    beta = run.pop("beta")
    run["summary"] = {
        f"beta[{j}]": {"mean": float(beta[..., j].mean()), "sd": float(beta[..., j].std()),
                       "ess": None if args.worker == "svgd" else ess(beta[..., j])}
        for j in range(beta.shape[-1])
    }  # fmt: skip
    pathlib.Path(args.out).write_text(json.dumps(run))


# ---------------------------------------------------------------- the grid (parent process)


def launch(name, data_path, draws, tune, seed):
    """Run `worker` for ``name`` in a fresh process on one core.

    Parameters
    ----------
    name : str
        A key of ``WORKERS``.
    data_path : pathlib.Path
        The ``.npz`` holding ``X`` and ``y``.
    draws, tune, seed : int

    Returns
    -------
    dict
        The worker's JSON plus ``process_s`` (wall seconds of the process, imports
        included), or ``{"failed": the end of its stderr}``.
    """
    out = data_path.with_name(f"{name}_{seed}.json")
    command = [sys.executable, str(pathlib.Path(__file__).resolve()), "--worker", name,
               "--data", str(data_path), "--out", str(out), "--draws", str(draws),
               "--tune", str(tune), "--seed", str(seed)]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, env={**os.environ, **ONE_CORE}, capture_output=True,
                          text=True)  # fmt: skip
    if done.returncode != 0:
        return {"failed": done.stderr.strip()[-2000:]}
    result = json.loads(out.read_text())
    result["process_s"] = time.perf_counter() - started
    return result


def accuracy(summary, reference):
    """Largest |mean error| in reference sds, and the range of sd / reference sd.

    Parameters
    ----------
    summary, reference : dict
        ``{label: {"mean": ..., "sd": ...}}`` over the coefficients.

    Returns
    -------
    dict
    """
    errors = [abs(summary[k]["mean"] - ref["mean"]) / ref["sd"] for k, ref in reference.items()]
    ratios = [summary[k]["sd"] / ref["sd"] for k, ref in reference.items()]
    return {"max_mean_error_sd": max(errors), "sd_ratio_min": min(ratios),
            "sd_ratio_max": max(ratios)}  # fmt: skip


def make_row(name, n_rows, n_dims, run, reference):
    """A table row from a worker's result.

    Parameters
    ----------
    name : str
    n_rows, n_dims : int
    run : dict
        From `launch`.
    reference : dict or None
        The reference's summary.

    Returns
    -------
    dict
    """
    row = {"sampler": name, "N": n_rows, "d": n_dims, "setup_s": run["setup_s"],
           "sampling_s": run["sampling_s"], "total_s": run["setup_s"] + run["sampling_s"],
           "process_s": run["process_s"], **run["extra"]}  # fmt: skip
    summary = run["summary"]
    if name != "svgd":
        min_ess = min(entry["ess"] for entry in summary.values())
        row.update(min_ess=min_ess, ess_per_s=min_ess / row["total_s"],
                   time_to_1000_s=row["setup_s"] + row["sampling_s"] * EFFECTIVE_DRAWS / min_ess,
                   rows_per_ess=run["rows"] / min_ess)  # fmt: skip
    if reference is not None:
        row["accuracy"] = accuracy(summary, reference)
    row["summary"] = summary
    return row


def extrapolate(row, n_rows):
    """A NUTS row at ``n_rows`` from one that ran: its sampling cost in proportion to N.

    Parameters
    ----------
    row : dict
        From `make_row`, at a smaller N.
    n_rows : int

    Returns
    -------
    dict
        With ``extrapolated`` and ``extrapolated_from``; no accuracy or summary.
    """
    scale = n_rows / row["N"]
    sampling = row["sampling_s"] * scale
    total = row["setup_s"] + sampling
    return {"sampler": row["sampler"], "N": n_rows, "d": row["d"], "setup_s": row["setup_s"],
            "sampling_s": sampling, "total_s": total, "min_ess": row["min_ess"],
            "ess_per_s": row["min_ess"] / total,
            "time_to_1000_s": row["setup_s"] + sampling * EFFECTIVE_DRAWS / row["min_ess"],
            "rows_per_ess": row["rows_per_ess"] * scale, "extrapolated": True,
            "extrapolated_from": row["N"]}  # fmt: skip


HEADER = (f"{'sampler':9s} {'N':>9s} {'d':>3s} {'setup':>7s} {'sampling':>8s} {'total':>8s} "
          f"{'min ESS':>7s} {'ESS/s':>8s} {'t(1000)':>8s} {'rows/ESS':>9s} {'mean err':>8s} "
          f"{'sd ratio':>9s}")  # fmt: skip


def print_row(row):
    """Print ``row`` under ``HEADER``; ``*`` marks an extrapolated row.

    Parameters
    ----------
    row : dict
        From `make_row` or `extrapolate`.
    """
    name = row["sampler"] + ("*" if row.get("extrapolated") else "")
    if "min_ess" in row:
        chains = (f"{row['min_ess']:7.0f} {row['ess_per_s']:8.2f} {row['time_to_1000_s']:8.1f} "
                  f"{row['rows_per_ess']:9.3g}")  # fmt: skip
    else:
        chains = f"{'-':>7s} {'-':>8s} {'-':>8s} {'-':>9s}"
    check = row.get("accuracy")
    answer = (f"{check['max_mean_error_sd']:8.3f} {check['sd_ratio_min']:4.2f}-"
              f"{check['sd_ratio_max']:4.2f}" if check else f"{'-':>8s} {'-':>9s}")  # fmt: skip
    print(f"{name:9s} {row['N']:9d} {row['d']:3d} {row['setup_s']:7.1f} {row['sampling_s']:8.1f} "
          f"{row['total_s']:8.1f} {chains} {answer}", flush=True)  # fmt: skip


def missing_package(name):
    """The first package ``name`` needs that is not installed, or None.

    Parameters
    ----------
    name : str
        A sampler.

    Returns
    -------
    str or None
    """
    return next((package for package in REQUIRES.get(name, ())
                 if importlib.util.find_spec(package) is None), None)  # fmt: skip


def parse(argv):
    """The command line, the worker's hidden options included.

    Parameters
    ----------
    argv : list of str or None

    Returns
    -------
    argparse.Namespace
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--design", choices=("logistic", "onehot"), default="logistic")
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    parser.add_argument("--draws", type=int, default=1000,
                        help="tuning steps and kept draws per chain of every MCMC sampler")
    parser.add_argument("--reference-draws", type=int, default=1000,
                        help="kept draws per chain of the reference")
    parser.add_argument("--extrapolate-rows", type=int, default=1_000_000,
                        help="from this N on, extrapolate PyMC's NUTS and nutpie and take "
                        "numpyro's NUTS as the reference")
    parser.add_argument("--jobs", type=int, default=2, help="workers at once, one core each")
    parser.add_argument("--json", default=str(RESULTS / "peers.json"))
    for hidden in ("--worker", "--data", "--out"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    for hidden in ("--tune", "--seed"):
        parser.add_argument(hidden, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    smallest = 3 if args.design == "onehot" else 1
    if min(args.dims) < smallest:
        parser.error(f"--design {args.design} needs --dims of at least {smallest}")
    return args


def main(argv=None):
    """Run the grid, or one sampler with ``--worker``.

    Parameters
    ----------
    argv : list of str, optional
    """
    args = parse(argv)
    if args.worker:
        worker(args)
        return
    samplers = [name for name in SAMPLERS if name in args.samplers]
    skipped = {}
    for name in samplers:
        package = missing_package(name)
        if package is not None:
            skipped[name] = f"{package} is not installed"
            print(f"{name}: skipped, {skipped[name]}")
    samplers = [name for name in samplers if name not in skipped]
    reference_sampler = "nuts" if missing_package("nutpie") else "nutpie"
    threshold = args.extrapolate_rows
    results = {"design": args.design,
               "draws": {"tune": args.draws, "draws": args.draws, "chains": CHAINS,
                         "reference_draws": args.reference_draws},
               "settings": {"seed": SEED, "reference_seed": REFERENCE_SEED,
                            "reference_sampler": reference_sampler,
                            "hmcecs_subsample": SUBSAMPLE, "hmcecs_blocks": HMCECS_BLOCKS,
                            "sgld_batch_size": SG_BATCH, "extrapolate_rows": threshold},
               "environment": environment(extra_packages=("nutpie", "numpyro", "jax")),
               "skipped": skipped, "layouts": [], "references": [], "runs": []}  # fmt: skip
    print(f"{args.design} design; seconds; ESS/s over the total; t(1000): setup + sampling "
          f"to 1000 effective draws; accuracy against {reference_sampler} "
          f"({args.reference_draws} draws x {CHAINS} chains; numpyro's NUTS where rows are "
          "extrapolated): max |mean error| / ref sd, sd / ref sd; * extrapolated in N")
    print(HEADER, flush=True)
    largest_run = {}  # (sampler, d) -> its row at the largest N that ran
    grid_started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder, ThreadPoolExecutor(args.jobs) as pool:
        cells = [(n_dims, n_rows) for n_dims in args.dims for n_rows in sorted(args.rows)]
        jobs = {}  # (n_dims, n_rows) -> {name: the arguments of its launch}
        for n_dims, n_rows in cells:
            extrapolating = threshold is not None and n_rows >= threshold
            X, y = logistic_data(n_rows, n_dims, args.design)
            data_path = pathlib.Path(folder) / f"N{n_rows}_d{n_dims}" / "data.npz"
            data_path.parent.mkdir()
            np.savez(data_path, X=X, y=y)  # .npy keeps a column-major design so
            results["layouts"].append({"N": n_rows, "d": n_dims,
                                       "fortran_order": bool(X.flags.f_contiguous)})
            del X, y  # the workers load their own copies
            cell = {name: (name, data_path, args.draws, args.draws, SEED) for name in samplers
                    if not (extrapolating and name in EXTRAPOLATED)}  # fmt: skip
            if not extrapolating:  # else numpyro's NUTS is the reference
                cell["reference"] = (reference_sampler, data_path, args.reference_draws,
                                     args.draws, REFERENCE_SEED)  # fmt: skip
            jobs[n_dims, n_rows] = cell
        # every run of the grid at once, the longest first (full-data samplers by N d), so
        # that the longest run starts at once and the others fill the other workers
        order = sorted(((n_dims, n_rows, name) for (n_dims, n_rows), cell in jobs.items()
                        for name in cell),
                       key=lambda job: -job[0] * job[1] * (job[2] in FULL_DATA))  # fmt: skip
        futures = {(n_dims, n_rows, name): pool.submit(launch, *jobs[n_dims, n_rows][name])
                   for n_dims, n_rows, name in order}  # fmt: skip
        for n_dims, n_rows in cells:
            extrapolating = threshold is not None and n_rows >= threshold
            runs = {name: futures[n_dims, n_rows, name].result()
                    for name in jobs[n_dims, n_rows]}  # fmt: skip
            reference_name = "numpyro" if extrapolating else reference_sampler
            reference_run = runs.get("numpyro") if extrapolating else runs.pop("reference", None)
            reference = None
            if reference_run is None or "failed" in reference_run:
                failure = (reference_run or {}).get("failed", "not run")
                print(f"no reference at N={n_rows}, d={n_dims}: {failure}")
            else:
                reference = reference_run["summary"]
                results["references"].append({
                    "N": n_rows, "d": n_dims, "sampler": reference_name,
                    "total_s": reference_run["setup_s"] + reference_run["sampling_s"],
                    **reference_run,
                })  # fmt: skip
                write_results(args.json, results)
            for name in samplers:
                if name in runs:
                    run = runs[name]
                    if "failed" in run:
                        print(f"{name} at N={n_rows}, d={n_dims} failed:\n{run['failed']}")
                        results["runs"].append({"sampler": name, "N": n_rows, "d": n_dims,
                                                **run})  # fmt: skip
                        write_results(args.json, results)
                        continue
                    is_reference = extrapolating and name == "numpyro"
                    row = make_row(name, n_rows, n_dims, run,
                                   None if is_reference else reference)  # fmt: skip
                    largest_run[name, n_dims] = row
                elif (name, n_dims) in largest_run:
                    row = extrapolate(largest_run[name, n_dims], n_rows)
                else:
                    print(f"{name}: not run at N={n_rows}, d={n_dims}, and no smaller N "
                          "ran to extrapolate from")
                    continue
                print_row(row)
                results["runs"].append(row)
                write_results(args.json, results)
    results["grid_s"] = time.perf_counter() - grid_started
    write_results(args.json, results)
    print(f"the grid took {results['grid_s'] / 60:.1f} minutes", flush=True)


if __name__ == "__main__":
    main()
