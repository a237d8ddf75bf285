"""Every algorithm module listed in :data:`pymc_minibatch.kernels.base.KERNEL_MODULES`
follows the kernel protocol: it exports ``State`` and ``Info`` (NamedTuples), ``init`` and
``step``, ``step`` takes the generator first, and a step is a function of the generator's
state and its arguments (two runs from copies of one generator state agree exactly)."""

import copy
import importlib
import inspect

import numpy as np
import pytest

from pymc_minibatch.kernels import base
from pymc_minibatch.kernels.exact_mh import ExactModel, Params
from pymc_minibatch.kernels.mint import MintConfig
from pymc_minibatch.kernels.tuna import single_group, tuna_rule
from tests.kernels.test_flymc import tiny_logistic
from tests.kernels.test_group_sweep import tiny_sweep
from tests.kernels.test_mint import N_ROWS, UNTEMPERED, _recording_target
from tests.kernels.test_particle_kernel import START, minibatch, settings
from tests.kernels.test_sg_chain import SGMGT, _chain, _settings


def _exact_mh(module, rng):
    """TunaMH's rule on rows whose log-likelihoods are ``-x_i theta^2 / 2``, bounded by
    ``c_i M`` with ``M = |theta'^2 - theta^2| / 2``."""
    x = np.random.default_rng(2).uniform(0.1, 1.0, size=50)

    def row_pair(theta, proposal, idx):
        return -0.5 * x[idx] * theta[0] ** 2, -0.5 * x[idx] * proposal[0] ** 2

    def metrics(theta, proposal, whitened):
        return np.array([0.5 * abs(proposal[0] ** 2 - theta[0] ** 2)])

    def draw(rng, size):
        return rng.choice(x.size, size, p=x / x.sum())

    model = ExactModel(lambda theta: -0.5 * float(theta @ theta), row_pair=row_pair,
                       full_loglik=lambda theta: -0.5 * x.sum() * theta[0] ** 2,
                       metrics=metrics)  # fmt: skip
    params = Params(scale=0.3, rows=single_group(x, float(x.sum()), draw), n_data=x.size,
                    chi=0.05)  # fmt: skip
    return module.init(np.array([0.4]), model.logdensity), (model, params, tuna_rule)


def _flymc(module, rng):
    n_data = 8
    target = tiny_logistic(n_data)
    state = module.init(rng, target, np.array([0.3]), n_data)
    return state, (target, 0.2, 1.5)


def _group_sweep(module, rng):
    """The sweep on a small hierarchical model, drawing rows, while tuning and searching
    (every draw of the generator a sweep can make)."""
    return tiny_sweep(c=0.5, residual=0.5, tune=True, search=True)


def _mint(module, rng):
    config = MintConfig(UNTEMPERED, N_ROWS, N_ROWS // 2, "sgld", temper_prior=False)
    target = _recording_target([])
    state = module.init(rng, np.array([0.4, -0.8]), target, config)
    return state, (target, config, 0.3)


def _sg_chain(module, rng):
    """SGMGT (momentum, thermostats and their resampling) on a standard normal whose
    gradient estimate is noisy with the batch."""

    def estimate(theta, idx):
        return -0.5 * float(theta @ theta), -theta + (idx.mean() - 49.5) / 10

    _, state = _chain(SGMGT)
    return state, (estimate, _settings(SGMGT, period=3), 2)


def _particles(module, rng):
    config = settings("pisgld", wasserstein_weight=0.2)
    return module.init(START, config.preconditioner), (minibatch, config)


#: For each kernel module: ``(module, rng) -> (state, the step's arguments after it)`` on a
#: small problem.
EXAMPLES = {"exact_mh": _exact_mh, "flymc": _flymc, "group_sweep": _group_sweep, "mint": _mint,
            "particles": _particles, "sg_chain": _sg_chain}


def _module(name):
    return importlib.import_module(f"pymc_minibatch.kernels.{name}")


def test_every_listed_module_has_an_example():
    assert set(EXAMPLES) == set(base.KERNEL_MODULES)


@pytest.mark.parametrize("name", base.KERNEL_MODULES)
def test_a_kernel_module_exports_the_four_names(name):
    module = _module(name)
    for cls in (module.State, module.Info):
        assert issubclass(cls, tuple) and hasattr(cls, "_fields"), cls  # a NamedTuple
    assert callable(module.init)
    first = next(iter(inspect.signature(module.step).parameters))
    assert first == "rng", f"{name}.step takes {first!r} first, not the generator"


def _equal(a, b):
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return a == b or (a != a and b != b)  # NaN equals NaN here


@pytest.mark.parametrize("name", base.KERNEL_MODULES)
def test_a_step_is_a_function_of_the_generator_state(name):
    module = _module(name)
    state, args = EXAMPLES[name](module, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    moved = False
    for _ in range(20):
        twin = copy.deepcopy(rng)
        first, first_info = module.step(rng, state, *args)
        second, second_info = module.step(twin, state, *args)
        assert _equal(first, second) and _equal(first_info, second_info)
        assert _equal(rng.bit_generator.state, twin.bit_generator.state)
        moved |= not _equal(first, state)
        state = first
    assert moved  # the example's chain does move, so the comparison has power
