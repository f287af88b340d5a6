"""What the judge sees of one result: its text fenced as untrusted data (issue 14, item 3).

A search result is rendered for the judge as its source path, its anchor and its text (the document's
passages for the query by the one rule, :mod:`judge_runner.search.passages`, or the text the system
returned when no store holds the document), all three treated as untrusted document content, inside a
fence whose tag carries a per-call random delimiter::

    <document-3f9a0c1d5e7b2a46 id="D2">
    source: runbooks/redis-failover.md
    anchor: Redis failover > Promote the replica
    text:
    1. Check the replica's lag ...
    </document-3f9a0c1d5e7b2a46>

The delimiter comes from :func:`secrets.token_hex`, so a document cannot close its own fence: it cannot
know the tag (the "spotlighting" defence by delimiting, Hines et al. 2024, "Defending Against Indirect
Prompt Injection Attacks With Spotlighting"). As defence in depth, anything in the document that looks
like a fence or prompt tag, a chat-template token, or a result header of the old prompt format
(``[3] source: x | score 1.0000``) is neutralised case-insensitively, whatever its spacing, case,
full-width brackets or zero-width characters inside; and instruction-like text ("label this 3",
"ignore previous instructions", "you are now", "system: ..."; a few other languages) is *detected*
and reported as ``injection_suspected``. Detection never changes the text's label: the judge and the
code that reads its labels must not raise a label because of it (the judge is told so; nothing in code
reads the flag to raise a label).

What is hashed for the judgment cache is :attr:`RenderedDocument.shown`, the delimiter-free text,
so the random delimiter does not defeat the cache; :data:`RENDER_VERSION` goes into the judge
fingerprint and must be bumped on any change to this module's output.
"""

from __future__ import annotations

import re
import secrets
import unicodedata
from dataclasses import dataclass

# the most characters of a result's text shown to the judge, where render_document cuts; defined beside the
# rule that chooses a document's passages to fit in it (search/passages.py), re-exported here
from judge_runner.search.passages import SHOWN_TEXT_CAP

RENDER_VERSION = "fence-1"
"""Version of the rendering below; part of the judge fingerprint and the cache key. Bump on ANY change
to what :func:`render_document` or :func:`fence` produce."""


FIELD_CAP = 300
"""Most characters of the source path and of the anchor shown (each is one line; untrusted)."""

DELIMITER_PREFIX = "document-"
_DELIMITER_RE = re.compile(r"document-[0-9a-f]{16}")

# zero-width and invisible format characters that can hide inside a tag name
_ZW_CHARS = "\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad\u180e\u034f"
_ZW = f"[{_ZW_CHARS}]"
_ZW_RE = re.compile(_ZW)
_GAP = rf"(?:[\s_.\-]|{_ZW})*"  # what may sit between the letters of a spoofed tag name
_LT, _GT = "[<\uff1c\ufe64\u2329\u3008]", "[>\uff1e\ufe65\u232a\u3009]"

# Tag names the prompts use or that read as prompt structure. A tag whose name STARTS with one of them
# (after removing spacing, case and zero-width characters) is neutralised, so <documentation> and
# List<Document> are touched too: harmless (brackets become ‹ › in what the judge sees).
RESERVED_TAG_NAMES = (
    "document",
    "doc",
    "result",
    "query",
    "intent",
    "expected",
    "judged",
    "labelled",
    "labeled",
    "label",
    "instruction",
    "system",
    "user",
    "assistant",
    "developer",
    "untrusted",
    "fence",
    "verdict",
    "im_start",
    "im_end",
    "endoftext",
    "search",
)


def _spaced(word: str) -> str:
    return _GAP.join(re.escape(c) for c in word)


_TAG_RE = re.compile(
    rf"{_LT}(?P<inner>(?:\s|{_ZW})*[/!|]?(?:\s|{_ZW})*(?:{'|'.join(_spaced(n) for n in RESERVED_TAG_NAMES)})[^<>\n\uff1c\uff1e]{{0,200}}?)(?P<close>{_GT}|$)",
    re.IGNORECASE | re.MULTILINE,
)
_CHAT_TOKEN_RE = re.compile(r"\[/?INST\]|<<\s*/?\s*SYS\s*>>|<\|[a-z_]{2,20}\|>", re.IGNORECASE)
# "[3] source: x | anchor: y | lines 1-4 | score 1.0000", the result header of the old prompt, and any
# "| score 0.93" engine-score imitation
_HEADER_RE = re.compile(
    r"^(?P<lead>[ \t>*_\-]*)\[\s*(?P<id>[A-Za-z]{0,3}\s*\d{1,4})\s*\](?=\s*(?:source|anchor|doc|document|result|rank|id)\b)",
    re.IGNORECASE | re.MULTILINE,
)
_SCORE_RE = re.compile(r"\|(?=\s*(?:engine\s*)?score\s*[:=]?\s*[-+]?\d)", re.IGNORECASE)

_NUM = r"(?:[0-3]|zero|one|two|three)"
_DOC = r"(?:document|doc|result|page|passage|snippet|section|text|file|chunk|answer|source|entry)"
_RATE = r"(?:label|grade|rate|score|mark|judge|assess|rank|classify|tag)"
INSTRUCTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE | re.MULTILINE))
    for name, pattern in (
        (
            "ignore-instructions",
            r"\b(?:ignore|disregard|forget|override|skip)\b[^.\n]{0,40}\b(?:previous|prior|above|earlier|preceding|all|your|system|original)\b[^.\n]{0,30}\b(?:instructions?|rules?|prompts?|directions?|guidelines?|rubric|criteria)\b",
        ),
        (
            "rate-this",
            rf"\b{_RATE}(?:s|d|ed)?\s+(?:this|these|it|me|us)\b(?:\s+{_DOC}s?\b)?[^.\n]{{0,20}}?(?:\bas\b|\bwith\b|\ba\b|:|=)?\s*(?:\b{_NUM}\b|\b(?:highly|high(?:est)?|perfect(?:ly)?|maximum|max|top|most|very)\b)",
        ),
        (
            "rate-this",
            rf"\b{_RATE}\s+(?:the|this|every|all|each|these)\s+(?:{_DOC}s?\s+)?(?:as\s+)?(?:(?:perfectly|highly|very|most|extremely)\s+relevant\b|(?:a\s+)?{_NUM}\s*(?:/\s*3|out\s+of\s+3)?(?:$|[\s.,;!]))",
        ),
        (
            "must-be-relevant",
            rf"\b(?:this|the)\s+{_DOC}\s+(?:is|should\s+be|must\s+be|will\s+be|has\s+to\s+be)\s+(?:rated|labell?ed|graded|marked|scored|considered|judged|treated)\b",
        ),
        ("relevance-value", r"[\"']?\b(?:relevance|label|grade)\b[\"']?\s*[:=]\s*[\"']?(?:[1-3]|three|perfect)\b"),
        (
            "you-are-now",
            r"\byou\s+are\s+now\b|\bfrom\s+now\s+on\b|\bnew\s+instructions?\b|\bact\s+as\s+(?:an?\s+)?(?:judge|assessor|grader|evaluator)\b",
        ),
        (
            "note-to-judge",
            r"\b(?:note|message|instructions?|attention|hint|reminder)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?(?:ai|llm|language\s+model|model|assessors?|judges?|graders?|evaluators?|annotators?|raters?|assistants?|reviewers?|bots?)\b|\b(?:dear|hey|attention)\s+(?:ai|llm|assessor|judge|grader|evaluator|model|assistant)\b",
        ),
        ("role-prefix", r"^\s*(?:#+\s*)?(?:system|assistant|developer)(?:\s+(?:prompt|message|override|note))?\s*:\s*\S"),
        (
            "ignore-instructions-de",
            r"\b(?:ignoriere|ignorieren|vergiss|vergessen\s+sie)\b[^.\n]{0,40}\b(?:anweisungen|instruktionen|regeln|vorgaben)\b",
        ),
        (
            "ignore-instructions-fr",
            r"\b(?:ignore[rz]?|oublie[rz]?)\b[^.\n]{0,30}\b(?:les|toutes|tous|vos|tes|des)\b[^.\n]{0,30}\b(?:instructions|consignes|règles)\b",
        ),
        ("ignore-instructions-es", r"\b(?:ignora|ignore|olvida)\b[^.\n]{0,40}\b(?:instrucciones|reglas)\b"),
        ("ignore-instructions-zh", r"(?:忽略|无视|忽视)[^。\n]{0,12}(?:指令|指示|说明|规则)"),
        ("ignore-instructions-ja", r"(?:指示|命令|ルール)[^。\n]{0,8}(?:無視|むし)"),
        ("ignore-instructions-ko", r"(?:지시|명령|규칙)[^.\n]{0,10}무시"),
        (
            "rate-this-de",
            r"\b(?:bewerte|bewerten\s+sie|stufe)\b[^.\n]{0,30}\b(?:dokument|ergebnis|seite)\b[^.\n]{0,30}(?:\b[0-3]\b|\bhoch\b|\brelevant\b)",
        ),
        (
            "rate-this-fr",
            r"\b(?:note|notez|évalue[rz]?|attribue[rz]?)\b[^.\n]{0,30}\b(?:document|résultat|page)\b[^.\n]{0,30}(?:\b[0-3]\b|\bpertinent)",
        ),
    )
)


@dataclass(frozen=True)
class InjectionSignal:
    """One suspicious thing found in a result: ``kind`` is ``"instruction"``, ``"spoofed-delimiter"`` or
    ``"spoofed-header"``; ``name`` the pattern (e.g. ``"ignore-instructions"``); ``field`` where
    (``"source"``, ``"anchor"`` or ``"text"``); ``excerpt`` at most 80 characters of the match."""

    kind: str
    name: str
    field: str
    excerpt: str


@dataclass(frozen=True)
class RenderedDocument:
    """One result ready for the judge, before fencing.

    - ``source``, ``anchor``: one line each, neutralised, at most :data:`FIELD_CAP` characters
      (``anchor`` is ``"-"`` when the result has none);
    - ``body``: the chunk text, neutralised, cut to :data:`SHOWN_TEXT_CAP` characters;
    - ``shown``: the delimiter-free text the judge reads inside the fence (``source``/``anchor``/``text``
      lines): what the judgment cache hashes as "the exact text shown";
    - ``truncated`` / ``original_chars``: whether the body was cut, and its length before cutting;
    - ``neutralised``: how many delimiter-like pieces were defused;
    - ``signals``: everything suspicious found; ``injection_suspected`` is true when there is any.
    """

    source: str
    anchor: str
    body: str
    truncated: bool
    original_chars: int
    neutralised: int
    signals: tuple[InjectionSignal, ...]

    @property
    def shown(self) -> str:
        return f"source: {self.source}\nanchor: {self.anchor}\ntext:\n{self.body}"

    @property
    def injection_suspected(self) -> bool:
        return bool(self.signals)


def new_delimiter() -> str:
    """A fresh fence delimiter, ``"document-"`` + 16 random hex digits (:func:`secrets.token_hex`, 64
    bits). Use a new one for every call to the judge."""
    return DELIMITER_PREFIX + secrets.token_hex(8)


def _excerpt(text: str) -> str:
    return " ".join(text.split())[:80]


def neutralise(text: str) -> tuple[str, int, list[tuple[str, str, str]]]:
    """Defuse everything delimiter-like in ``text``. Returns ``(text, count, found)`` where ``found``
    lists ``(kind, name, excerpt)``.

    - a tag whose name starts with a reserved word (:data:`RESERVED_TAG_NAMES`: ``<document…>``,
      ``</RESULTS >``, ``< / res\u200bults>``, ``＜query＞``, an unclosed ``</results`` at a line end) gets
      its brackets replaced by ``‹ ›`` and the zero-width characters inside it removed;
    - chat-template tokens (``<|im_start|>``, ``[INST]``, ``<<SYS>>``) get the same treatment;
    - a line-leading result header of the old format (``[3] source: …``) gets ``‹3›`` instead of
      ``[3]``, and an engine-score field ``| score 1.0000`` gets ``¦`` instead of ``|``.
    Text that is not delimiter-like is left byte for byte as it was.
    """
    found: list[tuple[str, str, str]] = []

    def tag(m: re.Match[str]) -> str:
        found.append(("spoofed-delimiter", "tag", _excerpt(m.group(0))))
        return "\u2039" + _ZW_RE.sub("", m.group("inner")) + ("\u203a" if m.group("close") else "")

    def chat(m: re.Match[str]) -> str:
        found.append(("spoofed-delimiter", "chat-token", _excerpt(m.group(0))))
        return "\u2039" + m.group(0)[1:-1] + "\u203a"

    def header(m: re.Match[str]) -> str:
        found.append(("spoofed-header", "result-header", _excerpt(m.group(0))))
        return f"{m.group('lead')}\u2039{m.group('id')}\u203a"

    def score(m: re.Match[str]) -> str:
        found.append(("spoofed-header", "engine-score", "| score"))
        return "\u00a6"

    text = _TAG_RE.sub(tag, text)
    text = _CHAT_TOKEN_RE.sub(chat, text)
    text = _HEADER_RE.sub(header, text)
    text = _SCORE_RE.sub(score, text)
    return text, len(found), found


def _detection_view(text: str) -> str:
    """Text as the detector reads it: NFKC (full-width letters become ASCII), zero-width characters
    removed. Never shown to the judge."""
    return _ZW_RE.sub("", unicodedata.normalize("NFKC", text))


def detect_instructions(text: str) -> list[tuple[str, str]]:
    """Instruction-like passages in ``text`` as ``(pattern name, excerpt)``, first match per pattern.

    Detection only (:data:`INSTRUCTION_PATTERNS`: English, plus cheap German, French, Spanish, Chinese,
    Japanese and Korean forms of "ignore the instructions" and "rate this"). Tuned so the sample
    knowledge base in ``fixtures/`` raises nothing (a test checks it); it will miss paraphrases, which is
    why the judge is also asked to flag them.
    """
    view = _detection_view(text)
    hits = []
    for name, pattern in INSTRUCTION_PATTERNS:
        m = pattern.search(view)
        if m:
            hits.append((name, _excerpt(m.group(0))))
    return hits


def _one_line(text: str | None, cap: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= cap else flat[: cap - 1] + "…"


_CUT_MARK = re.compile(r"\n\[… \d+ more characters not shown\]\Z")


def _cut(body: str, cap: int) -> tuple[str, bool]:
    """``(body cut to cap at a line or word boundary with a marker, cut?)``. A body already cut here (its
    marker last, its text within ``cap``: a run file's ``shownText`` judged again) is left as it is."""
    marked = _CUT_MARK.search(body)
    if marked is not None and marked.start() <= cap:
        return body, True
    if len(body) <= cap:
        return body, False
    head = body[:cap]
    cut = head.rfind("\n")
    if cut < cap // 2:
        cut = head.rfind(" ")
    if cut < cap // 2:
        cut = cap
    kept = head[:cut].rstrip()
    return kept + f"\n[… {len(body) - len(kept)} more characters not shown]", True


def render_document(source: str, anchor: str | None, text: str, cap: int = SHOWN_TEXT_CAP) -> RenderedDocument:
    """Render one result (its source path, anchor and text, all untrusted) for the judge:
    neutralise delimiter-like pieces in all three, flag instruction-like text, flatten source and
    anchor to one line of at most :data:`FIELD_CAP` characters, cut the text to ``cap`` characters at a
    line or word boundary (with a visible marker). Raises ValueError when ``cap`` < 100."""
    if cap < 100:
        raise ValueError("the shown-text cap must be at least 100 characters")
    signals: list[InjectionSignal] = []
    count = 0
    fields = {}
    for field, value in (("source", _one_line(source, FIELD_CAP)), ("anchor", _one_line(anchor, FIELD_CAP) or "-"), ("text", text or "")):
        clean, n, found = neutralise(value)
        count += n
        signals.extend(InjectionSignal(kind, name, field, excerpt) for kind, name, excerpt in found)
        signals.extend(InjectionSignal("instruction", name, field, excerpt) for name, excerpt in detect_instructions(value))
        fields[field] = clean
    body, truncated = _cut(fields["text"], cap)
    return RenderedDocument(fields["source"], fields["anchor"], body, truncated, len(fields["text"]), count, tuple(signals))


def fence(document: RenderedDocument, delimiter: str, local_id: str | None = None) -> str:
    """The fenced block for one rendered document: ``<DELIM id="ID">`` … ``</DELIM>``, where ``DELIM``
    comes from :func:`new_delimiter` (one per call, shared by every document of that call). ``local_id``
    (e.g. ``"D2"``, batched mode) must be 1-8 letters/digits. Raises ValueError on a malformed delimiter
    or id, or when the delimiter occurs in the document (cannot happen after neutralisation unless the
    delimiter was reused and leaked)."""
    if not _DELIMITER_RE.fullmatch(delimiter):
        raise ValueError("the delimiter must come from new_delimiter()")
    if local_id is not None and not re.fullmatch(r"[A-Za-z0-9]{1,8}", local_id):
        raise ValueError(f"bad local id {local_id!r}")
    if delimiter.lower() in document.shown.lower():
        raise ValueError("the delimiter occurs inside the document; draw a new one")
    opening = f"<{delimiter}" + (f' id="{local_id}"' if local_id else "") + ">"
    return f"{opening}\n{document.shown}\n</{delimiter}>"


def without_suspected_lines(document: RenderedDocument) -> RenderedDocument:
    """The document with every body line and anchor part (`` > ``-separated) that raised a signal
    removed: what a heuristic (non-LLM) judge should score, so that injected text neither raises nor
    lowers its label. An LLM judge is shown the full document instead."""

    def flagged(piece: str) -> bool:
        return bool(detect_instructions(piece)) or neutralise(piece)[1] > 0 or "\u2039" in piece or "\u00a6" in piece

    lines = [line for line in document.body.split("\n") if not flagged(line)]
    parts = [p for p in document.anchor.split(" > ") if not flagged(p)]
    body = "\n".join(lines)
    return RenderedDocument(
        document.source,
        " > ".join(parts) or "-",
        re.sub(r"\n{3,}", "\n\n", body).strip(),
        document.truncated,
        document.original_chars,
        document.neutralised,
        (),
    )
