"""Errors raised by pymc-minibatch."""


class NonFactorizableError(ValueError):
    """The model's likelihood does not split into independent per-row terms.

    Minibatch samplers need ``log p(y | theta) = sum_i log p(y_i | theta)`` over the rows
    of the data. The message names the offending variable and the reason.

    Examples
    --------
    A model without observed data has no rows to take minibatches of:

    >>> import pymc as pm, pymc_minibatch as pmm
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 1)
    >>> pmm.MinibatchModel(model)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pymc_minibatch.exceptions.NonFactorizableError: the model has no observed variables...
    """


class DataValidationError(ValueError):
    """The model's data cannot be subsampled as it is: missing, non-finite or impossible values.

    Raised when a ``MinibatchModel`` (and so any sampler of this package) is built with
    ``check=True``, for observed data with missing values that PyMC would impute, NaN or
    infinite values in a covariate or an observation, or an observation outside the support
    of its distribution (its log-likelihood is ``-inf`` at every parameter value tried). The
    message names the variable, the first bad row and its value, and says what to do.

    Examples
    --------
    A NaN in a covariate of a logistic regression:

    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> X = np.random.default_rng(0).normal(size=(200, 2))
    >>> y = (X[:, 0] > 0).astype("int64")
    >>> X[7, 1] = np.nan
    >>> with pm.Model() as model:
    ...     beta = pm.Normal("beta", 0, 1, shape=2)
    ...     obs = pm.Bernoulli("y", logit_p=X @ beta, observed=y)
    >>> pmm.MinibatchModel(model)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pymc_minibatch.exceptions.DataValidationError: 1 row(s) ... hold non-finite values; ...row 7...
    """


class BoundViolationError(RuntimeError):
    """A TunaMH bound ``|U_i(theta') - U_i(theta)| <= c_i M(theta, theta')`` failed at a row.

    TunaMH is exact only when the bounds hold for every row and every pair of points; a
    violated bound means the draws would silently target the wrong distribution.

    Examples
    --------
    Raised during sampling when user-given bounds are too small, e.g.
    ``Bounds(0.5 * np.linalg.norm(X, axis=1))`` for a logistic regression (whose rows need
    ``c_i = ||x_i||``):

    >>> try:  # doctest: +SKIP
    ...     idata = pm.sample(step=pmm.TunaMH(bounds=too_small), model=model)
    ... except pmm.BoundViolationError as err:
    ...     print(err)
    """


class BoundsUnavailableError(ValueError):
    """TunaMH bounds cannot be derived from the model and none were given.

    Examples
    --------
    A Gamma likelihood is not among the families whose bounds are derived:

    >>> import numpy as np, pymc as pm, pymc_minibatch as pmm
    >>> y = np.random.default_rng(0).gamma(2.0, size=100)
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 1)
    ...     obs = pm.Gamma("y", alpha=2.0, beta=2.0 / pm.math.exp(mu), observed=y)
    >>> pmm.TunaMH(model=model)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pymc_minibatch.exceptions.BoundsUnavailableError: cannot derive per-row bounds for ...
    """


class SamplerDivergenceError(FloatingPointError):
    """A stochastic-gradient sampler produced a NaN or infinite state or gradient.

    Raised instead of writing a NaN trace; the message names the step, the step size and
    what to change (usually a smaller ``step_size`` or a larger ``batch_size``).

    Examples
    --------
    >>> try:  # doctest: +SKIP
    ...     idata = pm.sample(step=pmm.SGLD(batch_size=100, step_size=1.0), model=model)
    ... except pmm.SamplerDivergenceError as err:
    ...     print(err)  # names the update and suggests a smaller step size
    """


class DrawsExceedMemoryError(MemoryError):
    """The draws a chain would keep do not fit in the memory available.

    Raised when a chain starts, before its first update (PyMC 6 tells a step method the
    length of its chain; PyMC 5 does not, and runs unchecked), with the arithmetic and the
    fix: fewer draws, or more updates per draw (each draw is then the state after that many
    updates, the same chain thinned).

    Examples
    --------
    >>> try:  # doctest: +SKIP
    ...     idata = pm.sample(step=pmm.SGHMC(batch_size=100), draws=10**6, model=network)
    ... except pmm.DrawsExceedMemoryError as err:
    ...     print(err)  # the size of the draws, the memory available and what to change
    """
