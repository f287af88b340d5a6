"""The query-set checks that need no judge: near-duplicates (:func:`find_duplicates`), non-specific queries
(:func:`non_specific`), and the leakage of queries and intents (:func:`measure_leakage`,
:func:`measure_intent`). docs/query-sets.md explains each check and its thresholds.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from judge_runner.core.models import Query
from judge_runner.core.query_card import NonSpecificQuery
from judge_runner.embed.base import TextEmbedder, encode_each
from judge_runner.querygen.contrast import contrast
from judge_runner.querygen.profile import CorpusProfile, content_stems, normalise_text
from judge_runner.search.hybrid import FIELD_WEIGHTS
from judge_runner.search.text import fts5_match_expression, lexical_text, path_terms

DUPLICATE_COSINE = 0.90
"""Cosine at or above which two queries with the same expected sources are near-duplicates (calibrated on
all-MiniLM-L6-v2: paraphrases score above, related but different questions about 0.75)."""
HEADING_FILES_LIMIT = 3
"""A query whose text is a heading of more than this many files is non-specific."""
NON_SPECIFIC_RIVALS = 3
"""Other files BM25 cannot separate from the expected source that make a query non-specific."""
BM25_TIE = 0.9
"""A file scoring at least this share of the expected source's BM25 score is not separated from it."""
MIN_COVERAGE = 0.75
"""The BM25 test applies only when the expected source holds this share of the query's stems: a query in
the user's own words is not lexical, so BM25 says nothing about it."""
WIDEN_LIMIT = 5
"""A non-specific query is widened to at most this many rivals; with more it is dropped."""
MAX_EXPECTED_SOURCES = 10
"""The query-set schema's ``expectedSources.maxItems``."""


# -- distinct ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Duplicate:
    """``dropped`` repeats ``kept``: the same normalised text, or the same sources at cosine ``cosine``."""

    kept: Query
    dropped: Query
    cosine: float | None
    same_text: bool


def find_duplicates(queries: Sequence[Query], embedder: TextEmbedder) -> tuple[list[Query], list[Duplicate]]:
    """``(kept, duplicates)``: ``queries`` in order without near-duplicates of an earlier query, unless
    :func:`~judge_runner.querygen.contrast.contrast` keeps them apart. Raises what the embedder raises."""
    groups: dict[frozenset[str], list[int]] = {}
    for i, q in enumerate(queries):
        groups.setdefault(frozenset(q.expectedSources), []).append(i)
    shared = [i for members in groups.values() if len(members) > 1 for i in members]
    vectors = dict(zip(shared, encode_each(embedder, [queries[i].query for i in shared]))) if shared else {}
    kept: list[int] = []
    by_text: dict[str, int] = {}
    found: list[Duplicate] = []
    for i, q in enumerate(queries):
        text = normalise_text(q.query)
        if text in by_text:
            found.append(Duplicate(queries[by_text[text]], q, None, True))
            continue
        best, best_cosine = None, -1.0
        if i in vectors:
            for k in kept:
                if k in vectors and frozenset(queries[k].expectedSources) == frozenset(q.expectedSources):
                    cosine = float(np.dot(vectors[k], vectors[i]))
                    if cosine > best_cosine and contrast(queries[k].query, q.query) is None:
                        best, best_cosine = k, cosine
        if best is not None and best_cosine >= DUPLICATE_COSINE:
            found.append(Duplicate(queries[best], q, round(best_cosine, 4), False))
            continue
        kept.append(i)
        by_text[text] = i
    return [queries[i] for i in kept], found


# -- specific ---------------------------------------------------------------------------------------------
class CorpusBM25:
    """BM25 over the corpus's files as the built-in search's FTS5 ``bm25()`` computes it (Robertson and
    Zaragoza 2009, k1 = 1.2, b = 0.75): the index's tokenizer and field weights, an OR of the query's tokens.
    One in-memory table, built on first use."""

    def __init__(self, profile: CorpusProfile):
        self.profile = profile
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _table(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            conn.execute(
                "CREATE VIRTUAL TABLE d USING fts5(source UNINDEXED, body, path, tokenize = 'porter unicode61 remove_diacritics 2')"
            )
            conn.executemany(
                "INSERT INTO d VALUES (?, ?, ?)", ((s, lexical_text(f.text), path_terms(s)) for s, f in self.profile.files.items())
            )
            self._conn = conn
        return self._conn

    def scores(self, query: str) -> dict[str, float]:
        """``{source: BM25 score}`` (higher is better); a file not in the dict scores 0."""
        expression = fts5_match_expression(query)
        if expression is None:
            return {}
        with self._lock:
            rows = (
                self._table().execute(f"SELECT source, -bm25(d, 1.0, {FIELD_WEIGHTS[2]}) FROM d WHERE d MATCH ?", (expression,)).fetchall()
            )
        return {source: float(score) for source, score in rows}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass(frozen=True)
class Specificity:
    """Why a query is non-specific, and the files (``rivals``) that answer it as well, best first."""

    why: str
    rivals: tuple[str, ...]


def non_specific(query: Query, profile: CorpusProfile, bm25: CorpusBM25) -> Specificity | None:
    """Why ``query`` is non-specific, or None: a heading of many files, or BM25 ties the expected source with
    :data:`NON_SPECIFIC_RIVALS` others. ``ambiguous``, ``off-topic`` and sourceless queries never are."""
    if query.queryType in ("ambiguous", "off-topic") or not query.expectedSources:
        return None
    expected = set(query.expectedSources)
    carriers = profile.heading_files(query.query)
    if len(carriers) > HEADING_FILES_LIMIT:
        rivals = tuple(sorted(carriers - expected))
        return Specificity(f"its text is a heading of {len(carriers)} files", rivals)
    held = [s for s in query.expectedSources if s in profile.files]
    if not held:
        return None
    scores = bm25.scores(query.query)
    best = max(held, key=lambda s: scores.get(s, 0.0))
    top = scores.get(best, 0.0)
    words = content_stems(query.query)
    held_share = sum(1 for w in words if w in profile.files[best].stems) / len(words) if words else 0.0
    if top <= 0 or held_share < MIN_COVERAGE:
        return None
    tied = sorted((s for s, v in scores.items() if s not in expected and v >= BM25_TIE * top), key=lambda s: (-scores[s], s))
    if len(tied) < NON_SPECIFIC_RIVALS:
        return None
    return Specificity(
        f"BM25 cannot separate its expected source from {len(tied)} other files (each within {1 - BM25_TIE:.0%})", tuple(tied)
    )


def resolve_non_specific(query: Query, finding: Specificity) -> tuple[Query | None, NonSpecificQuery]:
    """``(the query widened, or None when dropped; the card's entry)``."""
    rivals = list(finding.rivals)
    if len(rivals) <= WIDEN_LIMIT and len(query.expectedSources) + len(rivals) <= MAX_EXPECTED_SOURCES:
        widened = query.model_copy(update={"expectedSources": [*query.expectedSources, *rivals]})
        why = f"{finding.why}; expected sources widened to the {len(rivals)} other files that answer it as well"
        return widened, NonSpecificQuery(id=query.id, query=query.query, why=why, action="widened", rivals=len(rivals), addedSources=rivals)
    why = f"{finding.why}; dropped: with {len(rivals)} files answering it equally it cannot tell a good ranking from a bad one"
    return None, NonSpecificQuery(id=query.id, query=query.query, why=why, action="dropped", rivals=len(rivals))


COPY_NGRAM = 5
"""Words in a row an intent shares with its source to count as copied (five are a quotation)."""
INTENT_COPY_LIMIT = 0.25
"""The share of an intent's word 5-grams found verbatim in its best expected source above which it restates
the source rather than describing the need."""


# -- leakage ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Leakage:
    """How much of a query is copied from its expected source: ``value`` (None without a source in the
    corpus), ``background`` (the same share in an average other file), ``heading_copy``."""

    value: float | None
    background: float | None
    heading_copy: bool


def measure_leakage(query: Query, profile: CorpusProfile) -> Leakage:
    """The idf-weighted share of ``query``'s content stems that its best expected source holds (1.0 for an
    exact heading copy), and the same share averaged over the other files. The lexical overlap
    Promptagator (Dai et al. 2022) and InPars (Bonifacio et al. 2022) filter synthetic queries for."""
    sources = [s for s in query.expectedSources if s in profile.files]
    if not sources:
        return Leakage(None, None, False)
    target = normalise_text(query.query)
    heading_copy = any(normalise_text(h) == target for s in sources for h in profile.files[s].headings)
    weights = {w: profile.idf(w) for w in content_stems(query.query)}
    total = sum(weights.values())
    if total <= 0:
        return Leakage(1.0 if heading_copy else None, None, heading_copy)
    value = max(sum(v for w, v in weights.items() if w in profile.files[s].stems) for s in sources) / total
    others = len(profile.files) - len(sources)
    background = None
    if others > 0:  # each word counts in the files holding it, less the expected sources holding it
        held = sum(v * (profile.document_frequency[w] - sum(1 for s in sources if w in profile.files[s].stems)) for w, v in weights.items())
        background = round(held / others / total, 4)
    return Leakage(1.0 if heading_copy else round(value, 4), background, heading_copy)


@dataclass(frozen=True)
class IntentOverlap:
    """How much of an intent comes from its expected source: ``value`` and ``background`` as :class:`Leakage`,
    ``copied`` (share of its :data:`COPY_NGRAM`-grams, less the query's, found verbatim; None without any),
    ``names_source`` and ``over_limit``."""

    value: float | None
    background: float | None
    copied: float | None
    names_source: bool

    @property
    def over_limit(self) -> bool:
        return self.names_source or (self.copied is not None and self.copied > INTENT_COPY_LIMIT)


def _ngrams(text: str, n: int = COPY_NGRAM) -> set[tuple[str, ...]]:
    words = normalise_text(text).split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def measure_intent(query: Query, profile: CorpusProfile) -> IntentOverlap:
    """The overlap of ``query``'s intent with its expected sources."""
    sources = [s for s in query.expectedSources if s in profile.files]
    if not sources or not query.queryIntent.strip():
        return IntentOverlap(None, None, None, False)
    leak = measure_leakage(query.model_copy(update={"query": query.queryIntent}), profile)
    grams = _ngrams(query.queryIntent) - _ngrams(query.query)  # quoting the query adds nothing the judge is not shown
    copied = max(len(grams & _ngrams(profile.files[s].text)) for s in sources) / len(grams) if grams else None
    intent = query.queryIntent.lower()
    names = any(s.lower() in intent or (len(name := s.rsplit("/", 1)[-1].lower()) >= 5 and name in intent) for s in sources)
    return IntentOverlap(leak.value, leak.background, None if copied is None else round(copied, 4), names)
