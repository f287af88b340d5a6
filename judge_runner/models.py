"""Plain data passed between stages; each mirrors a JSON Schema in ``schemas/``."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

# The vocabulary, each defined once here: click choices, settings, prompts and the JSON Schemas' enums
# (tests/test_vocabulary.py proves the schemas agree) all derive from these Literals.
QueryType = Literal["keyword", "identifier", "natural-language", "conceptual", "ambiguous", "multilingual", "off-topic"]
QUERY_TYPES: tuple[str, ...] = get_args(QueryType)
SearchMode = Literal["hybrid", "fts", "vector"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
DIMENSIONS: tuple[str, ...] = ("relevance", "ranking", "coverage", "snippetQuality")


class Query(BaseModel):
    """One query of a query set (``schemas/query_set.schema.json``)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    query: str
    queryIntent: str
    queryType: QueryType
    expectedSources: list[str] = Field(default_factory=list)


class QuerySet(BaseModel):
    """What ``generate --out`` writes and ``evaluate --queries`` reads."""

    model_config = ConfigDict(extra="forbid")

    queries: list[Query] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> QuerySet:
        ids = [q.id for q in self.queries]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"query ids must be unique; repeated: {', '.join(repeated)}")
        return self
