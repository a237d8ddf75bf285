"""Reading the values a fixture recorded once (same draws, same particles) to hold a
refactor to."""

import numpy as np
import pytest


def load_recorded(path, record_command):
    """``{key: array}`` of the ``.npz`` at ``path``; fails the test, naming
    ``record_command``, when nothing was recorded for this PyMC version."""
    if not path.exists():
        pytest.fail(f"nothing recorded for this PyMC version ({path}): record it with "
                    f"{record_command}")  # fmt: skip
    with np.load(path) as data:
        return {key: data[key] for key in data.files}
