"""What the judge sees of one result: its source, anchor and text as untrusted data, in a fence whose tag
carries a per-call random delimiter a document cannot guess (spotlighting by delimiting: Hines et al.
2024, "Defending Against Indirect Prompt Injection Attacks With Spotlighting"). Delimiter-like text is
neutralised; instruction-like text is only detected, and never raises a label. The cache hashes the
delimiter-free :attr:`RenderedDocument.shown`. See docs/judge-protocol.md.
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
"""Part of the judge fingerprint and the cache key: bump on any change to what this module renders."""


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
    """One suspicious thing found in a result's ``field``; ``excerpt`` at most 80 characters."""

    kind: str
    name: str
    field: str
    excerpt: str


@dataclass(frozen=True)
class RenderedDocument:
    """One result ready for the judge, neutralised, before fencing. ``shown``: the delimiter-free text the
    judge reads, which the judgment cache hashes; ``anchor`` is ``"-"`` when there is none."""

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
    """``"document-"`` + 64 random bits in hex. Use a new one for every call to the judge."""
    return DELIMITER_PREFIX + secrets.token_hex(8)


def _excerpt(text: str) -> str:
    return " ".join(text.split())[:80]


def neutralise(text: str) -> tuple[str, int, list[tuple[str, str, str]]]:
    """``(text, count, found)``: ``text`` with reserved tags, chat-template tokens and old result headers
    defused (brackets become ``‹ ›``), ``found`` as ``(kind, name, excerpt)``. Other text is left byte for
    byte."""
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
    """NFKC, zero-width characters removed; never shown to the judge."""
    return _ZW_RE.sub("", unicodedata.normalize("NFKC", text))


def detect_instructions(text: str) -> list[tuple[str, str]]:
    """``(pattern name, excerpt)`` of the first match of each :data:`INSTRUCTION_PATTERNS`. It misses
    paraphrases, so the judge is asked to flag them too."""
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
    """``(body cut to cap at a line or word boundary with a marker, cut?)``; a body cut before is kept."""
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
    """One result for the judge, its text cut to ``cap`` characters. Raises ValueError when ``cap`` < 100."""
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
    """``<DELIM id="ID">`` … ``</DELIM>``. Raises ValueError on a malformed delimiter or id (1-8 letters
    or digits), or when the delimiter occurs in the document."""
    if not _DELIMITER_RE.fullmatch(delimiter):
        raise ValueError("the delimiter must come from new_delimiter()")
    if local_id is not None and not re.fullmatch(r"[A-Za-z0-9]{1,8}", local_id):
        raise ValueError(f"bad local id {local_id!r}")
    if delimiter.lower() in document.shown.lower():
        raise ValueError("the delimiter occurs inside the document; draw a new one")
    opening = f"<{delimiter}" + (f' id="{local_id}"' if local_id else "") + ">"
    return f"{opening}\n{document.shown}\n</{delimiter}>"


def without_suspected_lines(document: RenderedDocument) -> RenderedDocument:
    """The document without its lines and anchor parts that raised a signal, for the offline judge."""

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
