"""The phase-two run loop: interruption, failures that never count as zeros, exit codes."""

from __future__ import annotations

import json

import jsonschema
import pytest

from judge_runner.core.resources import load_schema
from judge_runner.evaluation.context import QUIET, RunContext
from judge_runner.evaluation.loop import EXIT_CONFIG, EXIT_GATE, EXIT_INCOMPLETE, EXIT_OK, run_evaluation
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.runs.write import RunWriter, read_run
from tests.support.loop_stubs import StubJudge, StubSearch, queries

# these tests exercise the CLI, the pipeline and the judge, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder


# labels [3, 2] with the expected doc1.md first: relevance 1 (all the attainable gain, scoring version 2) and
# graded precision (1 + 2/3) / 2; ranking = 1 (best first); coverage 0.4, snippetQuality 0.2 from the list-level verdict
RELEVANCE = 1.0
GRADED_PRECISION = (1 + 2 / 3) / 2
OVERALL = (RELEVANCE + 1.0 + 0.4 + 0.2) / 4


def run(tmp_path, qs, search, judge=None, **options):
    writer = RunWriter(tmp_path)
    outcome = run_evaluation(qs, search, writer, {"config": {}}, RunContext(judge or StubJudge(), EvaluateOptions(**options), output=QUIET))
    lines = list(read_run(writer.path))
    for line in lines[1:]:
        jsonschema.validate(line, load_schema(f"{line['type']}.schema.json"))
    return outcome, lines


def test_overall_is_computed_by_code_not_taken_from_judge(tmp_path):
    outcome, lines = run(tmp_path, queries(2), StubSearch())
    evaluation = lines[1]
    assert evaluation["scores"]["relevance"] == pytest.approx(RELEVANCE, abs=1e-6)  # from the labels
    assert evaluation["scores"]["gradedPrecision"] == pytest.approx(GRADED_PRECISION, abs=1e-6)
    assert evaluation["scores"]["overall"] == pytest.approx(OVERALL, abs=1e-6)  # the mean of the four
    assert evaluation["scores"]["judgeOverall"] == 0.9 and evaluation["scores"]["judgeRanking"] == 0.6
    assert outcome.exit_code == EXIT_OK


def test_weights_change_overall(tmp_path):
    _, lines = run(tmp_path, queries(1), StubSearch(), weights={"relevance": 3, "ranking": 1, "coverage": 0, "snippetQuality": 0})
    assert lines[1]["scores"]["overall"] == pytest.approx((3 * RELEVANCE + 1.0) / 4, abs=1e-6)


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
    assert summary["averageScores"]["overall"] == pytest.approx(OVERALL, abs=1e-6)  # not dragged down by the failure
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
    # overall is OVERALL = 0.65 on both queries
    outcome, _ = run(tmp_path, queries(2), StubSearch(), min_overall=OVERALL + 0.01)
    assert outcome.exit_code == EXIT_GATE
    outcome, _ = run(tmp_path, queries(2), StubSearch(), min_overall=OVERALL)
    assert outcome.exit_code == EXIT_OK


def test_metrics_follow_design_definitions(tmp_path):
    _, lines = run(tmp_path, queries(1), StubSearch())
    ev = lines[1]
    # labels 3, 2 on doc1, doc2; expected doc1 (already labelled 3): ideal = actual order -> nDCG 1
    assert ev["metrics"] == {"nDCG@10": 1.0, "R@10": 1.0, "RR(rel=2)": 1.0}
    assert [r["relevant"] for r in ev["results"]] == [True, True]
    assert json.dumps(ev)  # serialisable


def test_a_crash_before_the_summary_leaves_a_summary_saying_the_run_was_cut_short(tmp_path, monkeypatch):
    import judge_runner.evaluation.state as state_module

    def broken(*args, **kwargs):
        raise RuntimeError("a bug with a secret sk-123456")

    monkeypatch.setattr(state_module, "build_summary", broken)
    with pytest.raises(RuntimeError):
        run(tmp_path, queries(3), StubSearch())
    lines = list(read_run(next(tmp_path.glob("*.jsonl"))))
    assert [l["type"] for l in lines] == ["run_start", "evaluation", "evaluation", "evaluation", "summary"]
    summary = lines[-1]
    jsonschema.validate(summary, load_schema("summary.schema.json"))
    assert summary["stopReason"] == "internal error: RuntimeError" and summary["evaluated"] == 3 and summary["totalQueries"] == 3
    assert "sk-123456" not in json.dumps(summary)


def test_a_crash_in_a_compare_runs_summary_leaves_a_summary_saying_the_run_was_cut_short(tmp_path, monkeypatch):
    import judge_runner.evaluation.compare as compare_module
    from judge_runner.search.systems import System

    def broken(*args, **kwargs):
        raise ValueError("systems.1.name")

    monkeypatch.setattr(compare_module, "bias_corrected", broken)
    systems = [System(name, StubSearch(), "hybrid", {"kind": "stub"}) for name in ("a", "b")]
    writer = RunWriter(tmp_path)
    with pytest.raises(ValueError):
        compare_module.run_systems(queries(2), systems, writer, {"config": {}}, RunContext(StubJudge(), EvaluateOptions(), output=QUIET))
    lines = list(read_run(writer.path))
    assert [l.get("system") for l in lines if l["type"] == "evaluation"] == ["a", "a", "b", "b"]
    assert lines[-1]["type"] == "summary" and lines[-1]["stopReason"] == "internal error: ValueError"
