"""Every figure that README and the docs quote as measured traces to a committed result.

A figure is a decimal number (``141.0``, ``0.94``) or a whole number with a unit of
measurement (``151 times``, ``9.9 s``, ``30 passes``, ``5%``) in the prose of ``README.md``
and ``docs/**/*.md`` (code, inline code, maths, links, versions and citations left out).
It traces when some number, rounded to the figure's digits, equals it in:

- a results file ``benchmarks/results/*.json`` (each records the command that wrote it;
  numbers inside strings count), or the ratio of two numbers of one results file (for
  ``N times``);
- a numeric literal of the package or of the tests (a documented constant or default, or a
  figure a test asserts).

A simple check, as intended: a figure that matches a number by coincidence passes; a figure
with no source anywhere (measured once, by hand) fails. Every results file must also name
the command that wrote it (from the repository's root) and the machine.
"""

import json
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
NUMBER = r"\d[\d,]*(?:\.\d+)?"
#: A number, a second one after a dash (a range), and a unit of measurement, if any.
FIGURE = re.compile(
    rf"(?<![\w.^/-])({NUMBER})(?![\w.])(?:\s*[-–]\s*({NUMBER}))?\s*"
    r"(times|×|%|s\b|ms\b|µs|minutes|passes|GB|rows per step|effective draws)?"
)
LEFT_OUT = [
    r"```.*?```",  # code
    r"`[^`]*`",  # inline code
    r"\$\$.*?\$\$|\$[^$\n]*\$",  # maths
    r"\]\([^)]*\)|https?://\S+",  # links
    r"arXiv:\S+|doi:\S+|\(\d{4}[a-z]?\)|\b(?:19|20)\d\d\b",  # citations, years
    # versions
    r"(?:Python|PyMC|ArviZ|PyTensor|NumPy|version|v)\s*[≥>=<]*\s*\d+(?:\.\d+)*",
    r"\d+\.\d+\s*(?:[-–]\s*\d+\.x|and later|or later)|\d+\.x",
]


def _prose(text):
    for pattern in LEFT_OUT:
        text = re.sub(pattern, " ", text, flags=re.S)
    return text


def _numbers_in(value, found):
    if isinstance(value, dict):
        for item in value.values():
            _numbers_in(item, found)
    elif isinstance(value, list):
        for item in value:
            _numbers_in(item, found)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, (int, float)):
        found.add(float(value))
    elif isinstance(value, str):
        found.update(float(x) for x in re.findall(r"\d+(?:\.\d+)?(?:e-?\d+)?", value))
    return found


def _results():
    """Per results file, its numbers."""
    return {path.name: _numbers_in(json.loads(path.read_text()), set())
            for path in sorted((ROOT / "benchmarks" / "results").glob("*.json"))}  # fmt: skip


def _literals():
    found = set()
    for folder in ("pymc_minibatch", "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            found.update(float(x) for x in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?",
                                                      path.read_text()))  # fmt: skip
    return found


def _value(figure):
    """``(value, decimal digits)`` of a figure as printed."""
    digits = len(figure.split(".")[1]) if "." in figure else 0
    return float(figure.replace(",", "")), digits


def _matches(figure, candidates, percent=False):
    target, digits = _value(figure)
    scales = (1.0, 100.0) if percent else (1.0,)
    return any(round(x * scale, digits) == target for x in candidates for scale in scales)


def _is_ratio(figure, numbers):
    """Whether ``a / b`` rounds to ``figure`` for two positive numbers of one results file."""
    target, digits = _value(figure)
    half = 0.5 * 10.0**-digits
    positive = np.sort(np.array([x for x in numbers if x > 0]))
    if target <= half or positive.size < 2:
        return False
    # b in (a / (target + half), a / (target - half)] for each a: one sorted search each side
    low = np.searchsorted(positive, positive / (target + half), side="right")
    high = np.searchsorted(positive, positive / (target - half), side="right")
    return bool(np.any(high > low))


def _figures(page):
    """``(figure, unit or None, context)`` for each measured-looking figure of ``page``."""
    prose = _prose(page.read_text())
    for match in FIGURE.finditer(prose):
        unit = match.group(3)
        context = prose[max(0, match.start() - 60) : match.end() + 20]
        for figure in match.group(1, 2):
            if figure is not None and ("." in figure or unit is not None):
                yield figure, unit, context


def test_every_documented_figure_traces_to_a_result_or_a_constant():
    results = _results()
    known = set().union(*results.values()) | _literals()
    untraced = []
    for page in PAGES:
        for figure, unit, context in _figures(page):
            if _matches(figure, known, percent=unit == "%"):
                continue
            if unit in ("times", "×") and any(_is_ratio(figure, numbers)
                                             for numbers in results.values()):  # fmt: skip
                continue
            where = " ".join(context.split())
            untraced.append(f"{page.relative_to(ROOT)}: {figure} in ...{where}...")
    assert not untraced, "figures with no source:\n" + "\n".join(untraced)


def test_every_results_file_names_its_command_and_machine():
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        environment = json.loads(path.read_text()).get("environment") or {}
        assert str(environment.get("command", "")).startswith("python benchmarks/"), path.name
        assert environment.get("cpu") and environment.get("pymc"), path.name


#: Scripts of ``benchmarks/`` that are not benchmarks: shared helpers, and the writers of the
#: tests' stored NUTS references (``tests/zoo_*reference.json``, which record their own runs).
NOT_BENCHMARKS = {"bench_data.py", "networks.py", "run_record.py", "zoo_reference.py",
                  "zoo_hierarchical_reference.py", "zoo_tempered_reference.py",
                  "zoo_network_reference.py"}  # fmt: skip


def test_every_benchmark_has_committed_results():
    commands = set()
    for path in (ROOT / "benchmarks" / "results").glob("*.json"):
        command = json.loads(path.read_text()).get("environment", {}).get("command", "")
        commands.update(command.split()[1:2])  # "python benchmarks/NAME.py ..." -> the script
    scripts = {path.name for path in (ROOT / "benchmarks").glob("*.py")} - NOT_BENCHMARKS
    missing = sorted(name for name in scripts if f"benchmarks/{name}" not in commands)
    assert not missing, f"benchmarks with no committed results file: {missing}"


INCLUDED_TABLE = re.compile(r"\{include\} (?:\.\./)?tables/(\w+)\.md")


def test_the_pages_tables_render_from_the_committed_results():
    import importlib.util

    path = ROOT / "docs" / "results_tables.py"
    spec = importlib.util.spec_from_file_location("results_tables", path)
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    included = {name for page in PAGES for name in INCLUDED_TABLE.findall(page.read_text())}
    assert included == set(tables.RENDERERS), "a page includes a table no renderer writes"
    for name, render in tables.RENDERERS.items():
        table, source = render()
        assert table.count("\n") >= 2 and "benchmarks/results/" in source, name
