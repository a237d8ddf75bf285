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


class SamplerDivergenceError(FloatingPointError):
    """A stochastic-gradient sampler produced a NaN or infinite state or gradient.

    Raised instead of writing a NaN trace; the message names the step, the step size and
    what to change (usually a smaller ``step_size`` or a larger ``batch_size``).
    """
