"""What the judge reads of a document for a query: one rule, whoever returned the document, as TREC judges
a pooled document once (Voorhees & Harman 2005, "TREC: Experiment and Evaluation in Information
Retrieval", ch. 2). A document that fits is shown whole; else its chunks are ranked for the query and the
intent by BM25 and cosine fused by RRF, and the best that fit are shown in document order. Deterministic.
See docs/judge-protocol.md, "What the judge sees of a document".
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from judge_runner.core.textproc import _WORD, cjk_bigrams, query_tokens, word_variants
from judge_runner.corpus.chunk import Chunk
from judge_runner.embed.base import TextEmbedder, encode_each
from judge_runner.search.fusion import rrf
from judge_runner.search.text import fold_diacritics

PASSAGE_RULE = "passages-2"
"""In the judge fingerprint: bump on any change to what :func:`select_passages` returns."""

SHOWN_TEXT_CAP = 2000
"""Most characters of a result's text shown to the judge; a chunk (at most 1,200) always fits."""

GAP = "[…]"
"""The line that stands for chunks left out."""

BM25_K1, BM25_B = 1.2, 0.75  # Robertson & Zaragoza 2009, the usual defaults (Lucene, Anserini)
RRF_K = 60.0  # Cormack, Clarke & Büttcher 2009, "Reciprocal Rank Fusion outperforms Condorcet and individual rank learning methods"
COSINE_DECIMALS = 4
INTENT_FILLER = frozenset(
    """want wants wanted needs need needed looking find finds know knows user users good answer answers gives give
    explains explain describes describe contains contain shows show says names lists document documents section
    sections page pages file files information""".split()
)
"""Words every intent is written with, left out of its terms."""
_VECTOR_CACHE_SIZE = 8192  # chunk texts; 384 float32 each: about 12 MB at most


@dataclass(frozen=True)
class Passages:
    """What the judge is shown of one document. ``chunks``: 0-based positions shown; ``line_start`` and
    ``line_end``: the best chunk's 1-based lines."""

    text: str
    anchor: str | None
    chunks: tuple[int, ...]
    best: int
    line_start: int
    line_end: int


def _stem(term: str) -> str:
    """The honesty gate's crude stem: over 5 characters, the last two go."""
    return term if len(term) <= 5 else term[:-2]


@lru_cache(maxsize=1024)  # a run scores the same documents for many queries; about 13 MB at most
def chunk_words(text: str) -> tuple[str, ...]:
    """A chunk's words: CJK as bigrams, diacritics folded, lower case, plus camelCase parts."""
    words = _WORD.findall(fold_diacritics(cjk_bigrams(text)))
    return tuple(w.lower() for word in words for w in (word, *word_variants(word)))


def bm25_scores(query: str, texts: Sequence[str], ignore: frozenset[str] = frozenset()) -> list[float]:
    """BM25 (Robertson & Zaragoza 2009; Lucene's IDF) of ``query``'s terms less ``ignore`` for each of one
    document's chunk ``texts``, which are the collection."""
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


def text_vectors(embedder: TextEmbedder, texts: Sequence[str]) -> np.ndarray:
    """``texts`` embedded one at a time, shape ``(len(texts), dimension)``, through a process cache."""
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


def remember_vector(embedder: TextEmbedder, text: str, vector: np.ndarray) -> None:
    """Cache a vector made alone under ``embedder``, so a query is not embedded twice."""
    name = str(getattr(embedder, "name", type(embedder).__name__))
    with _vectors_lock:
        _vectors[(name, text)] = np.asarray(vector, dtype=np.float32).reshape(-1)
        while len(_vectors) > _VECTOR_CACHE_SIZE:
            _vectors.popitem(last=False)


def cosines(embedder: TextEmbedder, text: str, texts: Sequence[str]) -> list[float]:
    """The cosine of ``text`` with each of ``texts``, rounded to :data:`COSINE_DECIMALS`."""
    vectors = text_vectors(embedder, [text, *texts])
    return [round(float(v), COSINE_DECIMALS) for v in vectors[1:] @ vectors[0]]


def _ranking(scores: Sequence[float], positive_only: bool) -> list[int]:
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return [i for i in order if scores[i] > 0] if positive_only else order


def chunk_ranking(query: str, intent: str, texts: Sequence[str], embedder: TextEmbedder | None = None) -> list[int]:
    """Every chunk position, best first; document order when nothing ranks them."""
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
    """The texts at ``positions``, a blank line between neighbours, a :data:`GAP` line for those left out."""
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
    query: str, chunks: Sequence[Chunk], cap: int = SHOWN_TEXT_CAP, *, intent: str = "", embedder: TextEmbedder | None = None
) -> Passages | None:
    """What the judge is shown of a document's ``chunks``, at most ``cap`` characters but the best chunk
    always; None without chunks. ``embedder`` None: lexical only."""
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
