"""The search contract every backend honours (docs/design.md, "The search contract")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, Field

from judge_runner.core.models import SearchMode
from judge_runner.embed.base import TextEmbedder
from judge_runner.search.settings import SearchSettings  # noqa: F401 - neutral module (config.py imports no search)


class IndexMismatchError(RuntimeError):
    """The index cannot be used as it is: missing, another model, another schema."""


class HitScores(BaseModel):
    """Per-signal scores of a result's best chunk; None when the signal did not retrieve it."""

    bm25: float | None = None
    cosine: float | None = None
    rrf: float | None = None


class SearchHit(BaseModel):
    """One ranked document: what the system returned for it, and what the judge is shown (``text``,
    ``textAnchor``, ``textFrom``)."""

    rank: int
    source: str
    anchor: str | None
    lineStart: int
    lineEnd: int
    snippet: str
    score: float
    scores: HitScores
    matchedBy: list[Literal["fts", "vector"]]
    text: str | None = Field(
        default=None,
        exclude=True,
        description="What the judge is shown of the document for this query (fence.render_document caps it): with textFrom "
        "'document', its passages by the one rule (search/passages.py), whoever returned it; with 'result', the result's own "
        "text. Not part of the search's JSON output.",
    )
    textAnchor: str | None = Field(
        default=None,
        exclude=True,
        description="The anchor shown to the judge with a 'document' text: its best passage's (the system's own anchor stays in anchor).",
    )
    textFrom: Literal["document", "result"] = Field(
        default="result",
        exclude=True,
        description="Where text comes from: 'document', the document's chunks (the index, or a document store) by the one rule; "
        "'result', the text the system returned (no store holds the document).",
    )

    def shown(self) -> tuple[str | None, str]:
        """``(anchor, text)`` as the judge is shown them."""
        if self.textFrom == "document" and self.text is not None:
            return self.textAnchor, self.text
        return self.anchor, self.text or self.snippet


class SearchAnswer(BaseModel):
    """Documents best first, and ``confident``, the honesty gate's verdict."""

    query: str
    mode: SearchMode
    results: list[SearchHit]
    confident: bool
    latencyMs: float
    notes: list[str] = Field(
        default_factory=list,
        exclude=True,
        description="What the run file should say about how this answer was read (an external search's output decoded "
        "from another encoding, a process left holding its output open); not part of the search's JSON output.",
    )


class SearchBackend(Protocol):
    """What phase two needs from a search. ``intent`` only chooses what the judge is shown: it never ranks
    and never reaches an external system."""

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10, *, intent: str = "") -> SearchAnswer: ...


@runtime_checkable
class PreparesQueries(Protocol):
    """A backend that can embed a query set before searching it: ``prepare_queries(queries, mode) -> int``."""

    def prepare_queries(self, queries: Sequence[str], mode: SearchMode = "hybrid") -> int: ...


class SearchIndex(Protocol):
    """What the jobs use of an open built-in index (:class:`~judge_runner.search.sqlite.SQLiteIndex`,
    :class:`~judge_runner.search.postgres.PostgresIndex`): its search, its documents by sha256, its meta."""

    settings: SearchSettings
    embedder: TextEmbedder

    def search(
        self,
        query: str,
        mode: SearchMode = "hybrid",
        limit: int = 10,
        *,
        query_vector: np.ndarray | None = None,
        passages: bool = True,
        intent: str = "",
    ) -> SearchAnswer: ...

    def prepare_queries(self, queries: Sequence[str], mode: SearchMode = "hybrid") -> int: ...

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def document_hashes(self) -> dict[str, str]: ...

    def replace_document(self, source: str, sha256: str, fmt: str, size: int, chunks: list, vectors: np.ndarray) -> None: ...

    def remove_documents(self, sources: Iterable[str]) -> int: ...

    def stats(self) -> dict[str, int]: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def close(self) -> None: ...
