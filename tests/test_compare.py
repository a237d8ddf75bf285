"""pmm.compare and pmm.plot_compare: the table's contract, its numbers, and bad input."""

import math

import matplotlib
import numpy as np
import pandas as pd
import pymc as pm
import pytest
import xarray as xr

import pymc_minibatch as pmm
from pymc_minibatch._compat import IS_PYMC6, posterior
from pymc_minibatch.compare import COLUMNS

matplotlib.use("Agg")

N_ROWS = 1000
DRAWS, TUNE, CHAINS = 500, 300, 2


def logistic_model():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(N_ROWS, 2))
    y = (rng.random(N_ROWS) < 1 / (1 + np.exp(-(X @ [1.0, -0.5])))).astype("int64")
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, 1.0, shape=2)
        pm.Bernoulli("y", logit_p=X @ beta, observed=y)
    return model


def tempered_mint():
    """MINT on 20 of 1000 rows samples the likelihood to the power 1/T with T >> 1: biased."""
    return pmm.MINT(batch_size=20)


@pytest.fixture(scope="module")
def comparison():
    model = logistic_model()
    table, results = pmm.compare(
        {"TunaMH": pmm.TunaMH, "MINT": tempered_mint},
        model=model, draws=DRAWS, tune=TUNE, chains=CHAINS, random_seed=11, return_results=True,
    )  # fmt: skip
    return model, table, results


def test_table_has_every_column_for_every_sampler(comparison):
    _, table, results = comparison
    assert list(table.columns) == list(COLUMNS)
    assert list(table.index) == ["NUTS", "TunaMH", "MINT"]
    assert list(results) == ["NUTS", "TunaMH", "MINT"]
    assert (table["draws"] == DRAWS * CHAINS).all()
    efficiency = table[["wall_time_s", "ess_bulk_min", "ess_tail_min", "ess_bulk_per_s"]]
    assert np.isfinite(efficiency.to_numpy()).all() and (efficiency.to_numpy() > 0).all()
    assert table.loc["NUTS", "ess_per_s_ratio"] == 1.0
    ratio = table.loc["TunaMH", "ess_bulk_per_s"] / table.loc["NUTS", "ess_bulk_per_s"]
    assert table.loc["TunaMH", "ess_per_s_ratio"] == pytest.approx(ratio)
    errors = ["max_std_mean_error", "max_rel_sd_error", "mean_std_wasserstein"]
    assert table.loc["NUTS", errors].isna().all()
    assert np.isfinite(table.loc[["TunaMH", "MINT"], errors].to_numpy()).all()


def test_results_are_the_installed_pymc_result_type(comparison):
    _, _, results = comparison
    expected = "DataTree" if IS_PYMC6 else "InferenceData"
    assert {type(result).__name__ for result in results.values()} == {expected}


def test_rows_per_draw_reads_each_sampler_cost(comparison):
    _, table, results = comparison
    nuts_steps = float(results["NUTS"].sample_stats["n_steps"].mean())
    assert table.loc["NUTS", "loglik_rows_per_draw"] == pytest.approx(nuts_steps * N_ROWS)
    assert table.loc["NUTS", "setup_passes"] == 0
    # the steps' setup (data checks, Laplace fit, bounds) is spread over the kept draws
    passes = table.loc[["MINT", "TunaMH"], "setup_passes"]
    assert (passes > 0).all() and (passes < 100).all()
    setup_rows = passes * N_ROWS / (DRAWS * CHAINS)
    assert table.loc["MINT", "loglik_rows_per_draw"] == pytest.approx(20 + setup_rows["MINT"])
    tuna_batches = float(results["TunaMH"].sample_stats["batch_size"].mean())
    expected = tuna_batches + setup_rows["TunaMH"]
    assert table.loc["TunaMH", "loglik_rows_per_draw"] == pytest.approx(expected)
    assert table.loc["TunaMH", "loglik_rows_per_draw"] < N_ROWS / 2


def test_accuracy_columns_recompute_from_the_draws(comparison):
    _, table, results = comparison
    draws = posterior(results["TunaMH"])["beta"].values.reshape(-1, 2)
    ref = posterior(results["NUTS"])["beta"].values.reshape(-1, 2)
    mean_error = np.max(np.abs(draws.mean(0) - ref.mean(0)) / ref.std(0))
    sd_error = np.max(np.abs(draws.std(0) / ref.std(0) - 1))
    assert table.loc["TunaMH", "max_std_mean_error"] == pytest.approx(mean_error)
    assert table.loc["TunaMH", "max_rel_sd_error"] == pytest.approx(sd_error)


def test_exact_sampler_is_within_monte_carlo_error_and_biased_one_is_not(comparison):
    _, table, _ = comparison
    tuna, mint, nuts = table.loc["TunaMH"], table.loc["MINT"], table.loc["NUTS"]
    # an exact sampler's standardised mean error is N(0, 1/ESS + 1/ESS_ref) per parameter
    mcse = math.sqrt(1 / tuna["ess_bulk_min"] + 1 / nuts["ess_bulk_min"])
    assert tuna["max_std_mean_error"] < 3.5 * mcse
    assert tuna["max_rel_sd_error"] < 0.25
    # the tempered target is much wider: its mean and sd errors dwarf TunaMH's
    assert mint["max_std_mean_error"] > 3 * tuna["max_std_mean_error"]
    assert mint["max_rel_sd_error"] > 1.0
    assert mint["mean_std_wasserstein"] > 5 * tuna["mean_std_wasserstein"]


def test_reference_result_and_callables_with_named_arguments():
    model = logistic_model()
    with model:
        reference = pm.sample(
            draws=300, tune=300, chains=1, random_seed=2, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
    seen = {}

    def particles(random_seed, draws):
        seen.update(random_seed=random_seed, draws=draws)
        return pmm.sample_particles(
            "svgd", n_particles=draws, n_steps=50, random_seed=random_seed, progressbar=False
        )

    table = pmm.compare(
        {"SVGD": particles, "earlier": reference},
        model=model, reference=reference, draws=40, chains=1, random_seed=5,
    )  # fmt: skip
    assert seen == {"random_seed": 5, "draws": 40}
    assert list(table.index) == ["reference", "SVGD", "earlier"]
    # an earlier result keeps PyMC's sampling_time as its wall time
    assert table.loc["reference", "wall_time_s"] == posterior(reference).attrs["sampling_time"]
    assert table.loc["earlier", "max_std_mean_error"] == 0.0
    assert table.loc["SVGD", "draws"] == 40
    # a particle costs its steps times the batch (all 1000 rows here)
    assert table.loc["SVGD", "loglik_rows_per_draw"] == 50 * N_ROWS


def test_rows_per_draw_of_sgmcmc_is_thin_times_batch():
    model = logistic_model()
    with model:
        table = pmm.compare(
            {"SGLD": lambda: pmm.SGLD(batch_size=50, updates_per_draw=2)},
            draws=100, tune=100, chains=1, random_seed=4,
        )  # fmt: skip
    setup_rows = table.loc["SGLD", "setup_passes"] * N_ROWS / 100
    assert table.loc["SGLD", "loglik_rows_per_draw"] == pytest.approx(100 + setup_rows)


@pytest.mark.filterwarnings("ignore:the reference 'NUTS' has r_hat")  # a short run, not judged
def test_setup_passes_count_each_chains_start():
    """FlyMC draws every row's brightness at each chain's first point: one pass per chain."""
    model = logistic_model()
    with model:
        built = pmm.FlyMC()
        passes_at_construction = built.minibatch_model.full_data_passes
        table = pmm.compare({"FlyMC": built}, draws=50, tune=50, chains=2, cores=1, random_seed=4)
    assert table.loc["FlyMC", "setup_passes"] == passes_at_construction + 2
    assert table.loc["NUTS", "setup_passes"] == 0


def test_plot_compare_draws_densities_and_forest(comparison):
    _, _, results = comparison
    plots = pmm.plot_compare(results, var_names=["beta"])
    assert set(plots) == {"density", "forest"}
    if IS_PYMC6:
        from arviz_plots import PlotCollection

        assert all(isinstance(plot, PlotCollection) for plot in plots.values())
        curves = plots["density"].viz["dist"]["beta"]
        assert dict(curves.sizes) == {"model": 3, "beta_dim_0": 2}  # one per result and element
    else:
        density_axes = np.ravel(plots["density"])
        assert len(density_axes) == 2  # beta[0], beta[1]
        assert len(line_colours(density_axes[0])) == 3  # one colour per result
    matplotlib.pyplot.close("all")


def line_colours(axes):
    return {matplotlib.colors.to_hex(line.get_color()) for line in axes.get_lines()}


def as_result(posterior_dataset):
    if IS_PYMC6:
        return xr.DataTree.from_dict({"posterior": posterior_dataset})
    import arviz as az

    return az.InferenceData(posterior=posterior_dataset)


@pytest.mark.parametrize("spread", [0.0, 1e-5])
def test_plot_compare_leaves_a_point_mass_out_of_the_densities(comparison, spread):
    _, _, results = comparison
    nuts = posterior(results["NUTS"])
    centre = nuts["beta"].mean(("chain", "draw"))
    point_mass = as_result(nuts.assign(beta=centre + spread * (nuts["beta"] - centre)))
    with pytest.warns(UserWarning, match=r"\['collapsed'\] have \(almost\) no spread"):
        plots = pmm.plot_compare({"NUTS": results["NUTS"], "collapsed": point_mass})
    if IS_PYMC6:
        assert list(plots["density"].viz["dist"]["beta"]["model"].values) == ["NUTS"]
    else:
        assert len(line_colours(np.ravel(plots["density"])[0])) == 1  # NUTS only
    assert plots["forest"] is not None
    matplotlib.pyplot.close("all")


def test_unconverged_reference_is_warned_about(comparison):
    model, _, results = comparison
    nuts = posterior(results["NUTS"])
    # chain 1 moved 5 sds away: the two chains of the reference disagree
    shift = xr.DataArray([0.0, 5.0], dims="chain") * nuts["beta"].std(("chain", "draw"))
    split = as_result(nuts.assign(beta=nuts["beta"] + shift))
    with pytest.warns(UserWarning, match=r"reference 'reference' has r_hat \d+\.\d\d"):
        pmm.compare({"NUTS run": results["NUTS"]}, model=model, reference=split)


@pytest.mark.parametrize(
    ("samplers", "error", "message"),
    [
        ({"NUTS": pmm.TunaMH}, ValueError, "names the reference"),
        ({"bad": 3}, TypeError, "is a int"),
        ({"bad": lambda: 3}, TypeError, "returned int"),
        ({"bad": "metropolis"}, ValueError, "the only name known is 'nuts'"),
    ],
)
def test_bad_samplers_are_refused(samplers, error, message):
    with logistic_model(), pytest.raises(error, match=message):
        pmm.compare(samplers, draws=10, tune=10, chains=1)


def test_bad_reference_is_refused_before_anything_runs():
    with logistic_model(), pytest.raises(TypeError, match="'reference' is a DataFrame"):
        pmm.compare({"TunaMH": pmm.TunaMH}, reference=pd.DataFrame())


def test_missing_variable_is_named():
    model = logistic_model()
    with model:
        reference = pm.sample(
            draws=50, tune=50, chains=1, random_seed=2, progressbar=False,
            compute_convergence_checks=False,
        )  # fmt: skip
        with pytest.raises(ValueError, match=r"'reference' has no variable\(s\) \['alpha'\]"):
            pmm.compare({"earlier": reference}, reference=reference, var_names=["alpha"])
