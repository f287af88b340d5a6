"""The search logic every chunk-storing backend shares: modes, fusion, collapse to documents, honesty gate.

A backend (SQLite, PostgreSQL) subclasses :class:`ChunkSearch` and provides three lookups by chunk id:

- ``_fts(query, depth) -> [(chunk_id, score)]``: full-text ranking, best first, higher is better;
- ``_vector(query, depth) -> [(chunk_id, cosine)]``: nearest chunks by cosine, best first;
- ``_chunk_rows(ids) -> [(chunk_id, source, anchor, line_start, line_end, text)]``.

:meth:`ChunkSearch.search` does the rest the same way for every backend: RRF (one implementation,
:func:`judge_runner.search.fusion.rrf`) over the two lists in hybrid mode, documents ranked by their
best chunk, snippets, and ``confident``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from judge_runner.search.base import SEARCH_MODES, HitScores, SearchAnswer, SearchHit, SearchMode, SearchSettings
from judge_runner.search.fusion import rrf
from judge_runner.search.text import lexical_text, make_snippet, path_terms, term_coverage

# Full-text weights of a chunk's three fields (body, anchor, path): a heading or file-name match counts
# more than a body match. SQLite's BM25 column weights; PostgreSQL's tsvector weights D, A, B.
FIELD_WEIGHTS = (1.0, 2.0, 1.5)

# (chunk_id, source, anchor, line_start, line_end, text)
ChunkRow = tuple


def lexical_row_text(source: str, anchor: str | None, text: str) -> str:
    """What the full-text index holds for a chunk (body, anchor, path terms), as one string: the text the
    honesty gate's :func:`term_coverage` is measured on."""
    return " ".join((lexical_text(text), lexical_text(anchor or ""), path_terms(source)))


def lexical_match(query: str, rows: Sequence[ChunkRow]) -> bool:
    """Whether one of these chunks contains most of the query's terms (see :func:`term_coverage`)."""
    return any(term_coverage(query, lexical_row_text(r[1], r[2], r[5])) > 0.5 for r in rows)


def is_confident(mode: str, lexical: bool, best_cosine: float | None, threshold: float) -> bool:
    """The honesty gate: fts trusts a lexical match, vector a best cosine at or over the threshold,
    hybrid either."""
    semantic = best_cosine is not None and best_cosine >= threshold
    return {"fts": lexical, "vector": semantic}.get(mode, lexical or semantic)


def collapse(query: str, rows: Sequence[ChunkRow], chunk_scores: dict, bm25: dict, cosine: dict, fused: dict,
             limit: int, snippet_chars: int) -> list[SearchHit]:
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
                rank=rank, source=source, anchor=anchor, lineStart=line_start, lineEnd=line_end,
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


class ChunkSearch:
    """``search(query, mode, limit)`` on top of a backend's ``_fts``, ``_vector`` and ``_chunk_rows``."""

    settings: SearchSettings

    def _fts(self, query: str, depth: int) -> list[tuple[int, float]]:
        raise NotImplementedError

    def _vector(self, query: str, depth: int) -> list[tuple[int, float]]:
        raise NotImplementedError

    def _chunk_rows(self, ids: list[int]) -> list[ChunkRow]:
        raise NotImplementedError

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10) -> SearchAnswer:
        """Rank documents for ``query`` (any text is safe) by their best chunk.

        ``fts``: the backend's full-text ranking over an OR of the query's tokens; ``vector``: cosine of
        all-MiniLM-L6-v2 embeddings; ``hybrid``: RRF of the top ``depth`` chunks of each. Raises
        ValueError for an unknown mode or a limit under 1.
        """
        if mode not in SEARCH_MODES:
            raise ValueError(f"unknown search mode {mode!r}; use hybrid, fts or vector")
        if limit < 1:
            raise ValueError("limit must be at least 1")
        started = time.perf_counter()
        s = self.settings
        depth = max(s.depth, limit)
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
            chunk_scores = dict(fused)

        rows = {r[0]: r for r in self._chunk_rows(list(chunk_scores))} if chunk_scores else {}
        results = collapse(query, list(rows.values()), chunk_scores, bm25, cosine, fused, limit, s.snippet_chars)
        # the top ten full-text chunks are always among the rows fetched (every fts hit has a score)
        lexical = lexical_match(query, [rows[cid] for cid, _ in fts_hits[:10] if cid in rows])
        confident = is_confident(mode, lexical, max(cosine.values(), default=None), s.confidence_threshold)
        return SearchAnswer(
            query=query, mode=mode, results=results, confident=bool(confident and results),
            latencyMs=round((time.perf_counter() - started) * 1000, 3),
        )

    def _lexical_match(self, query: str, chunk_ids: list[int]) -> bool:
        """Whether one of these chunks contains most of the query's terms (the honesty gate's lexical half)."""
        return lexical_match(query, self._chunk_rows(chunk_ids)) if chunk_ids else False
