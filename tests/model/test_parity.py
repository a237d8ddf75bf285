"""Parity of ``MinibatchModel`` with PyMC's own log-density, for every accepted family.

Each model family is built once per module. At the initial ``theta`` and five jittered
ones, the adapter's pieces must add up to PyMC's ``compile_logp``; minibatch values must
equal the full-data values at the same rows (repeats included); full-data gradients must
match finite differences; and ``grad_estimate`` over random batches must average to the
full log posterior and its gradient.
"""

import zlib
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_minibatch as pmm
from pymc_minibatch.model import full_data

N_ROWS = 600
N_FEATURES = 3
N_GROUPS = 10
N_JITTERED = 5
JITTER_SCALE = 0.3
RTOL = 1e-8


def _make_data():
    rng = np.random.default_rng(20240611)
    X = rng.normal(size=(N_ROWS, N_FEATURES))
    eta = X @ np.array([0.8, -0.5, 0.3])
    X_pos = np.exp(0.5 * rng.normal(size=(N_ROWS, 2)))
    group = rng.integers(0, N_GROUPS, size=N_ROWS)
    group_effect = rng.normal(size=N_GROUPS)
    return SimpleNamespace(
        X=X,
        y_bin=(rng.random(N_ROWS) < 1.0 / (1.0 + np.exp(-eta))).astype("int64"),
        y_count=rng.poisson(np.exp(0.2 + 0.5 * eta)),
        y_lin=eta + 0.7 * rng.standard_t(4, size=N_ROWS),
        y_mix=np.where(
            rng.random(N_ROWS) < 0.3,
            rng.normal(-2.0, 0.5, N_ROWS),
            rng.normal(1.5, 1.0, N_ROWS),
        ),
        group=group,
        y_hier=group_effect[group] + 0.5 * X[:, 0] + 0.3 * rng.normal(size=N_ROWS),
        X_pos=X_pos,
        y_trans=np.log(X_pos) @ np.array([0.5, -0.3])
        + 0.2 * X_pos[:, 0] ** 2
        + 0.5 * rng.normal(size=N_ROWS),
    )


DATA = _make_data()


# ---- model families ---------------------------------------------------------------------
def build_bernoulli_logit(data, workdir):
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=N_FEATURES)
        pm.Bernoulli("y", logit_p=data.X @ beta, observed=data.y_bin)
    return model


def build_poisson_log(data, workdir):
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0, 1)
        beta = pm.Normal("beta", 0, 1, shape=N_FEATURES)
        pm.Poisson("y", mu=pt.exp(alpha + data.X @ beta), observed=data.y_count)
    return model


def build_normal_linreg(data, workdir):
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", data.X @ beta, sigma, observed=data.y_lin)
    return model


def build_studentt_linreg(data, workdir):
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1)
        nu = pm.Gamma("nu", 2, 0.1)
        pm.StudentT("y", nu=nu, mu=data.X @ beta, sigma=sigma, observed=data.y_lin)
    return model


def build_normal_mixture(data, workdir):
    with pm.Model() as model:
        w = pm.Dirichlet("w", np.ones(2))
        mu = pm.Normal(
            "mu",
            0,
            5,
            shape=2,
            transform=pm.distributions.transforms.ordered,
            initval=np.array([-1.0, 1.0]),
        )
        sd = pm.HalfNormal("sd", 2, shape=2)
        pm.NormalMixture("y", w=w, mu=mu, sigma=sd, observed=data.y_mix)
    return model


def build_pm_mixture(data, workdir):
    with pm.Model() as model:
        w = pm.Dirichlet("w", np.ones(2))
        mu = pm.Normal("mu", 0, 5, shape=2)
        sd = pm.HalfNormal("sd", 2, shape=2)
        components = [pm.Normal.dist(mu[0], sd[0]), pm.Normal.dist(mu[1], sd[1])]
        pm.Mixture("y", w=w, comp_dists=components, observed=data.y_mix)
    return model


def build_hierarchical(data, workdir):
    with pm.Model() as model:
        mu_a = pm.Normal("mu_a", 0, 1)
        sigma_a = pm.HalfNormal("sigma_a", 1)
        z = pm.Normal("z", 0, 1, shape=N_GROUPS)
        a = pm.Deterministic("a", mu_a + sigma_a * z)
        b = pm.Normal("b", 0, 1)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", a[data.group] + b * data.X[:, 0], sigma, observed=data.y_hier)
    return model


def build_two_observed(data, workdir):
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", data.X @ beta, sigma, observed=data.y_lin)
        pm.Poisson("count", pt.exp(0.2 + 0.5 * (data.X @ beta)), observed=data.y_count)
    return model


def build_pm_data_dims(data, workdir):
    coords = {"obs": np.arange(N_ROWS), "feature": ["a", "b", "c"]}
    with pm.Model(coords=coords) as model:
        X = pm.Data("X", data.X, dims=("obs", "feature"))
        y_obs = pm.Data("y_obs", data.y_lin, dims="obs")
        beta = pm.Normal("beta", 0, 2, dims="feature")
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", X @ beta, sigma, observed=y_obs, dims="obs")
    return model


def build_rowwise_transform(data, workdir):
    with pm.Model() as model:
        X_pos = pt.as_tensor(data.X_pos)
        beta = pm.Normal("beta", 0, 1, shape=2)
        gamma = pm.Normal("gamma", 0, 1)
        sigma = pm.HalfNormal("sigma", 1)
        mu = pt.log(X_pos) @ beta + gamma * X_pos[:, 0] ** 2
        pm.Normal("y", mu, sigma, observed=data.y_trans)
    return model


def build_pm_minibatch(data, workdir):
    X_batch, y_batch = pm.Minibatch(data.X, data.y_lin, batch_size=50)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=N_FEATURES)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", X_batch @ beta, sigma, observed=y_batch, total_size=N_ROWS)
    return model


def build_memmap(data, workdir):
    """The Bernoulli-logit model, with X and y read from ``np.memmap`` files."""
    arrays = {}
    for name, value in (("X", data.X), ("y", data.y_bin)):
        path = workdir / f"{name}.dat"
        writer = np.memmap(path, dtype=value.dtype, mode="w+", shape=value.shape)
        writer[:] = value
        writer.flush()
        del writer
        arrays[name] = np.memmap(path, dtype=value.dtype, mode="r", shape=value.shape)
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=N_FEATURES)
        pm.Bernoulli("y", logit_p=arrays["X"] @ beta, observed=arrays["y"])
    return model


BUILDERS = {
    "bernoulli_logit": build_bernoulli_logit,
    "poisson_log": build_poisson_log,
    "normal_linreg": build_normal_linreg,
    "studentt_linreg": build_studentt_linreg,
    "normal_mixture": build_normal_mixture,
    "pm_mixture": build_pm_mixture,
    "hierarchical": build_hierarchical,
    "two_observed": build_two_observed,
    "pm_data_dims": build_pm_data_dims,
    "rowwise_transform": build_rowwise_transform,
    "pm_minibatch": build_pm_minibatch,
    "memmap": build_memmap,
}
#: Families whose PyMC logp is stochastic (pm.Minibatch draws its rows inside the graph).
STOCHASTIC_PYMC_LOGP = {"pm_minibatch"}


@dataclass
class Case:
    """One model family: the PyMC model, its adapter, and the thetas to test at."""

    name: str
    model: pm.Model
    mm: pmm.MinibatchModel
    thetas: list
    pymc_logp: object  # compiled model.compile_logp(), or None if stochastic

    @property
    def all_rows(self):
        return np.arange(self.mm.n_data)

    def rng(self, salt):
        """A generator seeded by the family name and ``salt`` (fixed across runs)."""
        return np.random.default_rng([zlib.crc32(self.name.encode()), salt])


class CaseCache:
    """Builds each family at most once per module."""

    def __init__(self, tmp_path_factory):
        self._tmp_path_factory = tmp_path_factory
        self._cases = {}

    def __getitem__(self, name):
        if name not in self._cases:
            workdir = self._tmp_path_factory.mktemp(name)
            model = BUILDERS[name](DATA, workdir)
            mm = pmm.MinibatchModel(model)
            rng = np.random.default_rng(zlib.crc32(name.encode()))
            theta0 = mm.initial_theta()
            thetas = [theta0] + [
                theta0 + rng.normal(scale=JITTER_SCALE, size=mm.ndim) for _ in range(N_JITTERED)
            ]
            pymc_logp = None if name in STOCHASTIC_PYMC_LOGP else model.compile_logp()
            self._cases[name] = Case(name, model, mm, thetas, pymc_logp)
        return self._cases[name]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return CaseCache(tmp_path_factory)


@pytest.fixture(scope="module", params=list(BUILDERS))
def case(request, cases):
    return cases[request.param]


def _assert_close_scalar(actual, expected, rtol=RTOL, what=""):
    assert np.isfinite(actual) and np.isfinite(expected), what
    assert abs(actual - expected) <= rtol * max(1.0, abs(expected)), (
        f"{what}: {actual!r} != {expected!r} (diff {actual - expected:.3e})"
    )


# ---- tests on every family ----------------------------------------------------------------
def test_shapes_and_theta_round_trip(case):
    mm, model = case.mm, case.model
    assert mm.n_data == N_ROWS
    point = model.initial_point()
    expected_ndim = sum(np.size(point[v.name]) for v in model.value_vars)
    assert mm.ndim == expected_ndim
    np.testing.assert_array_equal(mm.initial_theta(), mm.theta_from_point(point))
    for theta in case.thetas:
        back = mm.point_from_theta(theta)
        assert set(back) == {v.name for v in model.value_vars}
        np.testing.assert_array_equal(mm.theta_from_point(back), theta)
    assert mm.uses_pm_minibatch == (case.name == "pm_minibatch")


def test_logp_decomposes_and_matches_pymc(case):
    mm = case.mm
    for theta in case.thetas:
        loglik = mm.loglik(theta, case.all_rows)
        assert loglik.shape == (N_ROWS,)
        assert np.all(np.isfinite(loglik))
        pieces = mm.logprior(theta) + float(np.sum(loglik))
        logp = mm.logp(theta)
        _assert_close_scalar(pieces, logp, what="logprior + sum(loglik) vs logp")
        if case.pymc_logp is not None:
            reference = float(case.pymc_logp(mm.point_from_theta(theta)))
            _assert_close_scalar(logp, reference, what="logp vs model.compile_logp()")


def test_logp_is_not_constant_in_theta(case):
    values = [case.mm.logp(theta) for theta in case.thetas]
    assert len(set(values)) == len(values)


def test_batches_equal_full_values_at_their_rows(case):
    mm = case.mm
    rng = case.rng(1)
    random_idx = rng.integers(0, N_ROWS, size=60)
    batches = [
        np.array([0, 0, N_ROWS - 1, 7, N_ROWS - 1, 7, 7]),
        np.concatenate([random_idx, random_idx[:10]]),
        np.array([3, 3]),
    ]
    for theta, theta2 in zip(case.thetas[:-1], case.thetas[1:], strict=True):
        full = mm.loglik(theta, case.all_rows)
        full2 = mm.loglik(theta2, case.all_rows)
        full_rows_grad = mm.grad_loglik(theta, case.all_rows, per_row=True)
        for idx in batches:
            np.testing.assert_allclose(mm.loglik(theta, idx), full[idx], rtol=1e-10, atol=1e-12)
            first, second = mm.loglik_pair(theta, theta2, idx)
            np.testing.assert_allclose(first, full[idx], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(second, full2[idx], rtol=1e-10, atol=1e-12)
            per_row = mm.grad_loglik(theta, idx, per_row=True)
            assert per_row.shape == (len(idx), mm.ndim)
            np.testing.assert_allclose(per_row, full_rows_grad[idx], rtol=1e-9, atol=1e-10)


def test_single_row_batch(case):
    """Batches of one row (B=1) give the same values and gradients as the full data."""
    mm = case.mm
    theta, theta2 = case.thetas[1], case.thetas[2]
    full = mm.loglik(theta, case.all_rows)
    full2 = mm.loglik(theta2, case.all_rows)
    full_rows_grad = mm.grad_loglik(theta, case.all_rows, per_row=True)
    _, prior_grad = mm.logprior_and_grad(theta)
    for row in (0, N_ROWS // 2, N_ROWS - 1):
        idx = np.array([row])
        np.testing.assert_allclose(mm.loglik(theta, idx), full[idx], rtol=1e-10, atol=1e-12)
        first, second = mm.loglik_pair(theta, theta2, idx)
        np.testing.assert_allclose(first, full[idx], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(second, full2[idx], rtol=1e-10, atol=1e-12)
        summed = mm.grad_loglik(theta, idx)
        np.testing.assert_allclose(summed, full_rows_grad[row], rtol=1e-9, atol=1e-10)
        value, grad = mm.grad_estimate(theta, idx)
        _assert_close_scalar(value, mm.logprior(theta) + N_ROWS * full[row], rtol=1e-10)
        np.testing.assert_allclose(
            grad, prior_grad + N_ROWS * full_rows_grad[row], rtol=1e-9, atol=1e-8
        )
        per_row = mm.grad_loglik(theta, idx, per_row=True)
        assert per_row.shape == (1, mm.ndim)
        np.testing.assert_allclose(per_row[0], full_rows_grad[row], rtol=1e-9, atol=1e-10)


def test_full_batch_gradient_is_logp_gradient(case):
    mm = case.mm
    step = 1e-6
    for theta in case.thetas:
        value, grad = mm.grad_estimate(theta, case.all_rows)
        logp, logp_grad = mm.logp_and_grad(theta)
        assert grad.shape == (mm.ndim,)
        _assert_close_scalar(value, mm.logp(theta), rtol=1e-10, what="grad_estimate value")
        _assert_close_scalar(logp, mm.logp(theta), rtol=1e-10, what="logp_and_grad value")
        scale = max(1.0, abs(logp))
        np.testing.assert_allclose(grad, logp_grad, rtol=1e-9, atol=1e-11 * scale)
        finite_diff = np.array(
            [
                (mm.logp(theta + step * e) - mm.logp(theta - step * e)) / (2 * step)
                for e in np.eye(mm.ndim)
            ]
        )
        np.testing.assert_allclose(grad, finite_diff, rtol=1e-5, atol=1e-8 * scale)


def test_logprior_gradient_matches_finite_differences(case):
    mm = case.mm
    step = 1e-6
    for theta in case.thetas:
        value, grad = mm.logprior_and_grad(theta)
        _assert_close_scalar(value, mm.logprior(theta), rtol=1e-12, what="logprior")
        finite_diff = np.array(
            [
                (mm.logprior(theta + step * e) - mm.logprior(theta - step * e)) / (2 * step)
                for e in np.eye(mm.ndim)
            ]
        )
        np.testing.assert_allclose(grad, finite_diff, rtol=1e-5, atol=1e-8 * max(1, abs(value)))


def test_per_row_gradients_sum_to_summed_gradient(case):
    mm = case.mm
    rng = case.rng(2)
    idx = rng.integers(0, N_ROWS, size=80)
    for theta in case.thetas:
        per_row = mm.grad_loglik(theta, idx, per_row=True)
        summed = mm.grad_loglik(theta, idx)
        assert summed.shape == (mm.ndim,)
        np.testing.assert_allclose(per_row.sum(axis=0), summed, rtol=1e-9, atol=1e-10)
        full_rows = mm.grad_loglik(theta, case.all_rows, per_row=True)
        full_sum = mm.grad_loglik(theta, case.all_rows)
        scale = max(1.0, np.abs(full_sum).max())
        np.testing.assert_allclose(full_rows.sum(axis=0), full_sum, rtol=1e-9, atol=1e-11 * scale)
        _, prior_grad = mm.logprior_and_grad(theta)
        _, logp_grad = mm.logp_and_grad(theta)
        np.testing.assert_allclose(prior_grad + full_sum, logp_grad, rtol=1e-9, atol=1e-11 * scale)


def test_grad_estimate_is_unbiased_with_replacement(case):
    mm = case.mm
    rng = case.rng(3)
    theta = case.thetas[1]
    n_batches, batch_size = 2000, 20
    full_value, full_grad = mm.logp_and_grad(theta)
    values = np.empty(n_batches)
    grads = np.empty((n_batches, mm.ndim))
    for k in range(n_batches):
        values[k], grads[k] = mm.grad_estimate(theta, rng.integers(0, N_ROWS, size=batch_size))
    # estimates are not all equal (the batch matters), so the test below has power
    assert np.std(values) > 0
    value_se = values.std(ddof=1) / np.sqrt(n_batches)
    assert abs(values.mean() - full_value) <= 5 * value_se + 1e-9 * abs(full_value)
    grad_se = grads.std(axis=0, ddof=1) / np.sqrt(n_batches)
    z_bound = 5 * grad_se + 1e-9 * (1 + np.abs(full_grad))
    deviation = np.abs(grads.mean(axis=0) - full_grad)
    assert np.all(deviation <= z_bound), (deviation / np.maximum(grad_se, 1e-300)).round(2)


def test_grad_estimate_averages_exactly_over_a_partition(case):
    """Disjoint batches covering every row once average to the full value and gradient."""
    mm = case.mm
    batch_size = 20
    assert N_ROWS % batch_size == 0
    batches = case.rng(4).permutation(N_ROWS).reshape(-1, batch_size)
    for theta in case.thetas[:2]:
        estimates = [mm.grad_estimate(theta, idx) for idx in batches]
        mean_value = np.mean([value for value, _ in estimates])
        mean_grad = np.mean([grad for _, grad in estimates], axis=0)
        full_value, full_grad = mm.logp_and_grad(theta)
        _assert_close_scalar(mean_value, full_value, rtol=1e-10, what="partition mean")
        scale = max(1.0, np.abs(full_grad).max())
        np.testing.assert_allclose(mean_grad, full_grad, rtol=1e-9, atol=1e-11 * scale)


def test_logp_in_chunks_equals_logp_in_one_piece(case, monkeypatch):
    mm = case.mm
    theta = case.thetas[2]
    whole_value, whole_grad = mm.logp(theta), mm.logp_and_grad(theta)[1]
    monkeypatch.setattr(full_data, "FULL_DATA_CHUNK_ROWS", 37)
    chunked_value, chunked_grad = mm.logp_and_grad(theta)
    _assert_close_scalar(mm.logp(theta), whole_value, rtol=1e-12, what="chunked logp")
    _assert_close_scalar(chunked_value, whole_value, rtol=1e-12, what="chunked logp_and_grad")
    np.testing.assert_allclose(chunked_grad, whole_grad, rtol=1e-10, atol=1e-10)


def test_grad_estimate_rejects_an_empty_batch(case):
    with pytest.raises(ValueError, match="at least one row"):
        case.mm.grad_estimate(case.thetas[0], np.array([], dtype=np.int64))


# ---- family-specific checks ---------------------------------------------------------------
def test_pm_minibatch_model_reads_the_full_data(cases):
    """The pm.Minibatch + total_size model's rows are the plain model's rows."""
    minibatch, plain = cases["pm_minibatch"], cases["normal_linreg"]
    assert minibatch.mm.var_names == plain.mm.var_names
    for theta in minibatch.thetas:
        np.testing.assert_allclose(
            minibatch.mm.loglik(theta, minibatch.all_rows),
            plain.mm.loglik(theta, plain.all_rows),
            rtol=1e-12,
            atol=1e-12,
        )
        _assert_close_scalar(minibatch.mm.logprior(theta), plain.mm.logprior(theta))
        reference = float(plain.pymc_logp(minibatch.mm.point_from_theta(theta)))
        _assert_close_scalar(minibatch.mm.logp(theta), reference, what="vs plain model logp")


def test_memmap_model_equals_in_memory_model(cases):
    memmap, in_memory = cases["memmap"], cases["bernoulli_logit"]
    for theta in memmap.thetas:
        np.testing.assert_allclose(
            memmap.mm.loglik(theta, memmap.all_rows),
            in_memory.mm.loglik(theta, in_memory.all_rows),
            rtol=1e-12,
            atol=1e-12,
        )


def test_two_observed_variables_are_summed_per_row(cases):
    case = cases["two_observed"]
    assert case.mm.row_term_names == ["y", "count"]
    theta = case.thetas[1]
    point = case.mm.point_from_theta(theta)
    beta = point["beta"]
    sigma = np.exp(point["sigma_log__"])
    eta = DATA.X @ beta
    expected = (
        -0.5 * ((DATA.y_lin - eta) / sigma) ** 2
        - np.log(sigma)
        - 0.5 * np.log(2 * np.pi)
        + pm.logp(pm.Poisson.dist(np.exp(0.2 + 0.5 * eta)), DATA.y_count).eval()
    )
    np.testing.assert_allclose(case.mm.loglik(theta, case.all_rows), expected, rtol=1e-10)


def test_pm_data_changes_are_seen_and_row_count_changes_refused():
    model = build_pm_data_dims(DATA, None)
    mm = pmm.MinibatchModel(model)
    pymc_logp = model.compile_logp()
    theta = mm.initial_theta() + 0.1
    before = mm.logp(theta)
    with model:
        pm.set_data({"y_obs": DATA.y_lin[::-1].copy()})
    after = mm.logp(theta)
    assert after != before
    _assert_close_scalar(after, float(pymc_logp(mm.point_from_theta(theta))))
    with model:
        pm.set_data({"X": DATA.X[:100], "y_obs": DATA.y_lin[:100]}, coords={"obs": np.arange(100)})
    with pytest.raises(ValueError, match="rows"):
        mm.loglik(theta, np.arange(10))
