"""generate-and-evaluate and weekly are built from the same steps: both record the generator's model
when phase one stops, both warn about expected sources missing from the index, and weekly logs a
failure before its exit line."""

from __future__ import annotations

import json

import pytest

from tests.support.clitools import invoke, run_lines
from tests.support.fakes.fake_llm import FakeLLMServer

# these tests exercise the CLI, the pipeline and the judge, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder


def command(name: str, fixtures, db, out) -> list[str]:
    if name == "weekly":
        return [
            "weekly",
            "--regenerate",
            "--fixtures",
            str(fixtures),
            "--db",
            str(db),
            "--results",
            str(out),
            "--reports",
            str(out.parent / "reports"),
        ]
    return ["generate-and-evaluate", "--fixtures", str(fixtures), "--db", str(db), "--out-dir", str(out)]


@pytest.mark.parametrize("name", ["generate-and-evaluate", "weekly"])
def test_a_stopped_phase_one_records_the_generator_model(name, fixtures_root, db_copy, tmp_path):
    out = tmp_path / "results"
    with FakeLLMServer() as server:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        # one generation call may cost up to 8192 output tokens x $15/M = $0.12: over a $0.01 budget
        result = invoke(command(name, fixtures_root, db_copy, out) + ["--max-budget-usd", "0.01"], env)
        assert server.count() == 0
    assert result.exit_code == 3, result.output
    assert "phase one stopped" in result.output
    lines = run_lines(out)
    assert [line["type"] for line in lines] == ["run_start", "summary"]
    assert lines[0]["provenance"]["generatorModel"] == "claude-sonnet-4-6"
    assert lines[0]["config"]["count"] == 15
    assert lines[-1]["stopReason"] == "phase one: budget_exhausted" and lines[-1]["budgetExhausted"] is True
    if name == "weekly":
        log = (out / "weekly.log").read_text()
        assert "phase one stopped" in log and log.rstrip().endswith("=== exit 3 ===")
        assert not (out / "pinned-queries.json").exists()  # nothing pinned from a stopped phase one


def missing_source_set(path):
    path.write_text(
        json.dumps(
            {
                "queries": [
                    {
                        "id": "q1",
                        "query": "kubernetes drain",
                        "queryIntent": "i",
                        "queryType": "keyword",
                        "expectedSources": ["does/not/exist.md"],
                    }
                ]
            }
        )
    )
    return path


def test_weekly_warns_about_expected_sources_missing_from_the_index(fixtures_root, db_copy, tmp_path):
    results = tmp_path / "results"
    queries = missing_source_set(tmp_path / "q.json")
    result = invoke(
        [
            "weekly",
            "--fixtures",
            str(fixtures_root),
            "--db",
            str(db_copy),
            "--results",
            str(results),
            "--reports",
            str(tmp_path / "reports"),
            "--queries",
            str(queries),
            "--quiet",
        ]
    )
    assert result.exit_code == 0, result.output
    assert "not in the index" in result.output and "does/not/exist.md" in result.output
    assert "does/not/exist.md" in (results / "weekly.log").read_text()


def test_weekly_logs_a_failure_then_its_exit_code(fixtures_root, db_copy, tmp_path):
    results = tmp_path / "results"
    broken = tmp_path / "q.json"
    broken.write_text("not json")
    result = invoke(
        ["weekly", "--fixtures", str(fixtures_root), "--db", str(db_copy), "--results", str(results), "--queries", str(broken), "--quiet"]
    )
    assert result.exit_code == 2
    assert result.output.count("is not a valid query set") == 1  # printed once, after the log is closed
    log = (results / "weekly.log").read_text()
    assert "error: " in log and "is not a valid query set" in log and log.rstrip().endswith("=== exit 2 ===")
    assert not list(results.glob("*.jsonl"))
