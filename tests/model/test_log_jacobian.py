"""The adapter's log-Jacobian term against PyMC's logp with and without Jacobians."""

import numpy as np
import pymc as pm

import pymc_minibatch as pmm


def test_log_jacobian_matches_pymc_and_finite_differences():
    with pm.Model() as model:
        pm.HalfNormal("scale", 1.0)
        pm.Uniform("weight", 0.0, 3.0)
        pm.Normal("y", pm.Normal("mu", 0, 1), model["scale"], observed=np.arange(5.0))
    mm = pmm.MinibatchModel(model)
    with_jacobian, without = model.compile_logp(), model.compile_logp(jacobian=False)
    rng = np.random.default_rng(0)
    for _ in range(3):
        theta = mm.initial_theta() + rng.normal(size=mm.ndim)
        point = mm.point_from_theta(theta)
        value, grad = mm.log_jacobian_and_grad(theta)
        np.testing.assert_allclose(value, with_jacobian(point) - without(point), rtol=1e-10)
        steps = np.eye(mm.ndim) * 1e-6
        numeric = [
            (mm.log_jacobian_and_grad(theta + h)[0] - mm.log_jacobian_and_grad(theta - h)[0]) / 2e-6
            for h in steps
        ]
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)
