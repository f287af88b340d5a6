"""The weekly report (Markdown + self-contained HTML, checked in a real headless browser) and the
cron-safe weekly command."""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from datetime import UTC, datetime

import pytest

from judge_runner.analysis.report import build_report
from judge_runner.core.timespan import parse_since
from tests.support.clitools import invoke
from tests.support.trend_runs import noisy, write_run

# these tests exercise the CLI, the pipeline and the judge, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder


@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "quality-results"
    folder.mkdir()
    base = noisy(0.6, 21)
    write_run(folder, "r1", base, day=20)
    path = write_run(folder, "r2", [max(0, v - 0.1) for v in base], day=27)
    # the latest run also has a failed query
    path.write_text(
        path.read_text().replace(
            '{"type": "summary"',
            json.dumps(
                {
                    "type": "error",
                    "runId": "r2",
                    "queryId": "q99",
                    "query": "broken one",
                    "stage": "judge",
                    "errorType": "invalid_output",
                    "message": "verdict failed validation",
                    "attempts": 3,
                }
            )
            + '\n{"type": "summary"',
        )
    )
    return folder


def test_report_content(results, tmp_path):
    report = build_report(results, tmp_path / "reports", "7d", now=datetime(2026, 11, 28, tzinfo=UTC))
    md = report.markdown.read_text()
    assert "Latest run **r2**" in md and "previous comparable run r1" in md
    assert "| overall | " in md and "▼ regression" in md and "95% CI" in md  # -0.1 on every query
    assert "## Worst queries" in md and md.count("### q") == 5
    assert "| q99: broken one | judge | invalid_output" in md
    assert "| r2 |" in md and "$0.1200" in md  # cost per run in the 7-day window; r1 (day 20) is outside it
    assert "| r1 |" not in md
    assert "cost per judged query |" in md and "| $0.00600 |" in md  # format-1 run: costUsd 0.12 over its 20 evaluated queries
    page = report.html.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") == 2
    assert 'src="report-' not in page  # no external files: self-contained
    assert '<span class="reg">▼ regression</span>' in page


def test_since_parsing():
    assert parse_since("7d").days == 7 and parse_since("2w").days == 14 and parse_since("36h").total_seconds() == 36 * 3600
    with pytest.raises(ValueError):
        parse_since("soon")


def test_report_renders_in_headless_chromium(results, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Chromium is not installed (Debian package `chromium`); cannot check the page in a real browser")
    from PIL import Image

    report = build_report(results, tmp_path / "reports", "7d")
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1000,1400",
            f"--screenshot={shot}",
            report.html.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    image = Image.open(shot).convert("RGB")
    assert image.size == (1000, 1400)
    colors = image.getcolors(maxcolors=1_000_000)
    white = sum(count for count, rgb in colors if rgb == (255, 255, 255))
    assert len(colors) > 200  # text, tables and charts, not a blank page
    assert white < 0.95 * image.size[0] * image.size[1]


def test_report_cli_errors(tmp_path):
    assert invoke(["report", str(tmp_path), "--since", "soon"]).exit_code == 2
    result = invoke(["report", str(tmp_path)])
    assert result.exit_code == 2 and "no complete run" in result.output


def test_weekly_pins_a_set_reports_prunes_and_logs(fixtures_root, db_copy, tmp_path):
    results, reports = tmp_path / "quality-results", tmp_path / "reports"
    args = [
        "weekly",
        "--fixtures",
        str(fixtures_root),
        "--db",
        str(db_copy),
        "--results",
        str(results),
        "--reports",
        str(reports),
        "--count",
        "4",
        "--keep",
        "2",
        "--quiet",
        "--keep-unverified",
    ]
    first = invoke(args)
    assert first.exit_code == 0, first.output
    pinned = json.loads((results / "pinned-queries.json").read_text())
    assert len(pinned["queries"]) == 4
    assert list(reports.glob("report-*.html"))
    assert invoke(["baseline", "set", "latest", "--results", str(results)]).exit_code == 0
    baseline = json.loads((results / "baseline.json").read_text())["runId"]
    for _ in range(2):
        assert invoke(args).exit_code == 0
    runs = sorted(p.stem for p in results.glob("*.jsonl"))
    assert len(runs) == 3 and baseline in runs  # keep 2 newest plus the pinned baseline
    later = [json.loads(p.read_text().splitlines()[0]) for p in results.glob("*.jsonl") if p.stem != baseline]
    assert all(r["provenance"]["querySetSha256"] == later[0]["provenance"]["querySetSha256"] for r in later)  # the pinned set
    log = (results / "weekly.log").read_text()
    assert log.count("=== judge-runner weekly") == 3 and log.count("=== exit 0 ===") == 3


def test_weekly_skips_an_overlapping_run_with_exit_0(fixtures_root, db_copy, tmp_path):
    # two first runs at once: the second was right not to start, so cron must not see a failure (it got exit 3)
    results = tmp_path / "quality-results"
    results.mkdir()
    with open(results / ".weekly.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = invoke(["weekly", "--fixtures", str(fixtures_root), "--db", str(db_copy), "--results", str(results), "--quiet"])
    assert result.exit_code == 0
    assert result.output == f"weekly skipped: another weekly run holds {results / '.weekly.lock'}\n"
    assert sorted(p.name for p in results.iterdir()) == [".weekly.lock"]
