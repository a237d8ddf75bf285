"""What a chain's draws take in memory: the arithmetic, the refusal of a chain that cannot
fit (PyMC 6, which tells a step method its chain's length) and the statement at
construction on big models."""

import logging

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch import draw_memory
from pymc_minibatch._compat import IS_PYMC6
from pymc_minibatch.draw_memory import available_memory, check_chain_fits, draw_bytes


def test_a_draw_of_mints_network_takes_its_values_times_eight_bytes():
    """784-200-10: 159,010 float64 values, 1.27 MB a draw."""
    assert draw_bytes(159_010) == 1_272_080
    assert draw_bytes(159_010) / 1e6 == pytest.approx(1.27, abs=0.005)


def test_a_chain_that_fits_passes_and_one_that_does_not_is_refused_with_the_fix():
    check_chain_fits("SGHMC", 1000, n_draws=500, per_draw=1, available=4_000_000)
    with pytest.raises(pmm.DrawsExceedMemoryError) as refused:
        check_chain_fits("SGHMC", 1000, n_draws=2000, per_draw=3, available=4_000_000)
    message = str(refused.value)
    # 2000 draws of 8000 bytes = 16 MB against 4 MB: 500 draws fit, or 4 times the thinning
    assert "2000 draws" in message and "0.016 GB" in message and "0.004 GB" in message
    assert "at most 500 draws" in message and "updates_per_draw=12 (now 3)" in message
    assert "in 500 draws" in message


def test_nothing_is_checked_where_the_memory_available_is_unknown(monkeypatch):
    monkeypatch.setattr(draw_memory, "available_memory", lambda: None)
    check_chain_fits("SGHMC", 10**6, n_draws=10**9, per_draw=1)


def test_the_memory_available_is_read_on_linux():
    available = available_memory()
    assert available is None or available > 0


@pytest.mark.skipif(not IS_PYMC6, reason="PyMC 5 does not tell a step method its chain's length")
def test_pm_sample_refuses_a_chain_whose_draws_do_not_fit_before_any_update(monkeypatch):
    monkeypatch.setattr(draw_memory, "available_memory", lambda: 100 * draw_bytes(1))
    y = np.random.default_rng(0).normal(size=1000)
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Normal("y", mu, 1.0, observed=y)
        step = pmm.SGLD(batch_size=100)
        with pytest.raises(pmm.DrawsExceedMemoryError, match="150 draws"):
            pm.sample(step=step, draws=100, tune=50, chains=1, progressbar=False,
                      random_seed=0, compute_convergence_checks=False)  # fmt: skip
        assert step.chain is None  # not one update was made
        idata = pm.sample(step=step, draws=60, tune=40, chains=1, progressbar=False,
                          random_seed=0, compute_convergence_checks=False)  # fmt: skip
    assert idata.posterior["mu"].shape == (1, 60)


def test_big_models_keep_a_draw_per_epoch_and_say_its_size(caplog):
    """Above MAX_SHARED coordinates: 3001 coefficients, 500 rows in batches of 100."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 3001)) / 50
    with pm.Model():
        beta = pm.Normal("beta", 0.0, 1.0, shape=3001)
        pm.Bernoulli("y", logit_p=x @ beta, observed=rng.integers(0, 2, size=500))
        with caplog.at_level(logging.INFO, logger="pymc_minibatch"):
            step = pmm.SGHMC(batch_size=100)
        assert step.updates_per_draw == 5
        assert pmm.SGHMC(batch_size=100, updates_per_draw=2).updates_per_draw == 2
    assert "SGHMC keeps a draw every 5 updates (1 per epoch of 5 updates): 3001 values, " \
        "0.024 MB per draw and chain" in caplog.text
