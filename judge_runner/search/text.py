"""Text processing shared by every lexical backend: tokens, safe OR queries, snippets, and CJK runs as
overlapping bigrams (as Lucene's CJKBigramFilter), so a two-character word inside a sentence matches.
"""

from __future__ import annotations

import re
import unicodedata

# moved to the neutral judge_runner.core.textproc (the heuristic roles use them too); re-exported here
from judge_runner.core.textproc import _WORD, STOPWORDS, cjk_bigrams, query_tokens, word_variants  # noqa: F401

_TOKEN = re.compile(r"\w+", re.UNICODE)


def lexical_text(text: str) -> str:
    """``text`` as a full-text index stores it: CJK runs as bigrams, word variants appended."""
    text = cjk_bigrams(text)
    extra = [v for word in set(_WORD.findall(text)) for v in word_variants(word)]
    return text + ("\n" + " ".join(extra) if extra else "")


def path_terms(source: str) -> str:
    """``scripts/check_ingest_lag.py`` -> ``scripts check ingest lag py``."""
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
    """``Kündigung`` -> ``Kundigung`` as SQLite's unicode61 folds it; other scripts are left alone."""
    return text.translate(_LATIN_FOLD)


def normalized_words(text: str) -> list[str]:
    """Words lower-cased and folded, split exactly as SQLite's unicode61 splits them."""
    return _WORD.findall(fold_diacritics(text).lower())


def query_phrases(query: str) -> list[list[str]]:
    """Identifiers and compounds (``atomic_write_json``, ``DEC-0054``) and CJK runs of two or more bigrams,
    to match as phrases too."""
    phrases: list[list[str]] = []
    for piece in query.split():
        parts = [p.lower() for p in _WORD.findall(cjk_bigrams(piece))]
        if len(parts) > 1:
            phrases.append(parts)
    return phrases


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def fts5_match_expression(query: str) -> str | None:
    """An FTS5 MATCH expression ORing the query's tokens and phrases, each quoted, so no query text is
    read as FTS5 syntax. None when the query has no tokens."""
    tokens = query_tokens(query)
    if not tokens:
        return None
    clauses = [_quote(t) for t in tokens]
    clauses += [_quote(" ".join(p)) for p in query_phrases(query)]
    return " OR ".join(dict.fromkeys(clauses))


def make_snippet(text: str, query: str, width: int = 400) -> str:
    """At most ``width`` characters around most of the query's tokens, cut at whitespace and marked ``…``."""
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
    """A crude stem: over 5 characters, the last two go ("rotating" matches "rotate")."""
    return token if len(token) <= 5 else token[:-2]


def term_coverage(query: str, text: str) -> float:
    """Share of the query's tokens, less stopwords, whose crude stems occur in ``text``; 0.0 without tokens."""
    tokens = query_tokens(query)
    if not tokens:
        return 0.0
    words = [w.lower() for w in _TOKEN.findall(cjk_bigrams(text))]
    prefixes = {_stem_prefix(t) for t in tokens}
    found = {p for p in prefixes if any(w.startswith(p) for w in words)}
    return sum(1 for t in tokens if _stem_prefix(t) in found) / len(tokens)
