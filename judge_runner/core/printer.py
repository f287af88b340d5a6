"""Where a job prints: results on stdout, progress, warnings and errors on stderr, and ``--quiet``."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Say = Callable[[str], None]


def silent(message: str) -> None:
    """A :data:`Say` that prints nothing."""


def _stdout(message: str) -> None:
    print(message, file=sys.stdout)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def rich_text(draw: Callable[[Any], None]) -> str:
    """What ``draw(console)`` prints on a rich ``Console``, as one string for :attr:`Printer.out`, so that
    rich tables obey the same rules as every other line (a reader that goes away silences them instead of
    ending the job). The console renders as it would on this process's stdout: with styles at the
    terminal's width when stdout is a terminal, plain otherwise (rich's own width rules)."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    draw(Console(file=buffer, force_terminal=sys.stdout.isatty() or None))
    return buffer.getvalue().rstrip("\n")


def closed_stream_safe(say: Say, stream: str) -> Say:
    """``say`` that survives its reader going away (``judge-runner ... | head``): on a broken pipe the stream
    (``"stdout"`` or ``"stderr"``) is pointed at the null device, so nothing more is written to it and
    Python's flush at exit raises nothing, and the line is dropped. The job goes on and ends with its own
    exit code: a run is never cut short, nor reported as a failed quality gate (click's exit 1 on EPIPE),
    because nobody reads its output any more. Any other OSError is raised."""

    def guarded(message: str) -> None:
        try:
            say(message)
        except OSError as exc:
            if not isinstance(exc, BrokenPipeError) and exc.errno != errno.EPIPE:
                raise
            setattr(sys, stream, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - lives as long as the process

    return guarded


@dataclass(frozen=True)
class Printer:
    """The two streams a job prints to, each a callable taking one line (the CLI passes ``click.echo``).

    ``out`` carries results (summaries, "written to" lines); ``err`` carries warnings and errors, always
    shown; :meth:`note` and :attr:`progress` carry progress, silenced by ``quiet``. The streams are looked
    up at each call, so a weekly run can mirror them into its log.
    """

    out: Say = field(default=_stdout)
    err: Say = field(default=_stderr)
    quiet: bool = False

    def __post_init__(self) -> None:
        # a reader that goes away (``| head``) silences the stream instead of stopping the job
        object.__setattr__(self, "out", closed_stream_safe(self.out, "stdout"))
        object.__setattr__(self, "err", closed_stream_safe(self.err, "stderr"))

    def note(self, message: str) -> None:
        """Progress on stderr, unless quiet."""
        if not self.quiet:
            self.err(message)

    @property
    def progress(self) -> Say:
        """Per-query progress lines for stdout, or :func:`silent` when quiet."""
        return silent if self.quiet else self.out

    @property
    def problems(self) -> Say:
        """Per-item failures (a query that could not be searched or judged): beside the progress on stdout,
        or on stderr when quiet, since ``--quiet`` prints only the final summary and errors."""
        return self.err if self.quiet else self.out

    @property
    def log(self) -> Say:
        """Detail lines for stderr (e.g. dropped queries, judge recoveries), or :func:`silent` when quiet."""
        return silent if self.quiet else self.err
