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
    reference sds), refused, inaccurate or error; then the network's row (its own results
    file), with "-" for the samplers it does not run."""
    name, network_name = "zoo.json", "zoo_network.json"
    results = _load(name)
    samplers = results["samplers"]
    rows = _zoo_rows(results, samplers, "")
    source = f"{_source(results, name)} Seed {results['seed']}."
    if (RESULTS / network_name).exists():
        network = _load(network_name)
        rows += _zoo_rows(network, samplers, "-")
        source += (f" The network's row: {_source(network, network_name)} Seed "
                   f"{network['seed']}.")  # fmt: skip
    return _table(["model", *samplers], rows), source


def _zoo_rows(results, samplers, not_run):
    """The rows of one zoo results file (``not_run`` where it has no cell)."""
    cells = {(cell["sampler"], cell["model"]): cell for cell in results["cells"]}
    rows = []
    for model in results["models"]:
        row = [model]
        for sampler in samplers:
            cell = cells.get((sampler, model))
            if cell is None:
                row.append(not_run)
            elif cell["outcome"] == "ok" and cell["mean_error"] is not None:
                row.append(f"ok ({cell['mean_error']:.2f})")
            else:
                row.append(cell["outcome"])
        rows.append(row)
    return rows


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
                     f"a step (the particles' interaction alone: {run['interaction_ms']:.1f} "
                     f"ms; the rest of the step: {run['rest_over_floor']:.2f} × "
                     f"{run['n_particles']} floors)", f"{run['step_ms']:.1f}",
                     f"{run['step_over_floor']:.2f} × {run['n_particles']}", ""])  # fmt: skip
    network = results["network"]
    header = ["an update of", "ms", "× floor", "setup, s"]
    note = (f"{network['parameters']} parameters, {network['rows']} rows, batch "
            f"{network['batch_size']}, one BLAS thread; each row against the floor measured "
            f"around its own runs (for the samplers of pm.sample, the medians over 5 pairs of "
            f"runs of the cost and of its ratio to the floor, which differ from the ratio of "
            f"the medians). {_source(results, name)}")
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


def _epoch_marks(epochs):
    """The epochs at which the network tables show the test error: the first, a quarter, a
    half and the last."""
    return sorted({1, max(1, epochs // 4), max(1, epochs // 2), epochs})


#: The labels of the methods of ``benchmarks/networks_mnist_shape.py`` in its tables.
MNIST_SHAPE_LABELS = {"SGMGTD": "SGMGT-D, a = 1", "SGMGTD a=2": "SGMGT-D, a = 2",
                      "svgd": "SVGD", "wsgld": "w-SGLD", "pisgld": "π-SGLD"}  # fmt: skip


def _mnist_shape_center(part):
    """The test error at the chains' start, the diagonal fit's center (the same fit for
    every step of a section)."""
    return next((run["center_test_error"] for run in part["runs"].values()
                 if run.get("center_test_error") is not None), None)  # fmt: skip


def _mnist_shape(section):
    """Test error of the predictive average after some epochs, test log-likelihood,
    calibration and seconds of each method of one section of
    ``benchmarks/networks_mnist_shape.py``."""
    name = "networks_mnist_shape.json"
    results = _load(name)
    part = results[section]
    marks = _epoch_marks(part["epochs"])
    rows = []
    for method, run in part["runs"].items():
        label = MNIST_SHAPE_LABELS.get(method, method)
        seconds = f"{run['seconds']:.0f}"
        if run.get("setup_seconds") is not None:
            seconds += f" ({run['setup_seconds']:.0f})"
        if run["outcome"] != "ok":
            rows.append([label, *[run["outcome"]] * len(marks), "", "", seconds])
            continue
        errors = run["test_error_by_epoch"]
        rows.append([label, *("-" if errors[m - 1] is None else f"{errors[m - 1]:.3f}"
                              for m in marks),
                     f"{run['log_likelihood']:.3f}", f"{run['ece']:.3f}", seconds])  # fmt: skip
    header = ["method", *(f"epoch {m}" for m in marks), "test log-likelihood",
              "calibration error (ECE)", "seconds (setup)"]  # fmt: skip
    data = results["data"]
    averaged = "a draw per epoch"
    if section == "a":
        averaged += (f"; SGD: its point; CMINT: its snapshots so far, one per round of "
                     f"{part['cmint']['round_epochs']} epochs")
    epochs = f"{part['epochs']} epochs"
    if part.get("paper_epochs"):
        epochs += f" (the paper: {part['paper_epochs']})"
    note = (f"{'-'.join(str(w) for w in part['network'])} ReLU network, "
            f"{data['train_rows']:,} training and {data['test_rows']:,} test rows of MNIST's "
            f"shape labelled by a fixed {'-'.join(str(w) for w in data['labeller_shape'])} "
            f"network (its own test error {data['labeller']['test_error']:.3f}), batch "
            f"{part['batch_size']}, {epochs}, seed {results['seed']}; the test error of "
            f"the class probabilities averaged over the draws so far ({averaged}). The "
            f"chains start at the diagonal fit's center, test error "
            f"{_mnist_shape_center(part):.3f}. Wall time on a shared machine; setup: the "
            f"step's construction (the diagonal fit). {_source(results, name)}")
    return _table(header, rows), note


def networks_mnist_shape_a():
    """MINT's Figure 3 at its shape: SGD, SGD with momentum, SGLD, SGHMC, MINT, CMINT."""
    return _mnist_shape("a")


def networks_mnist_shape_c():
    """SGMGT's comparison on the network of MINT's Figure 3."""
    return _mnist_shape("c")


def networks_mnist_shape_b():
    """Chen et al. 2018's Table 1 at its shape: the particle methods and SGLD."""
    name = "networks_mnist_shape.json"
    results = _load(name)
    part = results["b"]
    rows = []
    for method, run in part["runs"].items():
        if run["outcome"] != "ok":
            rows.append([MNIST_SHAPE_LABELS.get(method, method), "", "", run["outcome"], "",
                         "", f"{run['seconds']:.0f}", ""])  # fmt: skip
            continue
        settled = "not settled" if any("NotSettled" in w for w in run["warnings"]) else ""
        rows.append([MNIST_SHAPE_LABELS.get(method, method), run.get("n_particles", "-"),
                     run["n_steps"],
                     f"{run['test_error']:.3f}", f"{run['log_likelihood']:.3f}",
                     f"{run['ece']:.3f}", f"{run['seconds']:.0f}", settled])  # fmt: skip
    header = ["method", "particles", "steps", "test error", "test log-likelihood",
              "calibration error (ECE)", "seconds", "warning"]  # fmt: skip
    data = results["data"]
    sgld = part["runs"].get("SGLD", {})
    note = (f"{'-'.join(str(w) for w in part['network'])} ReLU network, the same rows "
            f"(the labeller's own test error {data['labeller']['test_error']:.3f}), batch "
            f"{part['batch_size']}, {part['epochs']:g} epoch of steps, seed "
            f"{results['seed']}; the particles' predictive average, SGLD's over the second "
            f"half of its draws")
    if sgld.get("center_test_error") is not None:
        note += (f"; the center of SGLD's diagonal fit, where it starts: test error "
                 f"{sgld['center_test_error']:.3f}")
    note += (f". Wall time on a shared machine, setup included (for the particle methods, the "
             f"test predictions too). {_source(results, name)}")
    return _table(header, rows), note


#: Figures drawn from committed results with the tables (``docs/figures/``, generated).
FIGURES = DOCS / "figures"


def networks_mnist_shape_figure():
    """The test error against the epochs of sections (a) and (c) of
    ``benchmarks/networks_mnist_shape.py`` (MINT's Figure 3 in shape), drawn into
    ``docs/figures/networks_mnist_shape.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = _load("networks_mnist_shape.json")
    figure, panels = plt.subplots(1, 2, figsize=(9.6, 5.4), sharey=True)
    titles = {"a": "(a) Li & Wong 2017, Figure 3", "c": "(c) Zhang et al. 2017"}
    for axes, (section, title) in zip(panels, titles.items(), strict=True):
        part = results[section]
        for method, run in part["runs"].items():
            if run["outcome"] != "ok":
                continue
            errors = [float("nan") if e is None else e for e in run["test_error_by_epoch"]]
            axes.plot(range(1, len(errors) + 1), errors, marker=".",
                      label=MNIST_SHAPE_LABELS.get(method, method))  # fmt: skip
        axes.axhline(_mnist_shape_center(part), color="0.4", ls=":", lw=1.0,
                     label="the chains' start (the fit's center)")  # fmt: skip
        axes.axhline(results["data"]["labeller"]["test_error"], color="k", ls="--", lw=0.8,
                     label="the labelling network")  # fmt: skip
        axes.xaxis.get_major_locator().set_params(integer=True)
        axes.set(xlabel="epoch", title=f"{title}\n{'-'.join(map(str, part['network']))} ReLU, "
                 f"batch {part['batch_size']}")  # fmt: skip
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize="small", ncol=2, loc="upper center",
                    bbox_to_anchor=(0.5, -0.16))  # below the panel: the curves stay clear
    panels[0].set_ylabel("test error of the predictive average\n(SGD: of its point)")
    figure.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    figure.savefig(FIGURES / "networks_mnist_shape.png", dpi=120)
    plt.close(figure)


RENDERERS = {"zoo": zoo, "big_models_cost": big_models_cost, "networks_digits": networks_digits,
             "compile_times": compile_times, "peers": peers,
             "laplace_scaling": laplace_scaling,
             "stratified_batches": stratified_batches,
             "networks_mnist_shape_a": networks_mnist_shape_a,
             "networks_mnist_shape_b": networks_mnist_shape_b,
             "networks_mnist_shape_c": networks_mnist_shape_c}  # fmt: skip
#: Figures drawn with the tables.
FIGURE_RENDERERS = (networks_mnist_shape_figure,)


def write_tables():
    """Write every table to ``docs/tables/NAME.md`` (only those whose text changed, so that
    Sphinx rebuilds only their pages), and draw the figures of ``FIGURE_RENDERERS`` into
    ``docs/figures/``."""
    TABLES.mkdir(exist_ok=True)
    for name, render in RENDERERS.items():
        table, source = render()
        text = f"{table}\n\n{source}\n"
        target = TABLES / f"{name}.md"
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
    for draw in FIGURE_RENDERERS:
        draw()
