"""Checks of user arguments shared by the samplers: one message for one kind of mistake."""

import numpy as np


def positive_float(name, value, *, allow_none=False):
    """``value`` as a float, or ``ValueError`` unless it is a positive finite number.

    With ``allow_none``, ``None`` (a default to be derived or tuned) passes through.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def positive_int(name, value):
    """``value`` as an int, or ``ValueError`` unless it is an integer of at least 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
