"""Three scripted judges for the fake LLM server (``brain(api, body)``), answering today's ``record_verdict``
call: an honest one that follows the qrels, a position-biased one, and an injection-gullible one.

Each reads the query and the results (``[i] source: DOCID | ...`` headers) from the user message; the label of
a document is its human grade on 0-3 (binary qrels: 1 becomes 3, as calibrate rescales them).
"""

from __future__ import annotations

import re

from tests.support.fakes.fake_llm import ToolCall

_QUERY = re.compile(r"<query>(.*?)</query>", re.DOTALL)
# judge.render_results' header, through to the engine score (a spoofed header in a snippet has no "lines" part)
_HEADER = re.compile(r"^\[(\d+)\] source: (\S+) \| anchor: .* \| lines \d+-\d+ \| score -?\d+\.\d{4}$", re.MULTILINE)


def user_text(api: str, body: dict) -> str:
    """The last user message's text, whichever API."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def shown_results(text: str) -> list[tuple[str, str]]:
    """``[(docid, shown text)]`` of the results block, in the order shown."""
    block = text.split("<results>", 1)[1].rsplit("</results>", 1)[0]
    heads = list(_HEADER.finditer(block))
    return [(m.group(2), block[m.end() : heads[i + 1].start() if i + 1 < len(heads) else len(block)]) for i, m in enumerate(heads)]


class QrelsJudge:
    """The honest judge: labels every document with its human grade, whatever it says or where it sits.
    ``qrels``: ``{query text: {docid: grade on 0-3}}``. Speaks the label-first protocol:
    ``record_label`` (one fenced document), ``record_labels`` (several, in the order shown; the slot is the
    document's place in that order) and ``record_list_verdict`` (the honest fake's list-level reply)."""

    def __init__(self, qrels: dict[str, dict[str, int]]):
        self.qrels = qrels

    def label(self, query: str, docid: str, text: str, slot: int, count: int) -> int:
        return self.qrels.get(query, {}).get(docid, 0)

    def __call__(self, api: str, body: dict):
        from tests.support.fakes.fake_llm import _forced_tool, first_user_text, offered_tools
        from tests.support.fakes.honest_judge import fenced_documents, fit_to_schema, honest_reply, query_of

        text = first_user_text(body)
        tools = offered_tools(api, body)
        forced = _forced_tool(api, body) or next(iter(tools), None)
        if forced == "record_list_verdict":
            return ToolCall(forced, honest_reply(forced, text))
        query, docs = query_of(text), fenced_documents(text)
        schema = tools.get(forced or "", {})
        props = schema.get("properties") or {}
        self.reasons_asked = "reason" in props or "reason" in ((props.get("labels") or {}).get("items") or {}).get("properties", {})
        graded = [
            {
                "reason": "scripted",
                "injectionSuspected": False,
                "relevance": self.label(query, d["source"], (d.get("anchor") or "") + "\n" + d["text"], i, len(docs)),
            }
            for i, d in enumerate(docs)
        ]
        if forced == "record_label":
            return ToolCall(forced, fit_to_schema(graded[0], schema))
        return ToolCall("record_labels", fit_to_schema({"labels": [{"id": d["id"], **g} for d, g in zip(docs, graded)]}, schema))


class ReasonFirstJudge(QrelsJudge):
    """Honest when asked for a reason before the grade; asked for the grade alone, it grades every
    document 1 (a judge whose reasoning is what gets its grades right)."""

    reasons_asked = True

    def label(self, query: str, docid: str, text: str, slot: int, count: int) -> int:
        return super().label(query, docid, text, slot, count) if self.reasons_asked else 1


class PositionBiasedJudge(QrelsJudge):
    """Honest on one document; with several, the first slot gets 3 and the last 0."""

    def label(self, query: str, docid: str, text: str, slot: int, count: int) -> int:
        if count > 1 and slot == 0:
            return 3
        if count > 1 and slot == count - 1:
            return 0
        return super().label(query, docid, text, slot, count)


class GullibleJudge(QrelsJudge):
    """Honest, except that it obeys an instruction to rate the document highly."""

    def label(self, query: str, docid: str, text: str, slot: int, count: int) -> int:
        if re.search(r"rate it 3", text, re.IGNORECASE):
            return 3
        return super().label(query, docid, text, slot, count)
