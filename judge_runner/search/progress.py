"""Progress of long work on stderr, with a rate and an ETA: a rich bar on a terminal, else a plain line
(``embedding 2,304/8,590 chunks (27%), 44.1 chunks/s, ETA 2m22s``) at most every ``interval_s`` seconds and
repeated by a heartbeat, so the screen is never silent for longer.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

UNITS = {
    "reading": "files",
    "embedding": "chunks",
    "searching": "searches",
    "labelling": "labels",
    "probe": "labels",
    "statistics": "resamples",
}
"""The unit of each stage, by the stage's first word."""
INTERVAL_ENV = "JUDGE_RUNNER_PROGRESS_S"
DEFAULT_INTERVAL_S = 5.0
"""Seconds between two plain lines: well under the 10 s before a person wonders whether it hangs."""


def default_interval(environ: dict[str, str] | None = None) -> float:
    """``JUDGE_RUNNER_PROGRESS_S`` when it is a positive number, else :data:`DEFAULT_INTERVAL_S`."""
    value = (os.environ if environ is None else environ).get(INTERVAL_ENV, "")
    try:
        seconds = float(value)
    except ValueError:
        return DEFAULT_INTERVAL_S
    return seconds if 0 < seconds < float("inf") else DEFAULT_INTERVAL_S


def format_duration(seconds: float) -> str:
    """``"42s"``, ``"2m05s"``, ``"1h03m"``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class IndexProgress:
    """A ``progress(stage, done, total)`` callback on ``stream``; a context manager. ``interval_s``: least
    and most seconds between two plain lines; ``total=0``: unknown, no share or ETA."""

    def __init__(
        self,
        stream: TextIO | None = None,
        interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        live: bool | None = None,
        heartbeat: bool = True,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s = default_interval() if interval_s is None else interval_s
        self.clock = clock
        self.heartbeat = heartbeat and clock is time.monotonic
        self._write_lock = threading.Lock()
        self._state: tuple[int, int] = (0, 0)
        self._beat: threading.Thread | None = None
        self._stop = threading.Event()
        is_tty = getattr(self.stream, "isatty", lambda: False)()
        self.live = is_tty if live is None else live
        self._stage: str | None = None
        self._started = 0.0
        self._last_line = -float("inf")
        self._bar: Any = None  # a rich Progress once a live bar is shown
        self._task = None

    def __enter__(self) -> IndexProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop_beat()
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def _stop_beat(self) -> None:
        self._stop.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join(timeout=1.0)
        self._beat = None

    def _start_beat(self, stage: str) -> None:
        self._stop = threading.Event()
        stop = self._stop

        def beat() -> None:
            while not stop.wait(min(1.0, self.interval_s / 4)):
                with self._write_lock:
                    if stop.is_set() or self._stage != stage:
                        return
                    if self.clock() - self._last_line >= self.interval_s:
                        self._emit(stage, *self._state)

        self._beat = threading.Thread(target=beat, name="progress-heartbeat", daemon=True)
        self._beat.start()

    def _emit(self, stage: str, done: int, total: int) -> None:
        self._last_line = self.clock()
        self.stream.write(f"  {self.line(stage, done, total)}\n")
        self.stream.flush()

    def line(self, stage: str, done: int, total: int) -> str:
        unit = UNITS.get(stage.split(" ")[0], "items")
        elapsed = self.clock() - self._started
        text = f"{stage} {done:,}/{total:,} {unit}" if total else f"{stage} {done:,} {unit}"
        if total:
            text += f" ({100 * done // total}%)"
        rate = done / elapsed if elapsed > 0 else 0.0
        if rate > 0:
            text += f", {rate:,.1f} {unit}/s"
            if done < total:
                text += f", ETA {format_duration((total - done) / rate)}"
            elif total:
                text += f", took {format_duration(elapsed)}"
        elif elapsed >= 1:  # nothing done yet (a first batch, a first judge call): how long it has waited
            text += f", {format_duration(elapsed)} so far"
        return text

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        if stage != self._stage:
            self.close()
            self._stage, self._started, self._last_line = stage, now, -float("inf")
            if self.heartbeat and not self.live:
                self._start_beat(stage)
        if self.live:
            self._live(stage, done, total)
            return
        finished = bool(total) and done >= total
        with self._write_lock:
            self._state = (done, total)
            if finished or now - self._last_line >= self.interval_s:
                self._emit(stage, done, total)
        if finished:
            self._stop_beat()

    def _live(self, stage: str, done: int, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        if self._bar is None:
            unit = UNITS.get(stage.split(" ")[0], "items")
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
        if total and done >= total:
            self.close()
