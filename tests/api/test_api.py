"""The public Python API (judge_runner/api.py): typed results, a search written as a function judged like
any adapter, and the command line ending in the same functions."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

import judge_runner.api as jr
from judge_runner.config import Settings
from judge_runner.core.failures import UsageError
from judge_runner.core.printer import Printer
from judge_runner.runs.lines import EvaluationLine, SummaryLine
from judge_runner.search.systems import SystemsSpec
from tests.support.clitools import invoke
from tests.support.engines.bm25s_search import Engine

pytestmark = pytest.mark.hash_embedder

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
BM25S = ROOT / "tests" / "support" / "engines" / "bm25s_search.py"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(FIXTURES)


def test_a_function_is_judged_exactly_like_the_same_search_as_a_command(engine, query_set, tmp_path):
    def bm25s(query: str, k: int) -> list[dict]:
        return [{"id": docid, "score": round(score, 6)} for docid, score, _ in engine.search(query, k)]

    command = shlex.join([sys.executable, str(BM25S), "--corpus", str(FIXTURES), "--limit", "{limit}", "{query}"])
    run = jr.evaluate(
        query_set,
        search=bm25s,
        systems=SystemsSpec(commands=(command,)),
        corpus=FIXTURES,
        out_dir=tmp_path,
        provider="offline",
        cache=str(tmp_path / "judgments.sqlite"),
    )
    assert run is not None and run.status == "ok" and run.exit_code == 0
    by_system: dict[str, dict[str, EvaluationLine]] = {}
    for line in run.evaluations:
        by_system.setdefault(str(line.system), {})[line.queryId] = line
    assert set(by_system) == {"command:bm25s_search", "python:bm25s"}
    command_lines, function_lines = by_system["command:bm25s_search"], by_system["python:bm25s"]
    assert command_lines.keys() == function_lines.keys() and command_lines
    for qid, line in function_lines.items():
        same = command_lines[qid]
        assert [(r.source, r.shownText, r.shownAnchor, r.relevance) for r in line.results] == [
            (r.source, r.shownText, r.shownAnchor, r.relevance) for r in same.results
        ]
        assert line.labelsJudged == 0 or not line.results  # every label came from the cache: the same text was shown
    differences = run.summary.comparison.differences if run.summary.comparison else []
    assert differences and all(d.delta == 0 for d in differences if d.delta is not None)
    start = json.loads(run.path.read_text(encoding="utf-8").splitlines()[0])
    described = {system["name"]: system for system in start["provenance"]["searchSystems"]}
    assert described["python:bm25s"]["kind"] == "python" and described["python:bm25s"]["function"].endswith(".bm25s")


def test_the_results_are_typed_and_name_their_file(query_set, tmp_path):
    def nothing_but_one(query: str, k: int) -> list[dict]:
        return [{"id": "runbooks/redis-cache-failover.md", "score": 1.0}]

    run = jr.evaluate(query_set, search=nothing_but_one, corpus=FIXTURES, out_dir=tmp_path, provider="offline", no_cache=True)
    assert run is not None and isinstance(run.summary, SummaryLine) and all(isinstance(e, EvaluationLine) for e in run.evaluations)
    assert run.path.parent == tmp_path and run.path.name == f"{run.run_id}.jsonl" and run.path.is_file()
    assert run.overall == run.summary.averageScores["overall"] and run.ndcg10 == run.summary.averageMetrics["nDCG@10"]
    assert run.cost_usd == 0 and {e.resultCount for e in run.evaluations} == {1}
    history = jr.trend(tmp_path)
    assert history.latest["runId"] == run.run_id and not history.regression and history.judge_changes == ()
    assert jr.pr_summary(tmp_path).startswith("## Search quality")


def test_a_function_that_fails_fails_its_query_never_scores_zero(query_set, tmp_path):
    def flaky(query: str, k: int) -> list[dict]:
        if "bake" in query or len(query) % 3 == 0:
            raise ConnectionError("the search backend is down")
        return [{"id": "runbooks/redis-cache-failover.md", "score": 1.0}]

    run = jr.evaluate(query_set, search=flaky, corpus=FIXTURES, out_dir=tmp_path, provider="offline", no_cache=True)
    assert run is not None and run.summary.failed > 0
    errors = [line for line in map(json.loads, run.path.read_text().splitlines()) if line["type"] == "error"]
    assert len(errors) == run.summary.failed
    assert all(e["errorType"] == "search_failed" and "raised ConnectionError: the search backend is down" in e["message"] for e in errors)
    assert run.summary.evaluated == len(run.evaluations)  # a failed query is no evaluation, so no zero in the means


def test_queries_may_be_given_as_data_and_settings_as_keywords(tmp_path):
    queries = [{"id": "q1", "query": "promote the redis replica", "queryIntent": "failover steps", "queryType": "keyword",
                "expectedSources": ["runbooks/redis-cache-failover.md"]}]  # fmt: skip
    run = jr.evaluate(
        queries, search=lambda q, k: [{"id": "runbooks/redis-cache-failover.md"}], corpus=FIXTURES, out_dir=tmp_path,
        settings=jr.make_settings(provider="offline"), search_limit=3, no_cache=True,
    )  # fmt: skip
    assert run is not None and [e.queryId for e in run.evaluations] == ["q1"]
    assert run.evaluations[0].metrics is not None and run.evaluations[0].metrics["R@10"] == 1.0
    with pytest.raises(UsageError, match="the search_limit argument: input should be greater than or equal to 1"):
        jr.make_settings(search_limit=0)  # API users have no flags: named as the argument
    with pytest.raises(UsageError, match=r"not a query set: queries\[0\] \(id q1\)\.query: Field required;") as refused:
        jr.evaluate([{"id": "q1"}], search=lambda q, k: [], out_dir=tmp_path, provider="offline")
    assert "errors.pydantic.dev" not in str(refused.value) and "\n" not in str(refused.value)
    assert isinstance(jr.make_settings(Settings(), trials=2), Settings) and jr.make_settings(Settings(), trials=2).trials == 2


def test_the_command_line_ends_in_the_api(monkeypatch, tmp_path):
    called = []

    def record(name):
        def stub(*args, **kwargs):
            called.append(name)
            raise UsageError("stopped by the test")

        return stub

    for name in ("evaluate", "generate", "generate_and_evaluate", "rejudge", "trend", "pr_summary"):
        monkeypatch.setattr(jr, name, record(name))
    (tmp_path / "q.json").write_text("{}")
    (tmp_path / "run.jsonl").write_text("")
    (tmp_path / "kb").mkdir()
    commands = {
        "evaluate": ["evaluate", "--queries", str(tmp_path / "q.json")],
        "generate": ["generate", "--fixtures", str(tmp_path / "kb"), "--out", str(tmp_path / "o.json")],
        "generate_and_evaluate": ["generate-and-evaluate", "--fixtures", str(tmp_path / "kb")],
        "rejudge": ["rejudge", str(tmp_path / "run.jsonl")],
        "trend": ["trend", str(tmp_path)],
        "pr_summary": ["report", str(tmp_path), "--format", "github"],
    }
    for name, args in commands.items():
        result = invoke(args)
        assert result.exit_code == 2 and "stopped by the test" in result.output, (name, result.output)
    assert called == list(commands)


def test_the_api_names_its_argument_as_where_the_provider_came_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no config file
    monkeypatch.delenv("JUDGE_RUNNER_PROVIDER", raising=False)
    said: list[str] = []
    jr.generate(FIXTURES, out=tmp_path / "q.json", provider="offline", count=2, keep_unverified=True, no_cache=True,
                printer=Printer(out=said.append, err=said.append))  # fmt: skip
    [line] = [s for s in said if s.startswith("provider:")]
    assert line.startswith("provider: offline (the provider argument)") and "--provider" not in line, line
