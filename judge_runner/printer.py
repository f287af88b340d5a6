"""Where a job prints: results on stdout, progress, warnings and errors on stderr, and ``--quiet``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

Say = Callable[[str], None]


def silent(message: str) -> None:
    """A :data:`Say` that prints nothing."""


def _stdout(message: str) -> None:
    print(message, file=sys.stdout)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


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

    def note(self, message: str) -> None:
        """Progress on stderr, unless quiet."""
        if not self.quiet:
            self.err(message)

    @property
    def progress(self) -> Say:
        """Per-query progress lines for stdout, or :func:`silent` when quiet."""
        return silent if self.quiet else self.out

    @property
    def log(self) -> Say:
        """Detail lines for stderr (e.g. dropped queries, judge recoveries), or :func:`silent` when quiet."""
        return silent if self.quiet else self.err
