"""The systems whose rankings are compared, and the pool of documents the judge labels.

Systems (each gives, per query, a ranked list of up to ``RUN_DEPTH`` document ids):

- the built-in search's configurations (:data:`BUILTIN_SYSTEMS`): ``fts`` (BM25), ``vector`` (MiniLM cosine),
  ``hybrid`` (RRF, shipped settings), and two fusion settings: ``hybrid-rrf10`` (k = 10) and
  ``hybrid-equal`` (full-text weight 1.0, the seed's);
- degraded controls (:data:`CONTROLS`), which any sensible judge must rank below hybrid: ``control-ranks11-20``
  (hybrid's ranks 11-20 moved to the top) and ``control-reversed`` (hybrid's top 10 in reverse order);
- TREC runs given with ``--run`` (``run:<file stem>``).

The pool of a query is the union of every system's top ``depth`` plus every qrels-judged document of the
query (:func:`build_pool`), so agreement can be measured both on what systems retrieve (realistic
prevalence) and on a set holding every known relevant document (balanced).

Candidate scope (``scope="candidates"``): embedding all of a large corpus with MiniLM takes minutes (SciFact's
5,183 abstracts: about 2 minutes here), so the index may instead hold the *candidate sub-corpus*: every
qrels-judged document of the sampled queries plus the BM25 top ``candidates`` of each sampled query over the
whole corpus (SQLite FTS5 in memory, the search's own tokenisation). The systems then re-rank that set: their
absolute metrics are higher than on the full corpus, but every document a system could put in its top 10 on
the full corpus by BM25 is there, and the judge is measured on the same kind of documents. ``scope="full"``
indexes the whole corpus (incremental: a second run re-embeds nothing).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_runner.calibrate.data import CalibrationQuery, Collection
from judge_runner.core.failures import UsageError
from judge_runner.search.indexer import index_beir
from judge_runner.search.settings import SearchSettings
from judge_runner.search.text import fts5_match_expression, lexical_text
from judge_runner.search.trec_run import TrecRunError, read_trec_run

RUN_DEPTH = 100
"""Documents kept per query and system: enough for R@100."""


@dataclass(frozen=True)
class SystemSpec:
    """A built-in search configuration: ``name``, search ``mode`` and settings overrides."""

    name: str
    mode: str
    overrides: Mapping[str, float] = field(default_factory=dict)


BUILTIN_SYSTEMS = (
    SystemSpec("fts", "fts"),
    SystemSpec("vector", "vector"),
    SystemSpec("hybrid", "hybrid"),
    SystemSpec("hybrid-rrf10", "hybrid", {"rrf_k": 10.0}),
    SystemSpec("hybrid-equal", "hybrid", {"fts_weight": 1.0}),
)
CONTROLS = ("control-ranks11-20", "control-reversed")
CONTROL_BASE = "hybrid"

Runs = dict[str, dict[str, list[str]]]
"""``{system: {qid: [docid, ...best first]}}``."""


def builtin_runs(
    index: Any,
    queries: list[CalibrationQuery],
    systems: Iterable[SystemSpec] = BUILTIN_SYSTEMS,
    depth: int = RUN_DEPTH,
    progress: Callable[[str, int, int], None] | None = None,
) -> Runs:
    """Run every query through each configuration of ``index`` (a ``SQLiteIndex`` or ``PostgresIndex``;
    its ``settings`` are swapped per system and restored). Returns ``{system: {qid: docids}}``.
    ``progress("searching", done, total)`` is called after each search."""
    runs: Runs = {}
    original = index.settings
    specs = list(systems)
    total, done = len(specs) * len(queries), 0
    if progress and total:
        progress("searching", 0, total)
    try:
        for spec in specs:
            index.settings = original.model_copy(update=dict(spec.overrides))
            ranked: dict[str, list[str]] = {}
            for q in queries:
                ranked[q.id] = [h.source for h in index.search(q.text, mode=spec.mode, limit=depth, passages=False).results]
                done += 1
                if progress:
                    progress("searching", done, total)
            runs[spec.name] = ranked
    finally:
        index.settings = original
    return runs


def control_runs(base: Mapping[str, list[str]]) -> Runs:
    """The degraded controls built from ``base`` (``{qid: docids}``): ranks 11-20 first (then nothing), and
    the top 10 reversed."""
    return {
        "control-ranks11-20": {q: list(d[10:20]) for q, d in base.items()},
        "control-reversed": {q: list(reversed(d[:10])) for q, d in base.items()},
    }


def read_run(path: Path, qids: Iterable[str]) -> dict[str, list[str]]:
    """``{qid: docids best first}`` of a TREC run file (``qid Q0 docid rank score tag``), in trec_eval's
    order (:func:`judge_runner.search.trec_run.read_trec_run`: score descending, ties by docid
    descending), cut at ``RUN_DEPTH`` lines before a docid listed twice is merged into its first place,
    kept for ``qids`` only; a sampled query the run has no line for is absent (the caller
    says so: :func:`judge_runner.app.calibrate_job.collect_runs`). Raises UsageError for a line that is
    not a run line, or a file with no line for these queries (naming the ids on both sides)."""
    wanted = list(qids)
    try:
        run = read_trec_run(path)
    except TrecRunError as exc:
        raise UsageError(str(exc)) from None
    kept = {q: list(dict.fromkeys(d for d, _ in run[q][:RUN_DEPTH])) for q in wanted if q in run}  # cut as ranked, then merge
    if not kept:
        theirs = sorted(run)
        raise UsageError(
            f"{path} has no line for the sampled queries: its query ids ({', '.join(theirs[:3])}{' ...' if len(theirs) > 3 else ''}) "
            f"match none of the collection's ({', '.join(wanted[:3])}{' ...' if len(wanted) > 3 else ''})"
        )
    return kept


@dataclass(frozen=True)
class PoolEntry:
    """One pooled pair: the document, the systems that put it in their top ``depth`` (empty when it is in
    the pool only because it is qrels-judged), and its human grade (0-3; unjudged counts as 0)."""

    qid: str
    docid: str
    systems: tuple[str, ...]
    human: int

    @property
    def retrieved(self) -> bool:
        """Whether some system retrieved it (the realistic-prevalence subset)."""
        return bool(self.systems)


def build_pool(runs: Runs, collection: Collection, queries: list[CalibrationQuery], depth: int) -> dict[str, list[PoolEntry]]:
    """``{qid: [PoolEntry]}``: per query the union of every system's top ``depth`` (in order of first
    appearance, systems in the order given) and then every qrels-judged document. Documents missing from
    the corpus are left out."""
    docs = collection.documents()
    pool: dict[str, list[PoolEntry]] = {}
    for q in queries:
        found: dict[str, list[str]] = {}
        for system, ranked in runs.items():
            for docid in ranked.get(q.id, [])[:depth]:
                found.setdefault(docid, []).append(system)
        for docid in collection.qrels.get(q.id, {}):
            found.setdefault(docid, [])
        pool[q.id] = [PoolEntry(q.id, d, tuple(s), collection.grade(q.id, d)) for d, s in found.items() if d in docs]
    return pool


def bm25_candidates(docs: Mapping[str, tuple[str, str]], queries: list[CalibrationQuery], depth: int) -> dict[str, list[str]]:
    """``{qid: docids}``: the BM25 top ``depth`` of each query over ``docs`` (an in-memory SQLite FTS5 table
    over title and text with the search's own tokenisation, :func:`lexical_text` and
    :func:`fts5_match_expression`)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE c USING fts5(docid UNINDEXED, title, body, tokenize = 'porter unicode61 remove_diacritics 2')")
        conn.executemany("INSERT INTO c VALUES (?, ?, ?)", ((d, lexical_text(t), lexical_text(x)) for d, (t, x) in docs.items()))
        out: dict[str, list[str]] = {}
        for q in queries:
            expression = fts5_match_expression(q.text)
            out[q.id] = (
                []
                if expression is None
                else [
                    r[0]
                    for r in conn.execute("SELECT docid FROM c WHERE c MATCH ? ORDER BY bm25(c, 2.0, 1.0) LIMIT ?", (expression, depth))
                ]
            )
        return out
    finally:
        conn.close()


def candidate_corpus(collection: Collection, queries: list[CalibrationQuery], depth: int) -> list[str]:
    """The candidate sub-corpus (see the module docstring): qrels-judged documents of ``queries`` plus the
    BM25 top ``depth`` of each, sorted."""
    docs = collection.documents()
    chosen = {d for q in queries for d in collection.qrels.get(q.id, {}) if d in docs}
    for ranked in bm25_candidates(docs, queries, depth).values():
        chosen.update(ranked)
    return sorted(chosen)


def write_corpus(collection: Collection, docids: Iterable[str], path: Path) -> Path:
    """Write these documents as a BEIR ``corpus.jsonl`` at ``path`` (for :func:`index_beir`); returns it."""
    docs = collection.documents()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for d in docids:
            title, text = docs[d]
            out.write(json.dumps({"_id": d, "title": title, "text": text}, ensure_ascii=False) + "\n")
    return path


def prepare_index(
    index: Any,
    collection: Collection,
    queries: list[CalibrationQuery],
    scope: str,
    candidates: int,
    workdir: Path,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Bring ``index`` up to date with the corpus (``scope="full"``) or the candidate sub-corpus
    (``"candidates"``, BM25 depth ``candidates``), incrementally (prunes what is not in it). Returns
    ``{"scope", "documents", "candidateDepth", "indexed", "unchanged"}``. Raises UsageError for an unknown
    scope."""
    if scope == "full":
        report = index_beir(index, collection.corpus_path, prune=True, progress=progress)
        count = len(collection.documents())
    elif scope == "candidates":
        chosen = candidate_corpus(collection, queries, candidates)
        report = index_beir(index, write_corpus(collection, chosen, workdir / "candidates.corpus.jsonl"), prune=True, progress=progress)
        count = len(chosen)
    else:
        raise UsageError(f"unknown corpus scope {scope!r}; use full or candidates")
    return {
        "scope": scope,
        "documents": count,
        "candidateDepth": candidates if scope == "candidates" else None,
        "indexed": report.indexed,
        "unchanged": report.unchanged,
    }


def default_settings() -> SearchSettings:
    """The shipped search settings (what ``hybrid`` runs with)."""
    return SearchSettings()
