"""A damaged judgment cache is one clear message and one exit code, whichever command meets it.

``evaluate`` calls a cache damaged deep inside damaged (exit 3, "move it away"); ``cache stats`` and ``cache
prune`` exited 4 ("a bug") on the same file. Every kind of damage (deep inside, truncated, random bytes, a
folder where the file should be, a read-only file) gives ``cache stats``, ``cache prune``, ``qrels import``
and ``evaluate`` the same message and exit code, and leaves the file's bytes as they were.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from judge_runner.judging.cache import CachedJudgment, CacheError, JudgmentCache
from tests.support.batch_runs import env_for
from tests.support.clitools import invoke
from tests.support.fakes.fake_llm import FakeLLMServer
from tests.support.readonly import readonly_paths, run_readonly

pytestmark = pytest.mark.hash_embedder

PAGE = 4096


def filled_cache(path: Path, n: int = 300) -> Path:
    """A cache of ``n`` labels with long reasons (hundreds of pages), everything checkpointed into the main file."""
    with JudgmentCache(path) as cache:
        cache.put_many([(f"k{i}", CachedJudgment(label=i % 4, reason="r" * 2000, created_at=1.0), "pointwise") for i in range(n)])
        cache.replace_human_qrels("team", [("q1", "a.md", 2)])
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert path.stat().st_size > 40 * PAGE
    return path


def damage(path: Path, kind: str) -> None:
    """Damage the cache file at ``path``: ``deep`` (pages after the schema overwritten), ``truncated`` (cut in
    the middle), ``random`` (random bytes), ``folder`` (a folder in its place)."""
    if kind == "deep":
        with open(path, "r+b") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(PAGE * 8)
            f.write(b"\xa5" * (size - PAGE * 8))
    elif kind == "truncated":
        with open(path, "r+b") as f:
            f.truncate(PAGE * 20)
    elif kind == "random":
        path.write_bytes(b"\x00" + os.urandom(100_000))  # never SQLite's header by chance
    elif kind == "tiny":
        path.write_bytes(b"x")  # shorter than a page: SQLite alone would overwrite it with a new cache
    else:
        path.unlink()
        path.mkdir()
        (path / "something").write_text("kept")


def fingerprint(path: Path) -> str:
    """The sha256 of the file's bytes (of a folder's listing), to show a command changed nothing."""
    if path.is_dir():
        return "dir:" + ",".join(sorted(p.name for p in path.iterdir()))
    return hashlib.sha256(path.read_bytes()).hexdigest()


EXPECTED = {
    # kind: (exit code, what the one error line says)
    "deep": (3, "is damaged (database disk image is malformed): move it away, or pass another --cache path or --no-cache"),
    "truncated": (3, "is damaged (database disk image is malformed): move it away, or pass another --cache path or --no-cache"),
    "random": (2, "is not a judgment cache (file is not a database); move it away or pass another --cache path"),
    "tiny": (2, "is not a judgment cache (file is not a database); move it away or pass another --cache path"),
    "folder": (2, "is a folder, not a judgment cache file; pass the cache file's path with --cache"),
}


def error_line(output: str) -> str:
    [line] = [line for line in output.splitlines() if line.startswith(("error:", "internal error:"))]
    return line


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_cache_stats_and_prune_say_what_evaluate_says_of_a_damaged_cache_and_change_nothing(kind, query_set, db_copy, tmp_path):  # noqa: F811
    cache = filled_cache(tmp_path / "judgments.sqlite")
    damage(cache, kind)
    before = fingerprint(cache)
    code, says = EXPECTED[kind]
    seen = {}
    qrels = tmp_path / "human.qrels"
    qrels.write_text("q1 0 a.md 2\n")
    commands = (
        ["cache", "stats"],
        ["cache", "stats", "--json"],
        ["cache", "prune", "--older-than", "0d"],
        ["qrels", "import", str(qrels), "--name", "t"],
    )
    for command in commands:
        result = invoke([*command, "--cache", str(cache)])
        assert result.exit_code == code, (command, result.output)
        seen[" ".join(command)] = error_line(result.output)
        assert fingerprint(cache) == before, f"{command} changed the damaged cache"
    args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--out-dir", str(tmp_path / "runs")]
    dry = invoke([*args, "--dry-run", "--provider", "anthropic", "--cache", str(cache)])
    assert dry.exit_code == code, dry.output  # --dry-run says what the run would say (a folder was "no cache yet")
    seen["evaluate --dry-run"] = error_line(dry.output)
    with FakeLLMServer() as server:
        result = invoke([*args, "--provider", "anthropic", "--concurrency", "1", "--cache", str(cache)], env_for(server, "anthropic"))
    assert result.exit_code == code, result.output
    seen["evaluate"] = error_line(result.output)
    said = f"error: {cache} {says}" if kind in ("random", "tiny", "folder") else f"error: the judgment cache {cache} {says}"
    assert all(line.startswith(said) for line in seen.values()), seen  # evaluate adds how to resume its run
    assert fingerprint(cache) == before
    # a cache refused when opened refuses the run before any file is written: no empty run file for trend to skip;
    # damage found only once the run reads it stops a run that has its run_start and summary
    files = list((tmp_path / "runs").glob("*.jsonl"))
    assert all(f.read_text().startswith('{"type":"run_start"') or '"run_start"' in f.read_text().splitlines()[0] for f in files), files
    if kind != "deep":
        assert not files, "a run refused at the start left a run file"


def test_prune_checks_the_whole_file_before_deleting_anything(tmp_path):
    # the damage is in pages prune's DELETE need not read: without the check it would delete, and keep a damaged file
    cache = filled_cache(tmp_path / "c.sqlite")
    with sqlite3.connect(cache) as conn:
        table_root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'human_qrels'").fetchone()[0]
    with open(cache, "r+b") as f:
        f.seek(PAGE * (table_root - 1))
        f.write(b"\xa5" * PAGE)
    before = fingerprint(cache)
    with JudgmentCache(cache) as store, pytest.raises(CacheError, match="is damaged") as caught:
        store.prune(0.0)
    assert caught.value.exit_code == 3 and caught.value.reason == "cache_damaged"
    assert fingerprint(cache) == before


def test_a_cache_that_cannot_be_read_in_stats_is_a_cache_error_not_a_database_error(tmp_path):
    cache = filled_cache(tmp_path / "c.sqlite")
    damage(cache, "deep")
    with JudgmentCache(cache) as store, pytest.raises(CacheError, match="is damaged"):
        store.stats()
    assert store.failure is not None and store.failure.reason == "cache_damaged"


@readonly_paths
def test_a_read_only_cache_is_read_by_stats_and_refused_by_prune_with_a_clear_message(tmp_path):
    cache = filled_cache(tmp_path / "c.sqlite")
    before = fingerprint(cache)
    stats = run_readonly([cache], ["cache", "stats", "--json", "--cache", str(cache)])
    assert stats.returncode == 0, stats.stderr
    assert '"judgments": 300' in stats.stdout
    pruned = run_readonly([cache], ["cache", "prune", "--older-than", "0d", "--cache", str(cache)])
    assert pruned.returncode == 2, pruned.stderr
    assert f"error: the judgment cache {cache} is read-only" in pruned.stderr and "internal error" not in pruned.stderr
    assert fingerprint(cache) == before
    with JudgmentCache(cache) as store:
        assert store.stats()["judgments"] == 300  # nothing was lost


@readonly_paths
def test_a_cache_in_a_read_only_folder_is_read_by_stats(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    cache = filled_cache(folder / "judgments.sqlite")
    stats = run_readonly([folder], ["cache", "stats", "--json", "--cache", str(cache)])
    assert stats.returncode == 0, stats.stderr
    assert '"judgments": 300' in stats.stdout
    pruned = run_readonly([folder], ["cache", "prune", "--cache", str(cache)])
    assert pruned.returncode == 2 and "is read-only" in pruned.stderr, pruned.stderr


def test_a_zero_byte_cache_is_an_empty_cache_to_every_command_and_stats_leaves_it_0_bytes(tmp_path):
    # a new user's trial: `touch judgments.sqlite`, then `cache stats` said "not a judgment cache (no such table: meta)"
    # (exit 2) while `evaluate` and `cache prune` took it as the empty cache it is
    cache = tmp_path / "judgments.sqlite"
    cache.touch()
    stats = invoke(["cache", "stats", "--json", "--cache", str(cache)])
    assert stats.exit_code == 0 and '"judgments": 0' in stats.output, stats.output
    assert cache.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["judgments.sqlite"]  # read, never written
    with JudgmentCache(cache, readonly=True) as store:
        assert store.stats()["humanQrels"] == {} and store.label_designs() == {}
    pruned = invoke(["cache", "prune", "--cache", str(cache)])
    assert pruned.exit_code == 0 and "deleted 0 judgments" in pruned.output, pruned.output
    assert invoke(["cache", "stats", "--cache", str(cache)]).exit_code == 0
