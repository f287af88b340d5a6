"""What the judge reads of a document for a query: one rule, whoever returned the document.

A label must be a property of the query and the document, not of the system that returned it: TREC judges
a pooled document once, whoever retrieved it (Voorhees & Harman 2005, "TREC: Experiment and Evaluation in
Information Retrieval", ch. 2). So the text shown to the judge is chosen here, from the document's own
chunks, by a rule that knows nothing of the engine's ranking, matched chunk or snippet:

1. **The chunks.** The document's chunks as the indexer makes them (:mod:`judge_runner.corpus.formats`),
   in document order: the built-in index holds them; a document store
   (:mod:`judge_runner.search.documents`) chunks its files the same way.
2. **A document that fits is shown whole**: when all its chunks fit in :data:`SHOWN_TEXT_CAP`, nothing is
   chosen (TREC's assessors read the whole document); the anchor shown is its first chunk's (its title).
3. **Each chunk scored by the query and the intent**, in up to four rankings fused by reciprocal rank
   fusion (Cormack, Clarke & Büttcher 2009, k = 60; ties: the earlier chunk):

   - lexically: BM25 (Robertson & Zaragoza 2009, k1 = 1.2, b = 0.75, Lucene's always-positive IDF
     ``ln(1 + (N - n + 0.5) / (n + 0.5))``) of the query's terms, and of the intent's
     (:func:`~judge_runner.core.textproc.query_tokens`: stopwords dropped, camelCase parts added; the
     intent's stock words, :data:`INTENT_FILLER`, dropped too), in the chunk's own text, the collection
     being the document's chunks. Words match by the crude stem of the honesty gate
     (:func:`~judge_runner.search.text.term_coverage`), Latin diacritics folded. Path and anchor words do
     not count (every chunk shares the path, an anchor repeats its parents' headings; a chunk's own
     heading is in its text). A ranking holds only the chunks with a term.
   - by meaning: the cosine between the chunk's text and the query, and the intent, under the command's
     one embedder (:mod:`judge_runner.embed.registry`, the same for every system of a run; rounded to
     4 decimals, so float noise of another batch shape cannot swap two chunks). A ranking holds every chunk.

   The intent matters because the query types that test meaning (conceptual queries worded away from the
   document, queries in another language) share few words with the answer, and the intent usually names
   the need in the document's own terms.
4. **The choice.** The chunks best first, as long as the text stays within the cap; the best always
   (the fence cuts a longer one). So the document's start is shown first only when it ranks first: with
   no embedder and no word shared with the query or the intent, no ranking orders the chunks and the
   document is shown from its start.
5. **The text.** The chosen chunks in document order, separated by a blank line, with a line ``[…]``
   wherever chunks were left out; the anchor shown is the best chunk's.

Deterministic (a function of the query, the intent, the chunks' texts and the embedder) and the same for
every system. Its version, :data:`PASSAGE_RULE`, and the embedder's model name are part of the judge
fingerprint (``judging/fingerprint.py``): runs judged under another rule or embedder are not compared by
``trend``.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from judge_runner.core.textproc import _WORD, cjk_bigrams, query_tokens, word_variants
from judge_runner.corpus.chunk import Chunk
from judge_runner.embed.base import encode_each
from judge_runner.search.fusion import rrf
from judge_runner.search.text import fold_diacritics

PASSAGE_RULE = "passages-2"
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
RRF_K = 60.0  # Cormack, Clarke & Büttcher 2009, "Reciprocal Rank Fusion outperforms Condorcet and individual rank learning methods"
COSINE_DECIMALS = 4
INTENT_FILLER = frozenset(
    """want wants wanted needs need needed looking find finds know knows user users good answer answers gives give
    explains explain describes describe contains contain shows show says names lists document documents section
    sections page pages file files information""".split()
)
"""Words intents are written with whatever they ask for ("Wants to know ...; a good answer gives ..."):
not evidence of anything, left out of the intent's terms."""
_VECTOR_CACHE_SIZE = 8192  # chunk texts; 384 float32 each: about 12 MB at most


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


def bm25_scores(query: str, texts: Sequence[str], ignore: frozenset[str] = frozenset()) -> list[float]:
    """BM25 of ``query``'s terms (less those in ``ignore``) for each of ``texts`` (one document's chunks),
    with the document's chunks as the collection (module docstring, step 3). All 0.0 for a query without
    terms or texts without them."""
    terms = [t for t in query_tokens(query) if t not in ignore]
    stems = list(dict.fromkeys(_stem(fold_diacritics(t)) for t in terms))
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


_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_vectors_lock = threading.Lock()


def text_vectors(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """``texts`` embedded by ``embedder`` one at a time (:func:`~judge_runner.embed.base.encode_each`:
    a vector is a function of its text and the model only), shape ``(len(texts), dimension)``; a process
    cache keyed by the embedder's model name and the text keeps the last :data:`_VECTOR_CACHE_SIZE`.
    Raises what ``embedder.encode`` raises."""
    name = str(getattr(embedder, "name", type(embedder).__name__))
    with _vectors_lock:
        known = {t: _vectors[(name, t)] for t in texts if (name, t) in _vectors}
    missing = list(dict.fromkeys(t for t in texts if t not in known))
    if missing:
        made = encode_each(embedder, missing)
        with _vectors_lock:
            for text, vector in zip(missing, made):
                _vectors[(name, text)] = known[text] = vector
                while len(_vectors) > _VECTOR_CACHE_SIZE:
                    _vectors.popitem(last=False)
    dimension = int(getattr(embedder, "dimension", 0))
    return np.vstack([known[t] for t in texts]) if texts else np.zeros((0, dimension), dtype=np.float32)


def remember_vector(embedder: Any, text: str, vector: np.ndarray) -> None:
    """Put ``text``'s vector, made elsewhere by :func:`~judge_runner.embed.base.encode_each` under
    ``embedder`` (the built-in search's query vector: the same function of the text and the model), into
    the cache :func:`text_vectors` reads, so a query is not embedded twice."""
    name = str(getattr(embedder, "name", type(embedder).__name__))
    with _vectors_lock:
        _vectors[(name, text)] = np.asarray(vector, dtype=np.float32).reshape(-1)
        while len(_vectors) > _VECTOR_CACHE_SIZE:
            _vectors.popitem(last=False)


def cosines(embedder: Any, text: str, texts: Sequence[str]) -> list[float]:
    """The cosine of ``text`` with each of ``texts`` under ``embedder`` (its vectors are L2-normalised),
    rounded to :data:`COSINE_DECIMALS`."""
    vectors = text_vectors(embedder, [text, *texts])
    return [round(float(v), COSINE_DECIMALS) for v in vectors[1:] @ vectors[0]]


def _ranking(scores: Sequence[float], positive_only: bool) -> list[int]:
    """Positions by score, best first (ties: the earlier); with ``positive_only`` the scores above 0 only."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return [i for i in order if scores[i] > 0] if positive_only else order


def chunk_ranking(query: str, intent: str, texts: Sequence[str], embedder: Any = None) -> list[int]:
    """Every position of a document's chunk ``texts``, best first for the query and the intent (module
    docstring, step 3). Without an embedder, the lexical rankings only; with no ranking at all (no
    embedder, no shared word), document order."""
    rankings: list[list[int]] = []
    for words, ignore in ((query, frozenset()), (intent, INTENT_FILLER)):
        if not words.strip():
            continue
        rankings.append(_ranking(bm25_scores(words, texts, ignore), positive_only=True))
        if embedder is not None:
            rankings.append(_ranking(cosines(embedder, words, texts), positive_only=False))
    fused = rrf(rankings, k=RRF_K)
    return sorted(range(len(texts)), key=lambda i: (-fused.get(i, 0.0), i))


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


def select_passages(
    query: str, chunks: Sequence[Chunk], cap: int = SHOWN_TEXT_CAP, *, intent: str = "", embedder: Any = None
) -> Passages | None:
    """The passages of a document (its ``chunks`` in document order) shown to the judge for ``query`` and
    its ``intent``, by the rule of the module docstring; None when the document has no chunk. ``cap``: the
    most characters of the text (the best chunk is kept even when it alone is longer). ``embedder``: the
    command's one :class:`~judge_runner.embed.base.TextEmbedder` (None: lexical only, for callers that
    have none). Raises what the embedder raises."""
    if not chunks:
        return None
    texts = [c.text for c in chunks]
    whole = join_chunks(texts, range(len(texts)))
    if len(whole) <= cap:  # whole, under its first chunk's anchor (its title)
        first = chunks[0]
        return Passages(whole, first.anchor, tuple(range(len(texts))), 0, first.line_start, first.line_end)
    order = chunk_ranking(query, intent, texts, embedder) if len(texts) > 1 else [0]
    best = order[0]
    chosen = [best]
    room = cap - len(join_chunks(texts, chosen))
    for position in order[1:]:
        if len(texts[position]) - len(GAP) > room:  # cannot fit: a chunk adds at least its length less a gap line
            continue
        trial = sorted([*chosen, position])
        length = len(join_chunks(texts, trial))
        if length <= cap:
            chosen, room = trial, cap - length
    positions = tuple(sorted(chosen))
    chunk = chunks[best]
    return Passages(join_chunks(texts, positions), chunk.anchor, positions, best, chunk.line_start, chunk.line_end)
