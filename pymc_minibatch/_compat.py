"""Every difference between PyMC 5.x and PyMC 6.x that this package depends on.

PyMC 5 hands a step method its per-chain random generator through ``set_rng(rng)``;
PyMC 6 through ``setup_chain(rng, tune, draws)``. Both are routed to one hook here.
Results are ``arviz.InferenceData`` under PyMC 5 and ``xarray.DataTree`` under PyMC 6.
"""

import pymc
from pymc.util import get_random_generator

PYMC_MAJOR = int(pymc.__version__.split(".")[0])
IS_PYMC6 = PYMC_MAJOR >= 6


class ChainSetupMixin:
    """Route PyMC's per-chain hooks of both versions to ``reset_tuning``.

    A step method calls ``reset_tuning`` at the start of each chain, so that tuned
    settings never leak from one chain into the next (PyMC 5's parallel workers never
    call ``reset_tuning`` themselves).
    """

    def set_rng(self, rng):
        """PyMC 5.x: called once per chain with that chain's generator."""
        self.rng = get_random_generator(rng, copy=False)
        self.reset_tuning()

    def setup_chain(self, rng, tune, draws):
        """PyMC 6.x: called once per chain with that chain's generator and lengths."""
        self.check_chain_length(tune, draws)
        self.rng = get_random_generator(rng, copy=False)
        self.tune = bool(tune)
        self.reset_tuning()

    def check_chain_length(self, tune, draws):
        """PyMC 6.x: refuse a chain of ``tune + draws`` draws before it starts (a step
        method whose draws can exceed the memory overrides this; others accept any)."""


def default_compile_mode():
    """PyTensor mode for the adapter's functions when the user gives none.

    PyMC 5's pip wheels leave PyTensor's C backend without a BLAS to link; its BLAS
    rewrites then turn ``X @ beta`` into a Gemv that runs in Python (about 10 µs of overhead
    per call, most of a small-batch evaluation). Without those rewrites the product stays a
    ``Dot`` computed by NumPy's own BLAS. Elsewhere (a linked BLAS, PyMC 6's Numba backend)
    PyTensor's default is kept.
    """
    import pytensor
    from pytensor.compile.mode import get_mode

    if IS_PYMC6 or pytensor.config.blas__ldflags:
        return None
    return get_mode(None).excluding("BlasOpt")


def result_group(idata, name):
    """Group ``name`` of a result of either version (InferenceData or DataTree) as a Dataset."""
    group = idata[name]
    return group.to_dataset() if hasattr(group, "to_dataset") else group


def sample_stats(idata):
    """The ``sample_stats`` group of a result of either version, as an ``xarray.Dataset``."""
    return result_group(idata, "sample_stats")


def posterior(idata):
    """The ``posterior`` group of a result of either version, as an ``xarray.Dataset``."""
    return result_group(idata, "posterior")


def _arviz_major():
    import arviz as az

    return int(az.__version__.split(".")[0])


def plot_forest_comparison(results, path=None, var_names=None):
    """Forest plot of several results of the same model, one colour per result.

    ``results`` maps a label to an ``InferenceData`` (ArviZ 0.x) or ``DataTree`` (ArviZ 1.x).
    Saved to ``path`` if given. Returns the axes (ArviZ 0.x) or the ``PlotCollection``
    (ArviZ 1.x).
    """
    import arviz as az
    import matplotlib.pyplot as plt

    if _arviz_major() >= 1:
        # ArviZ 1.x aligns the results on (chain, draw): give them equal lengths first
        collection = az.plot_forest(
            _equal_length_posteriors(results), var_names=var_names, combined=True,
            backend="matplotlib", aes={"color": ["model"]},
        )  # fmt: skip
        collection.add_legend("model")
        if path is not None:
            collection.savefig(path)
        return collection
    axes = az.plot_forest(
        list(results.values()), model_names=list(results), var_names=var_names, combined=True
    )
    if path is not None:
        plt.savefig(path, bbox_inches="tight")
    return axes


def plot_density_comparison(results, var_names=None):
    """Overlaid marginal densities of several results of one model, one colour per result.

    Returns the axes (ArviZ 0.x) or the ``PlotCollection`` (ArviZ 1.x).
    """
    import arviz as az

    if _arviz_major() >= 1:
        collection = az.plot_dist(
            _equal_length_posteriors(results), var_names=var_names, kind="kde",
            backend="matplotlib", aes={"color": ["model"]},
        )  # fmt: skip
        collection.add_legend("model")
        return collection
    return az.plot_density(
        list(results.values()), data_labels=list(results), var_names=var_names, shade=0.1
    )


def _equal_length_posteriors(results):
    """Posteriors as one-chain DataTrees with the same number of (evenly thinned) draws."""
    import numpy as np
    import xarray as xr

    stacked = {
        label: posterior(idata).stack(sample=("chain", "draw")) for label, idata in results.items()
    }
    n_draws = min(ds.sizes["sample"] for ds in stacked.values())
    trees = {}
    for label, ds in stacked.items():
        keep = np.linspace(0, ds.sizes["sample"] - 1, n_draws).astype(int)
        thinned = ds.isel(sample=keep).drop_vars(["sample", "chain", "draw"])
        thinned = thinned.rename(sample="draw").expand_dims("chain")
        trees[label] = xr.DataTree.from_dict({"posterior": thinned.transpose("chain", "draw", ...)})
    return trees
