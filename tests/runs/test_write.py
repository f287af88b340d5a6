"""judge_runner.runs.write: the run file writer and reader, top issues, the summary line."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import jsonschema
import pytest

import judge_runner.runs.write as results_mod
from judge_runner.core.resources import load_schema
from judge_runner.runs.write import RunWriter, SummaryInputs, build_summary, read_run, top_issues

FIXED = datetime(2026, 11, 29, 23, 15, 0, 123456, tzinfo=UTC)


class FrozenDateTime(datetime):
    @classmethod
    def now(cls, tz=None):  # noqa: D102 - every writer is created "in the same second"
        return FIXED


# -- RunWriter ------------------------------------------------------------------------------------


def test_two_writers_in_the_same_millisecond_get_different_files(tmp_path, monkeypatch):
    monkeypatch.setattr(results_mod, "datetime", FrozenDateTime)
    writers = [RunWriter(tmp_path) for _ in range(3)]
    try:
        paths = [w.path for w in writers]
        assert len(set(paths)) == 3
        assert all(p.name.startswith("20261129T231500.123Z-") and p.suffix == ".jsonl" for p in paths), paths
        assert all(p.exists() for p in paths)
        assert [w.run_id for w in writers] == [p.stem for p in paths]
    finally:
        for w in writers:
            w.close()


def test_writer_never_reuses_an_existing_file(tmp_path, monkeypatch):
    monkeypatch.setattr(results_mod, "datetime", FrozenDateTime)
    suffixes = iter(["aaaaaa", "bbbbbb"])
    monkeypatch.setattr("judge_runner.core.ids.secrets.token_hex", lambda n: next(suffixes))
    existing = tmp_path / "20261129T231500.123Z-aaaaaa.jsonl"
    existing.write_text("precious\n", encoding="utf-8")
    w = RunWriter(tmp_path)
    w.write({"type": "run_start", "runId": w.run_id})
    w.close()
    assert w.path == tmp_path / "20261129T231500.123Z-bbbbbb.jsonl"
    assert existing.read_text(encoding="utf-8") == "precious\n"


def test_writer_real_clock_back_to_back(tmp_path):
    a, b = RunWriter(tmp_path / "runs"), RunWriter(tmp_path / "runs")
    try:
        assert a.path != b.path
        assert a.path.parent == tmp_path / "runs"
        assert a.path.suffix == ".jsonl"
    finally:
        a.close()
        b.close()


def test_each_line_is_valid_json_ending_in_newline(tmp_path):
    w = RunWriter(tmp_path)
    lines = [
        {"type": "run_start", "runId": w.run_id, "config": {"x": 1}},
        {"type": "evaluation", "runId": w.run_id, "query": '索引 ü "quoted"\nnewline'},
        {"type": "summary", "runId": w.run_id, "costUsd": None},
    ]
    for line in lines:
        w.write(line)
    w.close()
    raw = w.path.read_bytes().decode("utf-8")
    assert raw.endswith("\n")
    parts = raw.split("\n")
    assert parts[-1] == ""
    assert [json.loads(p) for p in parts[:-1]] == lines
    assert "索引" in raw  # written as UTF-8, not \u escapes


def test_line_is_durable_before_close(tmp_path):
    w = RunWriter(tmp_path)
    w.write({"type": "evaluation", "runId": w.run_id, "queryId": "q1"})
    # read through another handle while the writer is still open
    assert list(read_run(w.path)) == [{"type": "evaluation", "runId": w.run_id, "queryId": "q1"}]
    w.close()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_writer_refuses_non_finite_numbers(tmp_path, bad):
    w = RunWriter(tmp_path)
    with pytest.raises(ValueError):
        w.write({"type": "evaluation", "runId": w.run_id, "scores": {"overall": bad}})
    w.close()
    assert w.path.read_text(encoding="utf-8") == ""  # nothing half-written


@pytest.mark.parametrize("line", [{"runId": "r"}, {"type": "evaluation"}, {}])
def test_writer_requires_type_and_run_id(tmp_path, line):
    w = RunWriter(tmp_path)
    with pytest.raises(ValueError):
        w.write(line)
    w.close()
    assert w.path.read_text(encoding="utf-8") == ""


# -- read_run -------------------------------------------------------------------------------------


def test_read_run_tolerates_a_torn_last_line(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(
        '{"type":"run_start","runId":"r"}\n{"type":"evaluation","runId":"r","queryId":"q1"}\n{"type":"evaluation","runId":"r","qu',
        encoding="utf-8",
    )
    assert [line["type"] for line in read_run(path)] == ["run_start", "evaluation"]


def test_read_run_skips_garbage_and_non_objects(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"type":"a","runId":"r"}\nnot json\n[1,2]\n"string"\n\n   \n{"type":"b","runId":"r"}\n', encoding="utf-8")
    assert [line["type"] for line in read_run(path)] == ["a", "b"]


def test_read_run_keeps_u2028_inside_a_string(tmp_path):
    w = RunWriter(tmp_path)
    text = "line\u2028separator\u2029paragraph\x85nel\rcr"
    w.write({"type": "evaluation", "runId": w.run_id, "query": text})
    w.write({"type": "summary", "runId": w.run_id})
    w.close()
    assert "\u2028" in w.path.read_bytes().decode("utf-8")  # written raw, not escaped
    lines = list(read_run(w.path))
    assert len(lines) == 2
    assert lines[0]["query"] == text
    assert lines[1]["type"] == "summary"


def test_read_run_crlf_file(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(b'{"type":"a","runId":"r"}\r\n{"type":"b","runId":"r"}\r\n')
    assert [line["type"] for line in read_run(path)] == ["a", "b"]


# -- top_issues -----------------------------------------------------------------------------------


def ev(qid: str, suggestions: list[str], **extra) -> dict:
    return {"queryId": qid, "suggestions": suggestions, **extra}


def test_top_issues_groups_by_normalised_wording():
    evaluations = [
        ev("q1", ["Add synonyms for 'k8s'.", "Shorter snippets"]),
        ev("q2", ["add synonyms for k8s", "add  SYNONYMS for K8s!"]),  # same issue twice in one query: counted once
        ev("q3", ["Shorter snippets.", "Boost headings"]),
        ev("q4", ["ADD SYNONYMS FOR K8S"]),
        ev("q5", []),
    ]
    issues = top_issues(evaluations)
    assert issues[0]["count"] == 3
    assert issues[0]["queryIds"] == ["q1", "q2", "q4"]
    assert issues[0]["issue"].lower().startswith("add")
    assert issues[1] == {"issue": issues[1]["issue"], "count": 2, "queryIds": ["q1", "q3"]}
    assert issues[1]["issue"].lower().startswith("shorter snippets")
    assert issues[2] == {"issue": "Boost headings", "count": 1, "queryIds": ["q3"]}
    assert len(issues) == 3


def test_top_issues_limit_and_order():
    evaluations = [ev(f"q{i}", [f"issue {chr(97 + j)}" for j in range(i + 1)]) for i in range(8)]
    issues = top_issues(evaluations, limit=3)
    assert [i["issue"] for i in issues] == ["issue a", "issue b", "issue c"]
    assert [i["count"] for i in issues] == [8, 7, 6]


def test_top_issues_ignores_punctuation_only_suggestions():
    assert top_issues([ev("q1", ["...", "!!"])]) == []


# -- build_summary --------------------------------------------------------------------------------


def evaluation(qid, scores, metrics, query_type="keyword", confident=True, abstained=None, suggestions=()):
    line = {
        "type": "evaluation",
        "runId": "r1",
        "queryId": qid,
        "queryType": query_type,
        "confident": confident,
        "scores": scores,
        "metrics": metrics,
        "suggestions": list(suggestions),
    }
    if abstained is not None:
        line["abstained"] = abstained
    return line


def scores(rel, rank, cov, snip):
    return {"relevance": rel, "ranking": rank, "coverage": cov, "snippetQuality": snip, "overall": (rel + rank + cov + snip) / 4}


USAGE = {"inputTokens": 1000, "outputTokens": 200, "calls": 5}


def summary(evaluations, errors=(), total=None, **kw):
    args = dict(interrupted=False, budget_exhausted=False, cost_usd=0.0123, usage=USAGE, duration_s=12.3456, heuristic=False)
    args.update(kw)
    return build_summary(
        "r1", list(evaluations), list(errors), total if total is not None else len(evaluations) + len(errors), SummaryInputs(**args)
    )


@pytest.fixture()
def run_lines():
    evaluations = [
        evaluation("q1", scores(1.0, 0.8, 0.6, 0.9), {"nDCG@10": 0.9, "Recall@10": 1.0, "RR": 1.0}, suggestions=["Boost headings"]),
        evaluation(
            "q2",
            scores(0.6, 0.4, 0.2, 0.7),
            {"nDCG@10": 0.5, "Recall@10": None, "RR": 0.5},
            confident=False,
            suggestions=["boost headings.", "Index YAML keys"],
        ),
        evaluation("q3", scores(0.8, 0.9, 0.1, 0.5), None, query_type="off-topic", confident=False, abstained=True),
        evaluation("q4", scores(0.2, 0.3, 0.3, 0.3), None, query_type="off-topic", confident=True, abstained=False),
    ]
    errors = [
        {"type": "error", "runId": "r1", "queryId": "q5", "stage": "judge", "errorType": "transient_error", "message": "x", "attempts": 4},
        {"type": "error", "runId": "r1", "queryId": "q6", "stage": "search", "errorType": "search_error", "message": "y", "attempts": 1},
    ]
    return evaluations, errors


def test_summary_averages_only_evaluated_queries(run_lines):
    evaluations, errors = run_lines
    s = summary(evaluations, errors)
    assert s["totalQueries"] == 6
    assert s["evaluated"] == 4
    assert s["failed"] == 2
    # errors are not zeros, and off-topic queries (q3, q4) are scored on abstention, not on the dimensions:
    # the mean is over the 2 evaluated on-topic queries only
    assert s["averageScores"]["relevance"] == pytest.approx((1.0 + 0.6) / 2)
    assert s["averageScores"]["coverage"] == pytest.approx((0.6 + 0.2) / 2)
    assert s["averageScores"]["overall"] == pytest.approx(sum(e["scores"]["overall"] for e in evaluations[:2]) / 2, abs=1e-6)
    assert set(s["averageScores"]) == {"relevance", "ranking", "coverage", "snippetQuality", "overall"}


def test_summary_metrics_skip_off_topic_and_none_recall(run_lines):
    evaluations, errors = run_lines
    s = summary(evaluations, errors)
    assert s["averageMetrics"]["nDCG@10"] == pytest.approx((0.9 + 0.5) / 2)
    assert s["averageMetrics"]["RR(rel=2)"] == pytest.approx((1.0 + 0.5) / 2)
    assert s["averageMetrics"]["R@10"] == pytest.approx(1.0)  # q2's None recall is skipped, not a zero


def test_summary_abstention_counts(run_lines):
    evaluations, errors = run_lines
    s = summary(evaluations, errors)
    assert s["abstention"] == {"offTopic": 2, "correct": 1, "falseAbstentions": 1, "accuracy": 0.5, "falseAbstentionRate": 0.5}


def test_summary_records_the_focus_its_caller_computed(run_lines):
    # the focus needs the scoring rules (judge_runner.judging.advice, tested in test_focus.py): the summary keeps what it is given
    evaluations, errors = run_lines
    assert summary(evaluations, errors)["recommendedFocus"] is None
    evidence = {"dimension": "coverage", "headroom": {"coverage": 0.2}, "queryIds": ["q2", "q1"], "onTopicQueries": 2}
    s = summary(evaluations, errors, recommended_focus="coverage: ...", focus_evidence=evidence)
    assert s["recommendedFocus"] == "coverage: ..." and s["focusEvidence"]["queryIds"] == ["q2", "q1"]
    jsonschema.Draft202012Validator(load_schema("summary.schema.json")).validate(s)
    # top issues stay counted across queries: one count per query that made the suggestion, whatever its wording
    assert s["topIssues"][0] == {"issue": "Boost headings", "count": 2, "queryIds": ["q1", "q2"]}


def test_summary_flags_and_passthrough(run_lines):
    evaluations, errors = run_lines
    s = summary(evaluations, errors, interrupted=True, budget_exhausted=True, cost_usd=None, heuristic=True)
    assert s["type"] == "summary" and s["runId"] == "r1"
    assert s["interrupted"] is True and s["budgetExhausted"] is True and s["heuristicJudge"] is True
    assert s["costUsd"] is None
    assert s["usage"] == {**USAGE, "cacheWriteTokens": 0, "cacheReadTokens": 0}  # declared fields are always written
    assert s["durationS"] == 12.346


def test_summary_validates_against_its_schema(run_lines):
    evaluations, errors = run_lines
    schema = load_schema("summary.schema.json")
    for s in (
        summary(evaluations, errors),
        summary(evaluations, errors, cost_usd=None, interrupted=True),
        summary([], errors),
        summary([], []),
    ):
        assert "stopReason" in s
        jsonschema.Draft202012Validator(schema).validate(s)
        json.dumps(s, allow_nan=False)  # writable by RunWriter


def test_summary_with_only_errors():
    errors = [{"type": "error", "runId": "r1", "queryId": "q1", "stage": "judge", "errorType": "auth_error", "message": "m", "attempts": 1}]
    s = summary([], errors)
    assert s["evaluated"] == 0 and s["failed"] == 1
    assert s["averageScores"] is None
    assert s["averageMetrics"] is None
    assert s["recommendedFocus"] is None
    assert s["topIssues"] == []
    assert s["abstention"] == {"offTopic": 0, "correct": 0, "falseAbstentions": 0, "accuracy": None, "falseAbstentionRate": None}


def test_summary_only_off_topic_has_no_metrics():
    evaluations = [evaluation("q1", scores(1, 1, 1, 1), None, query_type="off-topic", confident=False, abstained=True)]
    s = summary(evaluations)
    assert s["averageMetrics"] is None
    assert s["averageScores"] is None  # an off-topic query is scored on abstention only
    assert s["abstention"] == {"offTopic": 1, "correct": 1, "falseAbstentions": 0, "accuracy": 1.0, "falseAbstentionRate": None}


def test_a_lone_surrogate_from_a_model_reply_is_written_as_replacement_character(tmp_path):
    """Model replies: a judge's reason holding half an emoji (``"\\ud83d"`` in its JSON)
    must not make the line unwritable (UnicodeEncodeError) and lose the judged query."""
    from judge_runner.runs.write import RunWriter

    writer = RunWriter(tmp_path)
    writer.write({"type": "evaluation", "runId": writer.run_id, "results": [{"reason": "emoji half \ud83d here"}]})
    writer.close()
    line = json.loads(writer.path.read_text(encoding="utf-8"))
    assert line["results"][0]["reason"] == "emoji half \ufffd here"
