"""The judgment cache: labels already paid for, in one SQLite file (WAL mode, shared by processes) keyed by
:class:`JudgmentKey`. The first writer wins. The file also holds people's imported qrels. A failure once
open raises :class:`CacheError` and is kept as :attr:`JudgmentCache.failure`; the run loop then starts no
new query. See docs/judge-protocol.md, "The judgment cache".
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Self, TypeVar

from judge_runner.judging.cache_failures import CacheError, connect_readonly, failure_of, foreign_file, opening_failure
from judge_runner.judging.cache_keys import CACHE_MODES, CACHE_VERSION, JudgmentKey, batch_context, topic_key

T = TypeVar("T")
__all__ = ["CACHE_MODES", "CACHE_VERSION", "CacheError", "CachedJudgment", "JudgmentCache", "JudgmentKey", "batch_context", "topic_key"]

SCHEMA_VERSION = 1
"""Version of the tables in the file; a file written by a newer judge-runner is refused."""

ADDED_COLUMNS = {"detector_flagged": "INTEGER", "judge": "TEXT", "topic": "TEXT", "docid": "TEXT", "judge_key": "TEXT"}
"""Nullable columns added after schema 1 (NULL: stored before); a key lookup never reads them."""
HUMAN_COLUMNS = {"query": "TEXT"}
"""Nullable columns of ``human_qrels`` added after schema 1: ``query``, the text graded (NULL: not known)."""

BUSY_TIMEOUT_S = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS judgments (
    key TEXT PRIMARY KEY,
    cache_version INTEGER NOT NULL,
    mode TEXT NOT NULL,
    label INTEGER CHECK (label IS NULL OR label BETWEEN 0 AND 3),
    reason TEXT NOT NULL DEFAULT '',
    injection_suspected INTEGER NOT NULL DEFAULT 0,
    model_returned TEXT,
    usage TEXT NOT NULL DEFAULT '{}',
    cost_usd REAL,
    latency_s REAL,
    created_at REAL NOT NULL,
    payload TEXT,
    detector_flagged INTEGER,
    judge TEXT,
    topic TEXT,
    docid TEXT,
    judge_key TEXT
);
CREATE INDEX IF NOT EXISTS judgments_created ON judgments (created_at);
CREATE TABLE IF NOT EXISTS human_qrels (
    name TEXT NOT NULL,
    qid TEXT NOT NULL,
    docid TEXT NOT NULL,
    grade INTEGER NOT NULL,
    imported_at REAL NOT NULL,
    query TEXT,
    PRIMARY KEY (name, qid, docid)
);
"""


@dataclass(frozen=True)
class CachedJudgment:
    """A stored judgment. ``label`` is None for a list-level verdict (held in ``payload``);
    ``injection_suspected`` is the judge's own flag (the detector is re-run at every run);
    ``cost_usd`` in USD (None: unknown); ``latency_s`` in seconds; ``created_at`` in Unix seconds. None in
    ``detector_flagged``, ``judge``, ``topic``, ``docid`` or ``judge_key`` means not recorded; a label
    without ``topic`` joins no pooled qrels."""

    label: int | None
    reason: str = ""
    injection_suspected: bool = False
    model_returned: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    latency_s: float | None = None
    created_at: float | None = None
    payload: Any = None
    detector_flagged: bool | None = None
    judge: str | None = None
    topic: str | None = None
    docid: str | None = None
    judge_key: str | None = None


def _row_to_judgment(row: sqlite3.Row) -> CachedJudgment:
    return CachedJudgment(
        label=row["label"],
        reason=row["reason"],
        injection_suspected=bool(row["injection_suspected"]),
        model_returned=row["model_returned"],
        usage=json.loads(row["usage"]),
        cost_usd=row["cost_usd"],
        latency_s=row["latency_s"],
        created_at=row["created_at"],
        payload=json.loads(row["payload"]) if row["payload"] is not None else None,
        detector_flagged=None if row["detector_flagged"] is None else bool(row["detector_flagged"]),
        judge=row["judge"],
        topic=row["topic"],
        docid=row["docid"],
        judge_key=row["judge_key"],
    )


class JudgmentCache:
    """The cache file at ``path``, created when missing; thread-safe. Raises :class:`CacheError` when the
    file cannot be used. ``failure``: the first CacheError raised once open."""

    def __init__(self, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S, readonly: bool = False):
        self.path = Path(path)
        self._lock = threading.Lock()
        self.failure: CacheError | None = None
        if self.path.is_dir():
            raise CacheError(f"{self.path} is a folder, not a judgment cache file; pass the cache file's path with --cache")
        foreign = foreign_file(self.path)
        if foreign is not None:
            raise foreign
        try:
            if readonly:
                self.conn = connect_readonly(self.path, busy_timeout_s)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.conn = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        except OSError as exc:
            raise CacheError(f"cannot open the judgment cache {self.path}: {exc}") from None
        except sqlite3.Error as exc:
            raise opening_failure(self.path, exc, busy_timeout_s) from None
        self.conn.row_factory = sqlite3.Row
        try:
            if readonly:
                self._empty_readonly(self.conn)
                self._check_version(self.conn)
                self._complete_readonly(self.conn)
            else:
                self._open_for_writing(busy_timeout_s)
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise opening_failure(self.path, exc, busy_timeout_s) from None
        except CacheError:
            self.conn.close()
            raise

    def _open_for_writing(self, busy_timeout_s: float) -> None:
        self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        mode = self._switch_to_wal(busy_timeout_s)
        if mode.lower() != "wal":
            raise CacheError(f"the judgment cache {self.path} could not switch to WAL mode (got {mode}); is it on a network drive?")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self._write(self._create)

    def _switch_to_wal(self, busy_timeout_s: float) -> str:
        """The journal mode in force after asking for WAL, retrying for ``busy_timeout_s`` seconds: SQLite
        answers "database is locked" at once, without its busy handler, while another connection switches.
        Raises sqlite3.OperationalError when the file stays locked."""
        deadline = time.monotonic() + busy_timeout_s
        while True:
            try:
                return str(self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def _create(self, conn: sqlite3.Connection) -> None:
        # statement by statement: executescript() would COMMIT the BEGIN IMMEDIATE around us
        for statement in filter(str.strip, _SCHEMA.split(";")):
            conn.execute(statement)
        # columns added since schema 1 (nullable, so files written before them stay readable by every version)
        have = {r[1] for r in conn.execute("PRAGMA table_info(judgments)")}
        for column in ADDED_COLUMNS:
            if column not in have:
                conn.execute(f"ALTER TABLE judgments ADD COLUMN {column} {ADDED_COLUMNS[column]}")
        have = {r[1] for r in conn.execute("PRAGMA table_info(human_qrels)")}
        for column in HUMAN_COLUMNS:
            if column not in have:
                conn.execute(f"ALTER TABLE human_qrels ADD COLUMN {column} {HUMAN_COLUMNS[column]}")
        conn.execute("CREATE INDEX IF NOT EXISTS judgments_topic ON judgments (judge_key, topic)")
        if self._check_version(conn) is None:
            conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    @staticmethod
    def _empty_readonly(conn: sqlite3.Connection) -> None:
        """An empty file reads as an empty cache: empty tables in the connection's temp schema."""
        if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
            for statement in filter(str.strip, _SCHEMA.split(";")):
                conn.execute(statement.replace("CREATE TABLE", "CREATE TEMP TABLE"))

    @staticmethod
    def _complete_readonly(conn: sqlite3.Connection) -> None:
        """A file older than :data:`ADDED_COLUMNS`, read unchanged: a temp view adds them as NULL."""
        have = {r[1] for r in conn.execute("PRAGMA table_info(judgments)")}
        missing = [column for column in ADDED_COLUMNS if column not in have]
        if have and missing:
            extra = ", ".join(f"NULL AS {column}" for column in missing)
            conn.execute(f"CREATE TEMP VIEW judgments AS SELECT *, {extra} FROM main.judgments")
        have = {r[1] for r in conn.execute("PRAGMA table_info(human_qrels)")}
        missing = [column for column in HUMAN_COLUMNS if column not in have]
        if have and missing:
            extra = ", ".join(f"NULL AS {column}" for column in missing)
            conn.execute(f"CREATE TEMP VIEW human_qrels AS SELECT *, {extra} FROM main.human_qrels")

    def _check_version(self, conn: sqlite3.Connection) -> str | None:
        """The file's schema version (None: not written yet). Raises CacheError for a newer one, and
        sqlite3.DatabaseError for a file that is no cache or cannot be read."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise CacheError(
                f"the judgment cache {self.path} was written by a newer judge-runner (schema {row[0]}); upgrade, or use another --cache path"
            )
        return None if row is None else str(row[0])

    def _write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` in one BEGIN IMMEDIATE transaction; roll back on any error."""
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(self.conn, *args)
            except BaseException:
                if self.conn.in_transaction:  # SQLite may have rolled back already (a full disk)
                    self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
            return result

    def _failed(self, exc: BaseException) -> CacheError:
        """Keep the first failure and return the error to raise."""
        error = failure_of(self.path, exc)
        self.failure = self.failure or error
        return error

    @contextmanager
    def _guarded(self) -> Iterator[None]:
        """Turn an SQLite error into the cache's CacheError, in the words every command uses."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise self._failed(exc) from exc

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self.conn.close()

    # -- judgments -----------------------------------------------------------------------------------

    def get(self, key: str) -> CachedJudgment | None:
        """The judgment under ``key`` (a :meth:`JudgmentKey.digest`), or None. Raises CacheError."""
        try:
            with self._lock:
                row = self.conn.execute("SELECT * FROM judgments WHERE key = ?", (key,)).fetchone()
            return _row_to_judgment(row) if row else None
        except sqlite3.DatabaseError as exc:
            raise self._failed(exc) from exc

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedJudgment]:
        """``{key: judgment}`` for the stored keys. Raises CacheError."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, CachedJudgment] = {}
        try:
            with self._lock:
                for start in range(0, len(keys), 500):
                    part = keys[start : start + 500]
                    rows = self.conn.execute(f"SELECT * FROM judgments WHERE key IN ({','.join('?' * len(part))})", part).fetchall()
                    found.update((row["key"], _row_to_judgment(row)) for row in rows)
        except sqlite3.DatabaseError as exc:
            raise self._failed(exc) from exc
        return found

    def judge_labels(self, judge_key: str, topics: Iterable[str], models: Iterable[str] | None = None) -> dict[tuple[str, str], list[int]]:
        """``{(topic, docid): [label, ...]}``: every label of the judge ``judge_key`` on ``topics``; with
        ``models``, only those whose returned model is one of them or unknown. Raises CacheError."""
        topics, wanted = list(dict.fromkeys(topics)), None if models is None else set(models)
        out: dict[tuple[str, str], list[int]] = {}
        with self._guarded(), self._lock:
            for start in range(0, len(topics), 500):
                part = topics[start : start + 500]
                rows = self.conn.execute(
                    "SELECT topic, docid, label, model_returned FROM judgments WHERE judge_key = ? AND label IS NOT NULL"
                    f" AND docid IS NOT NULL AND topic IN ({','.join('?' * len(part))})",
                    [judge_key, *part],
                ).fetchall()
                for topic, docid, label, model in rows:
                    if not wanted or model is None or model in wanted:
                        out.setdefault((topic, docid), []).append(int(label))
        return out

    def put(self, key: str, judgment: CachedJudgment, mode: str) -> bool:
        """True when stored (the first writer wins). Raises ValueError on a label outside 0-3, an unknown
        mode, or a usage/payload that is not JSON-serialisable."""
        return self.put_many([(key, judgment, mode)]) == 1

    def put_many(self, items: Iterable[tuple[str, CachedJudgment, str]]) -> int:
        """Store ``(key, judgment, mode)`` items in one transaction; returns how many were new. Raises
        CacheError, storing nothing, when the file cannot be written."""
        rows = []
        now = time.time()
        for key, j, mode in items:
            if mode not in CACHE_MODES:
                raise ValueError(f"mode must be one of {', '.join(CACHE_MODES)}, got {mode!r}")
            if j.label is not None and (isinstance(j.label, bool) or j.label not in (0, 1, 2, 3)):
                raise ValueError(f"label must be 0-3 or None, got {j.label!r}")
            try:
                usage = json.dumps(dict(j.usage), allow_nan=False)
                payload = None if j.payload is None else json.dumps(j.payload, allow_nan=False, ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"usage and payload must be JSON-serialisable: {exc}") from None
            rows.append(
                (
                    key,
                    CACHE_VERSION,
                    mode,
                    j.label,
                    j.reason,
                    int(bool(j.injection_suspected)),
                    j.model_returned,
                    usage,
                    j.cost_usd,
                    j.latency_s,
                    j.created_at if j.created_at is not None else now,
                    payload,
                    None if j.detector_flagged is None else int(bool(j.detector_flagged)),
                    j.judge,
                    j.topic,
                    j.docid,
                    j.judge_key,
                )
            )

        def insert(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            conn.executemany(
                "INSERT INTO judgments (key, cache_version, mode, label, reason, injection_suspected, model_returned,"
                " usage, cost_usd, latency_s, created_at, payload, detector_flagged, judge, topic, docid, judge_key)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (key) DO NOTHING",
                rows,
            )
            return conn.total_changes - before

        if not rows:
            return 0
        try:
            return self._write(insert)
        except sqlite3.DatabaseError as exc:
            raise self._failed(exc) from exc

    def stats(self) -> dict[str, Any]:
        """What ``cache stats`` shows: counts by mode, label, flag and judge, ``costUsd`` (known costs, USD),
        ``oldest``/``newest`` (Unix seconds), ``otherVersions`` and people's qrels sets. Raises CacheError."""
        with self._guarded(), self._lock:
            c = self.conn
            total, cost, unknown, oldest, newest, other = c.execute(
                "SELECT count(*), coalesce(sum(cost_usd), 0),"
                " sum(CASE WHEN cost_usd IS NULL THEN 1 ELSE 0 END), min(created_at), max(created_at),"
                " sum(CASE WHEN cache_version != ? THEN 1 ELSE 0 END) FROM judgments",
                (CACHE_VERSION,),
            ).fetchone()
            # flags of labels only (a list verdict flags nothing): by the judge, by the detector, by either
            suspected, by_judge, by_detector, unrecorded = c.execute(
                "SELECT coalesce(sum(CASE WHEN injection_suspected = 1 OR detector_flagged = 1 THEN 1 ELSE 0 END), 0),"
                " coalesce(sum(injection_suspected), 0), coalesce(sum(CASE WHEN detector_flagged = 1 THEN 1 ELSE 0 END), 0),"
                " coalesce(sum(CASE WHEN detector_flagged IS NULL THEN 1 ELSE 0 END), 0) FROM judgments WHERE label IS NOT NULL"
            ).fetchone()
            by_judge_name = {
                (name or "not recorded"): n
                for name, n in c.execute("SELECT judge, count(*) FROM judgments WHERE label IS NOT NULL GROUP BY judge").fetchall()
            }
            by_mode = dict(c.execute("SELECT mode, count(*) FROM judgments GROUP BY mode").fetchall())
            labels = {str(k): v for k, v in c.execute("SELECT label, count(*) FROM judgments WHERE label IS NOT NULL GROUP BY label")}
            tokens_in = tokens_out = 0
            for (usage,) in c.execute("SELECT usage FROM judgments"):
                u = json.loads(usage)
                tokens_in += int(u.get("inputTokens", 0))
                tokens_out += int(u.get("outputTokens", 0))
            human = dict(c.execute("SELECT name, count(*) FROM human_qrels GROUP BY name").fetchall())
        files = [self.path, Path(f"{self.path}-wal")]
        return {
            "path": str(self.path),
            "bytes": sum(p.stat().st_size for p in files if p.exists()),
            "judgments": total,
            "byMode": by_mode,
            "labels": {str(g): labels.get(str(g), 0) for g in range(4)},
            "injectionSuspected": suspected,
            "judgeFlagged": by_judge,
            "detectorFlagged": by_detector,
            "flagsNotRecorded": unrecorded,
            "labelsByJudge": by_judge_name,
            "costUsd": round(cost, 6),
            "unknownCost": unknown or 0,
            "inputTokens": tokens_in,
            "outputTokens": tokens_out,
            "oldest": oldest,
            "newest": newest,
            "otherVersions": other or 0,
            "humanQrels": human,
        }

    def prune(self, older_than: timedelta | float | None = None, *, other_versions: bool = True, now: float | None = None) -> int:
        """Delete judgments older than ``older_than`` (timedelta or seconds; None: any age) and, with
        ``other_versions``, those of another :data:`CACHE_VERSION`; people's qrels are kept. Returns the
        number deleted; no VACUUM. Raises ValueError on a negative age, CacheError (deleting nothing) when
        the file is damaged or cannot be written."""
        seconds = older_than.total_seconds() if isinstance(older_than, timedelta) else older_than
        if seconds is not None and seconds < 0:
            raise ValueError("older_than must be >= 0")
        cutoff = (time.time() if now is None else now) - seconds if seconds is not None else None

        def delete(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            if cutoff is not None:
                conn.execute("DELETE FROM judgments WHERE created_at < ?", (cutoff,))
            if other_versions:
                conn.execute("DELETE FROM judgments WHERE cache_version != ?", (CACHE_VERSION,))
            return conn.total_changes - before

        self.check()  # deleting from a damaged file could lose what a repair would save
        with self._guarded():
            return self._write(delete)

    def check(self) -> None:
        """SQLite's ``quick_check`` (one read of the file). Raises CacheError when any page is damaged."""
        with self._guarded():
            with self._lock:
                problems = [str(row[0]) for row in self.conn.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise self._failed(sqlite3.DatabaseError("database disk image is malformed"))

    # -- people's qrels (used by judge_runner.judging.qrels) -------------------------------------------------

    def replace_human_qrels(self, name: str, rows: Iterable[tuple[str, str, int]], texts: Mapping[str, str] | None = None) -> int:
        """Store ``(qid, docid, grade)`` rows as the qrels set ``name``, replacing it, each with its query's text
        from ``texts`` (``{qid: text}``; a qid not there: text unknown); returns the count."""
        texts = texts or {}
        stored = [(name, qid, docid, int(grade), time.time(), texts.get(qid)) for qid, docid, grade in rows]

        def replace(conn: sqlite3.Connection) -> int:
            conn.execute("DELETE FROM human_qrels WHERE name = ?", (name,))
            conn.executemany("INSERT INTO human_qrels (name, qid, docid, grade, imported_at, query) VALUES (?,?,?,?,?,?)", stored)
            return len(stored)

        with self._guarded():
            return self._write(replace)

    def update_human_qrels(self, name: str, pairs: Mapping[tuple[str, str], int | None], texts: Mapping[str, str] | None = None) -> None:
        """Set (a grade) or remove (None) single ``(qid, docid)`` grades of the qrels set ``name``; ``texts`` as
        :meth:`replace_human_qrels`."""
        now, texts = time.time(), texts or {}

        def update(conn: sqlite3.Connection) -> None:
            for (qid, docid), grade in pairs.items():
                conn.execute("DELETE FROM human_qrels WHERE name = ? AND qid = ? AND docid = ?", (name, qid, docid))
                if grade is not None:
                    conn.execute(
                        "INSERT INTO human_qrels (name, qid, docid, grade, imported_at, query) VALUES (?,?,?,?,?,?)",
                        (name, qid, docid, grade, now, texts.get(qid)),
                    )

        with self._guarded():
            self._write(update)

    def human_qrels(self, names: Iterable[str] | None = None) -> list[tuple[str, str, str, int]]:
        """``(name, qid, docid, grade)`` of people's stored qrels (only ``names`` when given), sorted."""
        return [(name, qid, docid, grade) for name, qid, docid, grade, _ in self.human_rows(names)]

    def human_rows(self, names: Iterable[str] | None = None) -> list[tuple[str, str, str, int, str | None]]:
        """``(name, qid, docid, grade, query text or None)`` of people's stored qrels (only ``names``), sorted."""
        try:
            with self._lock:
                rows = self.conn.execute("SELECT name, qid, docid, grade, query FROM human_qrels ORDER BY name, qid, docid").fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._failed(exc) from exc
        wanted = None if names is None else set(names)
        return [(str(r[0]), str(r[1]), str(r[2]), int(r[3]), r[4]) for r in rows if wanted is None or r[0] in wanted]

    def bind_human_texts(self, names: Iterable[str] | None, texts: Mapping[str, str]) -> int:
        """Give the grades of the sets ``names`` (None: every set) that have no query text the text of their qid
        in ``texts``; returns how many were bound."""
        wanted = None if names is None else sorted(set(names))

        def bind(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            for qid, text in texts.items():
                if wanted is None:
                    conn.execute("UPDATE human_qrels SET query = ? WHERE query IS NULL AND qid = ?", (text, qid))
                for name in wanted or []:
                    conn.execute("UPDATE human_qrels SET query = ? WHERE query IS NULL AND qid = ? AND name = ?", (text, qid, name))
            return conn.total_changes - before

        with self._guarded():
            return self._write(bind)

    def delete_human_qrels(self, name: str) -> int:
        """Remove the qrels set ``name``; returns the number of rows removed."""

        def delete(conn: sqlite3.Connection) -> int:
            return conn.execute("DELETE FROM human_qrels WHERE name = ?", (name,)).rowcount

        with self._guarded():
            return self._write(delete)

    def set_label_design(self, name: str, design: dict | None) -> None:
        """Keep how the qrels set ``name`` was drawn (``label --budget``) in ``meta``; None removes it."""
        key = f"labelDesign:{name}"

        def put(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM meta WHERE key = ?", (key,))
            if design is not None:
                conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, json.dumps(design, sort_keys=True)))

        self._write(put)

    def label_designs(self) -> dict[str, dict]:
        """``{set name: design}`` of the sets kept with a draw's design."""
        try:
            with self._lock:
                rows = self.conn.execute("SELECT key, value FROM meta WHERE key LIKE 'labelDesign:%'").fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._failed(exc) from exc
        out = {}
        for key, value in rows:
            try:
                out[str(key).split(":", 1)[1]] = json.loads(value)
            except (ValueError, IndexError):
                continue
        return out
