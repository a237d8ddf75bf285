"""``ksd``: the PyMC wiring (transforms, Jacobians, thinning), calibrated separation, errors."""

import numpy as np
import pymc as pm
import pytest
import xarray as xr

from pymc_minibatch._compat import IS_PYMC6
from pymc_minibatch.diagnostics import ksd
from pymc_minibatch.kernels.stein import balanced_scale, imq_ksd
from pymc_minibatch.model.adapter import MinibatchModel
from pymc_minibatch.results import draws_to_result

# Normal-inverse-gamma model: var ~ InvGamma(A, B), mu | var ~ N(M0, var / K0),
# y_i | mu, var ~ N(mu, var); its posterior is known in closed form
N_ROWS, M0, K0, A, B = 200, 0.0, 1.0, 2.0, 2.0
Y = np.random.default_rng(0).normal(1.0, 2.0, size=N_ROWS)
KN = K0 + N_ROWS
MN = (K0 * M0 + Y.sum()) / KN
AN = A + N_ROWS / 2
BN = B + 0.5 * np.sum((Y - Y.mean()) ** 2) + K0 * N_ROWS * (Y.mean() - M0) ** 2 / (2 * KN)


def _nig_model():
    with pm.Model() as model:
        var = pm.InverseGamma("var", A, B)
        mu = pm.Normal("mu", M0, sigma=pm.math.sqrt(var / K0))
        pm.Normal("y", mu, pm.math.sqrt(var), observed=Y)
    return model


@pytest.fixture(scope="module")
def nig():
    """The model and its MinibatchModel, compiled once for the module."""
    model = _nig_model()
    return model, MinibatchModel(model)


def _exact_nig(rng, n):
    """Exact posterior draws as ``(t, mu)``, ``t = log var`` (the order of ``theta``)."""
    var = 1.0 / rng.gamma(AN, 1.0 / BN, size=n)
    return np.column_stack([np.log(var), rng.normal(MN, np.sqrt(var / KN))])


def _nig_score(t, mu):
    """Gradient of the log posterior in ``(t, mu)``, Jacobian ``e^t`` of ``var = e^t`` included.

    log p = -A t - B e^-t  (InvGamma density times the Jacobian)
            - t / 2 - K0 (mu - M0)^2 e^-t / 2 - N t / 2 - sum (y - mu)^2 e^-t / 2
    """
    sq = ((Y[None, :] - mu[:, None]) ** 2).sum(axis=1)
    d_t = -A + B * np.exp(-t) - 0.5 + K0 * (mu - M0) ** 2 * np.exp(-t) / 2
    d_t += -N_ROWS / 2 + sq * np.exp(-t) / 2
    d_mu = (K0 * (M0 - mu) + (Y.sum() - N_ROWS * mu)) * np.exp(-t)
    return np.column_stack([d_t, d_mu])


def _result(n_chains, **variables):
    """``pm.sample``'s result type holding the given constrained draws, ``(chain * draw, ...)``."""
    data = {}
    for name, values in variables.items():
        values = np.asarray(values).reshape(n_chains, -1, *np.shape(values)[1:])
        dims = ["chain", "draw", *(f"{name}_dim_{i}" for i in range(values.ndim - 2))]
        data[name] = (dims, values)
    posterior = xr.Dataset(data, coords={"chain": np.arange(n_chains)})
    if IS_PYMC6:
        return xr.DataTree.from_dict({"posterior": posterior})
    from arviz import InferenceData

    return InferenceData(posterior=posterior)


def _nig_result(thetas, n_chains=1):
    return _result(n_chains, var=np.exp(thetas[:, 0]), mu=thetas[:, 1])


@pytest.mark.parametrize("scale", [None, "auto", np.array([0.1, 0.2])])
def test_ksd_equals_the_kernel_on_hand_computed_transformed_draws_and_scores(nig, scale):
    # 2 chains of 150 draws thinned to 100: the draws used are rint(linspace(0, 299, 100))
    # of the chain-major pooled draws; the score is the analytic one in log-variance space
    _, mm = nig
    thetas = _exact_nig(np.random.default_rng(1), 300)
    value = ksd(_nig_result(thetas, n_chains=2), mm, max_draws=100, scale=scale)
    used = thetas[np.rint(np.linspace(0, 299, 100)).astype(int)]
    score = _nig_score(used[:, 0], used[:, 1])
    expected_scale = balanced_scale(used, score) if isinstance(scale, str) else scale
    assert value == pytest.approx(imq_ksd(used, score, scale=expected_scale), rel=1e-10)


def test_ksd_on_an_interval_transform_uses_the_log_odds_score():
    # p ~ Uniform(0, 1), k successes in N: in theta = logit(p) the posterior with its
    # Jacobian p (1 - p) has score (k + 1) - (N + 2) p
    y = (np.random.default_rng(2).random(50) < 0.3).astype("int64")
    with pm.Model() as model:
        p = pm.Uniform("p", 0.0, 1.0)
        pm.Bernoulli("y", p=p, observed=y)
    p_draws = np.random.default_rng(3).beta(1 + y.sum(), 1 + 50 - y.sum(), size=60)
    value = ksd(_result(1, p=p_draws), model, scale=None)
    theta = np.log(p_draws / (1 - p_draws))[:, None]
    score = (y.sum() + 1) - (50 + 2) * p_draws[:, None]
    assert value == pytest.approx(imq_ksd(theta, score), rel=1e-10)


def test_pymc_result_round_trips_through_the_transforms():
    # draws_to_result maps theta to constrained values with PyMC's own backward transforms;
    # ksd must map them back: log, interval with bounds from another variable, simplex, dims
    rng = np.random.default_rng(4)
    with pm.Model(coords={"k": ["a", "b"]}) as model:
        mu = pm.Normal("mu", 0.0, 1.0, dims="k")
        s = pm.HalfNormal("s", 1.0)
        a = pm.Uniform("a", lower=mu[0] - 5.0, upper=mu[0] + 5.0)
        w = pm.Dirichlet("w", np.ones(3))
        pm.Normal("y", mu[1] + a * w[0], s, observed=rng.normal(size=20))
    mm = MinibatchModel(model)
    thetas = 0.5 * rng.normal(size=(12, mm.ndim))
    scores = np.array([mm.logp_and_grad(theta)[1] for theta in thetas])
    value = ksd(draws_to_result(mm, thetas), mm, scale=None)
    assert value == pytest.approx(imq_ksd(thetas, scores), rel=1e-10)


# Ways to get the posterior wrong, in theta = (log var, mu) around the posterior mean c with
# posterior standard deviations sd. Measured over 50 seeds, n = 300 draws, scale="auto"
# (mean, sd, min, max of the KSD):
#   exact                 0.116  0.025  0.081  0.225
#   narrow x0.5           0.566  0.026  0.508  0.628
#   wide x2               0.590  0.040  0.505  0.698
#   collapsed x0.05       1.380  0.002  1.376  1.383
#   mu shifted 1 sd       0.613  0.027  0.554  0.669
#   log var shifted 1 sd  0.616  0.030  0.546  0.715
# so exact < 0.3 < 0.4 < biased leaves >= 7 exact sds and >= 2 biased sds beyond the extremes
SEPARATION_VARIANTS = {
    "narrow x0.5": lambda th, c, sd: c + 0.5 * (th - c),
    "wide x2": lambda th, c, sd: c + 2.0 * (th - c),
    "collapsed x0.05": lambda th, c, sd: c + 0.05 * (th - c),
    "mu shifted 1 sd": lambda th, c, sd: th + np.array([0.0, sd[1]]),
    "log var shifted 1 sd": lambda th, c, sd: th + np.array([sd[0], 0.0]),
}


@pytest.mark.parametrize("variant", list(SEPARATION_VARIANTS))
def test_exact_posterior_draws_have_a_smaller_ksd_than_biased_ones(nig, variant):
    _, mm = nig
    reference = _exact_nig(np.random.default_rng(10**6), 200_000)
    center, sd = reference.mean(axis=0), reference.std(axis=0)
    thetas = _exact_nig(np.random.default_rng(5), 300)
    biased = SEPARATION_VARIANTS[variant](thetas, center, sd)
    assert ksd(_nig_result(thetas), mm) < 0.3
    assert ksd(_nig_result(biased), mm) > 0.4


def test_max_draws_thins_evenly_over_pooled_chains_and_a_larger_one_uses_all(nig):
    _, mm = nig
    thetas = _exact_nig(np.random.default_rng(6), 40)
    result = _nig_result(thetas, n_chains=4)
    score = _nig_score(thetas[:, 0], thetas[:, 1])
    assert ksd(result, mm, max_draws=1000, scale=None) == pytest.approx(
        imq_ksd(thetas, score), rel=1e-10
    )
    keep = np.rint(np.linspace(0, 39, 15)).astype(int)  # evenly over the 4 chains pooled
    assert keep[:4].tolist() == [0, 3, 6, 8]
    thinned = ksd(result, mm, max_draws=15, scale=None)
    assert thinned == pytest.approx(imq_ksd(thetas[keep], score[keep]), rel=1e-10)


def test_the_model_is_taken_from_the_context(nig):
    model, mm = nig
    result = _nig_result(_exact_nig(np.random.default_rng(7), 30))
    with model:
        in_context = ksd(result)
    assert in_context == pytest.approx(ksd(result, mm), rel=1e-12)


# ---- errors -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def nig_result():
    return _nig_result(_exact_nig(np.random.default_rng(8), 20), n_chains=2)


def test_no_model_in_context_and_none_given(nig_result):
    with pytest.raises(TypeError, match="pass model= or call it inside `with model:`"):
        ksd(nig_result)


def test_posterior_missing_a_free_variable(nig):
    result = _result(1, mu=np.zeros(10))
    with pytest.raises(ValueError, match=r"lacks free variables \['var'\]"):
        ksd(result, nig[1])


def test_posterior_variable_of_the_wrong_shape(nig):
    result = _result(1, mu=np.zeros((10, 2)), var=np.ones(10))
    with pytest.raises(ValueError, match=r"'mu' has shape \(2,\) per draw"):
        ksd(result, nig[1])


def test_non_finite_log_posterior_names_the_draw(nig):
    # var = 1e-320 is positive (log var = -737 is finite) but exp(737) overflows
    thetas = _exact_nig(np.random.default_rng(9), 20)
    var, mu = np.exp(thetas[:, 0]), thetas[:, 1]
    var[13] = 1e-320
    with pytest.raises(ValueError, match="not finite at chain 1, draw 3"):
        ksd(_result(2, var=var, mu=mu), nig[1])


def test_draw_outside_the_support_names_the_draw_and_variable(nig):
    thetas = _exact_nig(np.random.default_rng(10), 20)
    var, mu = np.exp(thetas[:, 0]), thetas[:, 1]
    var[4] = -1.0
    with pytest.raises(ValueError, match=r"chain 0, draw 4 is outside the support of \['var'\]"):
        ksd(_result(2, var=var, mu=mu), nig[1])


@pytest.mark.parametrize("max_draws", [1, 0, -5])
def test_max_draws_below_two(nig, nig_result, max_draws):
    with pytest.raises(ValueError, match="max_draws must be at least 2"):
        ksd(nig_result, nig[1], max_draws=max_draws)


@pytest.mark.parametrize(
    ("c", "beta", "match"),
    [
        (0.0, -0.5, "c > 0"),
        (-1.0, -0.5, "c > 0"),
        (1.0, 0.0, r"beta in \(-1, 0\)"),
        (1.0, -1.0, r"beta in \(-1, 0\)"),
        (1.0, 0.5, r"beta in \(-1, 0\)"),
    ],
)
def test_bad_kernel_parameters(nig, nig_result, c, beta, match):
    with pytest.raises(ValueError, match=match):
        ksd(nig_result, nig[1], c=c, beta=beta)


@pytest.mark.parametrize("scale", ["sd", 0.0, -1.0, [1.0, 2.0, 3.0], [[1.0, 2.0]], np.inf])
def test_bad_scale(nig, nig_result, scale):
    with pytest.raises(ValueError, match="scale must be 'auto', None, a positive number"):
        ksd(nig_result, nig[1], scale=scale)


def test_discrete_free_variable_is_refused():
    with pm.Model() as model:
        k = pm.Poisson("k", 3.0)
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu + k, 1.0, observed=np.zeros(5))
    with pytest.raises(ValueError, match=r"\['k'\] are discrete"):
        ksd(_result(1, k=np.ones(5, dtype=int), mu=np.zeros(5)), model)


def test_minibatch_model_over_a_subset_of_the_variables_is_refused(nig, nig_result):
    model = nig[0]
    with pytest.raises(ValueError, match="not every free variable"):
        ksd(nig_result, MinibatchModel(model, vars=[model["mu"]]))
