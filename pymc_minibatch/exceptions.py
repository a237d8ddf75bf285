"""Errors raised by pymc-minibatch."""


class NonFactorizableError(ValueError):
    """The model's likelihood does not split into independent per-row terms.

    Minibatch samplers need ``log p(y | theta) = sum_i log p(y_i | theta)`` over the rows
    of the data. The message names the offending variable and the reason.
    """
