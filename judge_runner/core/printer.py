"""Where a job prints (results on stdout; progress, warnings and errors on stderr; ``--quiet``), and what
reaches a console that cannot show every character."""

from __future__ import annotations

import codecs
import errno
import os
import sys
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Say = Callable[[str], None]

FALLBACK_ERRORS = "judge_runner.fallback"

FALLBACKS = {
    "Δ": "d",
    "±": "+/-",
    "→": "->",
    "←": "<-",
    "↑": "^",
    "↓": "v",
    "⇒": "=>",
    "▲": "^",
    "▼": "v",
    "…": "...",
    "–": "-",
    "—": "--",
    "−": "-",
    "“": '"',
    "”": '"',
    "‘": "'",
    "’": "'",
    "‹": "<",
    "›": ">",
    "«": "<<",
    "»": ">>",
    "·": ".",
    "•": "*",
    "≥": ">=",
    "≤": "<=",
    "≠": "!=",
    "≈": "~",
    "×": "x",
    "✓": "ok",
    "✗": "x",
    "█": "#",
    "━": "-",
}
"""ASCII for the characters judge-runner prints."""


def silent(message: str) -> None:
    """A :data:`Say` that prints nothing."""


def _stdout(message: str) -> None:
    print(message, file=sys.stdout)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def ascii_fallback(char: str, encoding: str = "ascii") -> str:
    r"""What to print for ``char`` where ``encoding`` cannot encode it: :data:`FALLBACKS`, box drawing as ``-``,
    ``|`` or ``+``, else its compatibility decomposition (``é`` as ``e``), else a ``\uXXXX`` escape, never a
    silent ``?``."""
    if char in FALLBACKS:
        return FALLBACKS[char]
    name = unicodedata.name(char, "")
    if name.startswith("BOX DRAWINGS"):
        across, down = "HORIZONTAL" in name or "LEFT" in name or "RIGHT" in name, any(w in name for w in ("VERTICAL", "UP", "DOWN"))
        return "+" if across and down else "-" if across else "|"
    kept = "".join(c for c in unicodedata.normalize("NFKD", char) if _encodes(c, encoding) and not unicodedata.combining(c))
    return kept or char.encode("ascii", "backslashreplace").decode("ascii")


def _encodes(char: str, encoding: str) -> bool:
    try:
        char.encode(encoding)
    except UnicodeError:
        return False
    return True


def _fallback_errors(error: UnicodeError) -> tuple[str | bytes, int]:
    """A codec error handler: :func:`ascii_fallback`; a lone surrogate of an undecodable byte goes out as that
    byte, as ``surrogateescape`` does."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    char = error.object[error.start]
    if 0xDC80 <= ord(char) <= 0xDCFF:
        return bytes([ord(char) - 0xDC00]), error.start + 1
    return ascii_fallback(char, error.encoding), error.start + 1


codecs.register_error(FALLBACK_ERRORS, _fallback_errors)


def fit_console() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` print what their encoding cannot encode (cp1252, a Windows
    console) as :func:`ascii_fallback` instead of raising; an ASCII stream becomes UTF-8, as click and Python's
    UTF-8 mode take the C locale."""
    for stream in (sys.stdout, sys.stderr):
        try:
            name = codecs.lookup(getattr(stream, "encoding", None) or "ascii").name
        except LookupError:
            name = "ascii"
        if name.startswith("utf") or not hasattr(stream, "reconfigure"):
            continue
        stream.reconfigure(**({"encoding": "utf-8"} if name == "ascii" else {"errors": FALLBACK_ERRORS}))


def rich_text(draw: Callable[[Any], None]) -> str:
    """What ``draw(console)`` prints on a rich ``Console``, as one string for :attr:`Printer.out`, so rich
    tables obey the same rules as every other line. Styled at the terminal's width when stdout is a terminal,
    plain otherwise."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    draw(Console(file=buffer, force_terminal=sys.stdout.isatty() or None))
    return buffer.getvalue().rstrip("\n")


def closed_stream_safe(say: Say, stream: str) -> Say:
    """``say`` that survives its reader going away (``| head``): on a broken pipe the stream is pointed at the
    null device and the job goes on to its own exit code. Other OSErrors raise."""

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
    """The two streams a job prints to, each a callable taking one line: ``out`` for results, ``err`` for
    warnings and errors (always shown); progress is silenced by ``quiet``. Looked up at each call, so a weekly
    run can mirror them into its log."""

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
        """Per-item failures: beside the progress on stdout, or on stderr when quiet."""
        return self.err if self.quiet else self.out

    @property
    def log(self) -> Say:
        """Detail lines for stderr, or :func:`silent` when quiet."""
        return silent if self.quiet else self.err
