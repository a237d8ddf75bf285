"""What a benchmark records beside its numbers: the machine, the versions, the command; and
the writing of its results to ``benchmarks/results/``."""

import importlib.metadata
import json
import os
import pathlib
import platform
import subprocess
import sys

#: Where the benchmarks write their results (committed; the docs read them).
RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def environment(extra_packages=()):
    """The machine (CPU model, cores), the versions of Python, PyMC, PyTensor, NumPy, ArviZ
    and ``extra_packages`` (None where not installed), this repository's commit and the
    command of this run."""
    cpuinfo = pathlib.Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    cpu = next((line.split(":", 1)[1].strip() for line in lines
                if line.startswith("model name")), platform.processor())  # fmt: skip
    versions = {}
    for package in ("pymc", "pytensor", "numpy", "arviz", *extra_packages):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=pathlib.Path(__file__).parent).stdout.strip()  # fmt: skip
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            **versions, "commit": commit or None,
            "command": " ".join(["python", _script(), *sys.argv[1:]])}  # fmt: skip


def _script():
    """This run's script relative to the repository's root (the same command from any
    working directory)."""
    script = pathlib.Path(sys.argv[0]).resolve()
    root = pathlib.Path(__file__).resolve().parent.parent
    return str(script.relative_to(root)) if script.is_relative_to(root) else sys.argv[0]


def write_results(path, results):
    """Write ``results`` as indented JSON to ``path``, its folder created if needed."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n")
