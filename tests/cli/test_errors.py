"""Bad input gets a clear error, the documented exit code, and loses nothing (each case a failing input
found by trying the tool as a new user)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import click
import pytest

from judge_runner import cli
from judge_runner.core.models import QuerySet
from tests.support.clitools import invoke, run_lines
from tests.support.fakes.fake_llm import FakeLLMServer

# these tests exercise the CLI, the pipeline and the judge, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder


def doc_count(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]


@pytest.mark.parametrize("command", ["generate-and-evaluate", "index"])
def test_empty_folder_is_a_usage_error_and_prunes_nothing(command, db_copy, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.rst").write_text("not an indexed extension")
    before = doc_count(db_copy)
    args = [command, str(empty)] if command == "index" else [command, "--fixtures", str(empty)]
    result = invoke(args + ["--db", str(db_copy)])
    assert result.exit_code == 2 and "no file to index" in result.output
    assert doc_count(db_copy) == before > 0


def test_non_utf8_file_name_is_skipped_not_fatal(tmp_path):
    from judge_runner.corpus.walk import walk_corpus

    root = tmp_path / "kb"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nfine")
    fd = os.open(os.fsencode(str(root)) + b"/caf\xe9.md", os.O_WRONLY | os.O_CREAT)
    os.write(fd, b"# Cafe\n\ntext")
    os.close(fd)
    walked = walk_corpus(root)
    assert [f.source for f in walked.files] == ["good.md"]
    assert [reason for _, reason in walked.skipped] == ["file name is not valid UTF-8"]


def test_generate_refuses_to_overwrite_and_checks_out_before_spending(fixtures_root, tmp_path):
    existing = tmp_path / "queries.json"
    existing.write_text('{"hand": "curated"}')
    result = invoke(["generate", "--fixtures", str(fixtures_root), "--out", str(existing)])
    assert result.exit_code == 2 and "--force" in result.output
    assert existing.read_text() == '{"hand": "curated"}'
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with FakeLLMServer() as server:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        result = invoke(["generate", "--fixtures", str(fixtures_root), "--out", str(blocker / "q.json")], env)
        assert server.count() == 0  # nothing was spent on a set that could not be saved
    assert result.exit_code == 2 and "not a writable folder" in result.output


def test_unwritable_out_dir_fails_before_indexing(fixtures_root, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = invoke(
        [
            "generate-and-evaluate",
            "--fixtures",
            str(fixtures_root),
            "--db",
            str(tmp_path / "new.sqlite"),
            "--out-dir",
            str(blocker / "results"),
        ]
    )
    assert result.exit_code == 2 and "not a writable folder" in result.output
    assert not (tmp_path / "new.sqlite").exists()


@pytest.mark.parametrize("value", ["nan", "2", "-1", "inf"])
def test_min_overall_must_be_a_finite_fraction(value, fixtures_root, tmp_path):
    result = invoke(["generate-and-evaluate", "--fixtures", str(fixtures_root), "--min-overall", value, "--db", str(tmp_path / "i.sqlite")])
    assert result.exit_code == 2


def test_failed_gate_says_why_and_is_recorded(fixtures_root, db_copy, tmp_path):
    out = tmp_path / "r"
    result = invoke(
        ["generate-and-evaluate", "--fixtures", str(fixtures_root), "--db", str(db_copy), "--out-dir", str(out), "--count", "3", "--quiet"],
        {"JUDGE_RUNNER_MIN_OVERALL": "0.99"},
    )
    assert result.exit_code == 1
    assert "quality gate failed: average overall" in result.output and "0.99" in result.output
    gate = run_lines(out)[-1]["qualityGate"]
    assert gate["minOverall"] == 0.99 and gate["passed"] is False and gate["overall"] < 0.99


def test_run_saves_its_query_set_for_next_week(fixtures_root, db_copy, tmp_path):
    out = tmp_path / "r"
    assert (
        invoke(
            [
                "generate-and-evaluate",
                "--fixtures",
                str(fixtures_root),
                "--db",
                str(db_copy),
                "--out-dir",
                str(out),
                "--count",
                "3",
                "--quiet",
            ]
        ).exit_code
        == 0
    )
    lines = run_lines(out)
    saved = out / lines[0]["config"]["querySetFile"]
    query_set = QuerySet.model_validate_json(saved.read_text())
    assert [q.id for q in query_set.queries] == [l["queryId"] for l in lines if l["type"] == "evaluation"]
    result = invoke(["evaluate", "--queries", str(saved), "--db", str(db_copy), "--out-dir", str(tmp_path / "again")])
    assert result.exit_code == 0, result.output


def entry(**fields: object) -> dict:
    return {"id": "a", "query": "x", "queryIntent": "i", "queryType": "keyword", **fields}


@pytest.mark.parametrize(
    "content,messages",
    [
        ('{"queries": []}', ["queries: List should have at least 1 item"]),
        (json.dumps({"queries": [entry(), entry()]}), ["the set: query ids must be unique; repeated: a"]),
        ("not json", ["line 1 column 1: Expecting value (not JSON)"]),
        ('{"queries": [\n  {"id": "a",\n   "query": }]}', ["line 3 column 13: Expecting value"]),
        ("", ["the file is empty"]),
        (json.dumps([entry()]), ['the file holds a list, not an object with a "queries" list']),
        (json.dumps({"queries": "x"}), ['queries: Input should be a valid array (got "x")']),
        (json.dumps({"quries": [entry()]}), ["queries: Field required", "quries: Extra inputs are not permitted"]),
        (
            json.dumps({"queries": [entry(id="q1"), entry(id="q2", queryType="kw", query=3)]}),
            [
                "queries[1] (id q2).queryType: Input should be",
                '(got "kw")',
                "queries[1] (id q2).query: Input should be a valid string (got 3)",
            ],
        ),
        (
            json.dumps({"queries": [{"id": "a", "query": "x", "queryType": "keyword", "ranking": 1}]}),
            ["queries[0] (id a).queryIntent: Field required", "queries[0] (id a).ranking: Extra inputs"],
        ),
    ],
    ids=[
        "empty-list",
        "repeated-ids",
        "not-json",
        "json-error-line",
        "empty-file",
        "a-list",
        "queries-not-a-list",
        "misspelt-key",
        "bad-fields",
        "missing-and-extra",
    ],
)
def test_bad_query_sets_are_usage_errors(content, messages, db_copy, tmp_path):
    path = tmp_path / "q.json"
    path.write_text(content)
    result = invoke(["evaluate", "--queries", str(path), "--db", str(db_copy), "--out-dir", str(tmp_path / "r")])
    assert result.exit_code == 2 and f"{path} is not a valid query set: " in result.output, result.output
    for message in messages:
        assert message in result.output, result.output
    assert "errors.pydantic.dev" not in result.output and ": :" not in result.output


def test_a_query_set_that_is_not_utf8_or_starts_with_a_bom(db_copy, tmp_path):
    path = tmp_path / "q.json"
    path.write_bytes(b'{"queries": [{"id": "caf\xe9"}]}')
    result = invoke(["evaluate", "--queries", str(path), "--db", str(db_copy), "--dry-run"])
    assert result.exit_code == 2 and f"{path} is not a valid query set: byte 24 is not UTF-8 text" in result.output
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"queries": [entry()]}).encode())
    result = invoke(["evaluate", "--queries", str(path), "--db", str(db_copy), "--dry-run"])
    assert result.exit_code == 0, result.output


def test_missing_expected_sources_are_warned_about(db_copy, tmp_path):
    path = tmp_path / "q.json"
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
    result = invoke(["evaluate", "--queries", str(path), "--db", str(db_copy), "--out-dir", str(tmp_path / "r")])
    assert result.exit_code == 0
    assert "not in the index" in result.output and "does/not/exist.md" in result.output


def test_unknown_price_with_budget_is_refused(fixtures_root, db_copy, tmp_path):
    with FakeLLMServer() as server:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        result = invoke(
            [
                "generate-and-evaluate",
                "--fixtures",
                str(fixtures_root),
                "--db",
                str(db_copy),
                "--out-dir",
                str(tmp_path / "r"),
                "--model",
                "claude-unpriced-9",
                "--max-budget-usd",
                "1",
            ],
            env,
        )
        assert server.count() == 0
    assert result.exit_code == 2 and "no price is known" in result.output


def test_search_opens_the_index_read_only(db_copy):
    from judge_runner.search.sqlite import SQLiteIndex

    with SQLiteIndex(db_copy, readonly=True) as index:
        assert index.search("kubernetes", mode="fts").results
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            index.conn.execute("INSERT INTO meta VALUES ('x', 'y')")


def test_ctrl_c_exits_3_not_1(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise click.exceptions.Abort()

    monkeypatch.setattr(cli.main, "main", interrupted)
    # entry() makes SIGINT and SIGTERM end the process (its handlers for before and after a command): put the
    # test process's own back, or a later signal in this worker ends the worker (tests/conftest.py checks it)
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(SystemExit) as exit_info:
            cli.entry()
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    assert exit_info.value.code == 3
    assert "interrupted" in capsys.readouterr().err


def test_unknown_model_with_user_price_or_token_cap(fixtures_root, db_copy, tmp_path):
    with FakeLLMServer() as server:
        env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}
        priced = invoke(
            [
                "generate-and-evaluate",
                "--fixtures",
                str(fixtures_root),
                "--db",
                str(db_copy),
                "--out-dir",
                str(tmp_path / "a"),
                "--count",
                "3",
                "--model",
                "claude-unpriced-9",
                "--price-per-mtok",
                "1,2",
                "--max-budget-usd",
                "5",
            ],
            env,
        )
        assert priced.exit_code == 0, priced.output
        capped = invoke(
            [
                "generate-and-evaluate",
                "--fixtures",
                str(fixtures_root),
                "--db",
                str(db_copy),
                "--out-dir",
                str(tmp_path / "b"),
                "--count",
                "3",
                "--model",
                "claude-unpriced-9",
                "--max-budget-tokens",
                "1000",
            ],
            env,
        )
    summary = run_lines(tmp_path / "a")[-1]
    assert summary["costUsd"] is not None and summary["costUsd"] > 0
    assert capped.exit_code == 3
    summary = run_lines(tmp_path / "b")[-1]
    assert summary["budgetExhausted"] is True and summary["costUsd"] is None  # unknown, never 0


@pytest.mark.parametrize("value", ["1", "a,b", "-1,2", "nan,1"])
def test_bad_user_price_is_a_usage_error(value, fixtures_root, tmp_path):
    result = invoke(["generate", "--fixtures", str(fixtures_root), "--price-per-mtok", value, "--out", str(tmp_path / "q.json")])
    assert result.exit_code == 2 and "--price-per-mtok: must be 'INPUT,OUTPUT'" in result.output


def test_all_files_over_the_size_limit_says_so(fixtures_root, tmp_path):
    result = invoke(["index", str(fixtures_root), "--db", str(tmp_path / "i.sqlite"), "--max-file-bytes", "10"])
    assert result.exit_code == 2 and "larger than 10 bytes" in result.output
