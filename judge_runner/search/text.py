"""Text processing shared by every lexical backend: CJK bigrams, tokens, safe OR queries, snippets.

Chinese, Japanese and Korean text has no spaces between words; SQLite's unicode61 tokenizer (and
PostgreSQL's default parser) would read a whole run of CJK characters as one token, so a two-character
word inside a sentence could never match. We index and query overlapping character bigrams of every CJK
run instead, the standard approach of Lucene's CJKBigramFilter: no dictionary, works for all three
languages, and a 2-character query word matches exactly one bigram.
"""

from __future__ import annotations

import re
import unicodedata

# moved to the neutral judge_runner.core.textproc (the heuristic roles use them too); re-exported here
from judge_runner.core.textproc import _WORD, STOPWORDS, cjk_bigrams, query_tokens, word_variants  # noqa: F401

_TOKEN = re.compile(r"\w+", re.UNICODE)


def lexical_text(text: str) -> str:
    """The form of ``text`` stored in a full-text index: CJK runs as bigrams, and the variants of
    :func:`word_variants` appended after the words that have them."""
    text = cjk_bigrams(text)
    extra = [v for word in set(_WORD.findall(text)) for v in word_variants(word)]
    return text + ("\n" + " ".join(extra) if extra else "")


def path_terms(source: str) -> str:
    """The words of a document's path as a full-text index stores them (``scripts/check_ingest_lag.py``
    -> ``scripts check ingest lag py``), so a file-name match counts."""
    return source.replace("/", " ").replace(".", " ").replace("_", " ").replace("-", " ")


def _latin_fold_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for start, end in ((0x00C0, 0x024F), (0x1E00, 0x1EFF)):  # Latin-1 Supplement to Latin Extended-B, Latin Extended Additional
        for cp in range(start, end + 1):
            base = "".join(c for c in unicodedata.normalize("NFD", chr(cp)) if not unicodedata.combining(c))
            if base and base != chr(cp):
                table[cp] = base
    return table


_LATIN_FOLD = _latin_fold_table()


def fold_diacritics(text: str) -> str:
    """Latin letters without their diacritics (``Kündigung`` -> ``Kundigung``, ``é`` -> ``e``), as SQLite's
    ``unicode61 remove_diacritics`` tokenizer folds them; other scripts (kana voicing marks, Hangul) are
    left alone."""
    return text.translate(_LATIN_FOLD)


def normalized_words(text: str) -> list[str]:
    """The word tokens of ``text`` lower-cased and diacritic-folded: how a backend without its own
    Unicode tokenizer (PostgreSQL's 'simple' parser) is fed, so it splits words exactly like SQLite's
    unicode61 (letters and digits; punctuation, underscores and spaces separate)."""
    return _WORD.findall(fold_diacritics(text).lower())


def query_phrases(query: str) -> list[list[str]]:
    """Multi-token pieces of a query that should also match as phrases: identifiers and compounds
    written without spaces (``atomic_write_json``, ``DEC-0054``, ``os.path.join``, ``real-time``,
    ``docker-compose.yml``) and CJK runs of more than one bigram."""
    phrases: list[list[str]] = []
    for piece in query.split():
        parts = [p.lower() for p in _WORD.findall(cjk_bigrams(piece))]
        if len(parts) > 1:
            phrases.append(parts)
    return phrases


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def fts5_match_expression(query: str) -> str | None:
    """An FTS5 MATCH expression that ORs the query's tokens and compound phrases, each a quoted string,
    so no query text can be read as FTS5 syntax (``AND``, ``NEAR``, ``*``, ``:``, quotes...). BM25
    then ranks documents holding more of them, and whole identifiers, higher. None when the query has
    no tokens (empty, whitespace or punctuation only)."""
    tokens = query_tokens(query)
    if not tokens:
        return None
    clauses = [_quote(t) for t in tokens]
    clauses += [_quote(" ".join(p)) for p in query_phrases(query)]
    return " OR ".join(dict.fromkeys(clauses))


def make_snippet(text: str, query: str, width: int = 400) -> str:
    """A window of at most ``width`` characters of ``text`` centred on where most query tokens occur,
    cut at whitespace (never mid-word unless a single word is longer than the window), with ``…``
    marking a cut."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    tokens = [t for t in query_tokens(query) if len(t) > 1]
    lowered = flat.lower()
    positions = sorted(m.start() for t in tokens for m in re.finditer(re.escape(t), lowered))
    best_start = 0
    if positions:
        # the window start (at a match) that covers the most matches
        best_count = -1
        j = 0
        for i, start in enumerate(positions):
            while j < len(positions) and positions[j] < start + width * 0.8:
                j += 1
            if j - i > best_count:
                best_count, best_start = j - i, start
        best_start = max(0, best_start - width // 5)
    # near the end of the text, start early enough that the window (after its "… ") is full
    if best_start > 0 and len(flat) - best_start < width - 2:
        best_start = max(0, len(flat) - (width - 2))
    # the start moves forward to a word start
    if best_start > 0 and flat[best_start - 1] != " ":
        space = flat.find(" ", best_start)
        if space != -1 and space + 1 < len(flat):
            best_start = space + 1
    prefix = "… " if best_start > 0 else ""
    room = width - len(prefix)
    if len(flat) - best_start <= room:
        return prefix + flat[best_start:]
    # the end moves back to a word end, leaving room for " …" (a single over-long word is cut)
    end = best_start + room - 2
    if flat[end] != " ":
        space = flat.rfind(" ", best_start, end)
        if space > best_start:
            end = space
    return prefix + flat[best_start:end].rstrip() + " …"


def _stem_prefix(token: str) -> str:
    """A crude stem for coverage checks: tokens over 5 characters lose their last two (plural and verb
    endings), so "trails" matches "trail" and "rotating" matches "rotate"."""
    return token if len(token) <= 5 else token[:-2]


def term_coverage(query: str, text: str) -> float:
    """Share of the query's tokens (stopwords dropped) that occur in ``text``, comparing crude stems;
    0.0 for a query without tokens. Used by the honesty gate: one shared common word is not a match."""
    tokens = query_tokens(query)
    if not tokens:
        return 0.0
    words = [w.lower() for w in _TOKEN.findall(cjk_bigrams(text))]
    prefixes = {_stem_prefix(t) for t in tokens}
    found = {p for p in prefixes if any(w.startswith(p) for w in words)}
    return sum(1 for t in tokens if _stem_prefix(t) in found) / len(tokens)
