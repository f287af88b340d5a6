"""What can end a command, and the exit code each maps to (DESIGN.md's exit-code contract).

Exit codes: 0 ok; 1 quality gate (``--min-overall``) failed or a regression with ``--fail-on-regression``;
2 usage or configuration error; 3 run incomplete (interrupted, budget or spend limit reached, too many
failed queries, or another weekly run holds the lock).

Library code raises a :class:`JudgeRunnerError` subclass carrying its exit code; the command line's
entry point (``judge_runner.cli.app``) prints it and exits, once. A finished run reports a
:class:`RunStatus`, mapped to an exit code by :func:`exit_code_for`.
"""

from __future__ import annotations

from enum import Enum

EXIT_OK, EXIT_GATE, EXIT_CONFIG, EXIT_INCOMPLETE = 0, 1, 2, 3


class JudgeRunnerError(Exception):
    """A failure that ends a command with ``exit_code``; ``message`` is shown to the user as is (it must
    never hold a secret: no API key, no DSN password)."""

    exit_code: int = EXIT_CONFIG
    prefix: str = "error: "

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def display(self) -> str:
        """The line printed on stderr: ``error: <message>`` (a regression prints its message alone)."""
        return f"{self.prefix}{self.message}"


class UsageError(JudgeRunnerError):
    """Bad usage or configuration (missing folder, bad query set, refused API key, ...): exit 2."""

    exit_code = EXIT_CONFIG


class IncompleteRunError(JudgeRunnerError):
    """The job stopped before it finished (interrupted, budget or spend limit, phase one failed, the
    weekly lock is held): exit 3."""

    exit_code = EXIT_INCOMPLETE


class GateFailedError(JudgeRunnerError):
    """The quality gate failed or the latest run regressed (``--fail-on-regression``): exit 1. Its message
    already says what failed, so it is printed without the ``error:`` prefix."""

    exit_code = EXIT_GATE
    prefix = ""


class RunStatus(str, Enum):
    """How a phase-two run ended (the run loop's verdict on itself)."""

    OK = "ok"
    GATE_FAILED = "gate_failed"
    INCOMPLETE = "incomplete"
    CONFIG_ERROR = "config_error"


EXIT_CODES: dict[RunStatus, int] = {
    RunStatus.OK: EXIT_OK,
    RunStatus.GATE_FAILED: EXIT_GATE,
    RunStatus.CONFIG_ERROR: EXIT_CONFIG,
    RunStatus.INCOMPLETE: EXIT_INCOMPLETE,
}


def exit_code_for(status: RunStatus) -> int:
    """The process exit code of a run that ended with ``status`` (see the module docstring)."""
    return EXIT_CODES[status]
