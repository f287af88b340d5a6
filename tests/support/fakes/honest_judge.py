"""An honest fake judge for the label-first protocol, and a request-log checker.

The fake LLM server (``fake_llm.py``) can answer ``record_label``, ``record_labels`` and
``record_list_verdict`` with :func:`honest_reply`: it reads the query and the fenced documents out of
the user message exactly as a model would see them, ignores text addressed to the judge (the lines
:mod:`judge_runner.judging.fence` flags), and grades by the share of the query's words the document's text
holds. It is deterministic, needs no model, and "behaves honestly": injected instructions neither raise
nor lower a grade, and it reports them as ``injectionSuspected``.

:func:`request_problems` is the request-log check of the "done when" list: no rank number or engine
score outside the fences, every document inside a fence, nothing delimiter-like left inside one.
"""

from __future__ import annotations

import re

from judge_runner.judging.fence import (
    RenderedDocument,
    detect_instructions,
    without_suspected_lines,
)

_FENCE = re.compile(r'<(document-[0-9a-f]{16})(?: id="(D\d+)")?>\n(.*?)\n</\1>', re.DOTALL)
_FIELDS = re.compile(r"source: (?P<source>.*)\nanchor: (?P<anchor>.*)\ntext:\n?(?P<text>.*)\Z", re.DOTALL)
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "is",
        "are",
        "do",
        "does",
        "how",
        "what",
        "when",
        "where",
        "which",
        "with",
        "by",
        "at",
        "it",
        "its",
        "i",
        "my",
        "our",
    ]
)
_GRADE = re.compile(r"Result (D\d+): grade ([0-3])")


def query_of(user: str) -> str:
    """The query text of a judge request's user message ("" when absent)."""
    m = re.search(r"<query>(.*?)</query>", user, re.DOTALL)
    return m.group(1) if m else ""


def fenced_documents(user: str) -> list[dict]:
    """``[{delimiter, id, source, anchor, text}]`` of the fenced documents in a user message, in order."""
    out = []
    for m in _FENCE.finditer(user):
        fields = _FIELDS.match(m.group(3))
        if fields:
            out.append({"delimiter": m.group(1), "id": m.group(2), **fields.groupdict()})
    return out


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[^\W_]{3,}", text.lower()) if w not in _STOP}


def honest_label(query: str, doc: dict) -> dict:
    """``{reason, injectionSuspected, relevance}`` for one parsed document: the grade is the share of the
    query's words found in the anchor and text once suspected lines are removed (>= 0.75 -> 3, >= 0.5
    -> 2, >= 0.25 -> 1, else 0)."""
    rendered = RenderedDocument(doc["source"], doc["anchor"], doc["text"], False, len(doc["text"]), 0, ())
    clean = without_suspected_lines(rendered)
    suspected = clean.body != doc["text"].strip() or clean.anchor != doc["anchor"] or bool(detect_instructions(doc["text"]))
    wanted = _words(query)
    share = len(wanted & _words(clean.anchor + "\n" + clean.body)) / len(wanted) if wanted else 0.0
    grade = 3 if share >= 0.75 else 2 if share >= 0.5 else 1 if share >= 0.25 else 0
    reason = f"holds {share:.0%} of the query's words" + ("; ignored text addressed to the judge" if suspected else "")
    return {"reason": reason, "injectionSuspected": suspected, "relevance": grade}


def fit_to_schema(reply: dict, schema: dict) -> dict:
    """``reply`` with only the fields the offered ``schema`` asks for, in its order (a grade-only request
    asks for no reason); a schema without properties keeps the reply as it is."""
    props = schema.get("properties") or {}
    if "labels" in reply and "labels" in props:
        item = list((props["labels"].get("items") or {}).get("properties") or {})
        return {"labels": [{k: label[k] for k in item if k in label} for label in reply["labels"]]} if item else reply
    return {k: reply[k] for k in props if k in reply} if props else reply


def honest_reply(tool: str, user: str) -> dict:
    """The tool input an honest judge would send for a request of the label-first protocol. Raises
    ValueError for another tool or a message without the expected documents."""
    query = query_of(user)
    docs = fenced_documents(user)
    if tool == "record_label":
        if len(docs) != 1:
            raise ValueError(f"a pointwise request must fence exactly one document, found {len(docs)}")
        return honest_label(query, docs[0])
    if tool == "record_labels":
        if not docs or any(d["id"] is None for d in docs):
            raise ValueError("a batched request must fence documents with ids")
        return {"labels": [{"id": d["id"], **honest_label(query, d)} for d in docs]}
    if tool == "record_list_verdict":
        grades = [int(g) for _, g in _GRADE.findall(user)]
        good = sum(1 for g in grades if g >= 2)
        coverage = 1.0 if good else 0.0
        return {
            "analysis": {"coverage": f"{good} of {len(grades)} results graded 2 or 3.", "snippetQuality": "Snippets judged by the fake."},
            "scores": {"coverage": coverage, "snippetQuality": 0.5 if grades else 0.0},
            "holistic": {
                "relevance": round(sum(grades) / (3 * len(grades)), 3) if grades else 0.0,
                "ranking": 1.0 if good else 0.0,
                "overall": 0.5 * coverage,
            },
            "suggestions": [] if good else ["Add semantic retrieval for queries worded differently from the documents"],
        }
    raise ValueError(f"not a tool of the label-first protocol: {tool}")


_LEFTOVER = re.compile(
    r"[<\uff1c]\s*/?\s*(?:doc|result|query|intent|system|user|assistant)|^\s*\[\s*\w*\d+\s*\]\s*source|\|\s*score\s*\d",
    re.IGNORECASE | re.MULTILINE,
)
_RANK_OR_SCORE = re.compile(r"\[\s*\d+\s*\]|\brank(?:ed)?\s*#?\d|\bscore\s*[:=]?\s*\d", re.IGNORECASE)


def request_problems(user: str) -> list[str]:
    """What is wrong with a logged judge request's user message: a rank number or engine score outside
    the fences, or anything delimiter-like inside one. Empty for a clean request."""
    problems = []
    outside = _FENCE.sub("", user)
    problems += [f"rank or score outside the fences: {m.group(0)!r}" for m in _RANK_OR_SCORE.finditer(outside)]
    for doc in fenced_documents(user):
        for m in _LEFTOVER.finditer(doc["source"] + "\n" + doc["anchor"] + "\n" + doc["text"]):
            problems.append(f"delimiter-like text inside the fence of {doc['source']}: {m.group(0)!r}")
    return problems
