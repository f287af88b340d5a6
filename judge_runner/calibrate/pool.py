"""The systems whose rankings are compared, and the pool of documents the judge labels: the built-in search's
configurations (:data:`BUILTIN_SYSTEMS`), degraded controls any sensible judge ranks below hybrid
(:data:`CONTROLS`), and TREC runs (``--run``). A query's pool is every system's top ``depth`` plus every
qrels-judged document. ``scope="candidates"`` indexes only the qrels-judged documents and each query's BM25 top
``candidates`` over the whole corpus, so a large corpus is not embedded whole; absolute metrics are then higher
than on the full corpus (docs/calibration.md)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from judge_runner.calibrate.data import CalibrationQuery, Collection
from judge_runner.core.failures import UsageError
from judge_runner.core.models import SearchMode
from judge_runner.search.base import SearchIndex
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
    mode: SearchMode
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
    index: SearchIndex,
    queries: list[CalibrationQuery],
    systems: Iterable[SystemSpec] = BUILTIN_SYSTEMS,
    depth: int = RUN_DEPTH,
    progress: Callable[[str, int, int], None] | None = None,
) -> Runs:
    """Every query through each configuration of ``index`` (its ``settings`` swapped per system and restored);
    ``progress("searching", done, total)`` after each search."""
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
    """From ``base``: ranks 11-20 first, and the top 10 reversed."""
    return {
        "control-ranks11-20": {q: list(d[10:20]) for q, d in base.items()},
        "control-reversed": {q: list(reversed(d[:10])) for q, d in base.items()},
    }


def read_run(path: Path, qids: Iterable[str]) -> dict[str, list[str]]:
    """``{qid: docids best first}`` of a TREC run file in trec_eval's order, cut at :data:`RUN_DEPTH` before a
    repeated docid is merged, for ``qids`` only (a query without lines is absent). Raises UsageError for a line
    that is not a run line, or no line for these queries."""
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
    """One pooled pair: the systems that put it in their top ``depth`` (none when only qrels-judged) and its
    human grade (0-3; unjudged counts 0)."""

    qid: str
    docid: str
    systems: tuple[str, ...]
    human: int

    @property
    def retrieved(self) -> bool:
        return bool(self.systems)


def build_pool(runs: Runs, collection: Collection, queries: list[CalibrationQuery], depth: int) -> dict[str, list[PoolEntry]]:
    """``{qid: [PoolEntry]}``: the union of every system's top ``depth`` in order of first appearance, then the
    qrels-judged documents; documents missing from the corpus are left out."""
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
    """``{qid: docids}``: the BM25 top ``depth`` of each query over ``docs``, in an in-memory SQLite FTS5 table
    with the search's own tokenisation."""
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
    """The qrels-judged documents of ``queries`` plus each one's BM25 top ``depth``, sorted."""
    docs = collection.documents()
    chosen = {d for q in queries for d in collection.qrels.get(q.id, {}) if d in docs}
    for ranked in bm25_candidates(docs, queries, depth).values():
        chosen.update(ranked)
    return sorted(chosen)


def write_corpus(collection: Collection, docids: Iterable[str], path: Path) -> Path:
    """Write these documents as a BEIR ``corpus.jsonl`` at ``path``; returns it."""
    docs = collection.documents()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for d in docids:
            title, text = docs[d]
            out.write(json.dumps({"_id": d, "title": title, "text": text}, ensure_ascii=False) + "\n")
    return path


def prepare_index(
    index: SearchIndex,
    collection: Collection,
    queries: list[CalibrationQuery],
    scope: str,
    candidates: int,
    workdir: Path,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Bring ``index`` up to date with the corpus or the candidate sub-corpus, incrementally (pruning the rest).
    Raises UsageError for an unknown scope."""
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
