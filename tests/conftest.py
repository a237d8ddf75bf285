"""Test-session setup shared by every test module."""

import os
import sys

# PyTensor compiles each new C module while holding one lock per compile directory, so
# pytest-xdist workers sharing a directory compile one at a time: on a cold cache most of
# the suite's time. One directory per worker lets them compile side by side.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and "pytensor" not in sys.modules:
    _FORMAT = (
        "compiledir_format=compiledir_%(short_platform)s-%(processor)s-%(python_version)s-"
        f"%(python_bitwidth)s-{_WORKER}"
    )
    os.environ["PYTENSOR_FLAGS"] = ",".join(
        flag for flag in (os.environ.get("PYTENSOR_FLAGS", ""), _FORMAT) if flag
    )
