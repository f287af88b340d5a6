"""A search written as a Python function, ``search(query, k)``, judged like a command: its hits, dicts in
a command's shape or :class:`~judge_runner.search.base.SearchHit` values, are mapped as a command's reply.
A function that fails fails its query with an error line, never a zero.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from judge_runner.core.models import SearchMode
from judge_runner.search.base import SearchAnswer, SearchHit
from judge_runner.search.mapping import DocumentStore, ExternalSearchError, FieldMapping, ReplyRules, answer_from_reply

SearchFunction = Callable[[str, int], Any]
"""``(query, k) -> hits``, best first (or a dict holding them under ``results``)."""


def _item(hit: Any) -> Any:
    if isinstance(hit, SearchHit):
        return {"source": hit.source, "snippet": hit.text or hit.snippet, "score": hit.score, "anchor": hit.anchor} | (
            {"lineStart": hit.lineStart, "lineEnd": hit.lineEnd}
        )
    return hit


class CallableSearch:
    """A :class:`~judge_runner.search.base.SearchBackend` calling ``function(query, limit)`` in this process."""

    def __init__(
        self,
        function: SearchFunction,
        *,
        mapping: FieldMapping | None = None,
        documents: DocumentStore | None = None,
        snippet_chars: int = 400,
        name: str | None = None,
    ):
        if not callable(function):
            raise ValueError(f"the search must be a callable (query, k) -> hits, not {type(function).__name__}")
        self.function, self.mapping, self.documents, self.snippet_chars = function, mapping or FieldMapping(), documents, snippet_chars
        self.name = name or getattr(function, "__name__", None) or type(function).__name__

    def describe(self) -> dict[str, Any]:
        module = getattr(self.function, "__module__", None)
        return {
            "kind": "python",
            "function": f"{module}.{self.name}" if module else self.name,
            "fields": self.mapping.describe(),
            "documents": getattr(self.documents, "label", None),
        }

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10, *, intent: str = "") -> SearchAnswer:
        """The function's hits for ``query``, mapped. Raises ExternalSearchError: ``search_failed``,
        ``search_output`` or ``search_unknown_source``."""
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
