"""The search logic every chunk-storing backend shares: modes, RRF fusion, documents ranked by their best
chunk, the honesty gate, and the passages the judge is shown. A backend subclasses :class:`ChunkSearch`
and provides:

- ``_fts(query, depth) -> [(chunk_id, score)]``: full-text ranking, best first;
- ``_vector(query, depth) -> [(chunk_id, cosine)]``: nearest chunks, best first;
- ``_chunk_rows(ids) -> [(chunk_id, source, anchor, line_start, line_end, text)]``;
- ``_document_chunks(sources) -> {source: [Chunk, ...]}``, in document order.

Lists are fetched deeper, up to :data:`MAX_DEPTH_FACTOR` times, until they name ``limit`` documents.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import cast

import numpy as np

from judge_runner.core.models import SEARCH_MODES, SearchMode
from judge_runner.core.textproc import clean_text
from judge_runner.corpus.chunk import Chunk
from judge_runner.embed.base import TextEmbedder, encode_each
from judge_runner.search.base import HitScores, SearchAnswer, SearchHit
from judge_runner.search.fusion import rrf
from judge_runner.search.passages import Passages, remember_vector, select_passages
from judge_runner.search.settings import SearchSettings
from judge_runner.search.text import lexical_text, make_snippet, path_terms, term_coverage

# Full-text weights of a chunk's three fields (body, anchor, path): a heading or file-name match counts
# more than a body match. SQLite's BM25 column weights; PostgreSQL's tsvector weights D, A, B.
FIELD_WEIGHTS = (1.0, 2.0, 1.5)

# (chunk_id, source, anchor, line_start, line_end, text)
ChunkRow = tuple

MAX_DEPTH_FACTOR = 32  # deepest fetch: 32 x the first depth (30 -> 960 chunks per list)


def lexical_row_text(source: str, anchor: str | None, text: str) -> str:
    """A chunk's body, anchor and path terms as one string: what the honesty gate measures."""
    return " ".join((lexical_text(text), lexical_text(anchor or ""), path_terms(source)))


def lexical_match(query: str, rows: Sequence[ChunkRow]) -> bool:
    """Whether one of these chunks contains most of the query's terms."""
    return any(term_coverage(query, lexical_row_text(r[1], r[2], r[5])) > 0.5 for r in rows)


def is_confident(mode: str, lexical: bool, best_cosine: float | None, threshold: float) -> bool:
    """The honesty gate: fts trusts a lexical match, vector a best cosine at or over the threshold,
    hybrid either."""
    semantic = best_cosine is not None and best_cosine >= threshold
    return {"fts": lexical, "vector": semantic}.get(mode, lexical or semantic)


def collapse(
    query: str, rows: Sequence[ChunkRow], chunk_scores: dict, bm25: dict, cosine: dict, fused: dict, limit: int, snippet_chars: int
) -> list[SearchHit]:
    """Documents ranked by their best chunk's score (ties by source), at most ``limit``."""
    best: dict[str, ChunkRow] = {}
    for row in rows:
        cid, source = row[0], row[1]
        if source not in best or chunk_scores[cid] > chunk_scores[best[source][0]]:
            best[source] = row
    ordered = sorted(best.values(), key=lambda r: (-chunk_scores[r[0]], r[1]))[:limit]
    hits = []
    for rank, (cid, source, anchor, line_start, line_end, text) in enumerate(ordered, start=1):
        matched = [name for name, table in (("fts", bm25), ("vector", cosine)) if cid in table]
        hits.append(
            SearchHit(
                rank=rank,
                source=source,
                anchor=anchor,
                lineStart=line_start,
                lineEnd=line_end,
                snippet=make_snippet(text, query, snippet_chars),
                score=round(chunk_scores[cid], 6),
                scores=HitScores(
                    bm25=round(bm25[cid], 6) if cid in bm25 else None,
                    cosine=round(cosine[cid], 6) if cid in cosine else None,
                    rrf=round(fused[cid], 6) if cid in fused else None,
                ),
                matchedBy=matched,
                text=text,
            )
        )
    return hits


def with_passages(
    query: str, hits: Sequence[SearchHit], chunks: dict[str, list[Chunk]], intent: str = "", embedder: TextEmbedder | None = None
) -> list[SearchHit]:
    """``hits`` with the passages the judge is shown of each document; one without chunks keeps its text."""
    out = []
    for hit in hits:
        passages = select_passages(query, chunks.get(hit.source) or [], intent=intent, embedder=embedder)
        if passages is None:
            out.append(hit)
        else:
            out.append(hit.model_copy(update={"text": passages.text, "textAnchor": passages.anchor, "textFrom": "document"}))
    return out


def embed_query(embedder: TextEmbedder, query: str) -> np.ndarray:
    """``query``'s float32 vector, encoded alone so it depends on the text and the model only."""
    return cast(np.ndarray, encode_each(embedder, [query])[0])


class ChunkSearch:
    """``search(query, mode, limit)`` on top of a backend's ``_fts``, ``_vector`` and ``_chunk_rows``."""

    settings: SearchSettings
    embedder: TextEmbedder

    def _fts(self, query: str, depth: int) -> list[tuple[int, float]]:
        raise NotImplementedError

    def _vector(self, query: str, depth: int) -> list[tuple[int, float]]:
        raise NotImplementedError

    def _chunk_rows(self, ids: list[int]) -> list[ChunkRow]:
        raise NotImplementedError

    def _document_chunks(self, sources: list[str]) -> dict[str, list[Chunk]]:
        raise NotImplementedError

    def passages(self, source: str, query: str, intent: str = "") -> Passages | None:
        """What the judge is shown of ``source`` for ``query``, as this index's own results show it
        (:func:`with_passages`); None when the index does not hold it."""
        chunks = self._document_chunks([source]).get(source)
        return select_passages(query, chunks, intent=clean_text(intent), embedder=self.embedder) if chunks else None

    def prepare_queries(self, queries: Sequence[str], mode: SearchMode = "hybrid") -> int:
        """Embed ``queries`` ahead of their searches, each alone, so a prepared search returns the
        unprepared one's answer bit for bit. Returns how many were embedded (none in fts mode). Raises
        EmbeddingModelError."""
        if mode not in SEARCH_MODES:
            raise ValueError(f"unknown search mode {mode!r}; use hybrid, fts or vector")
        if mode == "fts":
            return 0
        prepared: dict[str, np.ndarray] = self.__dict__.setdefault("_prepared", {})
        texts = list(dict.fromkeys(t for t in (clean_text(q) for q in queries) if t.strip() and t not in prepared))
        if not texts:
            return 0
        for text in texts:
            prepared[text] = embed_query(self.embedder, text)
        return len(texts)

    def forget_queries(self) -> None:
        """Drop the vectors :meth:`prepare_queries` computed."""
        self.__dict__.pop("_prepared", None)

    def _query_vector(self, query: str) -> np.ndarray:
        """The query's vector: given, prepared, else computed once per :meth:`search` call (per thread)."""
        local = self.__dict__.get("_search_local")
        memo = getattr(local, "vector", None) if local is not None else None
        if memo is not None and memo[0] == query:
            return cast(np.ndarray, memo[1])
        vector = self.__dict__.get("_prepared", {}).get(query)
        if vector is None:
            vector = embed_query(self.embedder, query)
        if local is not None and getattr(local, "active", False):
            local.vector = (query, vector)
        return cast(np.ndarray, vector)

    def search(
        self,
        query: str,
        mode: SearchMode = "hybrid",
        limit: int = 10,
        *,
        query_vector: np.ndarray | None = None,
        passages: bool = True,
        intent: str = "",
    ) -> SearchAnswer:
        """Documents for ``query`` (any text; unencodable characters become U+FFFD) ranked by their best
        chunk, ``limit`` of them when the index holds that many matches. ``passages``: also choose what the
        judge is shown, after the latency is measured; ``intent`` never ranks. Raises ValueError for an
        unknown mode, a limit under 1 or a vector of another shape."""
        if mode not in SEARCH_MODES:
            raise ValueError(f"unknown search mode {mode!r}; use hybrid, fts or vector")
        if limit < 1:
            raise ValueError("limit must be at least 1")
        started = time.perf_counter()
        query = clean_text(query)
        given = None
        if query_vector is not None:
            given = np.asarray(query_vector, dtype=np.float32).reshape(-1)
            dimension = int(getattr(self.embedder, "dimension", len(given)))
            if given.shape != (dimension,):
                raise ValueError(f"query_vector has shape {np.shape(query_vector)}, this index's embedder gives ({dimension},)")
        local = self.__dict__.get("_search_local") or self.__dict__.setdefault("_search_local", threading.local())
        local.active, local.vector = True, (query, given) if given is not None else None
        try:
            answer = self._search(query, mode, limit, started)
            made = local.vector if given is None else None  # the query's vector when the index embedded it (or prepared it)
        finally:
            local.active, local.vector = False, None
        if passages and answer.results:
            if made is not None:
                remember_vector(self.embedder, *made)
            chunks = self._document_chunks(list(dict.fromkeys(h.source for h in answer.results)))
            shown = with_passages(query, answer.results, chunks, clean_text(intent), self.embedder)
            answer = answer.model_copy(update={"results": shown})
        return answer

    def _search(self, query: str, mode: SearchMode, limit: int, started: float) -> SearchAnswer:
        s = self.settings
        first_depth = depth = max(s.depth, limit)
        rows: dict = {}
        while True:
            fts_hits = self._fts(query, depth) if mode in ("hybrid", "fts") else []
            vec_hits = self._vector(query, depth) if mode in ("hybrid", "vector") else []
            bm25 = dict(fts_hits)
            cosine = dict(vec_hits)
            fused: dict = {}
            if mode == "fts":
                chunk_scores = dict(fts_hits)
            elif mode == "vector":
                chunk_scores = dict(vec_hits)
            else:
                fused = rrf([[c for c, _ in fts_hits], [c for c, _ in vec_hits]], k=s.rrf_k, weights=[s.fts_weight, s.vector_weight])
                chunk_scores = {int(c): v for c, v in fused.items()}  # type: ignore[call-overload]
            missing = [cid for cid in chunk_scores if cid not in rows]
            rows.update((r[0], r) for r in self._chunk_rows(missing))
            wanted = [rows[cid] for cid in chunk_scores if cid in rows]
            documents = len({r[1] for r in wanted})
            more = len(fts_hits) >= depth or len(vec_hits) >= depth  # a list was cut at the depth
            if documents >= limit or not more or depth >= first_depth * MAX_DEPTH_FACTOR:
                break
            depth *= 2
        results = collapse(query, wanted, chunk_scores, bm25, cosine, fused, limit, s.snippet_chars)
        # the top ten full-text chunks are always among the rows fetched (every fts hit has a score)
        lexical = lexical_match(query, [rows[cid] for cid, _ in fts_hits[:10] if cid in rows])
        confident = is_confident(mode, lexical, max(cosine.values(), default=None), s.confidence_threshold)
        return SearchAnswer(
            query=query,
            mode=mode,
            results=results,
            confident=bool(confident and results),
            latencyMs=round((time.perf_counter() - started) * 1000, 3),
        )

    def _lexical_match(self, query: str, chunk_ids: list[int]) -> bool:
        return lexical_match(query, self._chunk_rows(chunk_ids)) if chunk_ids else False
