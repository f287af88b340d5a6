"""Mapping another search system's JSON onto the search contract (docs/design.md, "The search contract").

An external system (a command or an HTTP endpoint, :mod:`judge_runner.search.external`) prints or
returns JSON in its own shape. :class:`FieldMapping` says which key holds what; dotted paths reach
into nested objects (``_source.body``), so an Elasticsearch reply maps with
``results=hits.hits,id=_id,text=_source.body,score=_score``.

Mapping keys (``--search-fields KEY=PATH,...`` or a ``[search.external.fields]`` table):

==========  ==============================================  =========================================
key         what it names                                    default
==========  ==============================================  =========================================
results     the list of hits in the reply                    the reply itself when it is a list, else
                                                             its ``results`` or ``hits`` key
id          the document id: the result's ``source``         ``source``, else ``id``, else ``docid``
text        the result's text (shown to the judge)           ``snippet``, else ``text``
score       the system's score (higher is better)            ``score`` (missing: ``1 / rank``)
anchor      heading, key or title                            ``anchor``, else ``title``
lineStart   first line of the text in the document           ``lineStart``
lineEnd     last line                                        ``lineEnd``
==========  ==============================================  =========================================

What the judge is shown of a result's document comes from the document store when it holds the document
(the fixtures folder or a BEIR corpus: :mod:`judge_runner.search.documents`): its passages for the query by
the one rule every system is judged by (:mod:`judge_runner.search.passages`), so a document gets one label
whoever returned it. The text the system sent is its snippet (graded by the list-level snippet quality);
only when no store holds the document is that text what the judge reads. A result without text whose id is
not in the store is an error naming it. Only the first ``limit`` results are read, in the system's order;
a document listed twice among them is merged into its first place, and the run file says so.

What a command prints or an endpoint sends is read into memory only up to :data:`MAX_REPLY_BYTES`
(an error past that, saying where it was cut) and decoded by :func:`decode_reply`: the charset the
endpoint names, else UTF-8 (RFC 8259, section 8.1), else the encoding the corpus reader finds
(``judge_runner.corpus.read.decode``: UTF-16 with or without a BOM, cp1252 and other legacy code pages
via charset-normalizer), with a note saying so in the run file rather than a silent U+FFFD.
"""

from __future__ import annotations

import codecs
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from judge_runner.core.models import SearchMode
from judge_runner.corpus.read import BinaryContent, decode
from judge_runner.search.base import HitScores, SearchAnswer, SearchHit
from judge_runner.search.passages import Passages
from judge_runner.search.text import make_snippet

MAX_REPLY_BYTES = 16 * 1024 * 1024
"""The most read of one reply (a command's stdout, an endpoint's body after content decoding); past it the
query fails with a ``search_output`` error. ``max_reply_mb`` in a ``[search.external]`` table changes it."""

MAPPING_KEYS = ("results", "id", "text", "score", "anchor", "lineStart", "lineEnd")
# candidate keys tried, in order, when the mapping does not name one
DEFAULT_PATHS: dict[str, tuple[str, ...]] = {
    "id": ("source", "id", "docid", "_id"),
    "text": ("snippet", "text"),
    "score": ("score",),
    "anchor": ("anchor", "title"),
    "lineStart": ("lineStart",),
    "lineEnd": ("lineEnd",),
}


class ExternalSearchError(RuntimeError):
    """An external search failed: it could not be run or reached, timed out, exited with an error, or
    replied with something that is not results. ``kind`` becomes the ``error`` line's ``errorType``
    (``search_timeout``, ``search_failed``, ``search_output``, ``search_unknown_source``); ``attempts``
    counts the calls made. The message never holds a secret (header values are never put in it)."""

    def __init__(self, message: str, kind: str = "search_failed", attempts: int = 1):
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts


@dataclass(frozen=True)
class FieldMapping:
    """Which key of the other system's reply holds what (see the module's table). ``paths`` maps a
    mapping key to a dotted path; keys not given fall back to :data:`DEFAULT_PATHS`."""

    paths: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str | dict[str, str] | None) -> FieldMapping:
        """``"id=doc_id,text=body,score=_score"`` (or the same as a dict, from a config table) as a
        mapping. Raises ValueError naming an unknown key or a malformed pair."""
        if not spec:
            return cls()
        pairs: dict[str, str] = {}
        items = (
            spec.items()
            if isinstance(spec, dict)
            else (part.split("=", 1) if "=" in part else (part, "") for part in spec.split(",") if part.strip())
        )
        for key, path in items:
            key, path = str(key).strip(), str(path).strip()
            if key not in MAPPING_KEYS:
                raise ValueError(f"unknown search field {key!r}; the keys are {', '.join(MAPPING_KEYS)}")
            if not path:
                raise ValueError(f"search field {key!r} needs a key of the reply, e.g. {key}=my_{key}")
            pairs[key] = path
        return cls(pairs)

    def describe(self) -> dict[str, str]:
        """The mapping as given (for provenance)."""
        return dict(self.paths)

    def lookup(self, item: dict, key: str) -> Any:
        """The value of mapping key ``key`` in one result object, or None when it has none."""
        paths = (self.paths[key],) if key in self.paths else DEFAULT_PATHS.get(key, ())
        for path in paths:
            value = dig(item, path)
            if value is not None:
                return value
        return None

    def result_list(self, reply: Any) -> list:
        """The list of results in a decoded reply. Raises ExternalSearchError when there is none."""
        if "results" in self.paths:
            found = dig(reply, self.paths["results"])
            where = f"at {self.paths['results']!r}"
        elif isinstance(reply, list):
            found, where = reply, ""
        elif isinstance(reply, dict):
            found = reply.get("results", reply.get("hits"))
            where = "under 'results' or 'hits'"
        else:
            found, where = None, ""
        if not isinstance(found, list):
            raise ExternalSearchError(f"the reply holds no list of results {where}".strip() + f" (got {_shape(reply)})", "search_output")
        return found


class DocumentStore(Protocol):
    """Documents by id (:mod:`judge_runner.search.documents`): what the judge reads of a result."""

    label: str

    def passages(self, source: str, query: str, intent: str = "") -> Passages | None: ...


@dataclass(frozen=True)
class ReplyRules:
    """How an adapter reads a reply: ``mapping`` (which key holds what), the ``documents`` the judge's text
    comes from (None: the result's own text), the snippet length and the most bytes read of one reply."""

    mapping: FieldMapping = field(default_factory=FieldMapping)
    documents: DocumentStore | None = None
    snippet_chars: int = 400
    max_bytes: int = MAX_REPLY_BYTES


def megabytes(n: int) -> str:
    """``n`` bytes as ``"16 MiB"`` (or ``"512 KiB"``), for messages."""
    return f"{n / 1048576:g} MiB" if n >= 1048576 else f"{n / 1024:g} KiB"


def decode_reply(data: bytes, what: str, charset: str | None = None) -> tuple[Any, list[str]]:
    """``(decoded JSON, notes)`` of a reply's bytes. ``charset``: the one the reply names (HTTP
    ``Content-Type: ...; charset=...``), used first; without one (or when the bytes are not in it),
    UTF-8, else what :func:`judge_runner.corpus.read.decode` finds, with a note such as ``"search command
    'x' printed cp1252, not UTF-8: decoded as cp1252"``. ``what`` names the search in messages. Raises
    ExternalSearchError (``search_output``) for an empty reply, binary data or text that is not JSON."""
    notes: list[str] = []
    text: str | None = None
    if charset:
        try:
            text = data.decode(codecs.lookup(charset).name)
        except (LookupError, UnicodeDecodeError):
            notes.append(f"{what} named charset {charset!r}, which does not decode its reply; the encoding was detected instead")
    if text is None:
        try:
            found = decode(data)
        except BinaryContent:
            raise ExternalSearchError(f"{what} returned binary data, not JSON text: {data[:40]!r}", "search_output") from None
        text = found.text
        if found.note is not None and found.encoding != "utf-8-sig":
            notes.append(f"{what} did not return UTF-8: {found.note}")
    if not text.strip():
        raise ExternalSearchError(f"{what} returned nothing (expected JSON results)", "search_output")
    try:
        return json.loads(text), notes
    except json.JSONDecodeError as exc:
        shown = text.strip()[:120]
        raise ExternalSearchError(
            f"{what} returned invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): {shown!r}", "search_output"
        ) from None


def answer_from_reply(
    reply: Any,
    rules: ReplyRules,
    query: str,
    mode: SearchMode,
    limit: int,
    started: float,
    notes: list[str] | None = None,
    intent: str = "",
) -> SearchAnswer:
    """The answer of a decoded external reply (:func:`map_hits`); ``started``: the call's
    ``time.perf_counter()``, for ``latencyMs``. The reply's own boolean ``confident`` is honoured."""
    hits, merged = map_hits(reply, rules.mapping, query, limit, rules.documents, rules.snippet_chars, intent)
    confident = dig(reply, "confident") if isinstance(reply, dict) else None
    return SearchAnswer(
        query=query,
        mode=mode,
        results=hits,
        confident=bool(hits) and (confident if isinstance(confident, bool) else True),
        latencyMs=round((time.perf_counter() - started) * 1000, 3),
        notes=[*(notes or []), *merged],
    )


def dig(value: Any, path: str) -> Any:
    """``value[a][b]...`` for the dotted ``path`` ``a.b...`` (list items by number), or None."""
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        return "an object with keys " + ", ".join(sorted(map(str, value))[:8]) if value else "an empty object"
    return type(value).__name__


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def map_hits(
    reply: Any,
    mapping: FieldMapping,
    query: str,
    limit: int,
    documents: DocumentStore | None = None,
    snippet_chars: int = 400,
    intent: str = "",
) -> tuple[list[SearchHit], list[str]]:
    """``(hits, notes)``: the first ``limit`` results of a decoded ``reply`` as search hits, in the system's
    order. The cut comes first, then the merge: a document listed again keeps its first place and
    ``notes`` says so (nothing past the ``limit``-th result is read). The judge's ``text`` follows the
    module docstring's rule, for ``query`` and its ``intent``; the snippet is the system's text, or for a
    result without text a window of the passages. Raises ExternalSearchError when the reply holds no list,
    a result is not an object or has no id, or results have neither text nor a document in the store (the
    message names them)."""
    listed = mapping.result_list(reply)
    items = listed[:limit]
    hits: list[SearchHit] = []
    unknown: list[str] = []
    repeats: dict[str, int] = {}
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise ExternalSearchError(f"result {number} is not an object (got {_shape(item)})", "search_output")
        source = mapping.lookup(item, "id")
        if source is None or str(source) == "":
            raise ExternalSearchError(
                f"result {number} has no document id (looked for {mapping.paths.get('id') or ' / '.join(DEFAULT_PATHS['id'])})",
                "search_output",
            )
        source = str(source)
        if source in repeats:  # a chunk-level engine: a document is ranked by its first (best) result
            repeats[source] += 1
            continue
        repeats[source] = 0
        hit = _hit(item, mapping, source, len(hits) + 1, (query, intent), documents, snippet_chars)
        if hit is None:
            unknown.append(source)
        else:
            hits.append(hit)
    if unknown:
        where = f" in {documents.label}" if documents is not None else " (no document store to fetch text from)"
        shown = ", ".join(repr(s) for s in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        raise ExternalSearchError(f"{len(unknown)} result(s) have no text and no document{where}: {shown}", "search_unknown_source")
    return hits, _merge_notes(repeats, len(items), limit if len(listed) > limit else None)


def _hit(
    item: dict, mapping: FieldMapping, source: str, rank: int, need: tuple[str, str], documents: DocumentStore | None, snippet_chars: int
) -> SearchHit | None:
    """One result as a hit (see :func:`map_hits`; ``need``: the query and its intent), or None when it has
    no text and no document in the store."""
    query, intent = need
    own = mapping.lookup(item, "text")
    own = None if own is None or str(own).strip() == "" else str(own)
    anchor = mapping.lookup(item, "anchor")
    start, end = _number(mapping.lookup(item, "lineStart")), _number(mapping.lookup(item, "lineEnd"))
    passages = documents.passages(source, query, intent) if documents is not None else None
    if passages is None and own is None:
        return None
    if own is None and passages is not None:  # nothing shown by the system: the best passage stands for it
        anchor = anchor if anchor is not None else passages.anchor
        start, end = start or passages.line_start, end or passages.line_end
    shown = own if own is not None else (passages.text if passages is not None else "")
    score = _number(mapping.lookup(item, "score"))
    return SearchHit(
        rank=rank,
        source=source,
        anchor=None if anchor is None else str(anchor),
        lineStart=int(start or 1),
        lineEnd=int(end or start or max(1, shown.count("\n") + 1)),
        snippet=make_snippet(shown, query, snippet_chars),
        score=round(score if score is not None else 1.0 / rank, 6),
        scores=HitScores(),
        matchedBy=[],
        text=passages.text if passages is not None else own,
        textAnchor=passages.anchor if passages is not None else None,
        textFrom="document" if passages is not None else "result",
    )


def _merge_notes(repeats: dict[str, int], read: int, cut: int | None) -> list[str]:
    """The ``searchNotes`` line of a reply that listed documents more than once in the ``read`` results
    read (``cut``: the limit, when the reply held more results than that)."""
    twice = {source: n for source, n in repeats.items() if n}
    if not twice:
        return []
    named = ", ".join(f"{s!r} x{n + 1}" for s, n in sorted(twice.items(), key=lambda kv: -kv[1])[:3]) + (" ..." if len(twice) > 3 else "")
    judged = f"{len(repeats)} document{'s' if len(repeats) != 1 else ''} judged"
    return [
        f"{sum(twice.values())} of the first {read} results repeated a document listed before ({named}): each document is "
        f"judged once, at its first place ({judged})" + (f"; results after the first {cut} are not read" if cut else "")
    ]
