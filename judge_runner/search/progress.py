"""Indexing progress on stderr, whatever is printed on stdout (text or ``--json``), with a rate and an ETA.

:class:`IndexProgress` is the ``progress(stage, done, total)`` callback that
:func:`~judge_runner.search.indexer.index_tree` and :func:`~judge_runner.search.indexer.index_beir` call
(stages ``"reading"``, counted in files, and ``"embedding"``, counted in chunks). On a terminal it draws a
rich progress bar (rate and time remaining); elsewhere (a pipe, a log file, CI) it prints a plain line at
most every ``interval_s`` seconds and at the end of each stage, e.g.
``embedding 2,304/8,590 chunks (27%), 44.1 chunks/s, ETA 2m22s``.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

UNITS = {"reading": "files", "embedding": "chunks"}


def format_duration(seconds: float) -> str:
    """``"42s"``, ``"2m05s"``, ``"1h03m"`` for a non-negative number of seconds."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class IndexProgress:
    """A ``progress(stage, done, total)`` callback writing to ``stream`` (stderr by default).

    ``interval_s``: least seconds between two plain lines of one stage; ``clock``: a monotonic clock in
    seconds (injectable for tests). Use as a context manager (or call :meth:`close`) so a live bar is
    closed. The rate is items per second since the stage's first call (the indexer reports ``done=0``
    when a stage starts); the ETA is what is left at that rate.
    """

    def __init__(self, stream: TextIO | None = None, interval_s: float = 5.0, clock=time.monotonic, live: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s = interval_s
        self.clock = clock
        is_tty = getattr(self.stream, "isatty", lambda: False)()
        self.live = is_tty if live is None else live
        self._stage: str | None = None
        self._started = 0.0
        self._last_line = -float("inf")
        self._bar: Any = None  # a rich Progress once a live bar is shown
        self._task = None

    def __enter__(self) -> IndexProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop a live bar (plain output needs no closing)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def line(self, stage: str, done: int, total: int) -> str:
        """The plain progress line for the current state of ``stage``."""
        unit = UNITS.get(stage, "items")
        elapsed = self.clock() - self._started
        text = f"{stage} {done:,}/{total:,} {unit}"
        if total:
            text += f" ({100 * done // total}%)"
        rate = done / elapsed if elapsed > 0 else 0.0
        if rate > 0:
            text += f", {rate:,.1f} {unit}/s"
            if done < total:
                text += f", ETA {format_duration((total - done) / rate)}"
            else:
                text += f", took {format_duration(elapsed)}"
        return text

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        if stage != self._stage:
            self.close()
            self._stage, self._started, self._last_line = stage, now, -float("inf")
        if self.live:
            self._live(stage, done, total)
            return
        if done >= total or now - self._last_line >= self.interval_s:
            self._last_line = now
            self.stream.write(f"  {self.line(stage, done, total)}\n")
            self.stream.flush()

    def _live(self, stage: str, done: int, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        if self._bar is None:
            unit = UNITS.get(stage, "items")
            self._bar = Progress(
                TextColumn(f"  {stage}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(unit),
                TextColumn("{task.fields[rate]}"),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(stage, total=total, rate="")
        elapsed = self.clock() - self._started
        rate = done / elapsed if elapsed > 0 else 0.0
        self._bar.update(self._task, completed=done, total=total, rate=f"{rate:,.1f}/s" if rate else "")
        if done >= total:
            self.close()
