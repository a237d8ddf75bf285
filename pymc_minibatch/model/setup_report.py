"""Where a step's construction spends its time, and a progress bar for its passes.

Building a step on tall data is mostly full-data passes (the Laplace fit's Newton steps,
the bounds): at 10^7 rows each takes seconds. :class:`SetupReport` attributes each pass
and the wall time to the named stage it ran in (``"model"``, ``"Laplace fit"``,
``"bounds"``, ...; a pass outside every stage counts as ``"other"``), and, on data of at
least :data:`PROGRESS_MIN_ROWS` rows, shows each pass as it runs, in a transient bar
drawn with ``rich`` as ``pm.sample``'s own bar is.
"""

import contextlib
import time
from dataclasses import dataclass

#: Data of at least this many rows show a progress bar while a step is built (on smaller
#: data a pass takes well under a second).
PROGRESS_MIN_ROWS = 10**6

OTHER = "other"


@dataclass
class Stage:
    """One named stage of a step's construction: its full-data passes and wall seconds."""

    name: str
    passes: int = 0
    seconds: float = 0.0


class SetupReport:
    """Passes and seconds per stage of a step's construction.

    Stages do not nest: a stage entered while another runs is part of the outer one.
    ``seconds`` is the wall time from ``started`` (the model's construction) to
    :meth:`finish` (when the step is built); the stages' seconds are their own, and the
    rest is ``"other"``.

    Parameters
    ----------
    n_data : int
        The rows a pass reads (the bar counts them).
    progressbar : bool
        Show a bar while a pass runs (on at least :data:`PROGRESS_MIN_ROWS` rows).
    started : float, optional
        The ``time.perf_counter()`` at which the construction began (default: now).
    """

    def __init__(self, n_data, progressbar=True, started=None):
        self.n_data = int(n_data)
        self.progressbar = bool(progressbar)
        self.stages = {}
        self.pass_seconds = []
        self._current = None
        self._started = time.perf_counter() if started is None else started
        self.seconds = None

    @property
    def passes(self):
        """Full-data passes so far, over all stages."""
        return len(self.pass_seconds)

    @contextlib.contextmanager
    def stage(self, name, since=None):
        """Attribute the passes and time of the block to stage ``name`` (its time counted
        from ``since``, a ``time.perf_counter()`` value, when given)."""
        if self._current is not None:
            yield
            return
        self._current = self.stages.setdefault(name, Stage(name))
        started = time.perf_counter() if since is None else since
        try:
            yield
        finally:
            self._current.seconds += time.perf_counter() - started
            self._current = None

    @contextlib.contextmanager
    def full_data_pass(self):
        """Count one pass over all rows; yields ``advance(rows)``, to call as blocks of rows
        are done (it draws the bar where there is one)."""
        stage = self._current or self.stages.setdefault(OTHER, Stage(OTHER))
        started = time.perf_counter()
        with self._bar(stage.name) as advance:
            yield advance
        self.pass_seconds.append(time.perf_counter() - started)
        stage.passes += 1

    @contextlib.contextmanager
    def _bar(self, stage_name):
        if not (self.progressbar and self.n_data >= PROGRESS_MIN_ROWS):
            yield lambda rows: None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        description = f"building the step: {stage_name}, full-data pass {self.passes + 1}"
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("rows"))  # fmt: skip
        with Progress(*columns, transient=True) as progress:
            task = progress.add_task(description, total=self.n_data)
            yield lambda rows: progress.advance(task, rows)

    def finish(self):
        """Stop the clock: the step is built (later passes, e.g. full-data fallback steps
        while sampling, are counted in ``passes`` but not in the stages' seconds)."""
        if self.seconds is None:
            self.seconds = time.perf_counter() - self._started

    def table(self):
        """``[(stage, passes, seconds)]``: the named stages in the order they began, then
        ``"other"`` (passes outside every stage; the seconds not in a named stage)."""
        total = time.perf_counter() - self._started if self.seconds is None else self.seconds
        named = [stage for stage in self.stages.values() if stage.name != OTHER]
        other = self.stages.get(OTHER, Stage(OTHER))
        rest = max(total - sum(stage.seconds for stage in named), 0.0)
        return [(s.name, s.passes, s.seconds) for s in named] + [(OTHER, other.passes, rest)]

    def __repr__(self):
        rows = self.table()
        total = sum(seconds for _, _, seconds in rows)
        lines = [f"SetupReport: {total:.3g} s, {self.passes} full-data passes of "
                 f"{self.n_data} rows"]  # fmt: skip
        lines += [f"  {name:<12} {passes:>3} passes {seconds:>9.3g} s"
                  for name, passes, seconds in rows]  # fmt: skip
        return "\n".join(lines)
