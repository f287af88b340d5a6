"""One scope per line in compare runs: every figure printed or summarised says which
system it belongs to, or is given per system; nothing pooled sits beside a per-system number unsaid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge_runner.analysis.report import build_report
from tests.support.clitools import KEEP_ALL, invoke, run_lines

pytestmark = pytest.mark.hash_embedder

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture(scope="module")
def compare_run(tmp_path_factory):
    """A query set written from fixtures/ (8 queries, off-topic ones among them), then one compare run of
    hybrid, fts and vector on it with a quality gate; returns (result, run lines, query set)."""
    tmp = tmp_path_factory.mktemp("compare")
    with pytest.MonkeyPatch.context() as mp:
        from judge_runner.embed.registry import SETTING_ENV as EMBEDDER_ENV

        mp.setenv(EMBEDDER_ENV, "hash")
        db = str(tmp / "index.sqlite")
        out = tmp / "first"
        assert invoke(["index", str(FIXTURES), "--db", db]).exit_code == 0
        first = invoke(
            ["generate", "--fixtures", str(FIXTURES), "--count", "8", "--provider", "offline", "--out", str(tmp / "qs.json"), *KEEP_ALL]
        )
        assert first.exit_code == 0, first.output
        result = invoke(
            ["evaluate", "--queries", str(tmp / "qs.json"), "--db", db, "--out-dir", str(out), "--provider", "offline"]
            + ["--search-mode", "hybrid,fts,vector", "--min-overall", "0.01"]
        )
    assert result.exit_code == 0, result.output
    return result, run_lines(out), json.loads((tmp / "qs.json").read_text())["queries"], out


def test_the_summary_gives_the_reference_systems_figures_and_each_systems_own(compare_run):
    _, lines, queries, _ = compare_run
    summary = lines[-1]
    systems = summary["comparison"]["systems"]
    reference = systems[0]
    assert reference["name"] == "hybrid"
    for field in ("averageScores", "averageMetrics", "abstention", "topIssues", "recommendedFocus", "focusEvidence"):
        assert summary[field] == reference[field], field
    off_topic = sum(1 for q in queries if q["queryType"] == "off-topic")
    assert off_topic >= 1
    for system in systems:  # each over its own lines: the set's off-topic queries once, not once per system
        assert system["abstention"]["offTopic"] == off_topic and system["evaluated"] == len(queries)
        assert system["focusEvidence"]["onTopicQueries"] == len(queries) - off_topic
        assert all(issue["count"] <= len(queries) for issue in system["topIssues"])
    # the counts of the run are every system's, and the summary says which is which
    assert summary["evaluated"] == 3 * len(queries) and summary["totalQueries"] == 3 * len(queries)
    assert summary["qualityGate"]["system"] == "hybrid" and summary["qualityGate"]["overall"] == reference["averageScores"]["overall"]


def test_every_console_line_says_its_scope(compare_run):
    result, _, queries, _ = compare_run
    text = result.stdout
    n = len(queries)
    assert f"{3 * n} evaluated, 0 failed (3 systems x {n} queries, all systems)" in text
    summary_lines = text.split("\nrun ", 1)[1].splitlines()
    for prefix in ("  averages", "  IR metrics", "  abstention", "  issue", "  recommended focus"):
        found = [line for line in summary_lines if line.startswith(prefix)]
        assert found and all("(reference system hybrid)" in line for line in found), prefix
    for prefix in ("  judge", "  cost"):
        assert any(line.startswith(prefix + " (all systems)") for line in summary_lines), prefix
    assert "each over its own queries" in text
    for name in ("hybrid", "fts", "vector"):
        assert any(line.startswith(f"    {name}: {n} evaluated") for line in summary_lines), name


def test_the_report_says_whose_abstention_and_focus_it_shows(compare_run, tmp_path):
    _, lines, _, out = compare_run
    text = build_report(out, tmp_path / "reports").markdown.read_text(encoding="utf-8")
    assert "Off-topic queries (reference system hybrid):" in text
    assert "Figures (reference system hybrid); each system's focus is under “Systems compared”." in text
    assert "Recommended focus of each system, over its own queries:" in text
    for name in ("hybrid", "fts", "vector"):
        assert f"- {name}: " in text.split("Recommended focus of each system", 1)[1]
    # an older compare run file (pooled abstention and focus) is labelled as pooled, not as the reference's
    path = next(out.glob("*.jsonl"))
    old = [json.loads(x) for x in path.read_text().splitlines()]
    for system in old[-1]["comparison"]["systems"]:
        for field in ("abstention", "topIssues", "recommendedFocus", "focusEvidence"):
            system.pop(field)
    older = tmp_path / "older"
    older.mkdir()
    (older / path.name).write_text("".join(json.dumps(x) + "\n" for x in old), encoding="utf-8")
    text = build_report(older, tmp_path / "reports-old").markdown.read_text(encoding="utf-8")
    assert "Off-topic queries (all systems pooled, as this older run file records them):" in text


def test_trend_gives_each_system_row_its_own_abstention(compare_run):
    _, lines, queries, out = compare_run
    result = invoke(["trend", str(out), "--format", "json"])
    rows = json.loads(result.stdout)["groups"][0]["runs"]
    own = {s["name"]: s["abstention"]["accuracy"] for s in lines[-1]["comparison"]["systems"]}
    assert {r["system"]: r["abstentionAccuracy"] for r in rows} == own
