"""No module of the package reads another module's private attributes.

The rule, on the syntax of every file of ``pymc_minibatch/``: an attribute access
``x._name`` (one leading underscore, not a dunder), or ``getattr``/``setattr``/``hasattr``
of ``x`` with such a literal name, is allowed only where

- ``x`` is ``self`` or ``cls`` (an object reading its own state), or
- ``_name`` is defined by a class of this module (a method, a class-level assignment or an
  assignment ``obj._name = ...`` here) and by no other module of the package: a name both
  define could be read across the boundary under cover of the local one, or
- ``_name`` is part of a named tuple's public API (``_replace``, ``_asdict``, ...).

Private names imported from another module (``from .x import _helper``) are a separate,
looser rule: only the ones listed in :data:`PRIVATE_IMPORTS` may be.
"""

import ast
from pathlib import Path

import pymc_minibatch

PACKAGE = Path(pymc_minibatch.__file__).parent
FILES = sorted(PACKAGE.rglob("*.py"))

#: ``namedtuple``'s documented methods and attributes (underscored to avoid field clashes).
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_field_defaults", "_make"}
#: ``(importing module, imported module, name)`` of the private names imported across
#: modules: a private compatibility helper of the package's private ``_compat`` module.
PRIVATE_IMPORTS = {("plotting", "pymc_minibatch._compat", "_arviz_major")}
#: Built-ins that read or write an attribute named by their second argument.
ATTRIBUTE_BUILTINS = {"getattr", "setattr", "hasattr", "delattr"}


def _is_private(name):
    return name.startswith("_") and not name.startswith("__") and len(name) > 1


def defined_attributes(tree):
    """The private attribute names a module defines: its classes' methods and class-level
    assignments, and every ``obj._name = ...`` (or ``del obj._name``) in it."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(item.name)
                elif isinstance(item, ast.Assign | ast.AnnAssign):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.attr)
    return {name for name in names if _is_private(name)}


def private_accesses(tree):
    """``(line, owner source, name)`` of each read of a private attribute of an object
    other than ``self`` or ``cls``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            owner = node.value
            name = node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ATTRIBUTE_BUILTINS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _is_private(node.args[1].value)
        ):
            owner, name = node.args[0], node.args[1].value
        else:
            continue
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        yield node.lineno, ast.unparse(owner), name


def violations(sources):
    """Cross-module private reads in ``sources`` (``{module name: source text}``)."""
    trees = {module: ast.parse(source) for module, source in sources.items()}
    defined = {module: defined_attributes(tree) for module, tree in trees.items()}
    found = []
    for module, tree in trees.items():
        elsewhere = set().union(*(names for other, names in defined.items() if other != module))
        for line, owner, name in private_accesses(tree):
            if name in NAMEDTUPLE_API or (name in defined[module] and name not in elsewhere):
                continue
            found.append(f"{module}:{line}: {owner}.{name}")
    return found


def private_imports(module, tree):
    """``(module, imported module, name)`` of each private name imported from the package."""
    package_parts = module.split(".")[:-1]
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:  # a relative import, resolved against the module's package
            base = package_parts[: len(package_parts) - node.level + 1]
            imported = ".".join(["pymc_minibatch", *base, *filter(None, [node.module])])
        else:
            imported = node.module or ""
        if imported.split(".")[0] != "pymc_minibatch":
            continue
        for alias in node.names:
            if _is_private(alias.name):
                yield module, imported, alias.name


def _module_name(path):
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def _package_sources():
    return {_module_name(path): path.read_text() for path in FILES}


def test_no_module_reads_another_modules_private_attributes():
    assert len(FILES) > 50
    assert violations(_package_sources()) == []


def test_private_names_are_imported_across_modules_only_where_listed():
    found = {
        found
        for module, source in _package_sources().items()
        for found in private_imports(module, ast.parse(source))
    }
    assert found == PRIVATE_IMPORTS


def test_the_rule_catches_a_read_of_the_adapters_private_state():
    sources = {
        "model.adapter": "class MinibatchModel:\n    def __init__(self):\n"
        "        self._row_graph = None\n",
        "model.region": "def f(minibatch_model):\n    return minibatch_model._row_graph\n",
        "model.lipschitz": "def g(mm):\n    return getattr(mm, '_row_graph')\n",
    }
    assert violations(sources) == [
        "model.region:2: minibatch_model._row_graph",
        "model.lipschitz:2: mm._row_graph",
    ]


def test_a_local_definition_does_not_cover_a_name_another_module_defines():
    sources = {
        "model.adapter": "class A:\n    def __init__(self):\n        self._rows = 1\n",
        "model.region": "class B:\n    _rows = 2\n\ndef f(mm):\n    return mm._rows\n",
    }
    assert violations(sources) == ["model.region:5: mm._rows"]


def test_own_state_dunders_and_named_tuple_api_are_allowed():
    sources = {
        "kernels.state": "class S:\n    def __init__(self):\n        self._x = 1\n"
        "    def copy(self, other):\n        other._x = self._x\n"
        "        return other._replace(a=1).__class__\n",
    }
    assert violations(sources) == []
