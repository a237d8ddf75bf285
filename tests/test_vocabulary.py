"""One name, one meaning: the arguments of every sampler are those the glossary lists for it.

``docs/glossary.md`` has one row per argument name (its meaning and the samplers that take
it). A sampler taking a name the glossary does not list for it fails here: its author must
then check that the name means what the glossary says, or pick another.
"""

import ast
import inspect
import re
from pathlib import Path

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch import registry

GLOSSARY = Path(__file__).resolve().parents[1] / "docs" / "glossary.md"
ROW = re.compile(r"^\| `(?P<name>\w+)` \| (?P<meaning>.+) \| (?P<users>[\w, ]+) \|$")


def _glossary():
    rows = [ROW.match(line) for line in GLOSSARY.read_text().splitlines()]
    rows = [row for row in rows if row]
    names = [row["name"] for row in rows]
    assert len(names) == len(set(names)), "a name has two rows"
    return {row["name"]: set(row["users"].split(", ")) for row in rows}


def _accepted_names(function):
    """Keyword names a callable accepts, through the ``__init__`` chain of a class."""
    functions = (
        [vars(k)["__init__"] for k in function.__mro__ if "__init__" in vars(k)]
        if inspect.isclass(function)
        else [function]
    )
    names = set()
    for each in functions:
        if not getattr(each, "__module__", "").startswith("pymc_minibatch"):
            continue
        parameters = inspect.signature(inspect.unwrap(each)).parameters.values()
        names |= {p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return names - {"self"}


SAMPLERS = {name: entry.step_class for name, entry in registry.BY_NAME.items()}
SAMPLERS["sample_particles"] = pmm.sample_particles


def test_glossary_users_are_samplers():
    assert set().union(*_glossary().values()) == set(SAMPLERS)


@pytest.mark.parametrize("name", SAMPLERS)
def test_every_argument_is_in_the_glossary_for_its_sampler(name):
    accepted = _accepted_names(SAMPLERS[name])
    listed = {term for term, users in _glossary().items() if name in users}
    assert accepted == listed


@pytest.mark.parametrize(
    ("function", "old", "new"),
    [
        *(
            (entry.step_class, "step_size", "proposal_scale")
            for entry in registry.SAMPLERS
            if entry.family != "sgmcmc"
        ),
        (pmm.SGHMC, "friction", "sigma_p"),
        (pmm.SGNHT, "diffusion", "sigma_p"),
        (pmm.PoissonMH, "lam", "poisson_rate"),
        (pmm.TunaMH, "control_variates", "expansion_order"),
        (pmm.TFMH, "control_variates", "expansion_order"),
        (pmm.sample_particles, "gamma", "wasserstein_weight"),
        (pmm.sample_particles, "lam", "entropic_reg"),
    ],
)
def test_former_names_are_not_in_signatures(function, old, new):
    assert old not in _accepted_names(function)
    assert new in _accepted_names(function)


def _normal_model():
    y = np.random.default_rng(0).normal(1.0, 1.0, size=500)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 10)
        pm.Normal("y", mu, 1.0, observed=y)
    return model


@pytest.mark.parametrize(
    ("make", "scale"),
    [
        (lambda: pmm.FullMH(step_size=0.7), 0.7),
        (lambda: pmm.TunaMH(step_size=0.7), 0.7),
        (lambda: pmm.MINT(batch_size=50, step_size=0.7), 0.7),
        # MINT's Langevin proposal took the time step h = s^2
        (lambda: pmm.MINT(batch_size=50, proposal="sgld", step_size=0.04), 0.2),
    ],
)
def test_former_step_size_of_the_mh_samplers_still_works(make, scale):
    with _normal_model(), pytest.warns(FutureWarning, match="renamed 'proposal_scale'"):
        step = make()
    assert step.initial_proposal_scale == pytest.approx(scale)


def test_the_center_of_an_expansion_is_spelled_one_way():
    """``center`` (of an expansion, a control variate, a proposal) everywhere in the package
    and its docs; ``centred`` stays the name of a parametrisation. The former argument name
    ``centre`` survives only where :func:`renamed_arguments` maps it to ``center``."""
    root = Path(__file__).resolve().parents[1]
    files = [*(root / "pymc_minibatch").rglob("*.py"), *(root / "docs").rglob("*.md"),
             root / "README.md"]  # fmt: skip
    found = [f"{path.relative_to(root)}:{number}"
             for path in files
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"\bcentre\b", line) and "renamed_arguments(" not in line]  # fmt: skip
    assert not found


def _indexes_with(function, name):
    """Whether ``function`` subscripts an array with its argument ``name`` (``x[name]``)."""
    return any(isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name)
               and node.slice.id == name
               for node in ast.walk(function))  # fmt: skip


def test_row_indices_are_idx_and_rows_are_gathered_arrays():
    """``idx`` names row indices and ``rows`` the gathered arrays of rows, in every layer:
    no function of the package takes an argument ``rows`` that it uses to index an array."""
    root = Path(__file__).resolve().parents[1] / "pymc_minibatch"
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.Lambda):
                names = {arg.arg for arg in node.args.args + node.args.kwonlyargs}
                if "rows" in names and _indexes_with(node, "rows"):
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert not found
