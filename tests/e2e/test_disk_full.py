"""A full disk (or a damaged judgment cache) is the user's environment, not a bug.

- the judgment cache's disk fills: the labels paid for are kept in the run file, no new query starts, the
  message names the cache's path, exit 3; ``--resume`` once there is room judges the rest (and reuses what
  the cache took before it filled);
- the run file's disk fills: no half-written line, exit 3 (never "a bug in judge-runner"), the message
  names the file, nothing more is spent; also when the summary is what does not fit, and when the query
  set saved beside the run does not;
- the judgment cache damaged deep inside (open works, a read fails): one clear error naming the file,
  not a per-query ``DatabaseError``.

Disk full is simulated in-process (SQLite's ``max_page_count``, which fails a write with SQLITE_FULL as a
full disk does; an ``os.write`` that writes half a line and then raises ENOSPC) and, where the machine lets
an unprivileged user namespace mount one, on a real tiny tmpfs (``unshare``).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from judge_runner.judging import cache as cache_module
from judge_runner.runs import write as run_write
from tests.support.batch_runs import env_for
from tests.support.clitools import invoke
from tests.support.fakes.fake_llm import FakeLLMServer

pytestmark = pytest.mark.hash_embedder

ROOT = Path(__file__).resolve().parents[2]
REAL_CACHE_INIT = cache_module.JudgmentCache.__init__


def evaluate(server, query_set, db, out, *extra: str, api: str = "anthropic"):
    args = ["evaluate", "--queries", str(query_set), "--db", str(db), "--out-dir", str(out), "--provider", api, "--concurrency", "1"]
    return invoke([*args, *extra], env_for(server, api))


def complete_lines(out: Path) -> tuple[list[dict], bytes]:
    """Every line of the one run file in ``out`` parsed (each must be a whole JSON object), and its bytes."""
    [path] = sorted(out.glob("*.jsonl"))
    data = path.read_bytes()
    assert data.endswith(b"\n"), "the file ends inside a line"
    return [json.loads(line) for line in data.decode("utf-8").splitlines()], data


def judge_requests(server) -> int:
    return len(server.requests)


# -- the judgment cache's disk fills ---------------------------------------------------------------------------


def cache_that_fills(monkeypatch, free_pages: int) -> list:
    """Every judgment cache opened from now on has room for ``free_pages`` more pages of 4 KiB (SQLite's
    max_page_count: a write beyond fails with SQLITE_FULL, "database or disk is full", as on a full disk).
    Returns the caches opened."""
    opened: list = []

    def init(self, *args, **kwargs):
        REAL_CACHE_INIT(self, *args, **kwargs)
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        self.conn.execute(f"PRAGMA max_page_count = {pages + free_pages}")
        opened.append(self)

    monkeypatch.setattr(cache_module.JudgmentCache, "__init__", init)
    return opened


def test_a_full_disk_under_the_cache_keeps_what_was_paid_stops_spending_and_says_where(monkeypatch, query_set, db_copy, tmp_path):
    cache = tmp_path / "judgments.sqlite"
    opened = cache_that_fills(monkeypatch, free_pages=12)
    with FakeLLMServer() as server:
        result = evaluate(server, query_set, db_copy, tmp_path / "runs", "--cache", str(cache))
        spent = judge_requests(server)
    assert result.exit_code == 3, result.output
    assert f"the disk holding the judgment cache {cache} is full" in result.output
    assert "OperationalError" not in result.output and "internal error" not in result.output
    lines, _ = complete_lines(tmp_path / "runs")
    evaluations = [line for line in lines if line["type"] == "evaluation"]
    summary = lines[-1]
    # the query being judged when the cache filled kept its paid labels in its line; no query started after it
    assert 1 <= len(evaluations) < 15 and not [line for line in lines if line["type"] == "error"]
    assert summary["stopReason"] == "disk_full" and summary["evaluated"] == len(evaluations)
    assert spent == sum(e["usage"]["calls"] for e in evaluations), "a call was made for a query started after the disk filled"
    assert opened[0].failure is not None and opened[0].failure.reason == "disk_full"
    # room again: --resume judges the rest
    monkeypatch.setattr(cache_module.JudgmentCache, "__init__", REAL_CACHE_INIT)
    [run] = sorted((tmp_path / "runs").glob("*.jsonl"))
    with FakeLLMServer() as server:
        args = ["evaluate", "--resume", str(run), "--db", str(db_copy), "--cache", str(cache), "--out-dir", str(tmp_path / "again")]
        again = invoke([*args, "--provider", "anthropic"], env_for(server, "anthropic"))
    assert again.exit_code == 0, again.output
    lines, _ = complete_lines(tmp_path / "again")
    assert lines[-1]["evaluated"] == 15 and lines[-1]["failed"] == 0


def test_a_full_disk_under_the_cache_in_a_batch_run_keeps_the_labels_in_the_lines(monkeypatch, query_set, db_copy, tmp_path):
    cache = tmp_path / "judgments.sqlite"
    cache_that_fills(monkeypatch, free_pages=12)
    with FakeLLMServer() as server:
        result = evaluate(server, query_set, db_copy, tmp_path / "runs", "--cache", str(cache), "--batch")
    assert result.exit_code == 3, result.output
    assert f"the disk holding the judgment cache {cache} is full" in result.output
    lines, _ = complete_lines(tmp_path / "runs")
    # every query was already started when the labels came back: each is finished, none fails for the cache
    assert lines[-1]["evaluated"] == 15 and lines[-1]["failed"] == 0 and lines[-1]["stopReason"] == "disk_full"


# -- the run file's disk fills ------------------------------------------------------------------------------------


class FullDisk:
    """``os`` as the run writer sees it, on a disk that fills after ``room`` bytes: the write that crosses
    the limit writes what fits and returns (a short write), the next raises ENOSPC."""

    def __init__(self, room: int):
        self.room = room

    def __getattr__(self, name: str):
        return getattr(os, name)

    def write(self, fd: int, data) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        part = bytes(data[: self.room])
        written = os.write(fd, part)
        self.room -= written
        return written

    def ftruncate(self, fd: int, length: int) -> None:
        before = os.fstat(fd).st_size
        os.ftruncate(fd, length)
        self.room += max(0, before - length)  # truncating gives the space back


def test_a_full_disk_under_the_run_file_stops_the_run_with_exit_3_and_no_half_line(monkeypatch, query_set, db_copy, tmp_path):
    disk = FullDisk(room=120_000)  # run_start and a few evaluation lines
    monkeypatch.setattr(run_write, "os", disk)
    with FakeLLMServer() as server:
        result = evaluate(server, query_set, db_copy, tmp_path / "runs", "--no-cache")
        spent = judge_requests(server)
    assert result.exit_code == 3, result.output
    [path] = sorted((tmp_path / "runs").glob("*.jsonl"))
    assert f"the disk holding the run file {path} is full (No space left on device)" in result.output
    assert "internal error" not in result.output and "a bug in judge-runner" not in result.output
    lines, data = complete_lines(tmp_path / "runs")
    evaluations = [line for line in lines if line["type"] == "evaluation"]
    assert lines[0]["type"] == "run_start" and 1 <= len(evaluations) < 15
    # the line that did not fit was taken back out, which made room for the (smaller) summary: it says why
    assert lines[-1]["type"] == "summary" and lines[-1]["stopReason"] == "disk_full" and lines[-1]["evaluated"] == len(evaluations)
    # the query whose line did not fit was the last one judged (at most ten labels and a list verdict): nothing after it
    assert 0 < spent - sum(e["usage"]["calls"] for e in evaluations) <= 11


def test_a_batch_line_that_does_not_fit_stops_the_batch_run_and_says_which_batch(monkeypatch, query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:  # the sizes of run_start (with the query-set card) and of the first batch line
        server.batches.polls_before_done = 1
        assert evaluate(server, query_set, db_copy, tmp_path / "whole", "--no-cache", "--batch").exit_code == 0
    whole, data = complete_lines(tmp_path / "whole")
    start, first_batch = (len(line) for line in data.splitlines(keepends=True)[:2])
    assert whole[1]["type"] == "batch"
    disk = FullDisk(room=start + first_batch // 2)  # run_start fits; the batch line (150 custom ids) does not
    monkeypatch.setattr(run_write, "os", disk)
    with FakeLLMServer() as server:
        server.batches.polls_before_done = 10**9  # it would never end: the run must not wait for it
        result = evaluate(server, query_set, db_copy, tmp_path / "runs", "--no-cache", "--batch")
        [batch] = server.batches.submitted
    assert result.exit_code == 3, result.output
    assert "the disk holding the run file" in result.output and "internal error" not in result.output
    assert f"batch {batch['id']} (150 requests) was submitted but could not be recorded" in result.output
    assert f"batch {batch['id']} is still in flight and was NOT canceled" in result.output
    lines, _ = complete_lines(tmp_path / "runs")
    assert lines[0]["type"] == "run_start" and "batch" not in [line["type"] for line in lines]


def test_a_summary_that_does_not_fit_makes_the_run_incomplete(monkeypatch, query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        whole = evaluate(server, query_set, db_copy, tmp_path / "whole", "--no-cache")
    assert whole.exit_code == 0
    _, data = complete_lines(tmp_path / "whole")
    summary_bytes = len(data.splitlines(keepends=True)[-1])
    monkeypatch.setattr(run_write, "os", FullDisk(room=len(data) - summary_bytes // 2))  # all but half the summary
    with FakeLLMServer() as server:
        result = evaluate(server, query_set, db_copy, tmp_path / "runs", "--no-cache")
    assert result.exit_code == 3, result.output
    assert "the summary could not be written: the disk holding the run file" in result.output
    lines, _ = complete_lines(tmp_path / "runs")
    assert [line["type"] for line in lines].count("evaluation") == 15 and lines[-1]["type"] == "evaluation"


def test_a_query_set_that_cannot_be_saved_beside_the_run_is_exit_3_naming_it(monkeypatch, query_set, db_copy, tmp_path):
    from judge_runner.app import steps

    real = Path.write_text

    def write_text(self, *args, **kwargs):
        if self.name.endswith(".queries.json"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(steps.Path, "write_text", write_text)
    with FakeLLMServer() as server:
        result = evaluate(server, query_set, db_copy, tmp_path / "runs", "--no-cache")
        assert server.requests == []
    assert result.exit_code == 3, result.output
    assert ".queries.json is full" in result.output and "internal error" not in result.output


# -- a judgment cache damaged deep inside -------------------------------------------------------------------------


def damage(path: Path, keep_pages: int = 8) -> None:
    """Overwrite every page of the SQLite file ``path`` after the first ``keep_pages`` (the schema and the
    tables' root pages: the file still opens) with bytes that are no B-tree page."""
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(4096 * keep_pages)
        f.write(b"\xa5" * (size - 4096 * keep_pages))


def test_a_cache_damaged_deep_inside_is_one_clear_error_naming_the_file(query_set, db_copy, tmp_path):
    cache = tmp_path / "judgments.sqlite"
    with FakeLLMServer() as server:
        first = evaluate(server, query_set, db_copy, tmp_path / "first", "--cache", str(cache))
    assert first.exit_code == 0, first.output
    import sqlite3

    with sqlite3.connect(cache) as conn:  # everything into the main file, so that damaging it damages the judgments
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert cache.stat().st_size > 4096 * 12
    damage(cache)
    with FakeLLMServer() as server:
        result = evaluate(server, query_set, db_copy, tmp_path / "runs", "--cache", str(cache))
        spent = judge_requests(server)
    assert result.exit_code == 3, result.output
    assert f"the judgment cache {cache} is damaged (database disk image is malformed)" in result.output
    assert "move it away" in result.output and "DatabaseError" not in result.output
    lines, _ = complete_lines(tmp_path / "runs")
    assert not [line for line in lines if line["type"] == "error"], "the damage failed queries one by one"
    assert lines[-1]["stopReason"] == "cache_damaged" and spent == 0


# -- on a real tiny tmpfs (a private mount namespace) ---------------------------------------------------------------


def _can_mount_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        done = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


tmpfs = pytest.mark.skipif(not _can_mount_tmpfs(), reason="cannot mount a tmpfs in a user namespace here (unshare -rm)")


def on_tiny_tmpfs(mount: Path, size: str, copy_to: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run ``judge-runner ARGS`` with a tmpfs of ``size`` mounted on ``mount`` (a private mount namespace,
    gone when the command ends: its files are copied to ``copy_to`` first)."""
    mount.mkdir(parents=True, exist_ok=True)
    copy_to.mkdir(parents=True, exist_ok=True)
    command = " ".join(f"'{a}'" for a in [sys.executable, "-m", "judge_runner.cli", *args])
    script = f"mount -t tmpfs -o size={size} tmpfs '{mount}' && {command}; rc=$?; cp -a '{mount}/.' '{copy_to}/'; exit $rc"
    full = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, env=full, timeout=300)


@tmpfs
def test_on_a_real_full_disk_the_run_file_ends_with_a_whole_line_and_exit_3(query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        args = [
            "evaluate",
            "--queries",
            str(query_set),
            "--db",
            str(db_copy),
            "--out-dir",
            str(tmp_path / "tiny"),
            "--provider",
            "anthropic",
        ]
        done = on_tiny_tmpfs(
            tmp_path / "tiny", "48k", tmp_path / "copy", [*args, "--no-cache", "--concurrency", "1"], env_for(server, "anthropic")
        )
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert "is full (No space left on device)" in output and "internal error" not in output
    lines, _ = complete_lines(tmp_path / "copy")
    assert lines[0]["type"] == "run_start" and all(line["type"] in ("run_start", "evaluation", "summary") for line in lines)
    if lines[-1]["type"] == "summary":  # the line that did not fit was taken back out: the smaller summary may fit
        assert lines[-1]["stopReason"] == "disk_full" and lines[-1]["evaluated"] == len(lines) - 2


@tmpfs
def test_on_a_real_full_disk_under_the_cache_the_run_stops_and_names_it(query_set, db_copy, tmp_path):
    cache = tmp_path / "tiny" / "judgments.sqlite"
    with FakeLLMServer() as server:
        args = [
            "evaluate",
            "--queries",
            str(query_set),
            "--db",
            str(db_copy),
            "--out-dir",
            str(tmp_path / "runs"),
            "--provider",
            "anthropic",
        ]
        done = on_tiny_tmpfs(
            tmp_path / "tiny", "96k", tmp_path / "copy", [*args, "--cache", str(cache), "--concurrency", "1"], env_for(server, "anthropic")
        )
    output = done.stdout + done.stderr
    assert done.returncode == 3, output
    assert f"the disk holding the judgment cache {cache} is full" in output and "OperationalError" not in output
    lines, _ = complete_lines(tmp_path / "runs")
    assert lines[-1]["stopReason"] == "disk_full" and 1 <= lines[-1]["evaluated"] < 15
