"""Text normalisation shared by the search and the heuristic roles: CJK bigrams (as Lucene's CJKBigramFilter),
word variants, stopwords and query tokens. Neutral ground, so neither reaches into the other."""

from __future__ import annotations

import re

# Han, Hiragana, Katakana, Hangul syllables and Jamo, CJK punctuation excluded.
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]+")

# A short English stopword list (function words only). They are dropped from full-text queries so that
# "how do I bake bread" does not match every document on "how" and "do"; a query made only of
# stopwords keeps them.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves""".split()
)


def cjk_bigrams(text: str) -> str:
    """Replace each CJK run by its overlapping bigrams, space separated (``"索引服务"`` ->
    ``"索引 引服 服务"``); a single CJK character stays as it is; other text is unchanged."""

    def repl(match: re.Match[str]) -> str:
        run = match.group(0)
        if len(run) == 1:
            return f" {run} "
        return " " + " ".join(run[i : i + 2] for i in range(len(run) - 1)) + " "

    return _CJK_RUN.sub(repl, text)


_CAMEL = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_GERMAN = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "Ä": "Ae", "Ö": "Oe", "Ü": "Ue", "ß": "ss"})
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def word_variants(word: str) -> list[str]:
    """Extra index and query forms of a word: camelCase parts (``parseConfig`` -> ``parse``, ``Config``) and
    umlauts transliterated (``Kündigung`` -> ``Kuendigung``)."""
    variants: list[str] = []
    if any(c.isupper() for c in word[1:]) and any(c.islower() for c in word):
        parts = _CAMEL.findall(word)
        if len(parts) > 1:
            variants.extend(parts)
    transliterated = word.translate(_GERMAN)
    if transliterated != word:
        variants.append(transliterated)
    return variants


def query_tokens(query: str) -> list[str]:
    """Lower-cased word tokens, CJK as bigrams, plus word variants; stopwords dropped unless nothing else is
    left; no duplicates, order kept. Operators and punctuation are not tokens."""
    words = _WORD.findall(cjk_bigrams(query))
    tokens = [t.lower() for word in words for t in [word, *word_variants(word)]]
    tokens = list(dict.fromkeys(t for t in tokens if t.strip("_")))
    content = [t for t in tokens if t not in STOPWORDS]
    return content or tokens


# Unencodable code points: text from files, queries, query sets and model replies passes through here
_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_unencodable(text: str) -> tuple[str, int]:
    r"""``(text, n)``: ``text`` with each code point UTF-8 cannot encode (a lone surrogate, e.g. from a JSON
    ``"\ud83d"`` escape) replaced by U+FFFD, and how many were. A valid pair is recombined."""
    if not _SURROGATE.search(text):
        return text, 0
    before = text.count("\ufffd")
    # pairs recombine (e.g. "\ud83d\ude80" held as two code points), lone ones become U+FFFD
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text, text.count("\ufffd") - before


def clean_text(text: str) -> str:
    """``text`` safe to embed, store and write (:func:`scrub_unencodable` without the count)."""
    return scrub_unencodable(text)[0]
