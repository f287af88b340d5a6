"""The default backend: one SQLite file with an FTS5 table (BM25) and float32 chunk vectors searched
exactly (a few milliseconds up to ~10^5 chunks, and no extension to load).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from judge_runner.corpus.chunk import Chunk
from judge_runner.embed.base import DIMENSION, TextEmbedder
from judge_runner.embed.registry import choose, mismatch_advice
from judge_runner.search.base import IndexMismatchError
from judge_runner.search.hybrid import FIELD_WEIGHTS, ChunkRow, ChunkSearch
from judge_runner.search.settings import SearchSettings
from judge_runner.search.text import fts5_match_expression, lexical_text, path_terms

__all__ = ["SQLiteIndex", "IndexMismatchError", "IndexBusyError", "IndexAccessError", "SCHEMA_VERSION", "BM25_WEIGHTS", "BUSY_TIMEOUT_S"]

SCHEMA_VERSION = "1"
# Seconds a connection waits for another process's lock (SQLite's busy timeout; Python's default is 5)
# before IndexBusyError: long enough for another `index` to commit its current batch of 256 chunks
# (about 5 s of embedding on a 2-core machine, more when loaded), short enough that a stuck lock is
# reported within a minute.
BUSY_TIMEOUT_S = 60.0


class IndexBusyError(RuntimeError):
    """Another process held the index's lock for longer than the busy timeout."""


class IndexAccessError(PermissionError):
    """The index or its folder cannot be written, or a read-only folder holds changes SQLite cannot read
    without writing there. The message names the path and what to do."""


_SQLITE_READONLY, _SQLITE_CANTOPEN = 8, 14  # https://www.sqlite.org/rescode.html


def _cannot_write(path: Path, cause: object) -> IndexAccessError:
    folder = path.parent
    return IndexAccessError(
        f"cannot write the index {path}: {cause}; the file and its folder {folder} must be writable (SQLite "
        f"writes the index and its -wal and -shm files there); make them writable, or give --db a path in a "
        f"folder you can write (searching a read-only index needs no write access)"
    )


@contextmanager
def _writable(path: Path) -> Iterator[None]:
    """Turn SQLite's read-only and cannot-open errors into :class:`IndexAccessError`."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code in (_SQLITE_READONLY, _SQLITE_CANTOPEN):
            raise _cannot_write(path, exc) from None
        raise


def _connect_writable(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A writing connection, the folder created when missing. Raises IndexAccessError."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IndexAccessError(
            f"cannot create the folder {path.parent} for the index {path} ({exc.strerror or exc}); give --db a path in a folder you can write"
        ) from None
    if path.exists() and not os.access(path, os.W_OK):
        raise _cannot_write(path, f"{path} is read-only")
    if not os.access(path.parent, os.W_OK):
        raise _cannot_write(path, f"its folder {path.parent} is read-only")
    with _writable(path):
        return sqlite3.connect(path, check_same_thread=False, timeout=busy_timeout_s)


def _connect_readonly(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection that never writes (``mode=ro``; in a read-only folder ``immutable=1``, right only
    without a ``-wal`` file). Raises IndexAccessError when a ``-wal`` file holds changes."""
    uri = path.resolve().as_uri()
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False, timeout=busy_timeout_s)
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF != _SQLITE_CANTOPEN:
            raise
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise IndexAccessError(
            f"the index {path} is in a read-only folder and {wal.name} beside it holds changes not yet in the file, which "
            f"SQLite cannot read without writing a -shm file there; open it once where its folder {path.parent} is writable "
            "(any judge-runner search does; the changes are then folded into the file), or search a copy"
        )
    return sqlite3.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False)


# BM25 column weights for (body, anchor, path): a heading or file-name match counts more than a body match.
BM25_WEIGHTS = FIELD_WEIGHTS

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL UNIQUE,
    sha256 TEXT NOT NULL,
    fmt TEXT NOT NULL,
    size INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ord INTEGER NOT NULL,
    anchor TEXT,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL,
    text TEXT NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    body, anchor, path, tokenize = 'porter unicode61 remove_diacritics 2'
);
"""


class SQLiteIndex(ChunkSearch):
    """A search index in one SQLite file; a context manager. ``embedder`` None: the index's own, else the
    default. Raises IndexMismatchError for another model or schema version, IndexAccessError when it
    cannot be written (or, ``readonly``, read without writing), IndexBusyError past :data:`BUSY_TIMEOUT_S`.
    """

    def __init__(
        self, path: Path | str, settings: SearchSettings | None = None, embedder: TextEmbedder | None = None, readonly: bool = False
    ):
        self.path = Path(path)
        self.settings = settings or SearchSettings()
        self.busy_timeout_s = BUSY_TIMEOUT_S
        if readonly:  # search needs no write access: a shared or read-only index still serves queries
            with self._busy():
                self.conn = _connect_readonly(self.path, self.busy_timeout_s)
        else:
            self.conn = _connect_writable(self.path, self.busy_timeout_s)
            with self._busy(), _writable(self.path):
                self.conn.execute("PRAGMA foreign_keys = ON")
                self.conn.execute("PRAGMA journal_mode = WAL")
                self.conn.executescript(_SCHEMA)
        with self._busy():
            self._check_meta(readonly, embedder)
        self._matrix: np.ndarray | None = None
        self._matrix_ids: np.ndarray | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> SQLiteIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def _busy(self) -> Iterator[None]:
        """Turn SQLite's "database is locked" into IndexBusyError."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            raise IndexBusyError(
                f"the index {self.path} is locked by another process (waited {self.busy_timeout_s:g} s); let the other "
                "judge-runner command finish, or use another --db"
            ) from None

    def _check_meta(self, readonly: bool, embedder: TextEmbedder | None) -> None:
        """Choose the embedder and check the meta against it. Raises IndexMismatchError."""
        meta = dict(self.conn.execute("SELECT key, value FROM meta"))
        self.embedder = embedder if embedder is not None else choose(None, meta.get("embedding_model"))
        expected = {
            "schema_version": SCHEMA_VERSION,
            "embedding_model": self.embedder.name,
            "embedding_dim": str(DIMENSION),
        }
        if not meta and readonly:
            raise IndexMismatchError(f"{self.path} is an empty index; run `judge-runner index` first")
        if not meta:
            with self.conn:
                self.conn.executemany("INSERT INTO meta VALUES (?, ?)", expected.items())
            return
        if meta.get("embedding_model") != expected["embedding_model"] and not readonly and self._holds_nothing():
            # an index that never got a document (a first index that failed, say, exporting its model) is
            # taken over by whichever embedder indexes into it first
            with self.conn:
                self.conn.execute("UPDATE meta SET value = ? WHERE key = 'embedding_model'", (expected["embedding_model"],))
                self.conn.execute("DELETE FROM meta WHERE key = 'embedder'")
            meta["embedding_model"] = expected["embedding_model"]
        for key, value in expected.items():
            if key == "embedding_model" and meta.get(key) != value:
                raise IndexMismatchError(
                    f"the index {self.path} was built with embedding_model={meta.get(key)!r}, this process embeds with "
                    f"{value!r}; {mismatch_advice(meta.get(key), value)}"
                )
            if meta.get(key) != value:
                raise IndexMismatchError(
                    f"the index {self.path} was built with {key}={meta.get(key)!r}, this judge-runner uses "
                    f"{value!r}; delete the file (or pass another --db) and run `judge-runner index` again"
                )

    def _holds_nothing(self) -> bool:
        try:
            return bool(self.conn.execute("SELECT (SELECT COUNT(*) FROM documents) + (SELECT COUNT(*) FROM chunks)").fetchone()[0] == 0)
        except sqlite3.OperationalError:  # an index of another schema: the schema check says so
            return False

    # -- writing ---------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        """Raises IndexBusyError."""
        with self._busy():
            self.conn.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))

    def document_hashes(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT source, sha256 FROM documents"))

    def replace_document(self, source: str, sha256: str, fmt: str, size: int, chunks: list, vectors: np.ndarray) -> None:
        """Insert or replace a document and its chunks (``chunks[i]`` embedded as ``vectors[i]``). Raises
        IndexBusyError."""
        if len(chunks) != len(vectors):
            raise ValueError("one vector per chunk is required")
        with self._busy():
            self._replace_document(source, sha256, fmt, size, chunks, vectors)

    def _replace_document(self, source: str, sha256: str, fmt: str, size: int, chunks: list, vectors: np.ndarray) -> None:
        self.remove_documents([source])
        cur = self.conn.execute("INSERT INTO documents (source, sha256, fmt, size) VALUES (?, ?, ?, ?)", (source, sha256, fmt, size))
        doc_id = cur.lastrowid
        path_words = path_terms(source)
        for ord_, (chunk, vector) in enumerate(zip(chunks, vectors)):
            cur = self.conn.execute(
                "INSERT INTO chunks (doc_id, ord, anchor, line_start, line_end, text, embedding) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (doc_id, ord_, chunk.anchor, chunk.line_start, chunk.line_end, chunk.text, np.asarray(vector, dtype=np.float32).tobytes()),
            )
            self.conn.execute(
                "INSERT INTO chunks_fts (rowid, body, anchor, path) VALUES (?, ?, ?, ?)",
                (cur.lastrowid, lexical_text(chunk.text), lexical_text(chunk.anchor or ""), path_words),
            )
        self._matrix = None

    def remove_documents(self, sources: Iterable[str]) -> int:
        """Delete documents by source; returns how many existed. Raises IndexBusyError."""
        with self._busy():
            return self._remove_documents(sources)

    def _remove_documents(self, sources: Iterable[str]) -> int:
        removed = 0
        for source in sources:
            row = self.conn.execute("SELECT id FROM documents WHERE source = ?", (source,)).fetchone()
            if row is None:
                continue
            self.conn.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE doc_id = ?)", (row[0],))
            self.conn.execute("DELETE FROM chunks WHERE doc_id = ?", (row[0],))
            self.conn.execute("DELETE FROM documents WHERE id = ?", (row[0],))
            removed += 1
        self._matrix = None
        return removed

    def commit(self) -> None:
        """Raises IndexBusyError."""
        with self._busy():
            self.conn.commit()

    def rollback(self) -> None:
        self.conn.rollback()

    def stats(self) -> dict[str, int]:
        docs = self.conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        chunks = self.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return {"documents": docs, "chunks": chunks}

    # -- searching -------------------------------------------------------------------------------
    def _fts(self, query: str, depth: int) -> list[tuple[int, float]]:
        expression = fts5_match_expression(query)
        if expression is None:
            return []
        rows = self.conn.execute(
            f"SELECT rowid, bm25(chunks_fts, {', '.join(map(str, BM25_WEIGHTS))}) AS s FROM chunks_fts "
            "WHERE chunks_fts MATCH ? ORDER BY s, rowid LIMIT ?",  # equal BM25 scores in chunk order
            (expression, depth),
        ).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows]

    def _load_matrix(self) -> None:
        rows = self.conn.execute("SELECT id, embedding FROM chunks ORDER BY id").fetchall()
        self._matrix_ids = np.array([r[0] for r in rows], dtype=np.int64)
        if rows:
            self._matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), DIMENSION)
        else:
            self._matrix = np.zeros((0, DIMENSION), dtype=np.float32)

    def _vector(self, query: str, depth: int) -> list[tuple[int, float]]:
        if not query.strip():
            return []
        if self._matrix is None:
            self._load_matrix()
        assert self._matrix is not None and self._matrix_ids is not None
        if len(self._matrix) == 0:
            return []
        qvec = self._query_vector(query)
        sims = self._matrix @ qvec
        top = np.argsort(-sims, kind="stable")[:depth]  # equal cosines in chunk-id order (the matrix's order)
        return [(int(self._matrix_ids[i]), float(sims[i])) for i in top]

    def _chunk_rows(self, ids: list[int]) -> list[ChunkRow]:
        if not ids:
            return []
        return self.conn.execute(
            f"SELECT c.id, d.source, c.anchor, c.line_start, c.line_end, c.text FROM chunks c "
            f"JOIN documents d ON d.id = c.doc_id WHERE c.id IN ({','.join('?' * len(ids))})",
            ids,
        ).fetchall()

    def _document_chunks(self, sources: list[str]) -> dict[str, list[Chunk]]:
        out: dict[str, list[Chunk]] = {}
        for i in range(0, len(sources), 500):  # well under SQLite's limit of bound variables
            part = sources[i : i + 500]
            rows = self.conn.execute(
                "SELECT d.source, c.anchor, c.line_start, c.line_end, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
                f"WHERE d.source IN ({','.join('?' * len(part))}) ORDER BY d.source, c.ord",
                part,
            ).fetchall()
            for source, anchor, start, end, text in rows:
                out.setdefault(source, []).append(Chunk(text, anchor, start, end))
        return out
