"""trend names the real cause of a change: the system under test, the corpus, the query
set, the judge, the scoring version; and a change of the scoring rules is never a regression."""

from __future__ import annotations

import json

import pytest

from judge_runner.analysis.trend import build_trend
from tests.support.clitools import invoke
from tests.support.trend_runs import noisy, write_run

pytestmark = pytest.mark.hash_embedder


def changes(tmp_path, run_id="r2") -> list[str]:
    rows = {r["runId"]: r for g in build_trend(tmp_path).groups for r in g["runs"]}
    return rows[run_id]["vsPrevious"]["changes"]


def test_a_pinned_query_set_rerun_names_no_generator_change(tmp_path):
    # weekly: the first run wrote and pinned the set, the next ones read it (no generator model recorded)
    write_run(tmp_path, "r1", noisy(0.6, 1), day=1, provenance={"generatorModel": "offline-heuristic-v1"})
    write_run(tmp_path, "r2", noisy(0.6, 1), day=2, provenance={"generatorModel": None})
    assert changes(tmp_path) == []


def test_another_query_set_names_its_writers_when_both_are_known(tmp_path):
    write_run(tmp_path, "r1", noisy(0.6, 1), day=1, query_set="a" * 64, provenance={"generatorModel": "gpt-4.1"})
    write_run(tmp_path, "r2", noisy(0.6, 2), day=2, query_set="b" * 64, provenance={"generatorModel": "claude-sonnet-4-6"})
    write_run(tmp_path, "r3", noisy(0.6, 3), day=3, query_set="c" * 64, provenance={"generatorModel": None})
    assert changes(tmp_path) == ["different query set (unpaired comparison; written by gpt-4.1, then claude-sonnet-4-6)"]
    assert changes(tmp_path, "r3") == ["different query set (unpaired comparison)"]


def test_another_system_under_test_is_named_as_such_not_as_a_corpus_change(tmp_path):
    # the built-in search, then its TREC run judged with --run (no index, so no corpus fingerprint)
    write_run(tmp_path, "r1", noisy(0.6, 1), day=1, config={"searchMode": "hybrid", "searchLimit": 10})
    trec = {"corpusFingerprint": "", "searchSystems": [{"name": "reversed", "kind": "trec-run", "run": "reversed.trec"}]}
    write_run(tmp_path, "r2", noisy(0.6, 1), day=2, config={"searchMode": "hybrid", "searchLimit": 10}, provenance=trec)
    command = {"corpusFingerprint": "", "searchSystems": [{"name": "command:mysearch", "kind": "command", "command": "mysearch {query}"}]}
    write_run(tmp_path, "r3", noisy(0.6, 1), day=3, config={"searchLimit": 10}, provenance=command)
    assert changes(tmp_path) == ["system under test: built-in hybrid search, limit 10 -> TREC run reversed.trec, limit 10"]
    assert changes(tmp_path, "r3") == ["system under test: TREC run reversed.trec, limit 10 -> command mysearch {query}, limit 10"]


def test_the_same_search_in_another_mode_or_on_another_corpus(tmp_path):
    write_run(tmp_path, "r1", noisy(0.6, 1), day=1, config={"searchMode": "hybrid"})
    write_run(tmp_path, "r2", noisy(0.6, 1), day=2, config={"searchMode": "fts"})
    write_run(tmp_path, "r3", noisy(0.6, 1), day=3, config={"searchMode": "fts"}, provenance={"corpusFingerprint": "d"})
    assert changes(tmp_path) == ["system under test: built-in hybrid search -> built-in fts search"]
    assert changes(tmp_path, "r3") == ["corpus changed"]


def test_runs_scored_before_the_scoring_change_are_another_scoring_version_not_a_regression(tmp_path):
    # version 1 (no scoringVersion) scored one-answer queries about 0.65; version 2 scores the same lists
    # higher, and could score others lower: either way the scores of two versions are not compared
    base = noisy(0.9, 4)
    write_run(tmp_path, "r1", base, day=1)
    write_run(tmp_path, "r2", [v - 0.3 for v in base], ndcg=base, day=2, provenance={"scoringVersion": 2})
    row = next(r for r in build_trend(tmp_path).groups[0]["runs"] if r["runId"] == "r2")
    assert "overall" not in row["vsPrevious"]["comparisons"] and row["vsPrevious"]["comparisons"]["nDCG@10"]["verdict"] == "within noise"
    # a file of version 2 or later is re-scored when read: under today's version (3)
    assert row["vsPrevious"]["changes"] == ["scoring version 1 -> 3: scores not compared, IR metrics are"]
    result = invoke(["trend", str(tmp_path), "--fail-on-regression", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["latest"]["regression"] is False
    # the next version-2 run is compared with it on everything again
    write_run(tmp_path, "r3", [v - 0.4 for v in base], ndcg=base, day=3, provenance={"scoringVersion": 2})
    result = invoke(["trend", str(tmp_path), "--fail-on-regression"])
    assert result.exit_code == 1 and "overall" in result.output


def test_the_report_says_scores_of_two_scoring_versions_are_not_compared(tmp_path):
    from judge_runner.analysis.report import build_report

    base = noisy(0.9, 4)
    write_run(tmp_path, "r1", base, day=1)
    write_run(tmp_path, "r2", [v - 0.3 for v in base], ndcg=base, day=2, provenance={"scoringVersion": 2})
    text = build_report(tmp_path, tmp_path / "reports").markdown.read_text(encoding="utf-8")
    overall = next(line for line in text.splitlines() if line.startswith("| overall |"))
    ndcg = next(line for line in text.splitlines() if line.startswith("| nDCG@10 |"))
    assert "not compared: scoring version 1 -> 3" in overall and "regression" not in overall
    assert "within noise" in ndcg
