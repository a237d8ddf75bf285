"""What a step's construction reports: full-data passes and seconds per stage, and a
progress bar for each pass on large data."""

import numpy as np
import pymc as pm
import pytest
from rich.progress import Progress

import pymc_minibatch as pmm
from pymc_minibatch.model import setup_report


@pytest.fixture(scope="module")
def logistic():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 3))
    y = rng.binomial(1, 1 / (1 + np.exp(-x @ [1.0, -0.5, 0.2])))
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=3)
        pm.Bernoulli("y", logit_p=x @ beta, observed=y)
    return model


@pytest.fixture
def bars(monkeypatch):
    """Every bar drawn: ``[description, total, rows advanced]`` (on any data size)."""
    monkeypatch.setattr(setup_report, "PROGRESS_MIN_ROWS", 0)
    drawn = []
    add_task, advance = Progress.add_task, Progress.advance

    def recording_add_task(self, description, total=None, **kwargs):
        drawn.append([description, total, 0])
        return add_task(self, description, total=total, **kwargs)

    def recording_advance(self, task, rows):
        drawn[-1][2] += rows
        return advance(self, task, rows)

    monkeypatch.setattr(Progress, "add_task", recording_add_task)
    monkeypatch.setattr(Progress, "advance", recording_advance)
    return drawn


def test_tuna_reports_passes_and_seconds_by_stage(logistic):
    step = pmm.TunaMH(model=logistic)
    report = step.setup_report
    table = {name: (passes, seconds) for name, passes, seconds in report.table()}
    assert list(table) == ["model", "Laplace fit", "bounds", "other"]
    assert table["Laplace fit"][0] == step.laplace.passes >= 1
    assert table["bounds"][0] >= 1  # the bounds' constants are sums over all rows
    assert sum(passes for passes, _ in table.values()) == step.minibatch_model.full_data_passes
    assert all(seconds > 0 for _, seconds in table.values())
    # the clock stopped when the step was built: the stages add up to it
    assert report.seconds == pytest.approx(sum(seconds for _, seconds in table.values()))
    frozen = report.table()
    step.minibatch_model.full_loglik(step.laplace.mode)  # a pass while sampling
    assert report.passes == step.minibatch_model.full_data_passes
    assert [row[2] for row in report.table()] == [row[2] for row in frozen]
    laplace_line = repr(report).splitlines()[2].split()
    assert laplace_line[:3] == ["Laplace", "fit", str(table["Laplace fit"][0])]


def test_each_pass_shows_a_bar_over_all_rows(logistic, bars):
    step = pmm.TunaMH(model=logistic)
    passes = step.minibatch_model.full_data_passes
    assert len(bars) == passes
    assert all(total == rows == 3000 for _, total, rows in bars)
    assert bars[0][0] == "building the step: Laplace fit, full-data pass 1"
    assert bars[-1][0] == f"building the step: bounds, full-data pass {passes}"


def test_progressbar_false_draws_no_bar(logistic, bars):
    step = pmm.SGLD(batch_size=100, model=logistic, progressbar=False)
    assert step.minibatch_model.full_data_passes >= 1
    assert bars == []


def test_small_data_draws_no_bar(logistic, bars, monkeypatch):
    monkeypatch.setattr(setup_report, "PROGRESS_MIN_ROWS", 3001)
    pmm.TunaMH(model=logistic)
    assert bars == []
