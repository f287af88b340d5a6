"""A failed run is the latest run: report and trend show the newest run even when it
failed entirely, as failed and with its errors, and --fail-on-regression fails on it."""

from __future__ import annotations

import json

import pytest

from judge_runner.analysis.report import build_report
from judge_runner.analysis.trend import build_trend
from tests.support.clitools import invoke
from tests.support.trend_runs import noisy, write_run

pytestmark = pytest.mark.hash_embedder


def report_text(tmp_path) -> str:
    return build_report(tmp_path, tmp_path / "reports").markdown.read_text(encoding="utf-8")


def test_a_newest_run_of_only_errors_is_the_latest_in_report_and_trend(tmp_path):
    write_run(tmp_path, "r1", noisy(0.7, 1), day=1)
    write_run(tmp_path, "r2", noisy(0.7, 2), day=2)
    write_run(tmp_path, "r3", [], day=3, errors=15)  # the endpoint was down: every query an error line
    text = report_text(tmp_path)
    assert "**The latest run FAILED.** Run **r3**" in text and "15 of 15 queries failed" in text
    assert "connection refused" in text.split("## Failed queries", 1)[1]  # its errors, not "None."
    assert "Latest run with judged queries **r2**" in text
    assert "Failed queries\n\nNone." not in text

    rows = {r["runId"]: r for g in build_trend(tmp_path).groups for r in g["runs"]}
    assert (
        rows["r3"]["runFailed"]
        and rows["r3"]["failed"] == 15
        and rows["r3"]["failure"].startswith("15 of 15 queries failed (first: search_failed")
    )
    table = invoke(["trend", str(tmp_path)], env={"COLUMNS": "100"})
    assert "FAILED: 15 of 15 queries failed" in table.output and "0/15" in table.output
    gated = invoke(["trend", str(tmp_path), "--fail-on-regression"])
    assert gated.exit_code == 1 and "the latest run r3 failed: 15 of 15 queries failed" in gated.output
    as_json = json.loads(invoke(["trend", str(tmp_path), "--format", "json"]).output)
    assert as_json["latest"]["runId"] == "r3" and as_json["latest"]["failed"] is True


def test_a_run_where_more_than_a_quarter_failed_is_failed_but_keeps_its_figures(tmp_path):
    write_run(tmp_path, "r1", noisy(0.7, 1), day=1)
    write_run(tmp_path, "r2", noisy(0.7, 1)[:10], day=2, errors=10)
    text = report_text(tmp_path)
    assert "**The latest run FAILED.** Run **r2**" in text and "10 of 20 queries failed" in text
    assert "Figures from run **r2**" in text and "Its figures are below" in text
    assert invoke(["trend", str(tmp_path), "--fail-on-regression"]).exit_code == 1
    # a few failures are not a failed run
    write_run(tmp_path, "r3", noisy(0.7, 1), day=3, errors=2)
    assert "FAILED" not in report_text(tmp_path)
    assert invoke(["trend", str(tmp_path), "--fail-on-regression"]).exit_code == 0


def test_a_failed_run_with_no_judged_run_before_it_still_makes_a_report(tmp_path):
    write_run(tmp_path, "r1", [], day=1, errors=3)
    text = report_text(tmp_path)
    assert "**The latest run FAILED.**" in text and "No run has judged queries yet." in text and "connection refused" in text


def test_a_compare_run_whose_reference_failed_is_shown_as_failed(tmp_path):
    write_run(tmp_path, "r1", noisy(0.7, 1), day=1)
    path = write_run(tmp_path, "r2", noisy(0.7, 2), day=2, errors=20)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for line in lines:  # the evaluations are system b's, the errors the reference a's
        if line["type"] in ("evaluation", "error"):
            line["system"] = "b" if line["type"] == "evaluation" else "a"
    summary = lines[-1]
    summary["comparison"] = {
        "reference": "a",
        "minEffect": 0.03,
        "systems": [{"name": "a", "evaluated": 0, "failed": 20}, {"name": "b", "evaluated": 20, "failed": 0}],
        "differences": [],
    }
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    text = report_text(tmp_path)
    assert "**The latest run FAILED.** Run **r2** (reference system a)" in text and "20 of 20 queries failed" in text
    assert "## Systems compared in the failed run" in text
    gated = invoke(["trend", str(tmp_path), "--fail-on-regression"])
    assert gated.exit_code == 1 and "r2 failed" in gated.output


def test_weekly_with_the_judge_down_fails_and_its_report_says_so(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "backups.md").write_text("# Backups\n\nRotate the backup keys every month with the key tool.\n", encoding="utf-8")
    qs = tmp_path / "qs.json"
    query = {"id": "q1", "query": "rotate backup keys", "queryIntent": "how to rotate the keys", "queryType": "keyword"}
    qs.write_text(json.dumps({"queries": [{**query, "expectedSources": ["backups.md"]}]}), encoding="utf-8")
    results, reports = tmp_path / "quality-results", tmp_path / "reports"
    args = ["weekly", "--fixtures", str(kb), "--db", str(tmp_path / "index.sqlite"), "--results", str(results), "--reports", str(reports)]
    args += ["--queries", str(qs), "--quiet"]
    assert invoke([*args, "--provider", "offline"]).exit_code == 0
    # next week the judge's endpoint is down (nothing listens on port 9): every query fails
    down = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "JUDGE_RUNNER_MAX_RETRIES": "0"}
    failed = invoke([*args, "--provider", "openai", "--fail-on-regression"], env=down)
    assert failed.exit_code == 3, failed.output  # incomplete: more than a quarter of the queries failed
    (report,) = reports.glob("report-*.md")
    text = report.read_text(encoding="utf-8")
    assert "**The latest run FAILED.**" in text and "1 of 1 queries failed" in text and "transient_error" in text
    assert invoke(["trend", str(results), "--fail-on-regression"]).exit_code == 1


@pytest.mark.parametrize(
    ("stopped", "says"),
    [
        ({"stopReason": "cache_damaged", "totalQueries": 15}, "cut short (cache_damaged): 5 of 15 queries judged"),
        ({"interrupted": True, "stopReason": "interrupted", "totalQueries": 15}, "cut short (interrupted): 5 of 15 queries judged"),
        ({"budgetExhausted": True, "totalQueries": 15}, "cut short (budget_exhausted): 5 of 15 queries judged"),
    ],
)
def test_a_run_cut_short_says_so_in_trend_instead_of_looking_like_any_other(tmp_path, stopped, says):
    # a new user's trial: a run stopped by a damaged judgment cache after 5 of its 15 queries showed in trend as a
    # complete run, its means over 5 queries beside others' over 15, with no word of it
    write_run(tmp_path, "r1", noisy(0.7, 1), day=1)
    write_run(tmp_path, "r2", noisy(0.7, 2)[:5], day=2, stopped=stopped)
    rows = {r["runId"]: r for g in build_trend(tmp_path).groups for r in g["runs"]}
    assert rows["r2"]["stopReason"] == says.split("(")[1].split(")")[0] and rows["r1"]["stopReason"] is None
    table = invoke(["trend", str(tmp_path)], env={"COLUMNS": "100"})
    said = " ".join(table.output.split())
    assert table.exit_code == 0 and f"r2: {says}, compared on those" in said, table.output
    assert "cut short" not in said.split("r2:")[0]  # the complete run carries no such note


def test_the_report_says_the_latest_run_was_cut_short_and_why(tmp_path):
    write_run(tmp_path, "r1", noisy(0.7, 1), day=1)
    write_run(tmp_path, "r2", noisy(0.7, 2)[:5], day=2, stopped={"stopReason": "cache_damaged", "totalQueries": 15})
    assert "5 queries evaluated, 0 failed, **cut short (cache damaged)** of the run's 15 queries." in report_text(tmp_path)
