"""Plain data passed between stages; each mirrors a JSON Schema in ``schemas/``."""

from __future__ import annotations

import unicodedata
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from judge_runner.core.query_card import QuerySetCard
from judge_runner.core.textproc import clean_text

# The vocabulary, each defined once here: click choices, settings, prompts and the JSON Schemas' enums
# (tests/core/test_vocabulary.py proves the schemas agree) all derive from these Literals.
QueryType = Literal["keyword", "identifier", "natural-language", "conceptual", "ambiguous", "multilingual", "off-topic"]
QUERY_TYPES: tuple[str, ...] = get_args(QueryType)
SearchMode = Literal["hybrid", "fts", "vector"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
JudgeMode = Literal["pointwise", "batched"]  # one judge call per result, or one per query (docs/judge-protocol.md)
JUDGE_MODES: tuple[JudgeMode, ...] = get_args(JudgeMode)
DIMENSIONS: tuple[str, ...] = ("relevance", "ranking", "coverage", "snippetQuality")


class Query(BaseModel):
    """One query of a query set (``schemas/query_set.schema.json``)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    query: str
    queryIntent: str
    queryType: QueryType
    expectedSources: list[str] = Field(default_factory=list)

    @field_validator("id", "query", "queryIntent")
    @classmethod
    def _encodable(cls, value: str) -> str:
        # a "\ud83d" escape in a query-set file is a lone surrogate: U+FFFD, so it can be searched and written
        return clean_text(value)

    @field_validator("expectedSources")
    @classmethod
    def _nfc(cls, value: list[str]) -> list[str]:
        # corpus sources are NFC (judge_runner.corpus.walk): compare like with like
        return [unicodedata.normalize("NFC", clean_text(s)) for s in value]


class QuerySet(BaseModel):
    """What ``generate --out`` writes and ``evaluate --queries`` reads. ``card`` (None for a set written by
    hand) is not part of the set's sha256."""

    model_config = ConfigDict(extra="forbid")

    queries: list[Query] = Field(min_length=1)
    card: QuerySetCard | None = None

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> QuerySet:
        r"""As pydantic's, but JSON holding a lone surrogate escape (``"\ud83d"``), which pydantic refuses, is
        read too: the escape becomes U+FFFD."""
        from pydantic import ValidationError

        try:
            return super().model_validate_json(json_data, **kwargs)
        except ValidationError as exc:
            if not any(e["type"] == "json_invalid" for e in exc.errors()):
                raise
            import json

            try:
                data = json.loads(json_data)
            except ValueError:
                raise exc from None
            return cls.model_validate(data, **{k: v for k, v in kwargs.items() if k in ("strict", "context")})

    def to_json(self) -> str:
        """The file's text: 2-space JSON and a trailing newline, with no ``card`` key when there is no card."""
        return self.model_dump_json(indent=2, exclude={"card"} if self.card is None else None) + "\n"

    @model_validator(mode="after")
    def _unique_ids(self) -> QuerySet:
        ids = [q.id for q in self.queries]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"query ids must be unique; repeated: {', '.join(repeated)}")
        return self
