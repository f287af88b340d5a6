"""A judge and a search with fixed answers for the run loop's tests: no model, no index, no network."""

from __future__ import annotations

from judge_runner.core.models import Query
from judge_runner.judging.protocol import LabelReply, ListVerdict
from judge_runner.llm.errors import AuthError
from judge_runner.search.base import HitScores, SearchAnswer, SearchHit


class StubJudge:
    """A heuristic-style Judge with fixed answers: ``docN.md`` is labelled 4 - N (doc1 3, doc2 2); the
    list-level verdict gives coverage 0.4, snippetQuality 0.2 and holistic figures 0.8, 0.6, 0.9. It
    never sees a rank: it reads the source of the fenced document."""

    name, model, heuristic = "offline", "stub", True

    def __init__(self, fail_on: set[str] | None = None):
        self.fail_on = fail_on or set()

    def label_one(self, query, intent, document, sampling, log=lambda m: None):
        if query in self.fail_on:
            raise AuthError("the API key was refused: HTTP 401 (authentication_error)", 1)
        return LabelReply(label=max(0, 4 - int(document.source[3:-3])), reason="stub")

    def label_batch(self, query, intent, documents, order, sampling, log=lambda m: None):
        return [self.label_one(query, intent, d, sampling, log) for d in documents]

    def list_verdict(self, query, intent, expected_sources, items, sampling, log=lambda m: None):
        return ListVerdict(
            coverage=0.4,
            snippet_quality=0.2,
            holistic={"relevance": 0.8, "ranking": 0.6, "overall": 0.9},
            analysis={"coverage": "stub", "snippetQuality": "stub"},
            suggestions=["Boost title matches"],
        )


class StubSearch:
    """Returns two fixed results; raises ``raise_on[query]`` for the queries named there."""

    def __init__(self, raise_on: dict[str, BaseException] | None = None):
        self.raise_on = raise_on or {}
        self.calls = 0

    def search(self, query, mode="hybrid", limit=10, intent=""):
        self.calls += 1
        if query in self.raise_on:
            raise self.raise_on[query]
        hits = [
            SearchHit(
                rank=i,
                source=f"doc{i}.md",
                anchor=None,
                lineStart=1,
                lineEnd=2,
                snippet="text",
                score=1.0 / i,
                scores=HitScores(),
                matchedBy=["fts"],
            )
            for i in (1, 2)
        ]
        return SearchAnswer(query=query, mode=mode, results=hits, confident=True, latencyMs=1.0)


def queries(n: int) -> list[Query]:
    """``n`` keyword queries expecting ``doc1.md``."""
    return [
        Query(id=f"q{i}", query=f"query {i}", queryIntent="i", queryType="keyword", expectedSources=["doc1.md"]) for i in range(1, n + 1)
    ]
