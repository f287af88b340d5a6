"""Benchmark the PostgreSQL backend on a BEIR collection (default: ../shared/data/scifact), beside SQLite.

Indexes the corpus into a :class:`~judge_runner.search.postgres.PostgresIndex` (schema ``beir``), either by
embedding it with ``indexer.index_beir`` (about 9 minutes for SciFact on 2 cores) or, with
``--from-sqlite INDEX``, by copying the chunks and embeddings of an existing SQLite index of the same
corpus (built by ``judge-runner index --beir-corpus``; same chunker, same model) through
``replace_document``; then re-indexes with ``index_beir``, which must find every record unchanged and
embed nothing. Runs every test query in each mode and scores the runs with ir-measures against the
qrels: nDCG@10 and R@100 per mode, and query latency p50/p95. With ``--from-sqlite`` the same queries
also run on that SQLite index in this process, so the two backends are compared on identical chunks,
vectors and settings.

Query embeddings are computed once up front and served from a cache to both backends, so the latency
columns are the backends' own work (full-text, vector search, fusion, snippets); the model's time per
query is printed separately. The server is a throwaway embedded PostgreSQL 18 + pgvector
(tests/support/pgcluster.py) unless ``--dsn`` or DATABASE_URL names one. Writes nothing into the repository.

    .venv/bin/python benchmarks/beir_postgres.py [--from-sqlite /tmp/jr-beir/index.sqlite] [--dsn URL]
        [--data ../shared/data/scifact] [--search rrf_k=60 ...] [--fts-ranking bm25|ts_rank] [--modes fts,vector,hybrid]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import ir_measures
import numpy as np
from ir_measures import R, nDCG

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from judge_runner.corpus.chunk import Chunk  # noqa: E402
from judge_runner.embed.base import DIMENSION, MODEL_NAME  # noqa: E402
from judge_runner.embed.registry import DEFAULT_KIND, instance  # noqa: E402
from judge_runner.search import indexer  # noqa: E402
from judge_runner.search.base import SearchSettings  # noqa: E402
from judge_runner.search.indexer import index_beir  # noqa: E402
from judge_runner.search.postgres import PostgresIndex  # noqa: E402


class CachedEmbedder:
    """The shared embedder with a cache of precomputed query vectors."""

    name, dimension = MODEL_NAME, DIMENSION

    def __init__(self, inner, cache: dict[str, np.ndarray]):
        self.inner, self.cache = inner, cache

    def encode(self, texts):
        if all(t in self.cache for t in texts):
            return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, DIMENSION), np.float32)
        return self.inner.encode(texts)


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:  # BEIR tsv: header, then qid docid score
        qid, did, score = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(score)
    return qrels


def copy_from_sqlite(src: Path, index: PostgresIndex, batch_docs: int = 500) -> tuple[int, int]:
    """Copy every document, chunk and embedding of a SQLite index into ``index``; returns (docs, chunks)."""
    db = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True)
    meta = dict(db.execute("SELECT key, value FROM meta"))
    if meta.get("embedding_model") != MODEL_NAME or meta.get("embedding_dim") != str(DIMENSION):
        sys.exit(f"{src} was built with {meta.get('embedding_model')}/{meta.get('embedding_dim')}, not {MODEL_NAME}/{DIMENSION}")
    chunks_by_doc: dict[int, list] = {}
    for doc_id, anchor, ls, le, text, blob in db.execute(
        "SELECT doc_id, anchor, line_start, line_end, text, embedding FROM chunks ORDER BY doc_id, ord"
    ):
        chunks_by_doc.setdefault(doc_id, []).append((Chunk(text, anchor, ls, le), np.frombuffer(blob, dtype=np.float32)))
    docs = db.execute("SELECT id, source, sha256, fmt, size FROM documents ORDER BY id").fetchall()
    n_chunks = 0
    for i, (doc_id, source, sha, fmt, size) in enumerate(docs, start=1):
        items = chunks_by_doc.get(doc_id, [])
        index.replace_document(source, sha, fmt, size, [c for c, _ in items], np.stack([v for _, v in items]))
        n_chunks += len(items)
        if i % batch_docs == 0:
            index.commit()
    for key, value in meta.items():  # corpus fingerprint, root, chunker version...
        if key not in ("schema_version", "embedding_model", "embedding_dim"):
            index.set_meta(key, value)
    index.commit()
    db.close()
    return len(docs), n_chunks


def run_queries(index, queries: list[tuple[str, str]], mode: str, limit: int) -> tuple[dict, list[float]]:
    index.search(queries[0][1], mode=mode, limit=1)  # warm up (pool, matrix)
    run: dict[str, dict[str, float]] = {}
    latencies = []
    for qid, text in queries:
        answer = index.search(text, mode=mode, limit=limit)
        latencies.append(answer.latencyMs)
        run[qid] = {hit.source: hit.score for hit in answer.results}
    return run, latencies


def percentiles(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument(
        "--dsn", default=os.environ.get("DATABASE_URL"), help="an existing server [default: DATABASE_URL, else an embedded one]"
    )
    parser.add_argument("--schema", default="beir", help="PostgreSQL schema for the index (dropped and rebuilt unless --skip-index)")
    parser.add_argument(
        "--from-sqlite",
        type=Path,
        default=None,
        metavar="INDEX",
        help="copy chunks and embeddings from this SQLite index instead of embedding, and compare with it",
    )
    parser.add_argument("--skip-index", action="store_true", help="reuse the index in --schema")
    parser.add_argument("--no-reindex", action="store_true", help="skip the incremental re-index check")
    parser.add_argument("--search", action="append", default=[], metavar="KEY=VALUE", help="search settings, e.g. rrf_k=30")
    parser.add_argument("--fts-ranking", choices=["bm25", "ts_rank"], default="bm25")
    parser.add_argument("--modes", default="fts,vector,hybrid")
    parser.add_argument("--limit", type=int, default=100)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    settings = SearchSettings(**{k.strip(): v.strip() for k, v in (s.split("=", 1) for s in args.search)})
    qrels = read_qrels(args.data / "qrels" / "test.tsv")
    queries = [
        (str(r["_id"]), str(r["text"]))
        for r in map(json.loads, (args.data / "queries.jsonl").read_text(encoding="utf-8").splitlines())
        if str(r["_id"]) in qrels
    ]

    cluster = None
    dsn = args.dsn
    if not dsn:
        from tests.support.pgcluster import start_cluster

        started = time.perf_counter()
        cluster = start_cluster()
        dsn = cluster.dsn
        print(f"embedded PostgreSQL started in {time.perf_counter() - started:.1f} s at {dsn}")
    try:
        embedder = instance(DEFAULT_KIND)  # MiniLM whatever JUDGE_RUNNER_EMBEDDER says: this measures quality
        if not args.skip_index:
            import psycopg
            from psycopg import sql

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(args.schema)))
        index = PostgresIndex(dsn, settings, embedder=embedder, schema=args.schema)
        index.fts_ranking = args.fts_ranking
        if not args.skip_index:
            started = time.perf_counter()
            if args.from_sqlite:
                docs, chunks = copy_from_sqlite(args.from_sqlite, index)
                print(
                    f"copied {docs} documents, {chunks} chunks with their embeddings from {args.from_sqlite} "
                    f"in {time.perf_counter() - started:.1f} s (tsvector, GIN and HNSW built on insert)"
                )
            else:
                report = index_beir(index, args.data / "corpus.jsonl")
                print(
                    f"indexed {report.indexed} documents, {report.chunks_embedded} chunks in {time.perf_counter() - started:.1f} s "
                    f"(embedding {report.embed_seconds:.1f} s)"
                )
            started = time.perf_counter()
            index.close()  # as `judge-runner index` does; vacuums after a bulk load
            print(f"close (VACUUM ANALYZE after the bulk load): {time.perf_counter() - started:.1f} s")
            index = PostgresIndex(dsn, settings, embedder=embedder, schema=args.schema)
            index.fts_ranking = args.fts_ranking
        chunker = getattr(indexer, "CHUNKER_VERSION", None)
        if chunker is not None and index.get_meta("chunker_version") != chunker:
            print(
                f"re-index check skipped: the index was chunked by chunker version {index.get_meta('chunker_version')!r}, "
                f"this judge-runner's is {chunker!r} (re-indexing would re-chunk and re-embed everything)"
            )
        elif not args.no_reindex:
            started = time.perf_counter()
            again = index_beir(index, args.data / "corpus.jsonl")
            print(
                f"re-index: {again.unchanged} unchanged, {again.indexed} indexed, {again.chunks_embedded} chunks embedded, "
                f"{again.removed} removed in {time.perf_counter() - started:.1f} s; stats {index.stats()}"
            )

        started = time.perf_counter()
        vectors = embedder.encode([text for _, text in queries])
        per_query_ms = 1000 * (time.perf_counter() - started) / len(queries)
        cached = CachedEmbedder(embedder, {text: v for (_, text), v in zip(queries, vectors)})
        index.embedder = cached
        backends = [("postgres", index)]
        if args.from_sqlite:
            from judge_runner.search.sqlite import SQLiteIndex

            backends.append(("sqlite", SQLiteIndex(args.from_sqlite, settings, embedder=cached, readonly=True)))

        print(
            f"\n{len(queries)} test queries; query embedding {per_query_ms:.1f} ms/query (batched, excluded from the latencies); "
            f"fts ranking {args.fts_ranking}; settings {settings.model_dump()}"
        )
        print(f"{'backend':<9} {'mode':<7} {'nDCG@10':>8} {'R@100':>7} {'p50 ms':>7} {'p95 ms':>7}")
        runs: dict[tuple[str, str], dict] = {}
        for mode in args.modes.split(","):
            for name, backend in backends:
                run, latencies = run_queries(backend, queries, mode, args.limit)
                runs[name, mode] = run
                scores = ir_measures.calc_aggregate([nDCG @ 10, R @ 100], qrels, run)
                p50, p95 = percentiles(latencies)
                print(f"{name:<9} {mode:<7} {scores[nDCG @ 10]:>8.4f} {scores[R @ 100]:>7.4f} {p50:>7.1f} {p95:>7.1f}", flush=True)
        if args.from_sqlite:
            print("\nsame first document, postgres vs sqlite:")
            for mode in args.modes.split(","):
                a, b = runs["postgres", mode], runs["sqlite", mode]
                same = sum(1 for q in a if a[q] and b.get(q) and max(a[q], key=a[q].get) == max(b[q], key=b[q].get))
                print(f"  {mode:<7} {same}/{len(a)} queries")
        for _, backend in backends:
            backend.close()
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
