"""Bad data is refused when ``MinibatchModel`` is built, with a message that says where.

Every sampler builds a ``MinibatchModel``, so these checks cover them all: missing observed
values that PyMC would impute, NaN or infinite data on the rows, and observations outside
the support of their distribution. Each refusal is a ``DataValidationError`` (a
``ValueError``) naming the variable, the first bad row and its value.
"""

import numpy as np
import pymc as pm
import pytest

import pymc_minibatch as pmm
from pymc_minibatch.model import adapter, validation

# PyMC warns before it imputes missing observations; the adapter refuses them anyway
pytestmark = pytest.mark.filterwarnings("ignore::pymc.exceptions.ImputationWarning")

N_ROWS = 1000
N_FEATURES = 3

_rng = np.random.default_rng(20261130)
X = _rng.normal(size=(N_ROWS, N_FEATURES))
Y_BIN = (X @ np.array([1.0, -0.5, 0.25]) + _rng.logistic(size=N_ROWS) > 0).astype("int64")
Y_NORMAL = X @ np.array([1.0, -0.5, 0.25]) + _rng.normal(size=N_ROWS)
Z_NORMAL = _rng.normal(size=N_ROWS)
COUNTS = _rng.poisson(2.0, size=N_ROWS)
POSITIVE = _rng.gamma(2.0, size=N_ROWS)
UNIFORM = _rng.uniform(0, 5.0, size=N_ROWS)
MISSING_ROWS = _rng.choice(N_ROWS, size=24, replace=False)
PAIRS = _rng.normal(size=(N_ROWS, 2))


def logistic_regression(X=X, y=Y_BIN, as_data=False):
    with pm.Model() as model:
        covariates = pm.Data("X", X) if as_data else X
        beta = pm.Normal("beta", 0, 1, shape=N_FEATURES)
        pm.Bernoulli("y", logit_p=covariates @ beta, observed=y)
    return model


def refusal_message(model, **kwargs):
    with pytest.raises(pmm.DataValidationError) as excinfo:
        pmm.MinibatchModel(model, **kwargs)
    return str(excinfo.value)


def assert_mentions(message, *parts):
    for part in parts:
        assert part in message, f"{part!r} is not in the message: {message}"


def with_bad_entries(array, entries, value):
    array = array.copy()
    for index in entries:
        array[index] = value
    return array


# ---- non-finite data ---------------------------------------------------------------------------
def test_nan_in_a_numpy_covariate_names_the_observed_variable_row_and_value():
    X_nan = with_bad_entries(X, [(17, 2), (500, 0)], np.nan)
    message = refusal_message(logistic_regression(X_nan))
    assert_mentions(
        message,
        "2 row(s) of an unnamed data array used by observed variable(s) 'y'",
        "the first is row 17 ([17, 2] = nan)",
        "Drop or impute those rows before building the model",
    )


def test_nan_in_a_pm_data_covariate_names_the_data():
    # pm.Data refuses NaN when created, but pm.set_data lets it in
    model = logistic_regression(as_data=True)
    with model:
        pm.set_data({"X": with_bad_entries(X, [(17, 2)], np.nan)})
    message = refusal_message(model)
    assert_mentions(message, "1 row(s) of data 'X' used by observed variable(s) 'y'", "row 17")


@pytest.mark.parametrize("as_data", [False, True], ids=["numpy", "pm.Data"])
def test_inf_in_a_covariate_is_refused(as_data):
    X_inf = with_bad_entries(X, [(3, 1)], -np.inf)
    message = refusal_message(logistic_regression(X_inf, as_data=as_data))
    assert_mentions(message, "used by observed variable(s) 'y'", "row 3 ([3, 1] = -inf)")


def test_inf_in_the_observations_names_the_observed_variable():
    y = with_bad_entries(Z_NORMAL, [8], np.inf)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("z", mu, 1, observed=y)
    message = refusal_message(model)
    assert_mentions(message, "1 row(s) of the observed values of 'z'", "row 8 ([8] = inf)")


def test_nan_rows_are_refused_before_the_factorisation_check_can_blame_the_model():
    # on 20 rows check() evaluates every row; a NaN covariate makes PyMC's check of p fail
    # for the whole batch, which check() alone would report as a non-factorising model
    X_nan = with_bad_entries(X[:20], [(7, 1)], np.nan)
    message = refusal_message(logistic_regression(X_nan, Y_BIN[:20]))
    assert_mentions(message, "the first is row 7 ([7, 1] = nan)")


def test_non_finite_rows_are_counted_and_located_across_chunks(monkeypatch):
    monkeypatch.setattr(validation, "VALIDATION_CHUNK_ROWS", 64)
    X_nan = with_bad_entries(X, [(700, 1), (701, 0), (900, 2)], np.nan)
    message = refusal_message(logistic_regression(X_nan))
    assert_mentions(message, "3 row(s)", "the first is row 700 ([700, 1] = nan)")


# ---- missing observed values that PyMC imputes ---------------------------------------------------
def regression_with_missing_observations(observed):
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", X @ beta, sigma, observed=observed)
    return model


def test_nan_observations_are_refused_before_the_row_graph_is_built(monkeypatch):
    y = with_bad_entries(Y_NORMAL, MISSING_ROWS, np.nan)
    model = regression_with_missing_observations(y)

    def fail(model):
        raise AssertionError("build_row_graph ran before the imputation check")

    monkeypatch.setattr(adapter, "build_row_graph", fail)
    message = refusal_message(model)
    assert_mentions(
        message,
        "observed variable 'y' has 24 missing values",
        "the imputed free variable 'y_unobserved'",
        "minibatch samplers cannot subsample imputed rows",
        "mask = ~np.isnan(y)",
        "model the missing values explicitly",
    )


def test_masked_observations_are_refused():
    masked = np.ma.masked_array(Y_NORMAL, mask=np.arange(N_ROWS) % 100 == 0)
    message = refusal_message(regression_with_missing_observations(masked))
    assert_mentions(message, "'y' has 10 missing values", "'y_unobserved'")


def test_partly_missing_multivariate_rows_are_refused():
    # a row with one of two coordinates missing makes PyMC use a PartialObservedRV
    observed = with_bad_entries(PAIRS, [3, (4, 0)], np.nan)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1, shape=2)
        pm.MvNormal("pair", mu, np.eye(2), observed=observed)
    message = refusal_message(model)
    assert_mentions(message, "'pair' has 3 missing values", "'pair_unobserved'")


# ---- observations outside the support ------------------------------------------------------------
def test_bernoulli_observation_of_three_is_refused():
    y = with_bad_entries(Y_BIN, [42, 900], 3)
    message = refusal_message(logistic_regression(y=y))
    assert_mentions(
        message,
        "observed variable 'y' has 2 row(s) whose log-likelihood is -inf or NaN",
        "the first is row 42, with observed value 3",
        "outside the support of the distribution",
    )


def test_negative_poisson_count_is_refused():
    counts = with_bad_entries(COUNTS, [5], -1)
    with pm.Model() as model:
        rate = pm.Gamma("rate", 2, 1)
        pm.Poisson("counts", rate, observed=counts)
    message = refusal_message(model)
    assert_mentions(message, "'counts' has 1 row(s)", "row 5, with observed value -1")


def test_negative_gamma_observation_is_refused():
    values = with_bad_entries(POSITIVE, [8], -0.5)
    with pm.Model() as model:
        shape = pm.HalfNormal("shape", 2)
        pm.Gamma("g", shape, 1, observed=values)
    message = refusal_message(model)
    assert_mentions(message, "'g' has 1 row(s)", "row 8, with observed value -0.5")


def test_an_invalid_per_row_parameter_is_located_although_it_fails_whole_batches():
    # PyMC's check sigma > 0 makes every row of a batch with row 321 -inf, not just row 321
    scale = with_bad_entries(np.ones(N_ROWS), [321], -1.0)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("z", mu, sigma * scale, observed=Z_NORMAL)
    message = refusal_message(model)
    assert_mentions(message, "'z' has 1 row(s)", f"row 321, with observed value {Z_NORMAL[321]}")


def test_the_refusal_names_the_observed_variable_at_fault():
    weights = with_bad_entries(POSITIVE, [77], -1.0)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=N_FEATURES)
        pm.Bernoulli("y", logit_p=X @ beta, observed=Y_BIN)
        pm.Exponential("w", 1.0, observed=weights)
    message = refusal_message(model)
    assert_mentions(message, "observed variable 'w' has 1 row(s)", "row 77")
    assert "'y'" not in message


def test_impossible_rows_are_found_across_chunks(monkeypatch):
    monkeypatch.setattr(validation, "VALIDATION_CHUNK_ROWS", 64)
    y = with_bad_entries(Y_BIN, [130, 999], 2)
    message = refusal_message(logistic_regression(y=y))
    assert_mentions(message, "has 2 row(s)", "the first is row 130, with observed value 2")


def uniform_scale_model(y):
    with pm.Model() as model:
        upper = pm.Uniform("upper", 0, 10)  # initial value 5
        pm.Uniform("y", 0, upper, observed=y)
    return model


def test_rows_impossible_only_at_the_initial_point_are_accepted():
    y = with_bad_entries(
        UNIFORM, range(5), 5.05
    )  # above the initial upper bound of 5, below most jittered ones
    mm = pmm.MinibatchModel(uniform_scale_model(y))
    assert np.all(np.isneginf(mm.loglik(mm.initial_theta(), np.arange(5))))


def test_rows_above_every_reachable_uniform_bound_are_refused():
    y = with_bad_entries(UNIFORM, [7], 11.0)
    message = refusal_message(uniform_scale_model(y))
    assert_mentions(message, "'y' has 1 row(s)", "row 7, with observed value 11.0")


def test_variables_outside_theta_may_make_rows_possible():
    # with vars=[beta], sigma is moved by another step method: its rows are not judged
    weights = with_bad_entries(POSITIVE, [77], 0.0)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=N_FEATURES)
        rate = pm.HalfNormal("rate", 1)
        pm.Bernoulli("y", logit_p=X @ beta, observed=Y_BIN)
        pm.Gamma("w", 2.0, rate, observed=weights)
    pmm.MinibatchModel(model, vars=[beta])
    assert "'w' has 1 row(s)" in refusal_message(model)


# ---- valid data and check=False ------------------------------------------------------------------
def test_valid_data_passes():
    mm = pmm.MinibatchModel(logistic_regression())
    assert mm.n_data == N_ROWS


def test_check_false_skips_the_validation():
    X_nan = with_bad_entries(X, [(17, 2)], np.nan)
    mm = pmm.MinibatchModel(logistic_regression(X_nan), check=False)
    assert not np.isfinite(mm.loglik(mm.initial_theta(), np.array([17]))).any()
