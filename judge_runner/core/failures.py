"""What can end a command, and its exit code (docs/design.md, "Exit codes"). Library code raises a
:class:`JudgeRunnerError` carrying its code; ``judge_runner.cli.app`` prints it once.

- 0 ok (also a weekly run skipped: another holds the lock)
- 1 quality gate failed, a regression, or a judge not calibrated
- 2 usage or configuration error
- 3 run incomplete (stopped, a budget or spend limit, too many failed queries, no usable query)
- 4 internal error (a bug: one line on stderr, the traceback in a log, or on stderr with ``--debug``)"""

from __future__ import annotations

import errno
from enum import Enum
from pathlib import Path

EXIT_OK, EXIT_GATE, EXIT_CONFIG, EXIT_INCOMPLETE, EXIT_INTERNAL = 0, 1, 2, 3, 4


class JudgeRunnerError(Exception):
    """A failure that ends a command with ``exit_code``. ``message`` is shown as is, so it must never hold a
    secret."""

    exit_code: int = EXIT_CONFIG
    prefix: str = "error: "

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def display(self) -> str:
        """The line printed on stderr."""
        return f"{self.prefix}{self.message}"


class UsageError(JudgeRunnerError):
    """Bad usage or configuration: exit 2."""

    exit_code = EXIT_CONFIG


class IncompleteRunError(JudgeRunnerError):
    """The job stopped before it finished (interrupted, a budget or spend limit, phase one failed): exit 3."""

    exit_code = EXIT_INCOMPLETE


_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_SQLITE_FULL = 13  # SQLITE_FULL: "database or disk is full" (https://www.sqlite.org/rescode.html#full)


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is ENOSPC, EDQUOT or SQLite's SQLITE_FULL."""
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    return getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL or "database or disk is full" in str(exc)


def storage_problem(what: str, path: Path | str, exc: BaseException) -> tuple[str, str]:
    """``(reason, message)`` for a file the run could not write; ``reason`` is ``disk_full`` or
    ``storage_error``."""
    cause = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    if is_disk_full(exc):
        return "disk_full", f"the disk holding {what} {path} is full ({cause})"
    return "storage_error", f"cannot write {what} {path} ({cause})"


class StorageError(IncompleteRunError):
    """A file the run writes could not be written (full disk, quota, I/O error): the user's environment, not a
    bug, so exit 3."""

    def __init__(self, what: str, path: Path | str, cause: BaseException):
        self.reason, message = storage_problem(what, path, cause)
        super().__init__(message)
        self.path = Path(path)
        self.cause = cause


class GateFailedError(JudgeRunnerError):
    """The quality gate failed, the run regressed or the judge is not calibrated: exit 1, printed without the
    ``error:`` prefix (the message says what failed)."""

    exit_code = EXIT_GATE
    prefix = ""


def one_line(exc: BaseException, limit: int = 200) -> str:
    """``"<ExceptionType>: <first line of its message>"``, cut at ``limit`` characters. The caller scrubs
    secrets."""
    lines = str(exc).strip().splitlines()
    first = lines[0].strip() if lines else ""
    if len(first) > limit:
        first = first[:limit] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class InternalError(JudgeRunnerError):
    """An unexpected exception (a bug): exit 4, shown as one line. ``logged_in`` is the traceback's log, None
    when none could be written."""

    exit_code = EXIT_INTERNAL
    prefix = "internal error: "

    def __init__(self, message: str, cause: BaseException, logged_in: Path | None):
        super().__init__(message)
        self.cause = cause
        self.logged_in = logged_in

    def display(self) -> str:
        where = f"traceback in {self.logged_in}" if self.logged_in else "no log could be written"
        return f"{self.prefix}{self.message} (a bug in judge-runner; {where}; rerun with --debug to print it)"


class RunStatus(str, Enum):
    """How a phase-two run ended (the run loop's verdict on itself)."""

    OK = "ok"
    GATE_FAILED = "gate_failed"
    INCOMPLETE = "incomplete"
    CONFIG_ERROR = "config_error"
    SKIPPED = "skipped"  # weekly: another weekly run holds the lock and is doing the job


EXIT_CODES: dict[RunStatus, int] = {
    RunStatus.OK: EXIT_OK,
    RunStatus.GATE_FAILED: EXIT_GATE,
    RunStatus.CONFIG_ERROR: EXIT_CONFIG,
    RunStatus.INCOMPLETE: EXIT_INCOMPLETE,
    RunStatus.SKIPPED: EXIT_OK,
}


def exit_code_for(status: RunStatus) -> int:
    return EXIT_CODES[status]
