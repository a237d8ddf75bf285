"""What a chain's draws take in memory, said before sampling and checked when a chain starts.

``pm.sample`` keeps every draw of every free variable (8 bytes a value), tuning draws
included while the chain runs. On a network of 10^5 weights a draw is a megabyte or more:
a chain of a draw per update would fill the memory within minutes, so the samplers for big
models thin (``updates_per_draw``) and the size of what they keep is stated up front.
"""

import logging
from pathlib import Path

from pymc_minibatch.arguments import positive_int
from pymc_minibatch.exceptions import DrawsExceedMemoryError

_log = logging.getLogger("pymc_minibatch")

BYTES_PER_VALUE = 8


def draw_bytes(ndim: int) -> int:
    """Bytes of one draw of ``ndim`` float64 values."""
    return BYTES_PER_VALUE * int(ndim)


def available_memory() -> int | None:
    """The memory the system can give without swapping (Linux's ``MemAvailable``), in bytes;
    ``None`` where it is not known."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _gigabytes(n_bytes):
    return f"{n_bytes / 1e9:.3g} GB"


def default_per_draw(sampler: str, minibatch_model, batch_size: int, given, name: str):
    """The sampler's argument ``name`` (``updates_per_draw`` or ``steps_per_draw``):
    ``given``, checked, or by default 1, except on models too big for the exact Laplace fit
    (networks): one epoch, ``ceil(N / batch_size)``. On those the size of a draw is logged
    (:func:`announce_draws`)."""
    per_epoch = -(-minibatch_model.n_data // batch_size)
    big_model = not minibatch_model.laplace_is_exact()
    per_draw = positive_int(name, given if given is not None else (per_epoch if big_model else 1))
    if big_model:
        unit = "updates" if name == "updates_per_draw" else "steps"
        announce_draws(sampler, minibatch_model.ndim, per_draw, per_epoch, unit)
    return per_draw


def announce_draws(sampler: str, ndim: int, per_draw: int, per_epoch: int, unit="updates"):
    """Log, at construction, what each draw keeps (level INFO, logger ``pymc_minibatch``):
    a draw every ``per_draw`` of the ``per_epoch`` updates (or MINT's steps) of an epoch."""
    _log.info(
        "%s keeps a draw every %d %s (%.3g per epoch of %d %s): %d values, %.3g MB per draw "
        "and chain", sampler, per_draw, unit, per_epoch / per_draw, per_epoch, unit, ndim,
        draw_bytes(ndim) / 1e6,
    )  # fmt: skip


def check_chain_fits(sampler: str, ndim: int, n_draws: int, per_draw: int,
                     thinning="updates_per_draw", available: int | None = None):  # fmt: skip
    """Raise :class:`~pymc_minibatch.DrawsExceedMemoryError` if ``n_draws`` draws of
    ``ndim`` values (tuning included) exceed the memory available (``available`` bytes, by
    default :func:`available_memory`; nothing is checked where it is unknown); the fix names
    the sampler's argument ``thinning``, now ``per_draw``."""
    available = available_memory() if available is None else available
    needed = n_draws * draw_bytes(ndim)
    if available is None or needed <= available:
        return
    fitting = max(1, available // draw_bytes(ndim))
    factor = -(-needed // available)
    raise DrawsExceedMemoryError(
        f"{sampler}: {n_draws} draws (tuning included) of {ndim} values take "
        f"{_gigabytes(needed)} per chain ({draw_bytes(ndim) / 1e6:.3g} MB a draw), above the "
        f"{_gigabytes(available)} of memory available, and each further chain adds as much. "
        f"Sample at most {fitting} draws per chain, or keep fewer of the same chain's states: "
        f"{thinning}={factor * per_draw} (now {per_draw}) covers the same updates in "
        f"{-(-n_draws // factor)} draws."
    )
