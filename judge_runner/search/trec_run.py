"""An existing TREC run file as a search (``evaluate --run run.trec --corpus corpus.jsonl|DIR``): any engine
that can write a run (Anserini/Pyserini, Vespa, Elasticsearch scripts, ``judge-runner search --trec-run``)
is judged without an adapter.

A run line is ``qid Q0 docid rank score tag`` (whitespace-separated; trec_eval's format). Query and
document ids are decoded with :func:`judge_runner.search.trec.decode_id` (``%XX`` escapes of whitespace
and ``%``, the encoding judge-runner writes), so a fixtures path with a space round-trips. Results are
ordered by score (higher first; rank breaks ties, as trec_eval does). The search finds a query's
ranking by the query's id: the query set maps each query's text to its id. A query the run does not
hold gets an answer without results. Text comes from a document store
(:mod:`judge_runner.search.documents`); a docid the store does not hold is an error naming it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from judge_runner.core.models import SearchMode
from judge_runner.search.base import SearchAnswer
from judge_runner.search.mapping import FieldMapping, map_hits
from judge_runner.search.trec import decode_id


class TrecRunError(ValueError):
    """A run file that cannot be read; the message names the file and line."""


def read_trec_run(path: Path) -> dict[str, list[tuple[str, float]]]:
    """``{qid: [(docid, score), ...]}`` best first, ids decoded. Raises TrecRunError for a line that is
    not ``qid Q0 docid rank score tag``, a bad escape, or a file without any line."""
    rows: dict[str, list[tuple[float, int, str]]] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrecRunError(f"cannot read the run file {path}: {exc}") from None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            if len(parts) != 6:
                raise ValueError(f"expected 6 fields (qid Q0 docid rank score tag), got {len(parts)}")
            qid, docid = decode_id(parts[0]), decode_id(parts[2])
            rank, score = int(parts[3]), float(parts[4])
        except ValueError as exc:
            raise TrecRunError(f"{path} line {number}: {exc}") from None
        rows.setdefault(qid, []).append((score, rank, docid))
    if not rows:
        raise TrecRunError(f"{path} holds no run lines")
    out: dict[str, list[tuple[str, float]]] = {}
    for qid, found in rows.items():
        seen: set[str] = set()
        ranked = []
        for score, _, docid in sorted(found, key=lambda r: (-r[0], r[1])):
            if docid not in seen:
                seen.add(docid)
                ranked.append((docid, score))
        out[qid] = ranked
    return out


class TrecRunSearch:
    """A :class:`~judge_runner.search.base.SearchBackend` replaying a TREC run. ``query_ids`` maps a
    query's text to its id (from the query set); ``documents`` gives the text of each docid."""

    def __init__(self, path: Path, documents: Any, query_ids: dict[str, str], *, snippet_chars: int = 400, name: str | None = None):
        self.path = Path(path)
        self.run = read_trec_run(self.path)
        self.documents, self.query_ids, self.snippet_chars = documents, query_ids, snippet_chars
        self.name = name or self.path.stem

    def describe(self) -> dict[str, Any]:
        """What provenance records: the run file's name, its query count and the document store."""
        return {"kind": "trec-run", "run": self.path.name, "queries": len(self.run), "documents": getattr(self.documents, "label", None)}

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10) -> SearchAnswer:
        """The run's ranking for ``query`` (its first ``limit`` documents). Raises ExternalSearchError
        (``search_unknown_source``) naming docids the document store does not hold."""
        started = time.perf_counter()
        qid = self.query_ids.get(query)
        ranked = self.run.get(qid, []) if qid is not None else []
        reply = [{"id": docid, "score": score} for docid, score in ranked]
        hits = map_hits(reply, FieldMapping(), query, limit, self.documents, self.snippet_chars)
        return SearchAnswer(
            query=query, mode=mode, results=hits, confident=bool(hits), latencyMs=round((time.perf_counter() - started) * 1000, 3)
        )
