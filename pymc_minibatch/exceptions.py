"""Errors raised by pymc-minibatch."""


class NonFactorizableError(ValueError):
    """The model's likelihood does not split into independent per-row terms.

    Minibatch samplers need ``log p(y | theta) = sum_i log p(y_i | theta)`` over the rows
    of the data. The message names the offending variable and the reason.
    """


class BoundViolationError(RuntimeError):
    """A TunaMH bound ``|U_i(theta') - U_i(theta)| <= c_i M(theta, theta')`` failed at a row.

    TunaMH is exact only when the bounds hold for every row and every pair of points; a
    violated bound means the draws would silently target the wrong distribution.
    """


class BoundsUnavailableError(ValueError):
    """TunaMH bounds cannot be derived from the model and none were given."""
