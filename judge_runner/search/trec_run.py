"""An existing TREC run file as a search (``evaluate --run run.trec --corpus corpus.jsonl|DIR``): any engine
that can write a run (Anserini/Pyserini, Vespa, Elasticsearch scripts, ``judge-runner search --trec-run``)
is judged without an adapter.

A run line is ``qid Q0 docid rank score tag`` (whitespace-separated; trec_eval's format). Query and
document ids are decoded with :func:`judge_runner.search.trec.decode_id` (``%XX`` escapes of whitespace
and ``%``, the encoding judge-runner writes), so a fixtures path with a space round-trips. Results are
ordered as trec_eval and ir-measures order them, whatever the rank column says: by score, higher
first, the score held as a 32-bit float (trec_eval's C ``float``: doubles closer than about 1e-7 tie),
ties broken by docid in descending order of its bytes as written (trec_eval's ``strcmp``, reversed;
trec_eval's ``form_res_rels.c``, ``comp_sim_docno``); the rank column is never read for order. So
the metrics judge-runner computes on a run are those trec_eval would (an all-ties run used to rank by
the rank column: nDCG@10 0.924 where trec_eval gives 0.525). A run written by judge-runner
(:func:`judge_runner.search.trec.run_lines`) has strictly decreasing float32 scores, so its order is its
own.

The search finds a query's ranking by the query's id: the query set maps each query's text to its id.
A query the run holds no line for is not scored (an error line, as trec_eval leaves such a query out of
the run's averages, rather than a zero); :func:`judge_runner.app.inputs.check_run_coverage` says so
before the run, and refuses a run that matches none of the query set's ids. Text comes from a document
store (:mod:`judge_runner.search.documents`), by the rule every system's documents are shown by
(:mod:`judge_runner.search.passages`); a docid the store does not hold is an error naming it. The
ranking is cut at the search limit before a docid listed twice is merged into its first place (the
evaluation line's ``searchNotes`` says so).
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

from judge_runner.core.models import SearchMode
from judge_runner.search.base import SearchAnswer
from judge_runner.search.mapping import ExternalSearchError, FieldMapping, map_hits
from judge_runner.search.trec import decode_id


class TrecRunError(ValueError):
    """A run file that cannot be read; the message names the file and line."""


def _float32(value: float) -> float:
    """``value`` rounded to a 32-bit float, as trec_eval holds a score (beyond its range: infinite)."""
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


def trec_eval_order(rows: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """``[(docid as written, score)]`` of one query in trec_eval's order: score descending compared as
    float32, ties by docid descending (bytes). A docid listed twice stays twice (trec_eval refuses such a
    run; the search cuts the ranking at its limit first, then merges, as it does for every system:
    :func:`judge_runner.search.mapping.map_hits`)."""
    ordered = sorted(rows, key=lambda r: r[0].encode("utf-8"), reverse=True)
    ordered.sort(key=lambda r: -_float32(r[1]))  # stable: ties keep the docid order
    return ordered


def read_trec_run(path: Path) -> dict[str, list[tuple[str, float]]]:
    """``{qid: [(docid, score), ...]}`` in trec_eval's order (:func:`trec_eval_order`), ids decoded. Raises
    TrecRunError for a line that is not ``qid Q0 docid rank score tag``, a bad escape, a score that is not
    a finite number, or a file without any line."""
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
    """A :class:`~judge_runner.search.base.SearchBackend` replaying a TREC run. ``query_ids`` maps a
    query's text to its id (from the query set); ``documents`` gives the text of each docid."""

    def __init__(self, path: Path, documents: Any, query_ids: dict[str, str], *, snippet_chars: int = 400, name: str | None = None):
        self.path = Path(path)
        self.run = read_trec_run(self.path)
        self.documents, self.query_ids, self.snippet_chars = documents, query_ids, snippet_chars
        self.name = name or self.path.stem

    @property
    def qids(self) -> set[str]:
        """The query ids the run holds lines for."""
        return set(self.run)

    def describe(self) -> dict[str, Any]:
        """What provenance records: the run file's name, its query count and the document store."""
        return {"kind": "trec-run", "run": self.path.name, "queries": len(self.run), "documents": getattr(self.documents, "label", None)}

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10, *, intent: str = "") -> SearchAnswer:
        """The run's ranking for ``query`` (its first ``limit`` documents; ``intent`` chooses their passages). Raises ExternalSearchError:
        ``search_no_ranking`` when the run has no line for the query's id (not scored, never a zero),
        ``search_unknown_source`` naming docids the document store does not hold."""
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
