"""A TREC run file as a search (``evaluate --run run.trec --corpus ...``), found by query id. Results are
ordered as trec_eval orders them, never by the rank column: score descending as a 32-bit float, ties by
docid bytes descending (trec_eval's ``form_res_rels.c``, ``comp_sim_docno``). A query without lines is
an error line, not a zero. See docs/external-search.md.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

from judge_runner.core.models import SearchMode
from judge_runner.search.base import SearchAnswer
from judge_runner.search.mapping import DocumentStore, ExternalSearchError, FieldMapping, map_hits
from judge_runner.search.trec import decode_id


class TrecRunError(ValueError):
    """A run file that cannot be read; the message names the file and line."""


def _float32(value: float) -> float:
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def trec_eval_order(rows: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """One query's ``[(docid, score)]`` in trec_eval's order; a docid listed twice stays twice."""
    ordered = sorted(rows, key=lambda r: r[0].encode("utf-8"), reverse=True)
    ordered.sort(key=lambda r: -_float32(r[1]))  # stable: ties keep the docid order
    return ordered


def read_trec_run(path: Path) -> dict[str, list[tuple[str, float]]]:
    """``{qid: [(docid, score), ...]}`` in trec_eval's order, ids decoded. Raises TrecRunError for a line
    that is not ``qid Q0 docid rank score tag``, a bad escape, a non-finite score, or an empty file."""
    rows: dict[str, list[tuple[str, float]]] = {}
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
            qid = decode_id(parts[0])
            decode_id(parts[2])
            int(parts[3])
            score = float(parts[4])
            if score != score or score in (float("inf"), float("-inf")):
                raise ValueError(f"score {parts[4]!r} is not a finite number")
        except ValueError as exc:
            raise TrecRunError(f"{path} line {number}: {exc}") from None
        rows.setdefault(qid, []).append((parts[2], score))
    if not rows:
        raise TrecRunError(f"{path} holds no run lines")
    return {qid: [(decode_id(d), s) for d, s in trec_eval_order(found)] for qid, found in rows.items()}


class TrecRunSearch:
    """A :class:`~judge_runner.search.base.SearchBackend` replaying a TREC run. ``query_ids``: query text to
    id."""

    def __init__(
        self, path: Path, documents: DocumentStore | None, query_ids: dict[str, str], *, snippet_chars: int = 400, name: str | None = None
    ):
        self.path = Path(path)
        self.run = read_trec_run(self.path)
        self.documents, self.query_ids, self.snippet_chars = documents, query_ids, snippet_chars
        self.name = name or self.path.stem

    @property
    def qids(self) -> set[str]:
        return set(self.run)

    def describe(self) -> dict[str, Any]:
        return {"kind": "trec-run", "run": self.path.name, "queries": len(self.run), "documents": getattr(self.documents, "label", None)}

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10, *, intent: str = "") -> SearchAnswer:
        """The run's first ``limit`` documents for ``query``. Raises ExternalSearchError:
        ``search_no_ranking`` or ``search_unknown_source``."""
        started = time.perf_counter()
        qid = self.query_ids.get(query)
        if qid is None or qid not in self.run:
            raise ExternalSearchError(
                f"the run {self.path.name} has no line for query {qid or query!r}; not scored (trec_eval leaves it out too)",
                "search_no_ranking",
            )
        ranked = self.run[qid]
        reply = [{"id": docid, "score": score} for docid, score in ranked]
        hits, notes = map_hits(reply, FieldMapping(), query, limit, self.documents, self.snippet_chars, intent)
        return SearchAnswer(
            query=query,
            mode=mode,
            results=hits,
            confident=bool(hits),
            latencyMs=round((time.perf_counter() - started) * 1000, 3),
            notes=notes,
        )
