"""Kernels are pure NumPy: they import neither PyMC nor PyTensor, and no other package module."""

import ast
from pathlib import Path

import pymc_minibatch.kernels as kernels

KERNEL_FILES = sorted(Path(kernels.__file__).parent.glob("*.py"))


def _imported_modules(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module or ""


def test_kernel_modules_import_only_numpy_scipy_stdlib_and_other_kernels():
    assert len(KERNEL_FILES) > 3
    for path in KERNEL_FILES:
        for module in _imported_modules(path):
            top = module.split(".")[0]
            assert top not in ("pymc", "pytensor"), f"{path.name} imports {module}"
            if top == "pymc_minibatch":
                assert module.startswith("pymc_minibatch.kernels"), f"{path.name} imports {module}"
