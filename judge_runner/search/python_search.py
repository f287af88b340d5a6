"""A search written as a Python function, judged like a command or an HTTP endpoint
(:mod:`judge_runner.search.external`, :mod:`judge_runner.search.http_search`): ``search(query: str, k: int)``
returns the ranked hits, best first, each a dict in the shape a command prints (``source``/``id``,
``snippet``/``text``, ``score``, ``anchor``, ``lineStart``, ``lineEnd``; a
:class:`~judge_runner.search.mapping.FieldMapping` for other keys) or a
:class:`~judge_runner.search.base.SearchHit`. The hits are mapped by
:func:`~judge_runner.search.mapping.answer_from_reply`, exactly as a command's reply: the judge is shown a
document's passages from the document store when it holds the document, else the hit's own text.

A function that raises, or returns something that is not a list of hits, fails that query with an
:class:`~judge_runner.search.mapping.ExternalSearchError` (an ``error`` line, never a zero).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from judge_runner.core.models import SearchMode
from judge_runner.search.base import SearchAnswer, SearchHit
from judge_runner.search.mapping import ExternalSearchError, FieldMapping, ReplyRules, answer_from_reply

SearchFunction = Callable[[str, int], Any]
"""``(query, k) -> hits``: a list of dicts or SearchHits, best first (or a dict holding them under ``results``)."""


def _item(hit: Any) -> Any:
    """A SearchHit as the dict a command would print for it; anything else as it is."""
    if isinstance(hit, SearchHit):
        return {"source": hit.source, "snippet": hit.text or hit.snippet, "score": hit.score, "anchor": hit.anchor} | (
            {"lineStart": hit.lineStart, "lineEnd": hit.lineEnd}
        )
    return hit


class CallableSearch:
    """A :class:`~judge_runner.search.base.SearchBackend` calling ``function(query, limit)`` in this process.
    ``name`` defaults to the function's ``__name__``; ``documents``: the store text-less hits are read from."""

    def __init__(
        self,
        function: SearchFunction,
        *,
        mapping: FieldMapping | None = None,
        documents: Any = None,
        snippet_chars: int = 400,
        name: str | None = None,
    ):
        if not callable(function):
            raise ValueError(f"the search must be a callable (query, k) -> hits, not {type(function).__name__}")
        self.function, self.mapping, self.documents, self.snippet_chars = function, mapping or FieldMapping(), documents, snippet_chars
        self.name = name or getattr(function, "__name__", None) or type(function).__name__

    def describe(self) -> dict[str, Any]:
        """What provenance records: the kind, the function's module and name, the mapping."""
        module = getattr(self.function, "__module__", None)
        return {
            "kind": "python",
            "function": f"{module}.{self.name}" if module else self.name,
            "fields": self.mapping.describe(),
            "documents": getattr(self.documents, "label", None),
        }

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10, *, intent: str = "") -> SearchAnswer:
        """Call the function and map its hits (``intent`` chooses only the passages of a document store). Raises ExternalSearchError (``search_failed``: it raised;
        ``search_output``: not a list of hits; ``search_unknown_source``: a hit with no text and no document)."""
        started = time.perf_counter()
        try:
            reply = self.function(query, limit)
        except Exception as exc:  # noqa: BLE001 - the user's code: any failure is this query's error line
            raise ExternalSearchError(f"search function {self.name!r} raised {type(exc).__name__}: {str(exc)[:300]}") from exc
        if isinstance(reply, tuple):
            reply = list(reply)
        if isinstance(reply, list):
            reply = [_item(hit) for hit in reply]
        return answer_from_reply(
            reply, ReplyRules(self.mapping, self.documents, self.snippet_chars), query, mode, limit, started, None, intent
        )
