"""Every public name has a NumPy-style docstring with an Examples section, and the examples run.

Public names: ``pymc_minibatch.__all__``, the public classes and functions of the public
modules in it (``bounds``, ``schedules``: their ``__all__`` where they have one, otherwise
what they define), and the public methods of ``MinibatchModel``, its own and those of the
package's mixins it is assembled from. The doctests of every module that defines one of them
are run; examples that sample for long are marked ``# doctest: +SKIP`` in the docstrings.

Examples that import an optional extra's package (Dask for ``ChunkedRows``) are left out where
it is not installed, so that ``pytest -m slow`` runs the rest of their module's examples with
only the ``test`` extra; a module with no example left to run fails, naming the extra, as does
any example left out with ``PMM_REQUIRE_EXTRAS`` set, as ``.ci/run`` sets it where every extra
is installed, so that none goes unchecked in CI. Nothing here skips.

A method's examples continue the example of its class: they run with the names that the class
example defined (so ``MinibatchModel``'s methods use its ``mm``), also when the method is
defined on a mixin in another module.
"""

import doctest
import importlib
import importlib.util
import inspect
import os
import re
import sys
import types
import warnings
from pathlib import Path

import pytest

import pymc_minibatch

EXAMPLES_SECTION = re.compile(r"^\s*Examples\n\s*-{8,}\s*$", re.MULTILINE)
OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
#: Set (by ``.ci/run``) where every extra is installed: an example left out for a missing
#: package then fails even when the rest of its module runs, so that none goes unchecked in CI.
REQUIRE_EXTRAS = "PMM_REQUIRE_EXTRAS"

#: Classes whose public methods users call directly: their methods need examples too.
CLASSES_WITH_PUBLIC_METHODS = ("MinibatchModel",)


def _package_classes(cls):
    """``cls`` and the classes of this package it inherits from (its mixins), in MRO order."""
    return [klass for klass in cls.__mro__ if klass.__module__.split(".")[0] == "pymc_minibatch"]


def public_methods(cls):
    """``{name: function}`` of the public methods of ``cls``, its own and those it gets from
    the package's mixins (the first definition in the MRO wins, as for attribute lookup)."""
    methods = {}
    for klass in _package_classes(cls):
        for member, obj in vars(klass).items():
            if not member.startswith("_") and inspect.isfunction(obj):
                methods.setdefault(member, obj)
    return methods


def mixins():
    """``{qualified name of a mixin: the public class assembled from it}``: a mixin's method
    examples continue that class's example."""
    return {
        f"{mixin.__module__}.{mixin.__qualname__}": cls
        for cls in (getattr(pymc_minibatch, name) for name in CLASSES_WITH_PUBLIC_METHODS)
        for mixin in _package_classes(cls)[1:]
    }


def _module_public_names(module):
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and obj.__module__ == module.__name__
    ]


def public_objects():
    """``{qualified name: object}`` of every public name (see the module docstring)."""
    objects = {}
    for name in pymc_minibatch.__all__:
        obj = getattr(pymc_minibatch, name)
        objects[f"pymc_minibatch.{name}"] = obj
        if isinstance(obj, types.ModuleType):
            for member in _module_public_names(obj):
                objects[f"pymc_minibatch.{name}.{member}"] = getattr(obj, member)
    for class_name in CLASSES_WITH_PUBLIC_METHODS:
        for member, obj in public_methods(getattr(pymc_minibatch, class_name)).items():
            objects[f"pymc_minibatch.{class_name}.{member}"] = obj
    return objects


def modules_with_public_names():
    modules = set()
    for obj in public_objects().values():
        module = obj if isinstance(obj, types.ModuleType) else inspect.getmodule(obj)
        modules.add(module.__name__)
    return sorted(modules)


@pytest.mark.parametrize("name", sorted(public_objects()))
def test_public_name_has_examples(name):
    docstring = inspect.getdoc(public_objects()[name])
    assert docstring, f"{name} has no docstring"
    assert EXAMPLES_SECTION.search(docstring), f"{name}'s docstring has no Examples section"


def test_public_names_are_enumerated():
    # guards the enumeration itself: the samplers, the adapter's methods, both modules
    names = public_objects()
    for expected in (
        "pymc_minibatch.TunaMH",
        "pymc_minibatch.sample_particles",
        "pymc_minibatch.MinibatchModel.loglik",
        "pymc_minibatch.MinibatchModel.grad_estimate",
        "pymc_minibatch.MinibatchModel.laplace",
        "pymc_minibatch.MinibatchModel.rows_function",
        "pymc_minibatch.MinibatchModel.theta_from_point",
        "pymc_minibatch.bounds.Bounds",
        "pymc_minibatch.schedules.cyclical",
    ):
        assert expected in names


IMPORTED = re.compile(r"^\s*(?:import|from)\s+(\w+)")


def _missing_imports(tests):
    """Top-level packages the examples of ``tests`` import that are not installed."""
    imported = {match.group(1) for test in tests for example in test.examples
                if (match := IMPORTED.match(example.source))}  # fmt: skip
    return sorted(name for name in imported if importlib.util.find_spec(name) is None)


def _class_example(cls):
    """The doctest of ``cls``'s own docstring (not of its methods), in its module's globals."""
    module = inspect.getmodule(cls)
    finder = doctest.DocTestFinder(recurse=False, exclude_empty=True)
    (test,) = finder.find(cls, f"{module.__name__}.{cls.__qualname__}", module=module)
    return test


def _run_module_doctests(module_name):
    """Run a module's doctests; a method's test starts from its class test's names (a mixin's
    method's from those of the class assembled from the mixin). An example that imports a
    package that is not installed is left out, with the tests that continue it; the test
    fails when nothing of the module is left to run, or when ``REQUIRE_EXTRAS`` is set."""
    module = importlib.import_module(module_name)
    tests = sorted(doctest.DocTestFinder(exclude_empty=True).find(module), key=lambda t: t.name)
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    report = []
    finished, left_out = {}, {}  # test name -> globals it left; -> packages it lacked
    for mixin, cls in mixins().items():  # run first, as the mixin's test: its methods follow
        if mixin.rpartition(".")[0] == module_name:
            tests.insert(0, _class_example(cls))
            tests[0].name = mixin
    for test in tests:  # sorted by name: a class's test precedes its methods' tests
        parent = test.name.rpartition(".")[0]
        missing = _missing_imports([test]) or left_out.get(parent)
        if missing:
            left_out[test.name] = missing
            continue
        for earlier in (parent, test.name):  # a mixin's own docstring: after the class's
            if earlier in finished:
                test.globs = {**test.globs, **finished[earlier]}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runner.run(test, out=report.append, clear_globs=False)
        finished[test.name] = test.globs
    if left_out:
        packages = sorted({name for names in left_out.values() for name in names})
        message = f"examples of {module_name} need {', '.join(packages)} (an extra)"
        if os.environ.get(REQUIRE_EXTRAS):  # CI installs every extra: none may be left out
            pytest.fail(f"{message}, and {REQUIRE_EXTRAS} is set")
        if not finished:  # nothing ran: a pass would check nothing
            pytest.fail(f"{message}, and no other example of it runs: install it")
    return runner.summarize(verbose=False), "".join(report)


@pytest.mark.slow  # compiles every example's model: run once in CI (see .ci/run)
@pytest.mark.parametrize("module_name", modules_with_public_names())
def test_doctests(module_name):
    (failed, attempted), report = _run_module_doctests(module_name)
    assert failed == 0, f"{failed} of {attempted} examples failed in {module_name}:\n{report}"


def test_examples_that_import_a_missing_package_are_found():
    parser = doctest.DocTestParser()
    test = parser.get_doctest(
        ">>> import numpy as np\n>>> from not_installed_package_xyz import thing\n",
        {}, "example", None, 0,
    )  # fmt: skip
    assert _missing_imports([test]) == ["not_installed_package_xyz"]


def test_only_the_examples_that_need_a_missing_package_are_left_out(monkeypatch):
    module = types.ModuleType("module_with_an_optional_example")

    def plain():
        """>>> 1 + 1
        3
        """

    def optional():
        """>>> import not_installed_package_xyz"""

    plain.__module__ = optional.__module__ = module.__name__
    module.plain, module.optional = plain, optional
    monkeypatch.setitem(sys.modules, module.__name__, module)
    (failed, attempted), _ = _run_module_doctests(module.__name__)
    assert (failed, attempted) == (1, 1)  # the plain example ran (and fails, as written)


def _module_with_only_an_optional_example(monkeypatch):
    module = types.ModuleType("module_with_only_an_optional_example")

    def optional():
        """>>> import not_installed_package_xyz"""

    optional.__module__ = module.__name__
    module.optional = optional
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module.__name__


def test_a_module_with_nothing_left_to_run_fails_without_the_extras_required(monkeypatch):
    monkeypatch.delenv(REQUIRE_EXTRAS, raising=False)
    with pytest.raises(pytest.fail.Exception, match="need not_installed_package_xyz.*install"):
        _run_module_doctests(_module_with_only_an_optional_example(monkeypatch))


def test_a_left_out_example_fails_where_every_extra_is_required(monkeypatch):
    monkeypatch.setenv(REQUIRE_EXTRAS, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_EXTRAS} is set"):
        _run_module_doctests(_module_with_only_an_optional_example(monkeypatch))


def test_ci_runs_the_doctests_with_every_extra_required():
    # an example left out (its extra not installed) must never go unchecked in CI: .ci/run runs
    # the slow tests, the doctests among them, with every extra installed and this variable set
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert re.search(rf"^{REQUIRE_EXTRAS}=1 run_pytest \S+ -m slow\b", ci, flags=re.M)
