"""A search that answers with results already recorded (``judge-runner rejudge``): each query gets the
answer a past run wrote for it, the same documents in the same order, each with the very text and anchor
its judge was shown, so another judge labels exactly what the first one labelled.

The answers are built by the caller (:mod:`judge_runner.app.rejudge` reads them from a run file) and
handed over as :class:`~judge_runner.search.base.SearchAnswer` objects keyed by query text; nothing is
searched, fetched or embedded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judge_runner.core.models import SearchMode
from judge_runner.search.base import SearchAnswer
from judge_runner.search.mapping import ExternalSearchError


class ReplaySearch:
    """A :class:`~judge_runner.search.base.SearchBackend` over recorded ``answers`` (``{query text:
    SearchAnswer}``). ``name`` and ``description`` are the recorded system's, so a run judged through it
    describes the same system as the run it replays; ``meta``: the recorded index's metadata
    (``corpus_fingerprint``), read as an index's; ``failures``: ``{query text: (errorType, message)}`` of
    the queries the system failed then, which fail again the same way."""

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
        """The recorded index metadata ``key`` (None when not recorded)."""
        return self.meta.get(key)

    def describe(self) -> dict[str, Any]:
        """What provenance records: the recorded system's own description."""
        return dict(self.description)

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10, *, intent: str = "") -> SearchAnswer:
        """The recorded answer to ``query``, its first ``limit`` results, in the mode asked. Raises
        ExternalSearchError: the recorded failure's kind and message (said to be recorded), else
        ``search_no_ranking`` for a query nothing was recorded for."""
        answer = self.answers.get(query)
        if answer is None and query in self.failures:
            kind, message = self.failures[query]
            raise ExternalSearchError(f"failed in the recorded run: {message}", kind)
        if answer is None:
            raise ExternalSearchError(f"no recorded results for query {query[:80]!r}", "search_no_ranking")
        return answer.model_copy(update={"mode": mode, "results": answer.results[:limit]})
