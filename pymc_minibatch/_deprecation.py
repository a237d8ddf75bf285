"""Renamed keyword arguments: the old name keeps working, with a warning, for one release."""

import functools
import warnings

REMOVED_IN = "0.2"


def renamed_arguments(**old_to_new):
    """Decorate a function so that each old keyword name is accepted as its new name.

    A value is a new name, or a pair ``(new name, convert)`` where ``convert(value, kwargs)``
    gives the new argument's value from the old one (when the meaning changed with the
    name). The old name raises a ``FutureWarning`` (PyMC's category for user-facing
    deprecations); passing both names is a ``TypeError``. ``inspect.signature`` shows only
    the new names.
    """

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            for old, renamed in old_to_new.items():
                if old not in kwargs:
                    continue
                new, convert = renamed if isinstance(renamed, tuple) else (renamed, None)
                if new in kwargs:
                    raise TypeError(f"pass {new!r} only: {old!r} is its former name")
                warnings.warn(
                    f"{old!r} was renamed {new!r} (see the glossary in the docs); the old "
                    f"name will be removed in pymc-minibatch {REMOVED_IN}",
                    FutureWarning,
                    stacklevel=2,
                )
                value = kwargs.pop(old)
                kwargs[new] = value if convert is None else convert(value, kwargs)
            return function(*args, **kwargs)

        return wrapper

    return decorate
