"""Kernels are pure NumPy: importing them must not import PyMC or PyTensor."""

import subprocess
import sys
from pathlib import Path

import pymc_minibatch.kernels as kernels


def test_kernel_modules_import_without_pymc_or_pytensor():
    modules = sorted(
        p.stem for p in Path(kernels.__file__).parent.glob("*.py") if p.stem != "__init__"
    )
    assert modules, "no kernel modules found"
    # import the files directly, bypassing the package __init__ (which imports PyMC)
    code = (
        "import importlib.util, sys, pathlib\n"
        f"root = pathlib.Path({str(Path(kernels.__file__).parent)!r})\n"
        f"for name in {modules!r}:\n"
        "    spec = importlib.util.spec_from_file_location(name, root / (name + '.py'))\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "banned = ('pymc', 'pytensor', 'pymc_minibatch')\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in banned]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
