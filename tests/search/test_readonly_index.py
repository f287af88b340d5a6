"""An index in a read-only folder, and ``--db`` where no folder can be made.

``index`` into a read-only folder said SQLite's "unable to open database file" and nothing else. Now every
command that must write says which folder, why (SQLite writes the index and its -wal and -shm files there)
and what to do, exit 2; ``search`` of a read-only index works; ``evaluate`` names the judgment cache it
cannot write beside the index, and runs with ``--cache`` elsewhere.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from judge_runner.embed.hashing import HashEmbedder
from judge_runner.search.sqlite import IndexAccessError, SQLiteIndex
from tests.support.batch_runs import env_for
from tests.support.clitools import invoke
from tests.support.fakes.fake_llm import FakeLLMServer
from tests.support.readonly import readonly_paths, run_readonly

pytestmark = pytest.mark.hash_embedder

ROOT = Path(__file__).resolve().parents[2]
HASH = {"JUDGE_RUNNER_EMBEDDER": "hash"}


@pytest.fixture
def shared(db_copy, tmp_path) -> Path:
    """A folder holding a copy of the fixtures index (hash embedder), to be made read-only."""
    folder = tmp_path / "shared"
    folder.mkdir()
    shutil.copy(db_copy, folder / "index.sqlite")
    return folder


def says_what_to_do(stderr: str, folder: Path) -> None:
    assert f"its folder {folder} must be writable" in stderr, stderr
    assert "give --db a path in a folder you can write" in stderr and "Traceback" not in stderr


@readonly_paths
def test_index_into_a_read_only_folder_names_the_folder_and_what_to_do(shared):
    for db in (shared / "new.sqlite", shared / "index.sqlite"):  # a new index, and one to bring up to date
        done = run_readonly([shared], ["index", str(ROOT / "fixtures"), "--db", str(db)], HASH)
        assert done.returncode == 2, done.stderr
        says_what_to_do(done.stderr, shared)
        assert "unable to open database file" not in done.stderr.split("(", 1)[0]


@readonly_paths
def test_search_of_a_read_only_index_works(shared):
    done = run_readonly([shared], ["search", "redis failover", "--db", str(shared / "index.sqlite"), "--json"], HASH)
    assert done.returncode == 0, done.stderr
    assert '"results"' in done.stdout


@readonly_paths
def test_evaluate_beside_a_read_only_index_names_the_cache_and_runs_with_another(shared, query_set, tmp_path):  # noqa: F811
    db = shared / "index.sqlite"
    with FakeLLMServer() as server:
        env = {**HASH, **env_for(server, "anthropic")}
        args = ["evaluate", "--queries", str(query_set), "--db", str(db), "--provider", "anthropic", "--concurrency", "1"]
        refused = run_readonly([shared], [*args, "--out-dir", str(tmp_path / "a")], env)
        assert refused.returncode == 2, refused.stderr
        assert f"the judgment cache {shared / 'judgments.sqlite'} is read-only" in refused.stderr
        assert "pass another --cache path or --no-cache" in refused.stderr
        assert server.requests == []
        ran = run_readonly([shared], [*args, "--out-dir", str(tmp_path / "b"), "--cache", str(tmp_path / "j.sqlite")], env)
    assert ran.returncode == 0, ran.stderr
    assert len(list((tmp_path / "b").glob("*.jsonl"))) == 1


@readonly_paths
def test_a_read_only_folder_with_changes_still_in_the_wal_is_refused_not_read_stale(shared, tmp_path):
    db = shared / "index.sqlite"
    # a process wrote the index and never checkpointed (killed): its -wal holds a document the file lacks
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")
    writer.execute("INSERT INTO meta VALUES ('note', 'only in the wal')")
    writer.commit()
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    for name in ("index.sqlite", "index.sqlite-wal"):
        shutil.copy(shared / name, snapshot / name)
    writer.close()
    assert (snapshot / "index.sqlite-wal").stat().st_size > 0 and not (snapshot / "index.sqlite-shm").exists()
    done = run_readonly([snapshot], ["search", "redis", "--db", str(snapshot / "index.sqlite")], HASH)
    assert done.returncode == 2, done.stderr
    assert "index.sqlite-wal beside it holds changes not yet in the file" in done.stderr


def test_db_where_no_folder_can_be_made_is_a_clear_usage_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = invoke(["index", str(ROOT / "fixtures"), "--db", str(blocker / "sub" / "index.sqlite")], HASH)
    assert result.exit_code == 2, result.output
    assert f"cannot create the folder {blocker / 'sub'} for the index" in result.output
    assert "give --db a path in a folder you can write" in result.output


def test_db_in_a_folder_that_does_not_exist_yet_is_made_by_index_and_named_by_search(tmp_path):
    missing = tmp_path / "not" / "yet" / "index.sqlite"
    searched = invoke(["search", "redis", "--db", str(missing)], HASH)
    assert searched.exit_code == 2 and f"no index at {missing}" in searched.output
    assert not missing.parent.exists(), "a search created the folder"
    indexed = invoke(["index", str(ROOT / "fixtures"), "--db", str(missing)], HASH)
    assert indexed.exit_code == 0, indexed.output
    assert missing.is_file()


def test_the_library_raises_index_access_error_for_a_read_only_file(tmp_path, monkeypatch):
    db = tmp_path / "index.sqlite"
    SQLiteIndex(db, embedder=HashEmbedder()).close()
    monkeypatch.setattr("judge_runner.search.sqlite.os.access", lambda path, mode: Path(path) != db)
    with pytest.raises(IndexAccessError, match=r"index\.sqlite is read-only; the file and its folder"):
        SQLiteIndex(db, embedder=HashEmbedder())
