"""Phase one's bottom: what a query writer is (:class:`QueryWriter`) and what it returns
(:class:`GenerationResult`). The LLM agent (:mod:`judge_runner.querygen.agent`) and the heuristic writer
(:mod:`judge_runner.querygen.heuristic`) implement it; this module imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from judge_runner.core.models import Query, QuerySet
from judge_runner.core.query_card import QuerySetCard
from judge_runner.corpus.walk import DEFAULT_EXTENSIONS
from judge_runner.querygen.profile import CorpusProfile


class QueryWriter(Protocol):
    """Phase one's query writer; ``name``, ``model`` and ``heuristic`` as for :class:`Judge`."""

    name: str
    model: str
    heuristic: bool

    def write_queries(
        self,
        root: Path,
        count: int,
        extensions: tuple[str, ...] = ...,
        log: Callable[[str], None] = ...,
        profile: CorpusProfile | None = None,
    ) -> GenerationResult:
        """``count`` queries about the knowledge base at ``root`` (files with ``extensions``), schema-checked
        and with queries whose expected sources do not exist dropped. ``profile``: the corpus's profile
        when the caller has one (:func:`judge_runner.querygen.profile.profile_corpus`; else the writer
        builds it), for spreading the queries over the corpus. Raises an LLMError kind."""
        ...


@dataclass
class GenerationResult:
    """Phase one's outcome: valid queries, the dropped ones with reasons (``{"id", "query", "reason"}``,
    plus ``"check"`` once reviewed), usage and cost (USD; the writer's, plus the answerability check's
    once reviewed), and the query-set ``card`` (None until :func:`judge_runner.querygen.review.review_query_set`)."""

    queries: list[Query]
    generated: int
    dropped: list[dict] = field(default_factory=list)
    model: str | None = None
    cost_usd: float | None = 0.0
    tool_calls: int = 0
    card: QuerySetCard | None = None

    def query_set(self) -> QuerySet:
        """The queries and their card as the file ``generate --out`` writes."""
        return QuerySet(queries=self.queries, card=self.card)


def generate_queries(
    writer: QueryWriter,
    root: Path,
    count: int,
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS,
    log: Callable[[str], None] = lambda message: None,
    profile: CorpusProfile | None = None,
) -> GenerationResult:
    """Phase one with any query writer (the exploring LLM agent or the offline heuristic); both answers
    pass the same schema check and source filter (the review, :mod:`judge_runner.querygen.review`,
    follows). ``profile``: the corpus's profile, when the caller has one. Raises ValueError for
    ``count < 1`` and what the writer raises (see :func:`generate_with_llm`)."""
    if count < 1:
        raise ValueError("--count must be at least 1")
    return writer.write_queries(Path(root), count, extensions, log, profile)
