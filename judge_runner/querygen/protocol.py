"""What a query writer is (:class:`QueryWriter`) and what it returns (:class:`GenerationResult`); imports
no writer.
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
        """``count`` queries about the corpus at ``root``, schema-checked, those with missing sources dropped.
        Raises an LLMError kind."""
        ...


@dataclass
class GenerationResult:
    """Phase one's outcome: valid queries, the dropped ones (``{"id", "query", "reason"}``, plus ``"check"``
    once reviewed), usage, cost (USD) and the ``card`` (None until reviewed)."""

    queries: list[Query]
    generated: int
    dropped: list[dict] = field(default_factory=list)
    model: str | None = None
    cost_usd: float | None = 0.0
    tool_calls: int = 0
    card: QuerySetCard | None = None

    def query_set(self) -> QuerySet:
        """The queries and their card as ``generate --out`` writes them."""
        return QuerySet(queries=self.queries, card=self.card)


def generate_queries(
    writer: QueryWriter,
    root: Path,
    count: int,
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS,
    log: Callable[[str], None] = lambda message: None,
    profile: CorpusProfile | None = None,
) -> GenerationResult:
    """Phase one with any query writer. Raises ValueError for ``count < 1`` and what the writer raises."""
    if count < 1:
        raise ValueError("--count must be at least 1")
    return writer.write_queries(Path(root), count, extensions, log, profile)
