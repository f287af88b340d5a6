"""What the judge reads of a document for a query: one rule, whoever returned the document (issue 28).

A label must be a property of the query and the document, not of the system that returned it: TREC judges
a pooled document once, whoever retrieved it (Voorhees & Harman 2005, "TREC: Experiment and Evaluation in
Information Retrieval", ch. 2). So the text shown to the judge is chosen here, from the document's own
chunks, by a rule that knows nothing of the engine's ranking, matched chunk or snippet:

1. **The chunks.** The document's chunks as the indexer makes them (:mod:`judge_runner.corpus.formats`),
   in document order: the built-in index holds them; a document store
   (:mod:`judge_runner.search.documents`) chunks its files the same way.
2. **The scorer.** Each chunk is scored by BM25 (Robertson & Zaragoza 2009, "The Probabilistic Relevance
   Framework: BM25 and Beyond", k1 = 1.2, b = 0.75, Lucene's always-positive IDF
   ``ln(1 + (N - n + 0.5) / (n + 0.5))``) of the query's terms (:func:`~judge_runner.core.textproc.query_tokens`:
   stopwords dropped, camelCase parts added) in the chunk's own text, the collection being the document's
   chunks: a term every chunk holds (the sample's name in its README) weighs little, a term only one
   section holds decides. Words match by the crude stem of the honesty gate
   (:func:`~judge_runner.search.text.term_coverage`: a word starting with the term's first letters), Latin
   diacritics folded. The path and the anchor do not count: every chunk of a document shares its path,
   an anchor repeats its parent headings, and a chunk's own heading is in its text (with path words, a
   query naming the file tied every chunk, and the first, often a bare heading, won).
3. **The choice.** The chunks that hold a query term, best first (equal scores: the earlier chunk first),
   as long as the text stays within :data:`SHOWN_TEXT_CAP`; the best chunk always (the fence cuts a longer
   one). Several chunks, not one: all the evidence the document holds for the query, up to what the judge
   is shown of any result; chunks without a query term add tokens, not evidence, and are left out. When no
   chunk holds a query term (a document found by meaning, not by words), the document from its start, up
   to the cap: its title and opening say what it is about, and nothing better is known without a model.
4. **The text.** The chosen chunks in document order, separated by a blank line, with a line ``[…]``
   wherever chunks were left out (between, before or after them); the anchor shown is the best chunk's.

Deterministic (a function of the query and the chunks' texts alone), cheap (one pass over the
document's words, no model) and the same for every system. Its version, :data:`PASSAGE_RULE`, is part of
the judge fingerprint (``judging/fingerprint.py``): runs judged under another rule are not compared by
``trend``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from judge_runner.core.textproc import _WORD, cjk_bigrams, query_tokens, word_variants
from judge_runner.corpus.chunk import Chunk
from judge_runner.search.text import fold_diacritics

PASSAGE_RULE = "passages-1"
"""Version of the rule above; recorded in the judge fingerprint. Bump on any change to what
:func:`select_passages` returns."""

SHOWN_TEXT_CAP = 2000
"""Most characters of a result's text shown to the judge (imported by the fence, ``judging/fence.py``,
where the fence cuts at it). The passages of a document are chosen to fit in it; the built-in chunker caps
a chunk at 1,200 characters (``corpus.chunk.MAX_CHUNK_CHARS``), so the best chunk always fits and one or
more others may join it. A result's own text (an external search without a document store) is cut here at
a line or word boundary with a visible marker."""

GAP = "[…]"
"""The line that stands for chunks of the document left out of what the judge is shown."""

BM25_K1, BM25_B = 1.2, 0.75  # Robertson & Zaragoza 2009, the usual defaults (Lucene, Anserini)


@dataclass(frozen=True)
class Passages:
    """What the judge is shown of one document for one query: ``text`` (the chosen chunks in document
    order, gaps marked with :data:`GAP`), ``anchor`` (the best chunk's, None when it has none),
    ``chunks`` (the 0-based positions of the chunks shown, in document order), ``best`` (the best chunk's
    position) and ``line_start``/``line_end`` (the best chunk's 1-based lines in the document)."""

    text: str
    anchor: str | None
    chunks: tuple[int, ...]
    best: int
    line_start: int
    line_end: int


def _stem(term: str) -> str:
    """The crude stem of :func:`judge_runner.search.text.term_coverage`: over 5 characters, the last two go."""
    return term if len(term) <= 5 else term[:-2]


@lru_cache(maxsize=1024)  # a run scores the same documents for many queries; about 13 MB at most
def chunk_words(text: str) -> tuple[str, ...]:
    """The words of a chunk's text as the scorer reads them: CJK as bigrams, Latin diacritics folded,
    lower case, plus camelCase parts (:func:`~judge_runner.core.textproc.word_variants`)."""
    words = _WORD.findall(fold_diacritics(cjk_bigrams(text)))
    return tuple(w.lower() for word in words for w in (word, *word_variants(word)))


def bm25_scores(query: str, texts: Sequence[str]) -> list[float]:
    """BM25 of ``query`` for each of ``texts`` (one document's chunks), with the document's chunks as the
    collection (module docstring, step 2). All 0.0 for a query without terms or texts without them."""
    stems = list(dict.fromkeys(_stem(fold_diacritics(t)) for t in query_tokens(query)))
    docs = [chunk_words(t) for t in texts]
    if not stems or not docs:
        return [0.0] * len(docs)
    counts = [[sum(1 for w in words if w.startswith(s)) for s in stems] for words in docs]
    n = len(docs)
    average = sum(len(words) for words in docs) / n or 1.0
    idf = [math.log(1 + (n - df + 0.5) / (df + 0.5)) for df in (sum(1 for c in counts if c[j]) for j in range(len(stems)))]
    scores = []
    for words, tfs in zip(docs, counts):
        norm = BM25_K1 * (1 - BM25_B + BM25_B * len(words) / average)
        scores.append(sum(w * tf * (BM25_K1 + 1) / (tf + norm) for w, tf in zip(idf, tfs) if tf))
    return scores


def join_chunks(texts: Sequence[str], positions: Sequence[int]) -> str:
    """The texts at ``positions`` (sorted, 0-based, of ``len(texts)``) as the judge reads them: a blank
    line between neighbours, a :data:`GAP` line wherever chunks were left out."""
    parts: list[str] = []
    previous = -1
    for position in positions:
        if position > previous + 1:
            parts.append(GAP)
        parts.append(texts[position].strip("\n"))
        previous = position
    if positions and positions[-1] < len(texts) - 1:
        parts.append(GAP)
    return "\n\n".join(parts)


def select_passages(query: str, chunks: Sequence[Chunk], cap: int = SHOWN_TEXT_CAP) -> Passages | None:
    """The passages of a document (its ``chunks`` in document order) shown to the judge for ``query``, by
    the rule of the module docstring; None when the document has no chunk. ``cap``: the most characters
    of the text (the best chunk is kept even when it alone is longer)."""
    if not chunks:
        return None
    texts = [c.text for c in chunks]
    scores = bm25_scores(query, texts)
    order = sorted(range(len(chunks)), key=lambda i: (-scores[i], i))
    if scores[order[0]] > 0:
        order = [i for i in order if scores[i] > 0]  # the evidence only
    chosen = [order[0]]
    room = cap - len(join_chunks(texts, chosen))
    for position in order[1:]:
        if len(texts[position]) - len(GAP) > room:  # cannot fit: adding a chunk adds at least its length less a gap line
            continue
        trial = sorted([*chosen, position])
        length = len(join_chunks(texts, trial))
        if length <= cap:
            chosen, room = trial, cap - length
    positions = tuple(sorted(chosen))
    best = chunks[order[0]]
    return Passages(join_chunks(texts, positions), best.anchor, positions, order[0], best.line_start, best.line_end)
