"""The report's file name and the README's mail recipe (``date +%F``) agree: both use
the local date, also east of UTC+6 where the README's 06:00 cron line runs on the previous UTC day."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from judge_runner.analysis.report import build_report
from tests.support.trend_runs import noisy, write_run

ROOT = Path(__file__).resolve().parents[2]
EAST = ["JST-9", "NZDT-13", "UTC-6:30"]  # POSIX TZ strings (no tzdata needed): UTC+9, UTC+13, UTC+6:30


@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "quality-results"
    folder.mkdir()
    write_run(folder, "r1", noisy(0.6, 3), day=28)
    return folder


@pytest.fixture
def local_tz(monkeypatch, request):
    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield request.param
    monkeypatch.undo()
    time.tzset()


def date_f(tz: str, at: datetime | None = None) -> str:
    """What the README's recipe computes: ``date +%F`` in ``tz`` (at ``at``, else now)."""
    args = ["date", "+%F"] if at is None else ["date", "-d", f"@{int(at.timestamp())}", "+%F"]
    return subprocess.run(args, env={**os.environ, "TZ": tz}, capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("local_tz", EAST, indirect=True)
def test_monday_0600_east_of_utc_plus_6_names_the_report_as_date_does(results, tmp_path, local_tz):
    monday_0600_local = datetime(2026, 11, 30, 6, 0).astimezone()  # the cron line `0 6 * * 1`, local time
    assert monday_0600_local.astimezone(UTC).date().isoformat() == "2026-11-29"  # UTC is still on Sunday
    report = build_report(results, tmp_path / "reports", "30d", now=monday_0600_local.astimezone(UTC))
    assert report.markdown.name == f"report-{date_f(local_tz, monday_0600_local)}.md" == "report-2026-11-30.md"
    assert report.html.name == "report-2026-11-30.html"
    assert all(chart.name.startswith("report-2026-11-30-") for chart in report.charts)
    assert report.markdown.read_text().startswith("# Search quality report, 2026-11-30")


@pytest.mark.parametrize("tz", ["NZDT-13", "UTC+10"])
def test_the_report_command_writes_the_file_the_readme_recipe_mails(results, tmp_path, tz):
    out = tmp_path / "reports"
    before = date_f(tz)
    subprocess.run(
        [sys.executable, "-m", "judge_runner.cli", "report", str(results), "--since", "30d", "--out", str(out)],
        env={**os.environ, "TZ": tz, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=300,
    )
    after = date_f(tz)
    names = {p.name for p in out.glob("report-*.html")}
    assert names & {f"report-{before}.html", f"report-{after}.html"}, names  # the recipe's file is there


def test_help_says_which_date_names_the_file():
    from click.testing import CliRunner

    from judge_runner.cli import main

    text = CliRunner().invoke(main, ["report", "--help"]).output
    assert "local date" in " ".join(text.split()) and "date +%F" in text
