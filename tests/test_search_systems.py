"""Judging any search system end to end through the CLI (issue 12): external adapters around the real
bm25s engine (tests/engines/), commands that misbehave, TREC runs in, and compare runs."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from tests.clitools import invoke, run_lines
from tests.engines.bm25s_service import Bm25sService
from tests.fakes.fake_llm import FakeLLMServer

pytestmark = pytest.mark.hash_embedder

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
BM25S_COMMAND = shlex.join([sys.executable, str(ROOT / "tests" / "engines" / "bm25s_search.py"), "--corpus", str(FIXTURES),
                            "--limit", "{limit}", "{query}"])
HASH = {"JUDGE_RUNNER_EMBEDDER": "hash"}


@pytest.fixture(scope="module")
def hash_db(tmp_path_factory):
    """One SQLite index of fixtures/ with the hash embedder, copied by each test."""
    db = tmp_path_factory.mktemp("idx") / "index.sqlite"
    with pytest.MonkeyPatch.context() as mp:
        from judge_runner.embedding import EMBEDDER_ENV, set_embedder

        mp.setenv(EMBEDDER_ENV, "hash")
        previous = set_embedder(None)
        try:
            result = invoke(["index", str(FIXTURES), "--db", str(db)], HASH)
        finally:
            set_embedder(previous)
    assert result.exit_code == 0, result.output
    return db


@pytest.fixture
def db(hash_db, tmp_path):
    copy = tmp_path / "index.sqlite"
    shutil.copy(hash_db, copy)
    return copy


def evaluations(lines):
    return [l for l in lines if l["type"] == "evaluation"]


def test_generate_and_evaluate_with_bm25s_command_offline(db, tmp_path):
    out = tmp_path / "r"
    result = invoke(["generate-and-evaluate", "--fixtures", str(FIXTURES), "--db", str(db), "--out-dir", str(out), "--count", "5",
                     "--provider", "offline", "--search-command", BM25S_COMMAND], HASH)
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
        result = invoke(["generate-and-evaluate", "--fixtures", str(FIXTURES), "--db", str(db), "--out-dir", str(out), "--count", "5",
                         "--provider", "auto", "--search-url", service.url, "--search-header", "Authorization=env:SEARCH_TOKEN",
                         "--search-fields", "id=doc_id,text=body,score=_score"], env)
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
    result = invoke(["generate-and-evaluate", "--fixtures", str(FIXTURES), "--db", str(db), "--out-dir", str(out), "--count", "6",
                     "--provider", "offline", "--search-mode", "hybrid", "--search-command", BM25S_COMMAND], HASH)
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
    command = shlex.join([sys.executable, str(ROOT / "tests" / "flaky_search.py"), str(state), "hang,exit,junk,ghost,ok,empty,ok,ok",
                          "{query}"])
    result = invoke(["generate-and-evaluate", "--fixtures", str(FIXTURES), "--db", str(db), "--out-dir", str(out), "--count", "8",
                     "--provider", "offline", "--search-command", command, "--search-timeout", "6"], HASH)
    lines = run_lines(out)
    errors = [l for l in lines if l["type"] == "error"]
    assert [(e["stage"], e["errorType"]) for e in errors] == [
        ("search", "search_timeout"), ("search", "search_failed"), ("search", "search_output"),
        ("search", "search_unknown_source"), ("search", "search_output")]
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
    result = invoke(["evaluate", "--queries", str(queries), "--db", str(db), "--search-url", "http://127.0.0.1:1/s",
                     "--search-header", "Authorization=env:NOPE_TOKEN", "--out-dir", str(tmp_path / "r")], {**HASH, "NOPE_TOKEN": None})
    assert result.exit_code == 2 and "NOPE_TOKEN is not set" in result.output
    result = invoke(["evaluate", "--queries", str(queries), "--db", str(db), "--search-mode", "fts,bogus"], HASH)
    assert result.exit_code == 2 and "distinct modes" in result.output
    result = invoke(["evaluate", "--queries", str(queries), "--db", str(db), "--search-fields", "bogus=x",
                     "--search-command", "true", "--out-dir", str(tmp_path / "r")], HASH)
    assert result.exit_code == 2 and "unknown search field 'bogus'" in result.output
