"""What can go wrong with the judgment cache's file, in the words every command uses, and the read-only
connection. docs/judge-protocol.md ("The judgment cache") lists each failure's exit code and message.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from judge_runner.core.failures import EXIT_CONFIG, EXIT_INCOMPLETE, JudgeRunnerError, is_disk_full, storage_problem


class CacheError(JudgeRunnerError, RuntimeError):
    """The cache file cannot be used: not a cache, newer, read-only or locked (exit 2); damaged, full or
    failing while used (exit 3). ``reason``: ``cache_error``, ``disk_full``, ``cache_damaged``,
    ``cache_readonly`` or ``cache_locked``."""

    def __init__(self, message: str, reason: str = "cache_error", exit_code: int = EXIT_CONFIG):
        super().__init__(message, exit_code)
        self.reason = reason


_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26  # https://www.sqlite.org/rescode.html
_SQLITE_READONLY, _SQLITE_CANTOPEN = 8, 14  # a read-only file; a file (or its -wal, -shm) that cannot be created


def _sqlite_code(exc: BaseException) -> int | None:
    """SQLite's primary result code of ``exc``, or None."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def _damaged(path: Path, exc: BaseException) -> CacheError:
    return CacheError(
        f"the judgment cache {path} is damaged ({exc}): move it away, or pass another --cache path or --no-cache",
        "cache_damaged",
        EXIT_INCOMPLETE,
    )


def read_only(path: Path, exc: BaseException) -> CacheError:
    """Exit 2: the file or its folder is read-only."""
    return CacheError(
        f"the judgment cache {path} is read-only ({exc}): a cache is written to, and SQLite keeps its -wal and -shm "
        f"files in its folder {path.parent}; make both writable, or pass another --cache path or --no-cache",
        "cache_readonly",
    )


def failure_of(path: Path, exc: BaseException) -> CacheError:
    """A failure of the open cache: exit 3 (full, damaged, I/O), or exit 2 when read-only."""
    if is_disk_full(exc):
        return CacheError(storage_problem("the judgment cache", path, exc)[1], "disk_full", EXIT_INCOMPLETE)
    if _sqlite_code(exc) in (_SQLITE_CORRUPT, _SQLITE_NOTADB) or "malformed" in str(exc):
        return _damaged(path, exc)
    if _sqlite_code(exc) in (_SQLITE_READONLY, _SQLITE_CANTOPEN):
        return read_only(path, exc)
    return CacheError(f"cannot use the judgment cache {path} ({exc})", "cache_error", EXIT_INCOMPLETE)


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file (https://www.sqlite.org/fileformat.html, 1.3)."""


def foreign_file(path: Path) -> CacheError | None:
    """Exit 2 for a non-empty file without :data:`SQLITE_HEADER`, which SQLite might otherwise overwrite;
    None for a missing, empty or SQLite file."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except OSError:
        return None  # missing, or unreadable: the open says why
    if not head or head == SQLITE_HEADER:
        return None
    return not_a_cache(path, "file is not a database")


def opening_failure(path: Path, exc: BaseException, busy_timeout_s: float) -> CacheError:
    """A failure at open: locked longer than ``busy_timeout_s``, full, read-only or not a cache (exit 2);
    damaged (exit 3, as :func:`failure_of` says later)."""
    if "locked" in str(exc):
        return CacheError(f"the judgment cache {path} stayed locked by another process for {busy_timeout_s:g} s", "cache_locked")
    if is_disk_full(exc):
        return CacheError(storage_problem("the judgment cache", path, exc)[1], "disk_full")
    if _sqlite_code(exc) == _SQLITE_CORRUPT or "malformed" in str(exc):
        return _damaged(path, exc)
    if _sqlite_code(exc) in (_SQLITE_READONLY, _SQLITE_CANTOPEN):
        return read_only(path, exc)
    return not_a_cache(path, str(exc))


def not_a_cache(path: Path, why: str) -> CacheError:
    """Exit 2: another file passed as ``--cache``."""
    return CacheError(f"{path} is not a judgment cache ({why}); move it away or pass another --cache path")


def connect_readonly(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection that never writes the file (``mode=ro``; ``immutable=1`` in a read-only folder, where a
    concurrent writer may go unseen). Raises sqlite3.Error, and FileNotFoundError for a missing file."""
    if not path.is_file():
        raise FileNotFoundError(f"no file at {path}")
    uri = path.resolve().as_uri()
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if _sqlite_code(exc) != _SQLITE_CANTOPEN:
            raise
    return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None, check_same_thread=False)
