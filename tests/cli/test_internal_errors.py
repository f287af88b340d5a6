"""An unexpected error (a bug) exits 4, never 1 (the quality gate's code): one line on
stderr naming the exception and where its traceback was logged; the traceback itself only with
``--debug`` (or ``JUDGE_RUNNER_DEBUG=1``) and in the log. No secret reaches the line or the log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from judge_runner.cli.app import run_handled
from judge_runner.core.failures import EXIT_INTERNAL
from tests.support.clitools import invoke

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "sk-ant-api03-SECRETSECRETSECRET0123456789"
DSN_PASSWORD = "pg-pass-w0rd"
DSN = f"postgresql://judge:{DSN_PASSWORD}@db.internal:5432/kb"


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def bug(message: str = "boom"):
    def raise_it(*args, **kwargs):
        raise RuntimeError(message)

    return raise_it


def test_a_bug_exits_4_with_one_line_and_the_traceback_in_a_log(in_tmp, monkeypatch):
    monkeypatch.setattr("judge_runner.cli.history.show_trend", bug())
    result = invoke(["trend", str(in_tmp)])
    assert result.exit_code == EXIT_INTERNAL == 4
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith("internal error: RuntimeError: boom")
    log = in_tmp / ".judge-runner" / "errors.log"
    assert str(Path(".judge-runner") / "errors.log") in lines[0] and "--debug" in lines[0]
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "RuntimeError: boom" in text and "judge-runner trend" in text
    assert oct(log.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("how", [["--debug"], "env"])
def test_debug_shows_the_traceback(in_tmp, monkeypatch, how):
    monkeypatch.setattr("judge_runner.cli.history.show_trend", bug())
    args = ["trend", str(in_tmp)]
    result = invoke(how + args, env={"JUDGE_RUNNER_DEBUG": None}) if how != "env" else invoke(args, env={"JUDGE_RUNNER_DEBUG": "1"})
    assert result.exit_code == 4
    assert "Traceback (most recent call last)" in result.output and "RuntimeError: boom" in result.output
    assert result.output.strip().splitlines()[-1].startswith("internal error: RuntimeError: boom")


@pytest.mark.parametrize(
    "message",
    [
        f"request failed with key {API_KEY}",
        f"cannot connect to {DSN}",
        f"conninfo host=db.internal user=judge password={DSN_PASSWORD} dbname=kb",
        f"bad url https://judge:{DSN_PASSWORD}@proxy.internal/v1",
    ],
)
@pytest.mark.parametrize("debug", [False, True])
def test_no_secret_in_the_line_the_traceback_or_the_log(in_tmp, monkeypatch, message, debug):
    monkeypatch.setattr("judge_runner.cli.history.show_trend", bug(message))
    env = {"ANTHROPIC_API_KEY": API_KEY, "DATABASE_URL": DSN}
    result = invoke((["--debug"] if debug else []) + ["trend", str(in_tmp)], env)
    assert result.exit_code == 4
    log = (in_tmp / ".judge-runner" / "errors.log").read_text()
    for where in (result.output, log):
        assert API_KEY not in where and DSN_PASSWORD not in where and "SECRETSECRET" not in where
        assert "***" in where


def test_a_multi_line_or_empty_message_is_still_one_line(in_tmp, monkeypatch):
    monkeypatch.setattr("judge_runner.cli.history.show_trend", bug("first line\nsecond line\n" + "x" * 1000))
    line = invoke(["trend", str(in_tmp)]).output.strip()
    assert "\n" not in line and "second line" not in line and len(line) < 500
    monkeypatch.setattr("judge_runner.cli.history.show_trend", bug(""))
    assert invoke(["trend", str(in_tmp)]).output.startswith("internal error: RuntimeError (")


def test_the_log_falls_back_to_the_temp_folder_when_dot_judge_runner_is_not_writable(in_tmp, monkeypatch):
    (in_tmp / ".judge-runner").write_text("a file, not a folder")
    monkeypatch.setattr("tempfile.tempdir", str(in_tmp / "tmp"))
    (in_tmp / "tmp").mkdir()
    monkeypatch.setattr("judge_runner.cli.history.show_trend", bug())
    result = invoke(["trend", str(in_tmp)])
    assert result.exit_code == 4
    fallback = in_tmp / "tmp" / "judge-runner-errors.log"
    assert str(fallback) in result.output and "RuntimeError: boom" in fallback.read_text()


def test_run_handled_maps_any_exception_to_4(in_tmp, capsys):
    for exc in (KeyError("k"), ValueError("v"), TypeError("t"), OSError("o"), AssertionError()):

        def command(exc=exc):
            raise exc

        assert run_handled(command) == 4
    assert capsys.readouterr().err.count("internal error: ") == 5


def test_an_error_a_ctrl_c_caused_is_an_interruption_not_a_bug(in_tmp, capsys):
    # a new user's trial: Ctrl+C while `label` imported scipy ended "internal error: ImportError: initialization
    # failed (a bug in judge-runner...)", exit 4
    def import_cut_short():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ImportError("initialization failed") from None  # the chain keeps its context: what numpy does

    def chained():
        raise RuntimeError("cleanup failed") from KeyboardInterrupt()

    for command in (import_cut_short, chained):
        assert run_handled(command) == 3
    err = capsys.readouterr().err
    assert err.count("interrupted") == 2 and "internal error" not in err


def test_weekly_logs_the_traceback_in_its_log_and_exits_4(in_tmp, monkeypatch, fixtures_root):
    monkeypatch.setattr("judge_runner.app.weekly.weekly_steps", bug("weekly bug"))
    results = in_tmp / "quality-results"
    result = invoke(["weekly", "--fixtures", str(fixtures_root), "--results", str(results)], {"ANTHROPIC_API_KEY": API_KEY})
    assert result.exit_code == 4
    line = result.output.strip().splitlines()[-1]
    assert line.startswith("internal error: RuntimeError: weekly bug") and str(results / "weekly.log") in line
    log = (results / "weekly.log").read_text()
    assert "Traceback (most recent call last)" in log and log.rstrip().endswith("=== exit 4 ===")
    assert API_KEY not in log


def test_exit_code_4_is_documented_in_help_readme_and_failures():
    from judge_runner.core import failures

    help_text = " ".join(invoke(["--help"]).output.split())
    assert "4 internal error" in help_text and "--debug" in help_text
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"^\| 4 \| internal error", readme, re.M)
    assert "4 internal error" in failures.__doc__
