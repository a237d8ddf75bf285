"""Renamed keyword arguments: the old name keeps working, with a warning, for one release."""

import functools
import warnings

REMOVED_IN = "0.2"


def renamed_arguments(**old_to_new):
    """Decorate a function so that each old keyword name is accepted as its new name.

    The old name raises a ``FutureWarning`` (PyMC's category for user-facing deprecations);
    passing both names is a ``TypeError``. ``inspect.signature`` shows only the new names.
    """

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            for old, new in old_to_new.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise TypeError(f"pass {new!r} only: {old!r} is its former name")
                warnings.warn(
                    f"{old!r} was renamed {new!r} (see the glossary in the docs); the old "
                    f"name will be removed in pymc-minibatch {REMOVED_IN}",
                    FutureWarning,
                    stacklevel=2,
                )
                kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        wrapper.renamed_arguments = dict(old_to_new)
        return wrapper

    return decorate
