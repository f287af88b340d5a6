"""The query-set card: what phase one's checks found about a query set, as plain data (docs/query-sets.md).
Stored in the query-set file and the run's ``run_start`` line; shares are fractions in [0, 1]. Every model keeps
fields it does not know, so a card written by a later version reads."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CARD_VERSION = 1
Check = Literal["sources", "duplicate", "non-specific", "answerability"]
"""The check that dropped a query: ``sources`` (an expected source is not in the corpus, or an off-topic
query names one), ``duplicate``, ``non-specific`` or ``answerability``."""


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")


class SpreadRow(_Part):
    """One folder, format or language: its files in the corpus and the on-topic queries whose first
    expected source is there, each with its share."""

    name: str
    corpusFiles: int = Field(ge=0)
    corpusShare: float = Field(ge=0, le=1)
    queries: int = Field(ge=0)
    queryShare: float = Field(ge=0, le=1)


class Spread(_Part):
    """The set's on-topic queries against the corpus, by top-level folder, format and language, and the
    warnings where the two differ (docs/query-sets.md, "Spread")."""

    onTopicQueries: int = Field(0, ge=0)
    folders: list[SpreadRow] = Field(default_factory=list)
    formats: list[SpreadRow] = Field(default_factory=list)
    languages: list[SpreadRow] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class Answerability(_Part):
    """The judge's round-trip check: each on-topic query labelled against the passage of each expected
    source meant to answer it. ``verified``: a label of 2 or more; ``flagged``: every label below 2,
    kept because of ``--keep-unverified``; ``dropped``: every label below 2; ``unchecked``: a judge call
    failed, the query is kept unverified. ``calls`` and ``costUsd`` (USD; None when a price is unknown)
    are what the check spent; ``labelsCached``: labels the judgment cache already held."""

    checked: int = Field(0, ge=0)
    verified: int = Field(0, ge=0)
    flagged: int = Field(0, ge=0)
    dropped: int = Field(0, ge=0)
    unchecked: int = Field(0, ge=0)
    judge: str = ""
    judgeMode: str = "pointwise"
    calls: int = Field(0, ge=0)
    labelsCached: int = Field(0, ge=0)
    costUsd: float | None = 0.0


class DuplicatePair(_Part):
    """A near-duplicate: ``dropped`` repeats ``kept`` (the same text after normalisation, or the same
    expected sources and an embedding cosine of ``cosine`` at or above the threshold)."""

    kept: str
    dropped: str
    keptQuery: str = ""
    droppedQuery: str = ""
    cosine: float | None = None
    sameText: bool = False


class Duplicates(_Part):
    """Near-duplicates removed; ``threshold``: the cosine at or above which two queries with the same
    expected sources are one (``querygen.checks.DUPLICATE_COSINE``); ``embedder``: whose vectors."""

    threshold: float = 0.0
    embedder: str = ""
    removed: int = Field(0, ge=0)
    pairs: list[DuplicatePair] = Field(default_factory=list)


class NonSpecificQuery(_Part):
    """A query many documents answer equally: ``why``, and ``action``: ``widened`` (``addedSources``
    joined its expected sources) or ``dropped``."""

    id: str
    query: str
    why: str
    action: Literal["widened", "dropped"]
    rivals: int = Field(0, ge=0)
    addedSources: list[str] = Field(default_factory=list)


class NonSpecific(_Part):
    """Queries flagged non-specific (never an ``ambiguous`` one), how many were widened and dropped."""

    flagged: int = Field(0, ge=0)
    widened: int = Field(0, ge=0)
    dropped: int = Field(0, ge=0)
    queries: list[NonSpecificQuery] = Field(default_factory=list)


class TypeLeakage(_Part):
    """The leakage of one query type: mean leakage and mean background over its ``queries`` (on-topic,
    kept), how many are exact copies of a heading of their expected source, the intents' mean leakage and
    how many intents are over the limit (copying their source or naming it)."""

    queryType: str
    queries: int = Field(ge=0)
    meanLeakage: float | None = None
    meanBackground: float | None = None
    headingCopies: int = Field(0, ge=0)
    meanIntentLeakage: float | None = None
    intentsOverLimit: int = Field(0, ge=0)


class QueryFacts(_Part):
    """What the checks found about one kept query: ``leakage`` (share of its content words, weighted by
    idf, found in its best expected source), ``background`` (the same share in an average other corpus
    file), ``headingCopy``, the judge's ``answerLabel`` (the best label over its expected sources; None
    when not checked) and ``flags`` (``unverified``, ``unchecked``, ``non-specific``,
    ``intent-copies-source``); the intent's: ``intentLeakage`` (as ``leakage``), ``intentCopied`` (the
    share of its word 5-grams found verbatim in its best expected source) and ``intentNamesSource``."""

    id: str
    queryType: str
    leakage: float | None = None
    background: float | None = None
    headingCopy: bool = False
    intentLeakage: float | None = None
    intentCopied: float | None = None
    intentNamesSource: bool = False
    answerLabel: int | None = None
    flags: list[str] = Field(default_factory=list)


class DroppedQuery(_Part):
    """A query phase one wrote and dropped: which ``check`` dropped it and why."""

    id: str
    query: str
    check: Check
    reason: str


class QuerySetCard(_Part):
    """The card of one query set (see the module docstring): ``written`` queries, ``kept`` ones,
    ``byType`` (kept), the spread against the corpus, answerability (None when no judge checked it), the
    duplicates removed, the non-specific queries, leakage by type, facts per kept query, and every
    dropped query with its reason."""

    cardVersion: int = CARD_VERSION
    written: int = Field(0, ge=0)
    kept: int = Field(0, ge=0)
    corpusFiles: int = Field(0, ge=0)
    byType: dict[str, int] = Field(default_factory=dict)
    spread: Spread = Field(default_factory=Spread)
    answerability: Answerability | None = None
    duplicates: Duplicates = Field(default_factory=Duplicates)
    nonSpecific: NonSpecific = Field(default_factory=NonSpecific)
    leakage: list[TypeLeakage] = Field(default_factory=list)
    intentCopyLimit: float | None = Field(
        default=None, description="An intent copying more than this share of its word 5-grams from its source is flagged."
    )
    queries: list[QueryFacts] = Field(default_factory=list)
    dropped: list[DroppedQuery] = Field(default_factory=list)
