"""Judging any search system end to end through the CLI: external adapters around the real
bm25s engine (tests/support/engines/), commands that misbehave, TREC runs in, and compare runs."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from judge_runner.search.systems import named
from tests.support.clitools import invoke, run_lines
from tests.support.engines.bm25s_service import Bm25sService
from tests.support.fakes.fake_llm import FakeLLMServer

pytestmark = pytest.mark.hash_embedder

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
BM25S_COMMAND = shlex.join(
    [
        sys.executable,
        str(ROOT / "tests" / "support" / "engines" / "bm25s_search.py"),
        "--corpus",
        str(FIXTURES),
        "--limit",
        "{limit}",
        "{query}",
    ]
)
HASH = {"JUDGE_RUNNER_EMBEDDER": "hash"}


@pytest.fixture
def db(hash_db, tmp_path):
    copy = tmp_path / "index.sqlite"
    shutil.copy(hash_db, copy)
    return copy


def evaluations(lines):
    return [l for l in lines if l["type"] == "evaluation"]


def test_generate_and_evaluate_with_bm25s_command_offline(db, tmp_path):
    out = tmp_path / "r"
    result = invoke(
        [
            "generate-and-evaluate",
            "--keep-unverified",  # keep the written count: these tests judge other systems
            "--fixtures",
            str(FIXTURES),
            "--db",
            str(db),
            "--out-dir",
            str(out),
            "--count",
            "5",
            "--provider",
            "offline",
            "--search-command",
            BM25S_COMMAND,
        ],
        HASH,
    )
    assert result.exit_code == 0, result.output
    lines = run_lines(out)
    start, summary = lines[0], lines[-1]
    systems = start["provenance"]["searchSystems"]
    assert [s["name"] for s in systems] == ["command:bm25s_search"] and systems[0]["kind"] == "command"
    evs = evaluations(lines)
    assert len(evs) == 5 and {e["system"] for e in evs} == {"command:bm25s_search"}
    on_topic = [e for e in evs if e["queryType"] != "off-topic"]
    assert any(e["resultCount"] > 0 for e in on_topic)
    # text-less bm25s results were fetched from fixtures/: real snippets, real labels
    assert all(r["snippet"] for e in on_topic for r in e["results"])
    assert summary["comparison"] is None and summary["evaluated"] == 5


def test_generate_and_evaluate_with_bm25s_url_through_fake_llm(db, tmp_path):
    out = tmp_path / "r"
    token = "tok-" + "x" * 20
    with Bm25sService(FIXTURES, token=token) as service, FakeLLMServer() as llm:
        env = {**HASH, "OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": llm.openai_base_url, "SEARCH_TOKEN": f"Bearer {token}"}
        result = invoke(
            [
                "generate-and-evaluate",
                "--keep-unverified",  # keep the written count: these tests judge other systems
                "--fixtures",
                str(FIXTURES),
                "--db",
                str(db),
                "--out-dir",
                str(out),
                "--count",
                "5",
                "--provider",
                "auto",
                "--search-url",
                service.url,
                "--search-header",
                "Authorization=env:SEARCH_TOKEN",
                "--search-fields",
                "id=doc_id,text=body,score=_score",
            ],
            env,
        )
        assert len(service.requests) == 5
    assert result.exit_code == 0, result.output
    lines = run_lines(out)
    assert lines[0]["provenance"]["provider"] == "openai"
    assert lines[0]["provenance"]["searchSystems"][0]["headers"] == ["Authorization"]
    assert len(evaluations(lines)) == 5 and lines[-1]["failed"] == 0
    written = "".join(p.read_text() for p in out.iterdir()) + result.output
    assert token not in written


def test_bm25s_beside_the_builtin_search(db, tmp_path):
    out = tmp_path / "r"
    result = invoke(
        [
            "generate-and-evaluate",
            "--keep-unverified",  # keep the written count: these tests judge other systems
            "--fixtures",
            str(FIXTURES),
            "--db",
            str(db),
            "--out-dir",
            str(out),
            "--count",
            "6",
            "--provider",
            "offline",
            "--search-mode",
            "hybrid",
            "--search-command",
            BM25S_COMMAND,
        ],
        HASH,
    )
    assert result.exit_code == 0, result.output
    lines = run_lines(out)
    evs = evaluations(lines)
    assert [e["system"] for e in evs] == ["hybrid"] * 6 + ["command:bm25s_search"] * 6
    comparison = lines[-1]["comparison"]
    assert comparison["reference"] == "hybrid" and [s["name"] for s in comparison["systems"]] == ["hybrid", "command:bm25s_search"]
    assert {d["column"] for d in comparison["differences"]} >= {"overall", "relevance", "nDCG@10"}
    assert "systems (reference hybrid)" in result.output


def test_misbehaving_command_gives_error_lines_and_the_run_goes_on(db, tmp_path):
    out = tmp_path / "r"
    state = tmp_path / "calls"
    command = shlex.join(
        [sys.executable, str(ROOT / "tests" / "support" / "flaky_search.py"), str(state), "hang,exit,junk,ghost,ok,empty,ok,ok", "{query}"]
    )
    result = invoke(
        [
            "generate-and-evaluate",
            "--keep-unverified",  # keep the written count: these tests judge other systems
            "--fixtures",
            str(FIXTURES),
            "--db",
            str(db),
            "--out-dir",
            str(out),
            "--count",
            "8",
            "--provider",
            "offline",
            "--search-command",
            command,
            "--search-timeout",
            "6",
        ],
        HASH,
    )
    lines = run_lines(out)
    errors = [l for l in lines if l["type"] == "error"]
    assert [(e["stage"], e["errorType"]) for e in errors] == [
        ("search", "search_timeout"),
        ("search", "search_failed"),
        ("search", "search_output"),
        ("search", "search_unknown_source"),
        ("search", "search_output"),
    ]
    assert "exited with status 2: search backend unavailable" in errors[1]["message"]
    assert "invalid JSON" in errors[2]["message"]
    assert "'notes/does-not-exist.md', '../outside.md'" in errors[3]["message"]
    assert "returned nothing" in errors[4]["message"]
    assert all(e["system"] == "command:flaky_search" for e in errors)
    assert len(evaluations(lines)) == 3 and lines[-1]["failed"] == 5
    assert result.exit_code == 3  # more than a quarter failed: incomplete, but every query was tried


def test_usage_errors_for_bad_adapter_flags(db, tmp_path):
    result = invoke(["evaluate", "--queries", str(ROOT / "tests" / "data" / "none.json"), "--db", str(db)], HASH)
    assert result.exit_code == 2
    queries = tmp_path / "q.json"
    queries.write_text(json.dumps({"queries": [{"id": "q1", "query": "reindex", "queryIntent": "i", "queryType": "keyword"}]}))
    result = invoke(
        [
            "evaluate",
            "--queries",
            str(queries),
            "--db",
            str(db),
            "--search-url",
            "http://127.0.0.1:1/s",
            "--search-header",
            "Authorization=env:NOPE_TOKEN",
            "--out-dir",
            str(tmp_path / "r"),
        ],
        {**HASH, "NOPE_TOKEN": None},
    )
    assert result.exit_code == 2 and "NOPE_TOKEN is not set" in result.output
    result = invoke(["evaluate", "--queries", str(queries), "--db", str(db), "--search-mode", "fts,bogus"], HASH)
    assert result.exit_code == 2 and "--search-mode" in result.output and "bogus" in result.output
    result = invoke(
        [
            "evaluate",
            "--queries",
            str(queries),
            "--db",
            str(db),
            "--search-fields",
            "bogus=x",
            "--search-command",
            "true",
            "--out-dir",
            str(tmp_path / "r"),
        ],
        HASH,
    )
    assert result.exit_code == 2 and "unknown search field 'bogus'" in result.output


# -- TREC runs in ------------------------------------------------------------------------------------------
DOCS = {
    "d1": ("Redis failover", "When the Redis primary fails, Sentinel promotes a replica and clients reconnect."),
    "d2": ("OpenSearch reindex", "Reindex an OpenSearch index with an alias swap so searches never see a half-built index."),
    "d3": ("Node drain", "Drain a Kubernetes node before maintenance: cordon it, evict pods, then upgrade the kubelet."),
    "d4": ("Incident review", "Every incident gets a blameless postmortem within five working days."),
    "d5": ("Cache invalidation", "Stale search results came from a cache that was not invalidated after a reindex."),
    "d6": ("Onboarding", "New engineers clone the repositories side by side and run the bootstrap script."),
    "d7": ("Release train", "Releases leave every Tuesday; a hotfix may skip the train with two approvals."),
    "d8": ("Backups", "Database backups run nightly and are restored monthly to prove they work."),
}
QUERIES = [
    ("q1", "redis replica failover"),
    ("q2", "reindex alias swap"),
    ("q3", "drain a node"),
    ("q4", "stale cache after reindex"),
    ("q5", "postmortem deadline"),
    ("q6", "clone repositories bootstrap"),
    ("q7", "hotfix approvals"),
    ("q8", "restore backups"),
]


@pytest.fixture
def beir(tmp_path):
    """A small BEIR corpus indexed with the hash embedder, its query set (ours and BEIR's shape)."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n" for k, (t, x) in DOCS.items()), encoding="utf-8")
    db = tmp_path / "beir.sqlite"
    assert invoke(["index", "--beir-corpus", str(corpus), "--db", str(db)], HASH).exit_code == 0
    query_set = tmp_path / "qs.json"
    query_set.write_text(
        json.dumps({"queries": [{"id": i, "query": q, "queryIntent": "find it", "queryType": "keyword"} for i, q in QUERIES]}),
        encoding="utf-8",
    )
    beir_queries = tmp_path / "queries.jsonl"
    beir_queries.write_text("".join(json.dumps({"_id": i, "text": q}) + "\n" for i, q in QUERIES), encoding="utf-8")
    return corpus, db, query_set, beir_queries


def _labels(lines):
    return {e["queryId"]: [(r["source"], r["relevance"]) for r in e["results"]] for e in evaluations(lines)}


def test_trec_run_of_the_builtin_search_judges_like_the_builtin_search(beir, tmp_path):
    corpus, db, query_set, beir_queries = beir
    run = tmp_path / "run.trec"
    result = invoke(
        ["search", "--queries", str(beir_queries), "--trec-run", str(run), "--db", str(db), "--mode", "hybrid", "--limit", "10"], HASH
    )
    assert result.exit_code == 0, result.output
    direct = invoke(
        [
            "evaluate",
            "--queries",
            str(query_set),
            "--db",
            str(db),
            "--search-mode",
            "hybrid",
            "--provider",
            "offline",
            "--out-dir",
            str(tmp_path / "direct"),
        ],
        HASH,
    )
    replay = invoke(
        [
            "evaluate",
            "--queries",
            str(query_set),
            "--run",
            str(run),
            "--corpus",
            str(corpus),
            "--provider",
            "offline",
            "--db",
            str(tmp_path / "no-index-needed.sqlite"),
            "--out-dir",
            str(tmp_path / "replay"),
        ],
        HASH,
    )
    assert direct.exit_code == 0 and replay.exit_code == 0, direct.output + replay.output
    a, b = run_lines(tmp_path / "direct"), run_lines(tmp_path / "replay")
    assert _labels(a) == _labels(b) and all(_labels(a).values())
    assert {e["queryId"]: e["metrics"] for e in evaluations(a)} == {e["queryId"]: e["metrics"] for e in evaluations(b)}
    assert a[-1]["averageMetrics"] == b[-1]["averageMetrics"]
    assert b[0]["provenance"]["searchSystems"] == [
        {"name": "run:run", "kind": "trec-run", "run": "run.trec", "queries": 8, "documents": str(corpus)}
    ]


def test_trec_run_with_unknown_docids_and_bad_lines(beir, tmp_path):
    corpus, db, query_set, _ = beir
    run = tmp_path / "ghost.trec"
    run.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 nope 2 1.0 x\nq2 Q0 d2 1 3.0 x\n", encoding="utf-8")
    result = invoke(
        [
            "evaluate",
            "--queries",
            str(query_set),
            "--run",
            str(run),
            "--corpus",
            str(corpus),
            "--provider",
            "offline",
            "--out-dir",
            str(tmp_path / "r"),
        ],
        HASH,
    )
    lines = run_lines(tmp_path / "r")
    errors = {e["queryId"]: e for e in lines if e["type"] == "error"}
    assert (errors["q1"]["stage"], errors["q1"]["errorType"]) == ("search", "search_unknown_source")
    assert "'nope'" in errors["q1"]["message"]
    # queries the run holds no line for are not scored (error lines, as trec_eval leaves them out), never zeros
    assert {q: e["errorType"] for q, e in errors.items() if q != "q1"} == {f"q{i}": "search_no_ranking" for i in range(3, 9)}
    assert [e["queryId"] for e in evaluations(lines)] == ["q2"]
    assert "warning: run:ghost: the run has no line for 6 of 8 queries (q3, q4, q5, q6, q7 ...)" in result.output
    assert result.exit_code == 3, result.output  # more than a quarter of the queries went unscored
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 d1 1\n", encoding="utf-8")
    result = invoke(
        [
            "evaluate",
            "--queries",
            str(query_set),
            "--run",
            str(bad),
            "--corpus",
            str(corpus),
            "--provider",
            "offline",
            "--out-dir",
            str(tmp_path / "r2"),
        ],
        HASH,
    )
    assert result.exit_code == 2 and "line 1: expected 6 fields" in result.output
    result = invoke(["evaluate", "--queries", str(query_set), "--run", str(bad), "--provider", "offline"], HASH)
    assert result.exit_code == 2 and "needs --corpus" in result.output


# -- compare runs ------------------------------------------------------------------------------------------
def test_three_way_compare_then_trend_and_report(db, tmp_path):
    """fts,vector,hybrid judged in one run; trend shows one row per system (the reference chained over
    time); the HTML report holds the comparison table and chart."""
    out = tmp_path / "results"
    first = invoke(
        [
            "generate-and-evaluate",
            "--keep-unverified",  # keep the written count: these tests judge other systems
            "--fixtures",
            str(FIXTURES),
            "--db",
            str(db),
            "--out-dir",
            str(out),
            "--count",
            "6",
            "--provider",
            "offline",
        ],
        HASH,
    )
    assert first.exit_code == 0, first.output
    saved = next(out.glob("*.queries.json"))
    conf_a, conf_b = tmp_path / "lexical.toml", tmp_path / "semantic.toml"
    conf_a.write_text('search_mode = "fts"\n[search]\nsnippet_chars = 300\n', encoding="utf-8")
    conf_b.write_text('search_mode = "vector"\n[search]\n', encoding="utf-8")
    before = set(out.glob("*.jsonl"))
    result = invoke(
        [
            "evaluate",
            "--queries",
            str(saved),
            "--db",
            str(db),
            "--out-dir",
            str(out),
            "--provider",
            "offline",
            "--search-mode",
            "hybrid,fts,vector",
        ],
        HASH,
    )
    assert result.exit_code == 0, result.output
    # the new file (not the last by name: 20261130T183327.123Z sorts before 20261130T183327Z)
    (run_file,) = set(out.glob("*.jsonl")) - before
    lines = [json.loads(l) for l in run_file.read_text().splitlines()]
    evs = evaluations(lines)
    assert [e["system"] for e in evs] == ["hybrid"] * 6 + ["fts"] * 6 + ["vector"] * 6
    comparison = lines[-1]["comparison"]
    assert comparison["reference"] == "hybrid"
    diffs = {(d["system"], d["column"]): d for d in comparison["differences"]}
    assert set(diffs) == {
        (s, c)
        for s in ("fts", "vector")
        for c in ("relevance", "ranking", "coverage", "snippetQuality", "overall", "nDCG@10", "R@10", "RR(rel=2)")
    }
    for d in diffs.values():
        assert d["verdict"] in ("regression", "improvement", "within noise", "too few queries")
        assert d["delta"] is None or d["ci95"][0] is None or d["ci95"][0] <= d["delta"] <= d["ci95"][1]
    # the summary's averages are the reference system's
    assert lines[-1]["averageScores"] == comparison["systems"][0]["averageScores"]
    # the memo: a result shown by two systems is judged once (same labels for the same query, source and snippet)
    seen: dict = {}
    for e in evs:
        for r in e["results"]:
            seen.setdefault((e["queryId"], r["source"], r["snippet"]), set()).add(r["relevance"])
    assert all(len(v) == 1 for v in seen.values())
    assert "systems (reference hybrid)" in result.output

    # --compare with configuration files: one run, named by file
    result = invoke(
        [
            "evaluate",
            "--queries",
            str(saved),
            "--db",
            str(db),
            "--out-dir",
            str(tmp_path / "cmp"),
            "--provider",
            "offline",
            "--compare",
            f"{conf_a},{conf_b}",
        ],
        HASH,
    )
    assert result.exit_code == 0, result.output
    cmp_lines = run_lines(tmp_path / "cmp")
    assert [s["name"] for s in cmp_lines[0]["provenance"]["searchSystems"]] == ["lexical", "semantic"]
    assert {e["searchMode"] for e in evaluations(cmp_lines) if e["system"] == "semantic"} == {"vector"}

    trend = invoke(["trend", str(out), "--format", "json"])
    assert trend.exit_code == 0, trend.output
    rows = json.loads(trend.stdout)["groups"][0]["runs"]
    compare_rows = [r for r in rows if r["runId"] == lines[0]["runId"]]
    assert [r.get("system") for r in compare_rows] == ["hybrid", "fts", "vector"]
    assert "vsPrevious" in compare_rows[0] and compare_rows[0]["evaluated"] == 6  # the reference continues the trend
    assert all("vsReference" in r and "vsPrevious" not in r for r in compare_rows[1:])
    table = invoke(["trend", str(out), "--format", "markdown"])
    assert "\\[fts\\]" in table.output and "compare run: vs hybrid" in table.output  # markdown: literal text

    report = invoke(["report", str(out), "--out", str(tmp_path / "reports")])
    assert report.exit_code == 0, report.output
    page = next((tmp_path / "reports").glob("*.html")).read_text()
    assert "Systems compared" in page and "<table>" in page and page.count("data:image/png;base64,") == 3


def test_url_offline_and_command_through_fake_anthropic_and_config_table(db, tmp_path, monkeypatch):
    with Bm25sService(FIXTURES, with_text=False) as service:
        result = invoke(
            [
                "generate-and-evaluate",
                "--keep-unverified",  # keep the written count: these tests judge other systems
                "--fixtures",
                str(FIXTURES),
                "--db",
                str(db),
                "--out-dir",
                str(tmp_path / "u"),
                "--count",
                "4",
                "--provider",
                "offline",
                "--search-url",
                service.url,
                "--search-fields",
                "id=doc_id,score=_score",
            ],
            HASH,
        )
    assert result.exit_code == 0, result.output
    lines = run_lines(tmp_path / "u")
    assert len(evaluations(lines)) == 4 and lines[0]["provenance"]["searchSystems"][0]["kind"] == "http"

    # the same adapter from a [search.external] table of judge-runner.toml, judged by the fake Anthropic server
    monkeypatch.chdir(tmp_path)
    (tmp_path / "judge-runner.toml").write_text(
        "[search.external]\n"
        f"command = {json.dumps(BM25S_COMMAND)}\n"
        'name = "bm25s"\n'
        'fields = {id = "id", score = "score"}\n'
        "timeout = 60\n",
        encoding="utf-8",
    )
    with FakeLLMServer() as llm:
        env = {**HASH, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": llm.anthropic_base_url}
        result = invoke(
            [
                "generate-and-evaluate",
                "--keep-unverified",  # keep the written count: these tests judge other systems
                "--fixtures",
                str(FIXTURES),
                "--db",
                str(db),
                "--out-dir",
                str(tmp_path / "c"),
                "--count",
                "5",
                "--provider",
                "auto",
            ],
            env,
        )
    assert result.exit_code == 0, result.output
    lines = run_lines(tmp_path / "c")
    assert lines[0]["provenance"]["provider"] == "anthropic"
    assert [s["name"] for s in lines[0]["provenance"]["searchSystems"]] == ["bm25s"]
    assert "external" not in lines[0]["provenance"]["searchConfig"]
    assert {e["system"] for e in evaluations(lines)} == {"bm25s"} and lines[-1]["failed"] == 0


def test_unusable_adapter_stops_the_main_job_before_phase_one(db, tmp_path):
    out = tmp_path / "r"
    with FakeLLMServer() as llm:
        env = {**HASH, "OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": llm.openai_base_url, "MISSING_TOKEN": None}
        result = invoke(
            [
                "generate-and-evaluate",
                "--keep-unverified",  # keep the written count: these tests judge other systems
                "--fixtures",
                str(FIXTURES),
                "--db",
                str(db),
                "--out-dir",
                str(out),
                "--count",
                "3",
                "--provider",
                "auto",
                "--search-url",
                "http://127.0.0.1:9/s",
                "--search-header",
                "Authorization=env:MISSING_TOKEN",
            ],
            env,
        )
        assert llm.count("openai") == 0  # nothing spent
    assert result.exit_code == 2 and "MISSING_TOKEN is not set" in result.output
    assert not list(out.glob("*.jsonl")) if out.exists() else True


@pytest.mark.parametrize(
    "given,expected",
    [
        ("fast=mysearch {query}", ("fast", "mysearch {query}")),
        ("mysearch --limit={limit} {query}", (None, "mysearch --limit={limit} {query}")),
        ("python3 -c 'x=1' {query}", (None, "python3 -c 'x=1' {query}")),
        ("http://127.0.0.1:9/search?a=b", (None, "http://127.0.0.1:9/search?a=b")),
        ("prod=http://127.0.0.1:9/search", ("prod", "http://127.0.0.1:9/search")),
    ],
)
def test_a_search_flag_may_name_its_system(given, expected):
    assert named(given) == expected
