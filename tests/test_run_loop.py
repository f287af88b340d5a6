"""The phase-two run loop: interruption, failures that never count as zeros, exit codes."""

from __future__ import annotations

import json

import jsonschema
import pytest

from judge_runner.evaluate import EXIT_CONFIG, EXIT_GATE, EXIT_INCOMPLETE, EXIT_OK, EvaluateOptions, run_evaluation
from judge_runner.judge import JudgeOutcome, verdict_problems
from judge_runner.llm.errors import AuthError
from judge_runner.llm.pricing import Usage
from judge_runner.models import Query, Verdict
from judge_runner.resources import load_schema
from judge_runner.results import RunWriter, read_run
from judge_runner.search.base import HitScores, SearchAnswer, SearchHit

# these tests exercise the CLI, the pipeline and the judge, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder


class StubJudge:
    """A heuristic-style Judge whose verdict is fixed: every result gets grade 3 - rank + 1."""

    name, model, heuristic = "offline", "stub", True

    def __init__(self, fail_on: set[str] | None = None):
        self.fail_on = fail_on or set()

    def judge(self, query, answer, log=lambda m: None):
        if query.query in self.fail_on:
            raise AuthError("the API key was refused: HTTP 401 (authentication_error)", 1)
        data = {
            "labels": [{"rank": h.rank, "relevance": max(0, 4 - h.rank), "reason": "stub"} for h in answer.results],
            "analysis": {d: "stub" for d in ("relevance", "ranking", "coverage", "snippetQuality")},
            "scores": {"relevance": 0.8, "ranking": 0.6, "coverage": 0.4, "snippetQuality": 0.2, "overall": 0.9},
            "suggestions": ["Boost title matches"],
        }
        assert verdict_problems(data, len(answer.results)) == []
        return JudgeOutcome(Verdict.model_validate(data), Usage(), 0.0, 0, [])


class StubSearch:
    """Returns two fixed results; raises ``raise_on[query]`` for the queries named there."""

    def __init__(self, raise_on: dict[str, BaseException] | None = None):
        self.raise_on = raise_on or {}
        self.calls = 0

    def search(self, query, mode="hybrid", limit=10):
        self.calls += 1
        if query in self.raise_on:
            raise self.raise_on[query]
        hits = [SearchHit(rank=i, source=f"doc{i}.md", anchor=None, lineStart=1, lineEnd=2, snippet="text",
                          score=1.0 / i, scores=HitScores(), matchedBy=["fts"]) for i in (1, 2)]
        return SearchAnswer(query=query, mode=mode, results=hits, confident=True, latencyMs=1.0)


def queries(n: int) -> list[Query]:
    return [Query(id=f"q{i}", query=f"query {i}", queryIntent="i", queryType="keyword", expectedSources=["doc1.md"]) for i in range(1, n + 1)]


def run(tmp_path, qs, search, judge=None, **options):
    writer = RunWriter(tmp_path)
    outcome = run_evaluation(qs, search, judge or StubJudge(), writer, {"config": {}}, EvaluateOptions(**options), echo=lambda m: None)
    lines = list(read_run(writer.path))
    for line in lines[1:]:
        jsonschema.validate(line, load_schema(f"{line['type']}.schema.json"))
    return outcome, lines


def test_overall_is_computed_by_code_not_taken_from_judge(tmp_path):
    outcome, lines = run(tmp_path, queries(2), StubSearch())
    evaluation = lines[1]
    assert evaluation["scores"]["overall"] == pytest.approx(0.5)  # mean of 0.8, 0.6, 0.4, 0.2
    assert evaluation["scores"]["judgeOverall"] == 0.9
    assert outcome.exit_code == EXIT_OK


def test_weights_change_overall(tmp_path):
    _, lines = run(tmp_path, queries(1), StubSearch(), weights={"relevance": 3, "ranking": 1, "coverage": 0, "snippetQuality": 0})
    assert lines[1]["scores"]["overall"] == pytest.approx((3 * 0.8 + 0.6) / 4)


def test_ctrl_c_keeps_judged_lines_and_marks_summary_interrupted(tmp_path):
    search = StubSearch(raise_on={"query 3": KeyboardInterrupt()})
    outcome, lines = run(tmp_path, queries(5), search)
    assert [l["type"] for l in lines] == ["run_start", "evaluation", "evaluation", "summary"]
    summary = lines[-1]
    assert summary["interrupted"] is True and summary["stopReason"] == "interrupted"
    assert summary["evaluated"] == 2 and summary["totalQueries"] == 5
    assert outcome.exit_code == EXIT_INCOMPLETE
    assert search.calls == 3  # nothing searched after the interrupt


def test_search_failure_is_an_error_line_never_a_zero(tmp_path):
    search = StubSearch(raise_on={"query 2": RuntimeError("database is locked")})
    outcome, lines = run(tmp_path, queries(4), search)
    errors = [l for l in lines if l["type"] == "error"]
    assert len(errors) == 1 and errors[0]["stage"] == "search" and "locked" in errors[0]["message"]
    summary = lines[-1]
    assert summary["evaluated"] == 3 and summary["failed"] == 1
    assert summary["averageScores"]["overall"] == pytest.approx(0.5)  # not dragged down by the failure
    assert outcome.exit_code == EXIT_OK  # 1 of 4 is not more than a quarter


def test_too_many_failures_exit_3(tmp_path):
    search = StubSearch(raise_on={"query 1": RuntimeError("x"), "query 2": RuntimeError("y")})
    outcome, _ = run(tmp_path, queries(4), search)
    assert outcome.exit_code == EXIT_INCOMPLETE


def test_refused_key_stops_the_run_with_exit_2(tmp_path):
    outcome, lines = run(tmp_path, queries(4), StubSearch(), judge=StubJudge(fail_on={"query 1"}))
    assert outcome.exit_code == EXIT_CONFIG
    assert [l["type"] for l in lines] == ["run_start", "error", "summary"]
    assert lines[-1]["stopReason"] == "auth_error"


def test_min_overall_gate(tmp_path):
    outcome, _ = run(tmp_path, queries(2), StubSearch(), min_overall=0.6)
    assert outcome.exit_code == EXIT_GATE
    outcome, _ = run(tmp_path, queries(2), StubSearch(), min_overall=0.5)
    assert outcome.exit_code == EXIT_OK


def test_metrics_follow_design_definitions(tmp_path):
    _, lines = run(tmp_path, queries(1), StubSearch())
    ev = lines[1]
    # labels 3, 2 on doc1, doc2; expected doc1 (already labelled 3): ideal = actual order -> nDCG 1
    assert ev["metrics"] == {"nDCG@10": 1.0, "R@10": 1.0, "RR(rel=2)": 1.0}
    assert [r["relevant"] for r in ev["results"]] == [True, True]
    assert json.dumps(ev)  # serialisable
