"""What keeps two queries apart however close their embeddings are: different numbers, a negation,
opposite words, a swapped direction, or different identifiers. Embeddings are weak at exactly these
contrasts (negation: Ettinger 2020, TACL 8; numbers: Wallace et al. 2019, EMNLP), so they are read from
the words. The rules err on the side of keeping. docs/query-sets.md ("Distinct") gives each rule.
"""

from __future__ import annotations

import re
import unicodedata

NEGATIONS = frozenset(
    "not no never without none nothing nobody nowhere neither nor cannot cant dont doesnt didnt isnt arent "
    "wasnt werent wont wouldnt shouldnt couldnt hasnt havent hadnt mustnt".split()
)
"""Words that negate what follows (case-folded, apostrophes removed)."""

OPPOSITES: tuple[tuple[str, str], ...] = (
    ("increase", "decrease"),
    ("increase", "reduce"),
    ("raise", "lower"),
    ("higher", "lower"),
    ("more", "less"),
    ("more", "fewer"),
    ("enable", "disable"),
    ("enabled", "disabled"),
    ("on", "off"),
    ("start", "stop"),
    ("open", "close"),
    ("add", "remove"),
    ("add", "delete"),
    ("create", "delete"),
    ("create", "drop"),
    ("create", "destroy"),
    ("allow", "deny"),
    ("allow", "block"),
    ("allow", "forbid"),
    ("accept", "reject"),
    ("approve", "reject"),
    ("grant", "revoke"),
    ("include", "exclude"),
    ("show", "hide"),
    ("upgrade", "downgrade"),
    ("encrypt", "decrypt"),
    ("import", "export"),
    ("upload", "download"),
    ("push", "pull"),
    ("read", "write"),
    ("input", "output"),
    ("inbound", "outbound"),
    ("ingress", "egress"),
    ("min", "max"),
    ("minimum", "maximum"),
    ("first", "last"),
    ("before", "after"),
    ("old", "new"),
    ("older", "newer"),
    ("oldest", "newest"),
    ("up", "down"),
    ("expand", "shrink"),
    ("attach", "detach"),
    ("backup", "restore"),
    ("pause", "resume"),
    ("public", "private"),
    ("internal", "external"),
    ("client", "server"),
    ("source", "target"),
    ("sync", "async"),
    ("synchronous", "asynchronous"),
    ("ascending", "descending"),
    ("success", "failure"),
    ("succeed", "fail"),
    ("valid", "invalid"),
    ("true", "false"),
    ("allowlist", "denylist"),
    ("whitelist", "blacklist"),
    ("commit", "rollback"),
    ("login", "logout"),
    ("fast", "slow"),
    ("faster", "slower"),
    ("large", "small"),
    ("larger", "smaller"),
)
"""Opposite words common in operations queries (compared on their stems)."""

NEGATING_PREFIXES = ("un", "dis", "de", "non", "in", "anti")
"""A word and the word with one of these before it are opposites (``lock`` / ``unlock``) when the shorter
has at least four letters."""

DIRECTION_WORDS = frozenset("from to into onto than versus vs over".split())
"""Words whose object gives a query its direction (``from A to B``, ``A faster than B``)."""

_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_RAW_TOKEN = re.compile(r"\S+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_EDGE_PUNCT = "\"'`“”‘’()[]{}<>,;!?"
_IDENTIFIER_SHAPE = re.compile(r"\d|[^\W_][_\-./:][^\W_]|[a-z][A-Z]|^[A-Z][A-Z0-9]+$")


def _stem(word: str) -> str:
    """A light stem: ``ing``, ``ed``, ``es`` or ``s`` and then a final ``e`` removed when three letters stay."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


_OPPOSITE_STEMS = tuple((_stem(a), _stem(b)) for a, b in OPPOSITES)


def _words(text: str) -> list[str]:
    """NFKC, case-folded, apostrophes removed (``don't`` -> ``dont``)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return [w.replace("'", "").replace("’", "") for w in _TOKEN.findall(folded)]


def _numbers(text: str) -> tuple[int, ...]:
    """Every number in order, each dotted or comma-separated part as an integer."""
    return tuple(int(part) for match in _NUMBER.findall(unicodedata.normalize("NFKC", text)) for part in re.split(r"[.,]", match))


def _negated(text: str, words: list[str]) -> bool:
    return any(w in NEGATIONS for w in words) or re.search(r"n['’]t\b", text.casefold()) is not None


def _opposite(a: set[str], b: set[str]) -> str | None:
    """The first pair of opposites split between the two queries, as ``x/y``."""
    only_a, only_b = a - b, b - a
    for x, y in _OPPOSITE_STEMS:
        if (x in only_a and y in only_b) or (y in only_a and x in only_b):
            return f"{x}/{y}"
    for word in only_a | only_b:
        other = only_b if word in only_a else only_a
        for prefix in NEGATING_PREFIXES:
            if len(word) >= 4 and prefix + word in other:
                return f"{word}/{prefix}{word}"
    return None


def _swapped_direction(a: list[str], b: list[str]) -> str | None:
    """A direction word both use whose next word differs, each of the two named in the other query."""
    for d in DIRECTION_WORDS & set(a) & set(b):
        after_a = a[a.index(d) + 1] if a.index(d) + 1 < len(a) else None
        after_b = b[b.index(d) + 1] if b.index(d) + 1 < len(b) else None
        if after_a and after_b and after_a != after_b and after_a in b and after_b in a:
            return f"{d} {after_a} / {d} {after_b}"
    return None


def _identifiers(text: str) -> set[str]:
    """Tokens with a digit, an inner ``_ - . / :``, an inner capital, or in capitals; lower-cased, alphanumeric."""
    found = set()
    for raw in _RAW_TOKEN.findall(unicodedata.normalize("NFKC", text)):
        token = raw.strip(_EDGE_PUNCT).rstrip(".:")
        if len(token) >= 2 and _IDENTIFIER_SHAPE.search(token):
            found.add(_compact(token))
    return {i for i in found if i}


def _compact(text: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


def _identifier_contrast(a: str, b: str) -> str | None:
    """``x / y`` when each query names an identifier the other's text does not spell."""
    text_a, text_b = _compact(a), _compact(b)
    only_a = sorted(i for i in _identifiers(a) if i not in text_b)
    only_b = sorted(i for i in _identifiers(b) if i not in text_a)
    return f"{only_a[0]} / {only_b[0]}" if only_a and only_b else None


def contrast(a: str, b: str) -> str | None:
    """Why queries ``a`` and ``b`` ask different things, as a short phrase (``"numbers 14, 15 / 15, 16"``,
    ``"negation"``), or None."""
    numbers_a, numbers_b = _numbers(a), _numbers(b)
    if numbers_a != numbers_b:
        return f"numbers {', '.join(map(str, numbers_a)) or 'none'} / {', '.join(map(str, numbers_b)) or 'none'}"
    words_a, words_b = _words(a), _words(b)
    if _negated(a, words_a) != _negated(b, words_b):
        return "negation"
    opposite = _opposite({_stem(w) for w in words_a}, {_stem(w) for w in words_b})
    if opposite:
        return f"opposites {opposite}"
    direction = _swapped_direction(words_a, words_b)
    if direction:
        return f"direction {direction}"
    identifiers = _identifier_contrast(a, b)
    return f"identifiers {identifiers}" if identifiers else None
