"""The command line's structure: typed failures become exit codes in one place, SIGTERM acts as Ctrl+C
only while a command runs, the cli/ modules stay small and only the entry point exits the process."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import click
import pytest

from judge_runner.cli.app import run_handled, sigterm_as_ctrl_c
from judge_runner.core.failures import (
    EXIT_CODES,
    EXIT_CONFIG,
    EXIT_GATE,
    EXIT_INCOMPLETE,
    EXIT_OK,
    GateFailedError,
    IncompleteRunError,
    JudgeRunnerError,
    RunStatus,
    UsageError,
    exit_code_for,
)
from tests.support.isolated import run_isolated

PACKAGE = Path(__file__).resolve().parents[2] / "judge_runner"


def raising(exc: BaseException):
    def command():
        raise exc

    return command


@pytest.mark.parametrize(
    "exc,code,shown",
    [
        (UsageError("fixtures folder not found: x"), EXIT_CONFIG, "error: fixtures folder not found: x"),
        (IncompleteRunError("phase one produced no usable query"), EXIT_INCOMPLETE, "error: phase one produced no usable query"),
        (GateFailedError("regression: run b is worse than a"), EXIT_GATE, "regression: run b is worse than a"),
        (JudgeRunnerError("custom", exit_code=EXIT_INCOMPLETE), EXIT_INCOMPLETE, "error: custom"),
    ],
)
def test_typed_failures_map_to_their_exit_codes(exc, code, shown, capsys):
    assert run_handled(raising(exc)) == code
    err = capsys.readouterr().err
    assert err == shown + "\n"


def test_results_aborts_and_click_errors(capsys):
    assert run_handled(lambda: None) == EXIT_OK
    assert run_handled(lambda: EXIT_GATE) == EXIT_GATE
    assert run_handled(raising(click.exceptions.Abort())) == EXIT_INCOMPLETE
    assert "interrupted" in capsys.readouterr().err
    assert run_handled(raising(click.UsageError("bad option"))) == 2
    assert "bad option" in capsys.readouterr().err


def test_every_run_status_has_its_documented_exit_code():
    assert set(EXIT_CODES) == set(RunStatus)
    assert [exit_code_for(s) for s in (RunStatus.OK, RunStatus.GATE_FAILED, RunStatus.CONFIG_ERROR, RunStatus.INCOMPLETE)] == [0, 1, 2, 3]


def until_handled(seconds: float = 10.0) -> None:
    """Run bytecodes of the main thread (where the handler of a signal this process sent itself runs) until
    the handler raises, for at most ``seconds``: a fixed number of loops was too few on a loaded machine."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass
    pytest.fail(f"the signal's handler did not run within {seconds:g} s")


# The two tests below send SIGTERM to their own process: each runs in a fresh interpreter (a crashed test worker
# of the suite's two, seen under load, took the whole run with it).


def sigterm_is_ctrl_c_only_inside_a_command() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        with sigterm_as_ctrl_c():
            os.kill(os.getpid(), signal.SIGTERM)
            until_handled()
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_is_ctrl_c_only_inside_a_command():
    run_isolated(f"{__name__}:sigterm_is_ctrl_c_only_inside_a_command")


def sigterm_during_a_command_exits_3() -> None:
    def command():
        os.kill(os.getpid(), signal.SIGTERM)
        until_handled()
        return EXIT_OK

    def standalone():  # what click.main does with a KeyboardInterrupt in non-standalone mode
        try:
            return command()
        except KeyboardInterrupt:
            raise click.exceptions.Abort() from None

    assert run_handled(standalone) == EXIT_INCOMPLETE


def test_sigterm_during_a_command_exits_3():
    run_isolated(f"{__name__}:sigterm_during_a_command_exits_3")


def test_cli_modules_are_small():
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in (PACKAGE / "cli").glob("*.py")}
    assert {"app.py", "options.py", "indexing.py", "evaluation.py", "history.py", "weekly.py"} <= set(sizes)
    assert all(n < 250 for n in sizes.values()), sizes


def test_only_the_entry_point_exits_the_process():
    callers = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if re.search(r"\bsys\.exit\(|\bexit\(|raise SystemExit", p.read_text(encoding="utf-8"))
    )
    assert callers == ["cli/app.py"]


def test_no_business_logic_imports_in_the_click_layer():
    """Commands call library functions; the heavy modules (search backends, LLM SDKs, the run loop) are
    reached only through them. The provider registry is vocabulary (names, key variables, default
    models; it imports no SDK), so the click choices may come from it."""
    heavy = re.compile(r"(?:from|import) judge_runner\.(?:search|llm(?!\.registry\b)|evaluate|trend|report|corpus)\b")
    for path in (PACKAGE / "cli").glob("*.py"):
        assert not heavy.findall(path.read_text(encoding="utf-8")), path.name
