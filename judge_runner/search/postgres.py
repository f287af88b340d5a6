"""The PostgreSQL backend, with the SQLite backend's contract: BM25 as FTS5 computes it over a ``postings``
table built from a ``tsvector`` (the same pre-tokenisation as SQLite), and pgvector HNSW for embeddings.
Everything lives in one schema, upgraded through :data:`MIGRATIONS`. Query text reaches SQL only as bound
parameters. Searches use a pool; writes use one connection, so searches see committed state only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from judge_runner.core.textproc import query_tokens
from judge_runner.corpus.chunk import Chunk
from judge_runner.embed.base import TextEmbedder
from judge_runner.embed.registry import choose, mismatch_advice
from judge_runner.search.base import IndexMismatchError
from judge_runner.search.hybrid import FIELD_WEIGHTS, ChunkRow, ChunkSearch
from judge_runner.search.redact import redact_dsn, scrub_secrets  # noqa: F401 - moved to a neutral module; re-exported
from judge_runner.search.settings import SearchSettings
from judge_runner.search.text import fold_diacritics, lexical_text, normalized_words, path_terms, query_phrases

SCHEMA_VERSION = "1"
DEFAULT_SCHEMA = "judge_runner"
VACUUM_AFTER_CHUNKS = 1000  # close() vacuums the tables after this many chunks were written
HNSW_MAX_VECTOR_DIM = 2000  # pgvector: HNSW indexes vector columns up to 2,000 dimensions...
HNSW_MAX_HALFVEC_DIM = 4000  # ...and halfvec columns up to 4,000
BM25_K1, BM25_B = 1.2, 0.75  # FTS5's constants
# tsvector weight labels of the three fields, and their BM25 weights (the same as SQLite's columns)
BODY_WEIGHT, ANCHOR_WEIGHT, PATH_WEIGHT = FIELD_WEIGHTS
# schema upgrades: MIGRATIONS[v] is the list of statements (with {s} for the schema) taking version v to
# the next one; an index whose version has no path to SCHEMA_VERSION raises IndexMismatchError
MIGRATIONS: dict[str, tuple[str, list[str]]] = {}


class PostgresSetupError(RuntimeError):
    """The database cannot hold an index (no pgvector, no privilege to create the schema...)."""


def _schema_ddl(vector_type: str, dim: int) -> list[str]:
    """The statements creating schema version 1 in ``{s}``."""
    return [
        "CREATE TABLE {s}.meta (key text PRIMARY KEY, value text NOT NULL)",
        """CREATE TABLE {s}.documents (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            source text NOT NULL UNIQUE,
            sha256 text NOT NULL,
            fmt text NOT NULL,
            size bigint NOT NULL
        )""",
        f"""CREATE TABLE {{s}}.chunks (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            doc_id bigint NOT NULL REFERENCES {{s}}.documents(id) ON DELETE CASCADE,
            ord integer NOT NULL,
            anchor text,
            line_start integer NOT NULL,
            line_end integer NOT NULL,
            text text NOT NULL,
            tsv tsvector NOT NULL,
            dl integer NOT NULL,
            embedding {vector_type}({dim}) NOT NULL
        )""",
        "CREATE INDEX chunks_doc ON {s}.chunks (doc_id)",
        # the inverted index BM25 reads: one row per (lexeme, chunk) of tsv, with the weighted term
        # frequency and the chunk's length, so a query reads only its own terms' postings (index-only)
        """CREATE TABLE {s}.postings (
            lexeme text NOT NULL,
            chunk_id bigint NOT NULL REFERENCES {s}.chunks(id) ON DELETE CASCADE,
            tf real NOT NULL,
            dl integer NOT NULL,
            PRIMARY KEY (lexeme, chunk_id) INCLUDE (tf, dl)
        )""",
        "CREATE INDEX postings_chunk ON {s}.postings (chunk_id)",
        "CREATE INDEX chunks_tsv ON {s}.chunks USING gin (tsv)",
        f"CREATE INDEX chunks_embedding ON {{s}}.chunks USING hnsw (embedding {vector_type}_cosine_ops)",
        """CREATE TABLE {s}.corpus_stats (
            singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            chunks bigint NOT NULL,
            tokens bigint NOT NULL
        )""",
        "INSERT INTO {s}.corpus_stats VALUES (true, 0, 0)",
        "CREATE TEXT SEARCH DICTIONARY {s}.english_stem (TEMPLATE = snowball, Language = english)",
        "CREATE TEXT SEARCH CONFIGURATION {s}.lexical (COPY = pg_catalog.simple)",
        "ALTER TEXT SEARCH CONFIGURATION {s}.lexical ALTER MAPPING FOR asciiword, word, asciihword, hword, "
        "hword_asciipart, hword_part WITH {s}.english_stem",
        "CREATE AGGREGATE {s}.tsquery_or_agg(tsquery) (SFUNC = tsquery_or, STYPE = tsquery)",
    ]


def _no_nul(text: str | None) -> str | None:
    """``text`` with NUL, which PostgreSQL text cannot hold, as U+FFFD."""
    return text.replace("\x00", "\ufffd") if text and "\x00" in text else text


class PostgresIndex(ChunkSearch):
    """A search index in a PostgreSQL schema; a context manager. ``embedder`` None: the index's own, else
    the default. Raises IndexMismatchError for another model, dimension or schema version (or, ``readonly``,
    no index); PostgresSetupError without pgvector; psycopg.OperationalError when the server is unreachable.
    """

    fts_ranking = "bm25"  # or "ts_rank" (PostgreSQL's, no IDF; kept for the benchmark's comparison)
    ef_search_factor = 1.5  # HNSW's candidate list (hnsw.ef_search) is this many times the depth, 40 to 1000

    def __init__(
        self,
        dsn: str,
        settings: SearchSettings | None = None,
        embedder: TextEmbedder | None = None,
        readonly: bool = False,
        schema: str = DEFAULT_SCHEMA,
        pool_size: int = 8,
    ):
        import psycopg
        from psycopg import sql

        self.dsn = dsn
        self.schema = schema
        self.path = f"{redact_dsn(dsn)} (schema {schema})"
        self.settings = settings or SearchSettings()
        self.readonly = readonly
        self._pool_size = pool_size
        self._delta = (0, 0)  # (chunks, tokens) written by the open transaction, added to corpus_stats on commit
        self._touched = 0  # chunks inserted or deleted by the open transaction
        self._committed_chunks = 0  # ... and by the committed ones since this index was opened
        self._pool: Any = None  # a psycopg_pool.ConnectionPool once a search needs it
        self._pool_lock = threading.Lock()
        self._s = sql.Identifier(schema)
        self._cfg = sql.Literal(sql.Identifier(schema, "lexical").as_string())

        conn = psycopg.connect(dsn, autocommit=False)
        try:
            self._ensure_extension(conn)
            self._ensure_schema(conn, embedder)
        except BaseException:
            conn.close()
            raise
        self._q = self._statements()  # they name the vector type, known once the embedder is
        if readonly:
            conn.close()
            self._conn = None
        else:
            self._conn = conn

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> PostgresIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close, rolling back what is uncommitted; after :data:`VACUUM_AFTER_CHUNKS` committed chunks,
        vacuum first (a fresh bulk load's full-text queries ran about 3 times slower until vacuumed)."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            if self._committed_chunks >= VACUUM_AFTER_CHUNKS:
                self._committed_chunks = 0
                self.vacuum()

    def vacuum(self) -> None:
        """``VACUUM (ANALYZE)`` the index's tables, best effort."""
        import psycopg

        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(self._sql("VACUUM (ANALYZE) {s}.postings, {s}.chunks, {s}.documents, {s}.corpus_stats"))
        except psycopg.Error:
            pass

    def _sql(self, text: str) -> Any:
        from psycopg import sql

        return sql.SQL(text).format(s=self._s, cfg=self._cfg)

    def _ensure_extension(self, conn: Any) -> None:
        from pgvector.psycopg import register_vector

        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
            if self.readonly:
                raise IndexMismatchError(f"{self.path} has no pgvector extension and so no index; run `judge-runner index` first")
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.commit()
            except Exception as exc:
                conn.rollback()
                raise PostgresSetupError(
                    f"the database {redact_dsn(self.dsn)} has no pgvector extension and this user cannot create it "
                    f"({exc}); run `CREATE EXTENSION vector` there as a superuser"
                ) from exc
        register_vector(conn)
        conn.commit()

    def _use_embedder(self, embedder: TextEmbedder) -> None:
        """Raises PostgresSetupError for more dimensions than pgvector's HNSW index takes."""
        self.embedder, self.model_name, self.dim = embedder, embedder.name, int(embedder.dimension)
        if self.dim > HNSW_MAX_HALFVEC_DIM:
            raise PostgresSetupError(
                f"the embedding model {self.model_name} gives {self.dim} dimensions; pgvector's HNSW index takes at "
                f"most {HNSW_MAX_VECTOR_DIM} as vector and {HNSW_MAX_HALFVEC_DIM} as halfvec"
            )
        self.vector_type = "vector" if self.dim <= HNSW_MAX_VECTOR_DIM else "halfvec"

    def _recorded_model(self, conn: Any) -> str | None:
        if conn.execute("SELECT to_regclass(%s)", (f"{self._s.as_string()}.meta",)).fetchone()[0] is None:
            return None
        row = conn.execute(self._sql("SELECT value FROM {s}.meta WHERE key = 'embedding_model'")).fetchone()
        return row[0] if row else None

    def _ensure_schema(self, conn: Any, embedder: TextEmbedder | None) -> None:
        """Choose the embedder, then create, upgrade or check the schema and its meta."""
        self._use_embedder(embedder if embedder is not None else choose(None, self._recorded_model(conn)))
        expected = {
            "schema_version": SCHEMA_VERSION,
            "embedding_model": self.model_name,
            "embedding_dim": str(self.dim),
            "vector_type": self.vector_type,
        }
        exists = conn.execute("SELECT to_regclass(%s)", (f"{self._s.as_string()}.meta",)).fetchone()[0] is not None
        if not exists and self.readonly:
            raise IndexMismatchError(f"{self.path} is an empty index; run `judge-runner index` first")
        if not exists:
            # one creator at a time: a second process waits here, then finds the schema made
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"judge_runner:{self.schema}",))
            exists = conn.execute("SELECT to_regclass(%s)", (f"{self._s.as_string()}.meta",)).fetchone()[0] is not None
            if not exists:
                try:
                    conn.execute(self._sql("CREATE SCHEMA IF NOT EXISTS {s}"))
                    for statement in _schema_ddl(self.vector_type, self.dim):
                        conn.execute(self._sql(statement))
                    conn.cursor().executemany(self._sql("INSERT INTO {s}.meta VALUES (%s, %s)"), list(expected.items()))
                except Exception as exc:
                    conn.rollback()
                    raise PostgresSetupError(f"cannot create the index schema {self.schema} in {redact_dsn(self.dsn)}: {exc}") from exc
                conn.commit()
                return
        meta = dict(conn.execute(self._sql("SELECT key, value FROM {s}.meta")).fetchall())
        version = meta.get("schema_version")
        while version != SCHEMA_VERSION and version in MIGRATIONS and not self.readonly:
            target, statements = MIGRATIONS[version]
            for statement in statements:
                conn.execute(self._sql(statement))
            conn.execute(self._sql("UPDATE {s}.meta SET value = %s WHERE key = 'schema_version'"), (target,))
            version = meta["schema_version"] = target
        conn.commit()
        if not meta and self.readonly:
            raise IndexMismatchError(f"{self.path} is an empty index; run `judge-runner index` first")
        for key, value in expected.items():
            rebuild = f"drop the schema (DROP SCHEMA {self._s.as_string()} CASCADE) or use another, and run `judge-runner index` again"
            if key == "embedding_model" and meta.get(key) != value:
                raise IndexMismatchError(
                    f"the index {self.path} was built with embedding_model={meta.get(key)!r}, this process embeds with "
                    f"{value!r}; {mismatch_advice(meta.get(key), value, rebuild)}"
                )
            if meta.get(key) != value:
                raise IndexMismatchError(
                    f"the index {self.path} was built with {key}={meta.get(key)!r}, this judge-runner uses "
                    f"{value!r}; drop the schema (DROP SCHEMA {self._s.as_string()} CASCADE) or use another one, "
                    "and run `judge-runner index` again"
                )

    def _writer(self) -> Any:
        if self._conn is None:
            raise PermissionError(f"the index {self.path} was opened read-only")
        return self._conn

    def _reader(self) -> Any:
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    from psycopg_pool import ConnectionPool

                    def configure(conn: Any) -> None:
                        from pgvector.psycopg import register_vector

                        register_vector(conn)
                        conn.execute("SET default_transaction_read_only = on")

                    pool = ConnectionPool(
                        self.dsn,
                        min_size=1,
                        max_size=self._pool_size,
                        kwargs={"autocommit": True},
                        configure=configure,
                        open=False,
                        name=f"judge-runner:{self.schema}",
                    )
                    pool.open(wait=True, timeout=30)
                    self._pool = pool
        return self._pool.connection()

    def _meta_conn(self) -> Any:
        """The write connection when there is one (it sees its uncommitted writes), else a pooled one."""
        from contextlib import nullcontext

        return nullcontext(self._conn) if self._conn is not None else self._reader()

    # -- writing ---------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self._meta_conn() as conn:
            row = conn.execute(self._sql("SELECT value FROM {s}.meta WHERE key = %s"), (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self._writer().execute(
            self._sql("INSERT INTO {s}.meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value"), (key, value)
        )

    def document_hashes(self) -> dict[str, str]:
        with self._meta_conn() as conn:
            return dict(conn.execute(self._sql("SELECT source, sha256 FROM {s}.documents")).fetchall())

    def replace_document(self, source: str, sha256: str, fmt: str, size: int, chunks: list, vectors: np.ndarray) -> None:
        """Insert or replace a document and its chunks (``chunks[i]`` embedded as ``vectors[i]``)."""
        if len(chunks) != len(vectors):
            raise ValueError("one vector per chunk is required")
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(chunks), -1) if len(chunks) else np.zeros((0, self.dim), np.float32)
        if vectors.shape[1] != self.dim:
            raise ValueError(f"vectors have {vectors.shape[1]} dimensions, the index holds {self.dim}")
        conn = self._writer()
        self.remove_documents([source])
        doc_id = conn.execute(
            self._sql("INSERT INTO {s}.documents (source, sha256, fmt, size) VALUES (%s, %s, %s, %s) RETURNING id"),
            (source, sha256, fmt, size),
        ).fetchone()[0]
        path_words = " ".join(normalized_words(path_terms(source)))
        rows = [
            (
                doc_id,
                ord_,
                _no_nul(chunk.anchor),
                chunk.line_start,
                chunk.line_end,
                _no_nul(chunk.text),
                vector,
                " ".join(normalized_words(lexical_text(chunk.anchor or ""))),
                path_words,
                " ".join(normalized_words(lexical_text(chunk.text))),
            )
            for ord_, (chunk, vector) in enumerate(zip(chunks, vectors))
        ]
        with conn.cursor() as cur:
            cur.executemany(self._q["insert_chunk"], rows)
        n, tokens = conn.execute(self._q["insert_postings"], (doc_id,)).fetchone()
        self._delta = (self._delta[0] + n, self._delta[1] + tokens)
        self._touched += n

    def remove_documents(self, sources: Iterable[str]) -> int:
        """Delete documents by source; returns how many existed."""
        sources = list(dict.fromkeys(sources))
        if not sources:
            return 0
        conn = self._writer()
        n, tokens = conn.execute(
            self._sql(
                "WITH gone AS (DELETE FROM {s}.chunks c USING {s}.documents d "
                "WHERE d.id = c.doc_id AND d.source = ANY(%s) RETURNING c.dl) "
                "SELECT count(*), coalesce(sum(dl), 0) FROM gone"
            ),
            (sources,),
        ).fetchone()
        self._delta = (self._delta[0] - n, self._delta[1] - tokens)
        self._touched += n
        return int(conn.execute(self._sql("DELETE FROM {s}.documents WHERE source = ANY(%s)"), (sources,)).rowcount)

    def commit(self) -> None:
        """Commit, with BM25's corpus totals."""
        conn = self._writer()
        try:
            if self._delta != (0, 0):
                conn.execute(self._sql("UPDATE {s}.corpus_stats SET chunks = chunks + %s, tokens = tokens + %s"), self._delta)
            conn.commit()
            self._committed_chunks += self._touched
        finally:
            self._delta, self._touched = (0, 0), 0

    def rollback(self) -> None:
        self._delta, self._touched = (0, 0), 0
        if self._conn is not None:
            self._conn.rollback()

    def stats(self) -> dict[str, int]:
        with self._meta_conn() as conn:
            docs, chunks = conn.execute(
                self._sql("SELECT (SELECT count(*) FROM {s}.documents), (SELECT count(*) FROM {s}.chunks)")
            ).fetchone()
        return {"documents": int(docs), "chunks": int(chunks)}

    # -- searching -------------------------------------------------------------------------------
    def _statements(self) -> dict:
        w = {"A": ANCHOR_WEIGHT, "B": PATH_WEIGHT, "D": BODY_WEIGHT}
        top = max(w.values())
        # ts_rank takes weights in [0, 1] as {D, C, B, A}; the same ratios as the BM25 column weights
        ts_weights = "{{%g, 0, %g, %g}}" % (w["D"] / top, w["B"] / top, w["A"] / top)  # braces escaped for sql.SQL
        return {
            "insert_chunk": self._sql(
                "INSERT INTO {s}.chunks (doc_id, ord, anchor, line_start, line_end, text, tsv, dl, embedding) "
                "SELECT %s, %s, %s, %s, %s, %s, v.tsv, "
                "(SELECT coalesce(sum(cardinality(u.positions)), 0) FROM unnest(v.tsv) u), %s FROM ("
                "SELECT setweight(to_tsvector({cfg}, %s), 'A') || setweight(to_tsvector({cfg}, %s), 'B') "
                "|| to_tsvector({cfg}, %s) AS tsv) v"
            ),
            # BM25 over the postings of the query's lexemes (its tokens through the same parser and stemmer
            # as the index) plus one term per compound phrase, found through the GIN index; IDF from the
            # matches themselves (every chunk holding a term is among them), N and avgdl from corpus_stats
            "bm25": self._sql(
                f"""WITH lex AS (
                    SELECT u.lexeme, count(*) AS qtf
                    FROM unnest(%(tokens)s::text[]) AS t(tok) CROSS JOIN LATERAL unnest(to_tsvector({{cfg}}, t.tok)) AS u
                    GROUP BY u.lexeme
                ),
                hits AS (
                    SELECT p.chunk_id AS id, p.dl, p.lexeme AS term, lex.qtf, p.tf
                    FROM lex JOIN {{s}}.postings p ON p.lexeme = lex.lexeme
                    UNION ALL
                    SELECT c.id, c.dl, 'phrase ' || x.o, 1,
                           {w["A"]} * (ts_filter(c.tsv, '{{{{A}}}}') @@ x.q)::int + {w["B"]} * (ts_filter(c.tsv, '{{{{B}}}}') @@ x.q)::int
                           + {w["D"]} * (ts_filter(c.tsv, '{{{{D}}}}') @@ x.q)::int
                    FROM (SELECT o, phraseto_tsquery({{cfg}}, t) AS q FROM unnest(%(phrases)s::text[]) WITH ORDINALITY AS p(t, o)) x
                    CROSS JOIN LATERAL (SELECT id, dl, tsv FROM {{s}}.chunks WHERE tsv @@ x.q) c
                ),
                df AS (SELECT term, count(*)::float8 AS nhit FROM hits GROUP BY term),
                stats AS (SELECT greatest(chunks, 1)::float8 AS n, greatest(tokens, 1)::float8 / greatest(chunks, 1) AS avgdl
                          FROM {{s}}.corpus_stats)
                SELECT h.id, sum(h.qtf * greatest(ln((stats.n - df.nhit + 0.5) / (df.nhit + 0.5)), 1e-6)
                                 * h.tf * {BM25_K1 + 1} / (h.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * h.dl / stats.avgdl))) AS score
                FROM hits h JOIN df USING (term) CROSS JOIN stats
                GROUP BY h.id ORDER BY score DESC, h.id LIMIT %(depth)s"""
            ),
            "ts_rank": self._sql(
                f"""WITH query AS (
                    SELECT {{s}}.tsquery_or_agg(phraseto_tsquery({{cfg}}, t)) AS q
                    FROM unnest(%(tokens)s::text[] || %(phrases)s::text[]) AS t
                )
                SELECT c.id, ts_rank('{ts_weights}'::float4[], c.tsv, query.q) AS score
                FROM {{s}}.chunks c, query WHERE c.tsv @@ query.q
                ORDER BY score DESC, c.id LIMIT %(depth)s"""
            ),
            # a document's postings, from its chunks' tsv; returns its chunk count and token total
            "insert_postings": self._sql(
                f"""WITH c AS (SELECT id, tsv, dl FROM {{s}}.chunks WHERE doc_id = %s),
                p AS (
                    INSERT INTO {{s}}.postings (lexeme, chunk_id, tf, dl)
                    SELECT u.lexeme, c.id,
                           (SELECT sum(CASE wt WHEN 'A' THEN {w["A"]} WHEN 'B' THEN {w["B"]} ELSE {w["D"]} END) FROM unnest(u.weights) AS wt),
                           c.dl
                    FROM c CROSS JOIN LATERAL unnest(c.tsv) AS u
                )
                SELECT count(*), coalesce(sum(dl), 0) FROM c"""
            ),
            "vector": self._sql(
                f"SELECT id, 1 - (embedding <=> %(v)s::{self.vector_type}) AS cosine FROM {{s}}.chunks "
                f"ORDER BY embedding <=> %(v)s::{self.vector_type} LIMIT %(depth)s"
            ),
            "rows": self._sql(
                "SELECT c.id, d.source, c.anchor, c.line_start, c.line_end, c.text FROM {s}.chunks c "
                "JOIN {s}.documents d ON d.id = c.doc_id WHERE c.id = ANY(%s) ORDER BY c.id"
            ),
            "document_chunks": self._sql(
                "SELECT d.source, c.anchor, c.line_start, c.line_end, c.text FROM {s}.chunks c "
                "JOIN {s}.documents d ON d.id = c.doc_id WHERE d.source = ANY(%s) ORDER BY d.source, c.ord"
            ),
        }

    @staticmethod
    def query_terms(query: str) -> tuple[list[str], list[str]]:
        """The query's tokens and compound phrases, normalised as the index's text is: the clauses of
        SQLite's FTS5 expression."""
        tokens = [fold_diacritics(t) for t in query_tokens(query)]
        phrases = list(dict.fromkeys(" ".join(fold_diacritics(w) for w in p) for p in query_phrases(query)))
        return tokens, phrases

    def _fts(self, query: str, depth: int) -> list[tuple[int, float]]:
        tokens, phrases = self.query_terms(query)
        if not tokens:
            return []
        with self._reader() as conn:
            rows = conn.execute(self._q[self.fts_ranking], {"tokens": tokens, "phrases": phrases, "depth": depth}).fetchall()
        return [(int(r[0]), float(r[1])) for r in rows]

    def _vector(self, query: str, depth: int) -> list[tuple[int, float]]:
        if not query.strip():
            return []
        qvec = self._query_vector(query)
        with self._reader() as conn, conn.transaction():
            # Always through the HNSW index, whatever the planner's statistics say: at a few thousand rows
            # it prefers an exact sequential scan once the table is analysed (and HNSW before), and the two
            # return different neighbours, so a query's results would change with autovacuum's timing.
            conn.execute("SET LOCAL enable_seqscan = off")
            # HNSW returns at most ef_search rows: keep it over the depth asked for
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(min(1000, max(40, int(self.ef_search_factor * depth)))),))
            rows = conn.execute(self._q["vector"], {"v": qvec, "depth": depth}).fetchall()
        # equal distances in id order, so ties cannot reorder a result list
        return sorted(((int(r[0]), float(r[1])) for r in rows), key=lambda hit: (-hit[1], hit[0]))

    def _chunk_rows(self, ids: list[int]) -> list[ChunkRow]:
        if not ids:
            return []
        with self._reader() as conn:
            return [tuple(r) for r in conn.execute(self._q["rows"], (list(ids),)).fetchall()]

    def _document_chunks(self, sources: list[str]) -> dict[str, list[Chunk]]:
        out: dict[str, list[Chunk]] = {}
        if not sources:
            return out
        with self._reader() as conn:
            for source, anchor, start, end, text in conn.execute(self._q["document_chunks"], (list(sources),)).fetchall():
                out.setdefault(source, []).append(Chunk(text, anchor, start, end))
        return out
