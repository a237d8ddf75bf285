"""Sphinx configuration of the pymc-minibatch documentation.

Build with ``sphinx-build -W --keep-going -b html docs docs/_build/html`` from the repository
root. The tutorials are the jupytext percent scripts ``examples/*.py``; they are copied into
``docs/tutorials/`` (generated, not committed) and executed by myst-nb at every build.
"""

import filecmp
import os
import shutil
import sys
from pathlib import Path

import jupytext

import pymc_minibatch

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS))  # the table renderers beside this file

from results_tables import write_tables  # noqa: E402

EXAMPLES = DOCS.parent / "examples"
TUTORIALS = DOCS / "tutorials"


def _copy_tutorials():
    """Mirror ``examples/*.py`` (names not starting with ``_``) into ``docs/tutorials/``,
    each with its ``.ipynb`` (for the download link at the top of each tutorial).

    Files are rewritten only when their content changed, so that Sphinx sees unchanged
    tutorials as unchanged; tutorials deleted from ``examples/`` are removed.
    """
    TUTORIALS.mkdir(exist_ok=True)
    sources = (
        {p.name: p for p in EXAMPLES.glob("*.py") if not p.name.startswith("_")}
        if EXAMPLES.is_dir()
        else {}
    )
    for stale in TUTORIALS.glob("*.py"):
        if stale.name not in sources:
            stale.unlink()
    for stale in TUTORIALS.glob("*.ipynb"):
        if f"{stale.stem}.py" not in sources:
            stale.unlink()
    for name, source in sources.items():
        target, notebook = TUTORIALS / name, (TUTORIALS / name).with_suffix(".ipynb")
        if not target.exists() or not filecmp.cmp(source, target, shallow=False):
            shutil.copy2(source, target)
        if not notebook.exists() or notebook.stat().st_mtime < target.stat().st_mtime:
            # the unexecuted notebook each tutorial page offers for download
            jupytext.write(jupytext.read(source), notebook)


# Included by api.md, not a page of its own; listed for autosummary, which otherwise scans only
# pages for the objects to write stubs for.
STEP_METHOD_SECTIONS = "api_step_methods.md"  # beside api.md: the same :toctree: paths


def _write_step_method_sections():
    """API sections of the step methods, one per family, from ``pymc_minibatch.registry``."""
    from pymc_minibatch import registry

    sections = []
    for family, title in registry.FAMILIES.items():
        names = [entry.name for entry in registry.SAMPLERS if entry.family == family]
        listing = "\n".join(f"   {name}" for name in names)
        sections.append(
            f"## {title}\n\n```{{eval-rst}}\n.. autosummary::\n   :toctree: generated\n"
            f"   :nosignatures:\n\n{listing}\n```\n"
        )
    target = DOCS / STEP_METHOD_SECTIONS
    # autosummary reads this file on its own, without api.md's current module
    header = "```{eval-rst}\n.. currentmodule:: pymc_minibatch\n```\n\n"
    text = header + "\n".join(sections)
    if not target.exists() or target.read_text() != text:
        target.write_text(text)


#: Figures drawn at every build from committed benchmark results (generated, not committed).
FIGURES = DOCS / "figures"
#: Results of ``benchmarks/peers.py`` on the logistic regression with d = 10, one file per run.
PEERS_RESULTS = [DOCS.parent / "benchmarks" / "results" / name
                 for name in ("peers_N1e4_d10.json", "peers.json")]  # fmt: skip
#: Samplers of the landing figure: label, colour, marker.
LANDING_SAMPLERS = {
    "tunamh": ("pmm.TunaMH (exact)", "C0", "o"),
    "sgld": ("pmm.SGLD (approximate)", "C1", "s"),
    "hmcecs": ("numpyro HMCECS (approximate)", "C4", "v"),
    "numpyro": ("numpyro NUTS", "C2", "^"),
    "nutpie": ("nutpie NUTS", "C3", "D"),
    "nuts": ("PyMC NUTS", "C7", "x"),
}


def _draw_landing_figure():
    """Time to 1000 effective draws (setup included) against N for each sampler of the
    ``benchmarks/peers.py`` results in ``PEERS_RESULTS``, drawn into
    ``docs/figures/time_to_answer.png``; times the benchmark extrapolated in N rather than
    measured get open markers."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [run for path in PEERS_RESULTS for run in json.loads(path.read_text())["runs"]]
    figure, axes = plt.subplots(figsize=(6.4, 4.0))
    for sampler, (label, colour, marker) in LANDING_SAMPLERS.items():
        points = sorted((run["N"], run["time_to_1000_s"], bool(run.get("extrapolated")))
                        for run in runs
                        if run["sampler"] == sampler and run.get("time_to_1000_s"))  # fmt: skip
        if not points:
            continue
        rows, seconds, _ = zip(*points, strict=True)
        axes.plot(rows, seconds, color=colour, marker=marker, label=label)
        for n, time_to_answer, extrapolated in points:  # extrapolated in N: open markers
            if extrapolated:
                axes.plot(n, time_to_answer, marker=marker, color=colour,
                          markerfacecolor="white")  # fmt: skip
    axes.set(xscale="log", yscale="log", xlabel="rows N",
             ylabel="seconds to 1000 effective draws\n(setup included)",
             title="Logistic regression, 10 coefficients, one core\n"
                   "(open markers: extrapolated from fewer rows)")  # fmt: skip
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    FIGURES.mkdir(exist_ok=True)
    figure.savefig(FIGURES / "time_to_answer.png", dpi=120)
    plt.close(figure)


_copy_tutorials()
_write_step_method_sections()
_draw_landing_figure()
write_tables()

# The pip wheels of PyTensor find no BLAS to link and say so, with a local path, in the first
# cell that compiles; an explicit empty setting selects the same NumPy fallback silently. The
# tutorials' kernels inherit this environment.
if "blas__ldflags" not in os.environ.get("PYTENSOR_FLAGS", ""):
    os.environ["PYTENSOR_FLAGS"] = ",".join(
        flag for flag in (os.environ.get("PYTENSOR_FLAGS"), "blas__ldflags=") if flag
    )

project = "pymc-minibatch"
author = "pymc-minibatch developers"
copyright = "2026, pymc-minibatch developers"
release = pymc_minibatch.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]

exclude_patterns = [
    "_build",
    "conf.py",
    "**/.ipynb_checkpoints",
    "jupyter_execute",
    "tutorials/*.ipynb",
    STEP_METHOD_SECTIONS,
    "results_tables.py",  # renders tables/, included by the pages
    "architecture_example.py",  # included piecewise by architecture.md
    "tables",
]
templates_path = ["_templates"]

# ---- MyST and myst-nb -----------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
nb_custom_formats = {".py": ["jupytext.reads", {"fmt": "py:percent"}]}
nb_execution_mode = "force"  # the tutorials are tests of the package: always run them
nb_execution_raise_on_error = True
nb_execution_timeout = 1800  # seconds per cell
nb_execution_show_tb = True
nb_merge_streams = True

# ---- API reference --------------------------------------------------------------------------
autosummary_generate = ["api.md", STEP_METHOD_SECTIONS]
autosummary_imported_members = False
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # types are in the NumPy-style docstrings
autodoc_default_options = {
    "members": True,
    # PyMC's step-method plumbing, called by pm.sample and not by users
    "exclude-members": "astep, stats_dtypes_shapes, reset_tuning, stop_tuning, competence, "
    "kernel_params, make_exact_model, check_bounds, info_stats, tune_after, metropolis_stats, "
    "adapt_proposal_scale, default_step_size, remember, recall, current_logdensity",
}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

# ---- HTML -----------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"pymc-minibatch {release}"
