"""A search that answers with a past run's recorded answers (``judge-runner rejudge``), text and anchor as
shown, so another judge labels exactly what the first one labelled. Nothing is searched or embedded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judge_runner.core.models import SearchMode
from judge_runner.search.base import SearchAnswer
from judge_runner.search.mapping import ExternalSearchError


class ReplaySearch:
    """A :class:`~judge_runner.search.base.SearchBackend` over ``answers`` by query text, describing the
    recorded system. ``failures``: ``{query text: (errorType, message)}``, failed again the same way."""

    def __init__(
        self,
        answers: Mapping[str, SearchAnswer],
        name: str = "replay",
        description: Mapping[str, Any] | None = None,
        meta: Mapping[str, str] | None = None,
        failures: Mapping[str, tuple[str, str]] | None = None,
    ):
        self.answers = dict(answers)
        self.name = name
        self.description = dict(description or {"kind": "replay"})
        self.meta = dict(meta or {})
        self.failures = dict(failures or {})

    def get_meta(self, key: str) -> str | None:
        return self.meta.get(key)

    def describe(self) -> dict[str, Any]:
        return dict(self.description)

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10, *, intent: str = "") -> SearchAnswer:
        """The recorded answer's first ``limit`` results. Raises ExternalSearchError: the recorded failure,
        else ``search_no_ranking``."""
        answer = self.answers.get(query)
        if answer is None and query in self.failures:
            kind, message = self.failures[query]
            raise ExternalSearchError(f"failed in the recorded run: {message}", kind)
        if answer is None:
            raise ExternalSearchError(f"no recorded results for query {query[:80]!r}", "search_no_ranking")
        return answer.model_copy(update={"mode": mode, "results": answer.results[:limit]})
