"""The docs' tables of measured figures, rendered from ``benchmarks/results/`` at every build.

Each function reads one committed results file and returns a Markdown table; ``write_tables``
writes them into ``docs/tables/`` (generated, not committed), where the pages include them
(``{include} tables/NAME.md``), each followed by the command, commit and PyMC version that
produced it. Rerunning a benchmark and rebuilding the docs updates the page.
"""

import json
from pathlib import Path

DOCS = Path(__file__).resolve().parent
RESULTS = DOCS.parent / "benchmarks" / "results"
TABLES = DOCS / "tables"


def _load(name):
    return json.loads((RESULTS / name).read_text())


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _source(results, name):
    environment = results["environment"]
    commit = (environment.get("commit") or "unknown")[:7]
    return (f"Written by `{environment['command']}` (commit `{commit}`, PyMC "
            f"{environment['pymc']}, {environment['cores']} cores) into "
            f"`benchmarks/results/{name}`.")  # fmt: skip


def zoo():
    """Every sampler on every everyday zoo model: ok (with the worst mean error in
    reference sds), refused, inaccurate or error."""
    name = "zoo.json"
    results = _load(name)
    cells = {(cell["sampler"], cell["model"]): cell for cell in results["cells"]}
    samplers = results["samplers"]
    rows = []
    for model in results["models"]:
        row = [model]
        for sampler in samplers:
            cell = cells.get((sampler, model))
            if cell is None:
                row.append("")
            elif cell["outcome"] == "ok" and cell["mean_error"] is not None:
                row.append(f"ok ({cell['mean_error']:.2f})")
            else:
                row.append(cell["outcome"])
        rows.append(row)
    return _table(["model", *samplers], rows), f"{_source(results, name)} Seed {results['seed']}."


def compile_times():
    """Seconds to build ``pmm.TunaMH()`` and to run NUTS, PyTensor's cache empty then
    filled, in both supported environments."""
    columns = {"compile_times_py311.json": "PyMC 5, Python 3.11 (C)",
               "compile_times_py312.json": "PyMC 6, Python 3.12 (Numba)"}  # fmt: skip
    runs = {name: _load(name) for name in columns}

    def cell(name, key):
        seconds = [runs[name]["runs"][cache]["seconds"][key]
                   for cache in ("empty cache", "filled cache")]  # fmt: skip
        return ", then ".join(f"{value:.3g} s" for value in seconds)

    rows = [["`pmm.TunaMH()` built", *(cell(name, "tunamh_setup") for name in columns)],
            ["`pm.sample()` of NUTS, 400 draws", *(cell(name, "nuts_sample")
                                                   for name in columns)]]  # fmt: skip
    sources = " ".join(_source(runs[name], name) for name in columns)
    return _table(["", *columns.values()], rows), sources


#: The samplers of the peers table, in its order, and their labels.
PEERS = {"nuts": "PyMC NUTS", "nutpie": "nutpie", "numpyro": "numpyro NUTS",
         "hmcecs": "numpyro HMCECS (approximate)", "tunamh": "`TunaMH()`",
         "sgld": "`SGLD(batch_size=1000)` (approximate)"}  # fmt: skip


def peers():
    """Seconds to 1000 effective draws (setup included) and the largest error of a mean in
    reference sds, for each sampler and number of rows of ``benchmarks/peers.py``."""
    name = "peers.json"
    results = _load(name)
    runs = {(run["sampler"], run["N"]): run for run in results["runs"]}
    sizes = sorted({run["N"] for run in results["runs"]})
    header = ["sampler"]
    for n in sizes:
        header += [f"$N = 10^{len(str(n)) - 1}$", "mean error"]
    rows = []
    for sampler, label in PEERS.items():
        row = [label]
        for n in sizes:
            run = runs.get((sampler, n), {})
            seconds = run.get("time_to_1000_s")
            if seconds is None:
                row += ["-", "-"]
                continue
            row.append(f"{seconds:.3g}" + (" (extrapolated)" if run.get("extrapolated") else ""))
            accuracy = run.get("accuracy")
            row.append(f"{accuracy['max_mean_error_sd']:.3f}" if accuracy
                       else "-" if run.get("extrapolated") else "reference")  # fmt: skip
        rows.append(row)
    return _table(header, rows), _source(results, name)


def laplace_scaling():
    """Time, full-data passes and peak memory of the all-rows Laplace fit against G."""
    name = "laplace_scaling.json"
    results = _load(name)
    rows = [[f"{fit['groups']:,}", f"{fit['ndim']:,}", f"{fit['fit_s']:.1f}", fit["passes"],
             f"{fit['peak_rss_mb']:.0f}", f"{fit['data_mb']:.0f}"]
            for fit in results["fits"]]  # fmt: skip
    header = ["groups $G$", "parameters", "fit s", "full-data passes",
              "peak memory of the process, MB", "the rows, MB"]  # fmt: skip
    return _table(header, rows), _source(results, name)


def stratified_batches():
    """SGLD with batches stratified by group against uniform batches."""
    name = "stratified_batches.json"
    results = _load(name)
    rows = []
    for run in results["runs"]:
        groups = run["model"].split("_G")[1].split("_")[0]
        rows.append([f"{groups} groups", "stratified" if run["stratify"] else "uniform",
                     f"{run['noise_ratio']:.3f}", f"{run['min_ess']:.0f}",
                     f"{run['max_mean_error_sd']:.3f}",
                     f"{run['sd_ratio_min']:.2f}–{run['sd_ratio_max']:.2f}"])  # fmt: skip
    header = ["model ($10^5$ rows, centred)", "batches", "noise ratio $r$", "min ESS",
              "largest mean error, sds", "sd / NUTS sd"]  # fmt: skip
    return _table(header, rows), _source(results, name)


def big_models_cost():
    """Per update (per step for the particles) on the 784-200-10 network, against the
    hand-written minibatch gradient."""
    name = "big_models_cost.json"
    results = _load(name)
    floor = results["floor_ms"]
    rows = [["one minibatch gradient, by hand in NumPy (the floor)", f"{floor:.2f}", "1.00",
             ""],
            ["the package's minibatch gradient", f"{results['package_gradient_ms']:.2f}",
             f"{results['package_gradient_ms'] / floor:.2f}", ""]]  # fmt: skip
    for run in results["samplers"]:
        rows.append([f"`{run['sampler']}` at its defaults", f"{run['update_ms']:.2f}",
                     f"{run['update_over_floor']:.2f}", f"{run['setup_seconds']:.1f}"])  # fmt: skip
    for run in results["particles"]:
        rows.append([f"`sample_particles({run['method']!r})`, {run['n_particles']} particles, "
                     "a step", f"{run['step_ms']:.1f}",
                     f"{run['step_over_floor']:.2f} × {run['n_particles']}", ""])  # fmt: skip
    network = results["network"]
    header = ["an update of", "ms", "× floor", "setup, s"]
    note = (f"{network['parameters']} parameters, {network['rows']} rows, batch "
            f"{network['batch_size']}, one BLAS thread; each row against the floor measured "
            f"before and after its own runs. {_source(results, name)}")
    return _table(header, rows), note


def networks_digits():
    """Test accuracy, log-likelihood and calibration of every big-model sampler and of the
    baselines on the digits network."""
    name = "networks_digits.json"
    results = _load(name)
    rows = []
    for method, run in results["runs"].items():
        accuracy = f"{run['accuracy']:.3f}"
        if run["accuracy_min"] < run["accuracy_max"]:
            accuracy += f" ({run['accuracy_min']:.3f}-{run['accuracy_max']:.3f})"
        rows.append([method, accuracy, f"{run['log_likelihood']:.3f}", f"{run['ece']:.3f}",
                     f"{run['seconds']:.1f}"])  # fmt: skip
    network = results["network"]
    header = ["method", "test accuracy (range)", "test log-likelihood",
              "calibration error (ECE)", "seconds"]  # fmt: skip
    note = (f"{'-'.join(str(w) for w in network['shape'])} ReLU network, "
            f"{network['train_rows']} training and {network['test_rows']} test images, "
            f"batch {network['batch_size']}, {network['epochs']} epochs; means over "
            f"{len(results['seeds'])} seeds of the samplers (the range of the accuracy "
            f"beside it). {_source(results, name)}")
    return _table(header, rows), note


RENDERERS = {"zoo": zoo, "big_models_cost": big_models_cost, "networks_digits": networks_digits,
             "compile_times": compile_times, "peers": peers,
             "laplace_scaling": laplace_scaling,
             "stratified_batches": stratified_batches}  # fmt: skip


def write_tables():
    """Write every table to ``docs/tables/NAME.md`` (only those whose text changed, so that
    Sphinx rebuilds only their pages)."""
    TABLES.mkdir(exist_ok=True)
    for name, render in RENDERERS.items():
        table, source = render()
        text = f"{table}\n\n{source}\n"
        target = TABLES / f"{name}.md"
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
