"""What a user waits for before and during ``pm.sample(step=pmm.TunaMH())`` on tall data.

What it measures
----------------
A Bernoulli-logit regression with ``d = 10`` features (synthetic data, fixed seed;
``beta ~ Normal(0, 1)``) at ``N`` rows (default ``10^6`` and ``10^7``), in memory. For each
``N``:

* **setup**: the seconds to build ``pmm.TunaMH()`` (compilation, checks, the Laplace fit,
  the bounds) and its full-data passes, stage by stage (``step.setup_report``);
* **step cost**: the marginal wall time of one TunaMH step inside ``pm.sample`` (one chain,
  no progress bar), as the difference between a run of ``tune + 11000`` and one of
  ``tune + 1000`` steps divided by 10000, so that the run's fixed costs (PyMC's own
  compilation, the trace) cancel; and the same for a step that does nothing (a step
  method returning its input; ten times as many steps), PyMC's own floor per step. Their
  ratio is printed.

The rows evaluated per step (mean ``batch_size``) and the acceptance rate of the long run
are printed beside them. Timings vary by tens of percent with the machine's load: run it
on an idle machine, with ``OPENBLAS_NUM_THREADS=1``.

How to run
----------
From the repository root::

    OPENBLAS_NUM_THREADS=1 python benchmarks/step_cost.py
    OPENBLAS_NUM_THREADS=1 python benchmarks/step_cost.py --n-data 1000000 --json out.json

It writes ``benchmarks/results/step_cost.json`` (or ``--json``) with the machine, the
versions and the command. At ``N = 10^7`` the data take 0.8 GB; the whole run takes a few
minutes.
"""

import argparse
import time

import numpy as np
import pymc as pm
from pymc.step_methods.arraystep import ArrayStep
from run_record import RESULTS, environment, write_results
from scipy.special import expit

import pymc_minibatch as pmm

N_FEATURES = 10
DEFAULT_N_DATA = (10**6, 10**7)
TUNE = 1000
SHORT_DRAWS, LONG_DRAWS = 1000, 11000


class DoNothing(ArrayStep):
    """A step method that returns its input: what ``pm.sample`` costs per step by itself."""

    def __init__(self, vars, model):
        super().__init__(vars, [model.compile_logp()])

    def astep(self, q0, *args):
        return q0, []


def make_model(n_data, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_data, N_FEATURES))
    beta_true = rng.normal(scale=0.5, size=N_FEATURES)
    y = (rng.random(n_data) < expit(x @ beta_true)).astype(np.int64)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=N_FEATURES)
        pm.Bernoulli("y", logit_p=x @ beta, observed=y)
    return model


def marginal_step_seconds(step, model, short=SHORT_DRAWS, long=LONG_DRAWS):
    """Seconds per step past a run's fixed costs, and the long run's trace."""
    seconds = {}
    for draws in (short, long):
        started = time.perf_counter()
        idata = pm.sample(step=step, draws=draws, tune=TUNE, chains=1, progressbar=False,
                          random_seed=1, model=model,
                          compute_convergence_checks=False)  # fmt: skip
        seconds[draws] = time.perf_counter() - started
    return (seconds[long] - seconds[short]) / (long - short), idata


def measure(n_data):
    model = make_model(n_data)
    started = time.perf_counter()
    step = pmm.TunaMH(model=model, progressbar=False)
    setup = time.perf_counter() - started
    tuna, idata = marginal_step_seconds(step, model)
    with model:  # PyMC's step methods look up the model in the context
        do_nothing = DoNothing([model.rvs_to_values[model["beta"]]], model)
    # ten times the steps: the difference of the two runs is then well above their noise
    noop, _ = marginal_step_seconds(do_nothing, model, 10 * SHORT_DRAWS, 10 * LONG_DRAWS)
    stats = idata.sample_stats
    return {
        "n_data": n_data,
        "setup_seconds": setup,
        "setup_passes": step.minibatch_model.full_data_passes,
        "stages": [list(row) for row in step.setup_report.table()],
        "tuna_step_us": tuna * 1e6,
        "noop_step_us": noop * 1e6,
        "mean_batch_size": float(stats["batch_size"].mean()),
        "accept_rate": float(stats["accepted"].mean()),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-data", type=int, nargs="+", default=list(DEFAULT_N_DATA))
    parser.add_argument("--json", default=str(RESULTS / "step_cost.json"),
                        help="where to write the results (with the machine and versions)")
    args = parser.parse_args(argv)
    results = []
    for n_data in args.n_data:
        result = measure(n_data)
        results.append(result)
        print(f"N = {n_data:.0e}: setup {result['setup_seconds']:.2f} s in "
              f"{result['setup_passes']} full-data passes")  # fmt: skip
        for name, passes, seconds in result["stages"]:
            print(f"    {name:<12} {passes:>2} passes {seconds:7.2f} s")
        print(f"  TunaMH step {result['tuna_step_us']:.0f} us, no-op step "
              f"{result['noop_step_us']:.0f} us (ratio "
              f"{result['tuna_step_us'] / result['noop_step_us']:.1f}); "
              f"{result['mean_batch_size']:.1f} rows per step, acceptance "
              f"{result['accept_rate']:.3f}")  # fmt: skip
    write_results(args.json, {"environment": environment(), "results": results})


if __name__ == "__main__":
    main()
