"""The blocks of the run file's ``summary`` line: abstention, top issues, the recommended focus's
evidence, usage, the start-of-run estimate, and a compare run's per-system figures and paired differences
(:class:`~judge_runner.runs.lines.SummaryLine` holds them; docs/run-file.md describes each field).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from judge_runner.runs.values import Unit


class Abstention(BaseModel):
    """Off-topic queries evaluated, those the search abstained on, and on-topic queries answered without confidence."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    offTopic: int = Field(default=0, ge=0, description="Off-topic queries evaluated.")
    correct: int = Field(default=0, ge=0, description="Off-topic queries on which the search abstained.")
    falseAbstentions: int = Field(default=0, ge=0, description="On-topic queries on which the search said it was not confident.")
    accuracy: float | None = Field(default=None, ge=0, le=1, description="correct / offTopic; null without off-topic queries.")
    falseAbstentionRate: float | None = Field(
        default=None, ge=0, le=1, description="falseAbstentions / on-topic queries; null without them."
    )


class Issue(BaseModel):
    """A suggestion the judges made, grouped by wording, with the queries it was made on."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    issue: str
    count: int = Field(ge=1)
    queryIds: list[str]


class FocusEvidence(BaseModel):
    """What ``recommendedFocus`` rests on (judge_runner.judging.advice): per dimension the mean gain of overall
    if the search recovered that dimension on every on-topic query, the queries weak on the focus dimension
    and the suggestion paired with it."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    dimension: str | None = Field(default=None, description="The dimension to work on first; null when nothing is weak.")
    headroom: dict[str, float] = Field(
        default_factory=dict,
        description="Per dimension: how much the mean overall would rise if that dimension were recovered on every on-topic "
        "query (ranking: by reordering what was returned; relevance: by returning what is known to answer better).",
    )
    weakGain: float = Field(
        default=0.05, ge=0, description="A query is weak on a dimension when recovering it would raise its overall by this much."
    )
    onTopicQueries: int = Field(default=0, ge=0)
    queryIds: list[str] = Field(default_factory=list, description="The queries weak on the focus dimension, largest gain first.")
    suggestion: str | None = Field(
        default=None, description="The judges' most frequent suggestion on those queries that addresses the dimension."
    )
    suggestionQueryIds: list[str] = Field(default_factory=list)


class QrelsBlock(BaseModel):
    """Which qrels the summary's figures were computed against (judge_runner.judging.pooled): every grade known
    for each query of the run, pooled over every system's lines, the judgment cache and people's grades."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    source: Literal["judge", "people", "judge and people"] = Field(
        default="judge", description="Whose grades the qrels hold (expected sources aside)."
    )
    queries: int = Field(default=0, ge=0, description="Queries with qrels (on-topic queries with metrics).")
    judge: int = Field(default=0, ge=0, description="(query, document) grades from the judge: every system's labels, their median.")
    people: int = Field(default=0, ge=0, description="Grades people gave (they win over the judge's).")
    expected: int = Field(default=0, ge=0, description="Expected sources nobody graded, counted at grade 3.")
    fromCache: int = Field(default=0, ge=0, description="Of the judge's grades, those only the judgment cache held (same judge).")
    runs: int = Field(default=1, ge=0, description="Run files whose lines were pooled.")
    cache: bool = Field(default=False, description="Whether the judgment cache was read.")


class RunUsage(BaseModel):
    """Tokens and calls of the whole run (input tokens include cache writes and reads)."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    inputTokens: int = Field(ge=0)
    outputTokens: int = Field(ge=0)
    calls: int = Field(ge=0)
    cacheWriteTokens: int = Field(default=0, ge=0, description="Input tokens written to the provider's prompt cache (part of inputTokens).")
    cacheReadTokens: int = Field(default=0, ge=0, description="Input tokens read from the provider's prompt cache (part of inputTokens).")


class RunEstimate(BaseModel):
    """What the run was estimated to cost at its start (``judge_runner.estimate.costs``, the figures ``--dry-run``
    prints for the chosen judge), beside what it cost."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    calls: int = Field(ge=0, description="Judge calls the run was expected to make (labels in the judgment cache excluded).")
    inputTokens: int = Field(ge=0, description="Estimated input tokens: JSON length of what the model reads / 4.")
    outputTokens: int = Field(ge=0, description="Expected output tokens (a typical reply per call).")
    costUsd: float | None = Field(
        default=None,
        ge=0,
        description="Expected USD in the run's own mode: the prompt cache read after each kind's first call, at batch prices "
        "when batch is true; null when the price is unknown.",
    )
    worstCaseCostUsd: float | None = Field(
        default=None,
        ge=0,
        description="USD in the run's mode if every call wrote its max_tokens (re-asks not included); null when the price is unknown.",
    )
    batch: bool = Field(default=False, description="The run sent its judge calls through a batch API (costUsd at batch prices).")
    cacheReadTokens: int = Field(
        default=0,
        ge=0,
        description="Input tokens the estimate expected read from the prompt cache (a prefix at least the model's minimum, "
        "read by each later call of its kind); 0 when none reaches the minimum.",
    )
    batchCostUsd: float | None = Field(
        default=None, ge=0, description="Expected USD at batch-API prices (pricing.json batchDiscount), no prompt cache."
    )
    cachedCostUsd: float | None = Field(
        default=None,
        ge=0,
        description="Expected USD at standard prices with the tool schema and system prompt read from the prompt cache after "
        "each kind's first call.",
    )


class SystemAverages(BaseModel):
    """One system's figures in a compare run, each over that system's lines only (averaged as the summary
    averages; older files hold only the averages)."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    name: str
    evaluated: int = Field(ge=0)
    failed: int = Field(ge=0)
    averageScores: dict[str, Unit] | None = None
    averageMetrics: dict[str, Unit] | None = None
    abstention: Abstention | None = None
    topIssues: list[Issue] = Field(default_factory=list)
    recommendedFocus: str | None = None
    focusEvidence: FocusEvidence | None = None


class FailedSide(BaseModel):
    """One side's failed queries in a difference."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    name: str = Field(description="The system (or run) the figures are of.")
    failed: int = Field(ge=0, description="Queries it failed (search or judge).")
    onTopic: int = Field(ge=0, description="Of them, known on-topic (off-topic queries have no metrics).")
    of: int = Field(ge=0, description="Queries it was given, answered and failed.")
    counted: int = Field(ge=0, description="Of them, those the figure counts: the other side has a value for them.")


class FailedQueries(BaseModel):
    """A difference with failed queries (judge_runner/measures/failed.py): the figure shown has them at 0; the
    verdict stands only when the second figure (at the other side's value; unpaired: left out) agrees."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    system: FailedSide
    against: FailedSide
    shown: str = Field(description="How the shown figure counts them: 'at 0'.")
    shownVerdict: str = Field(description="The shown figure's own verdict (the difference's verdict unless it is 'cannot tell').")
    second: str = Field(description="How the second figure counts them: 'at the other's value' (paired) or 'left out'.")
    secondFigure: dict[str, Any] | None = Field(
        default=None, description="The second figure (its difference, interval and verdict); null when no failed query counts."
    )
    holds: bool = Field(description="The verdict is the same both ways; false: 'cannot tell'.")
    text: str = Field(description="In words: 'cannot tell: B failed 5 of 14 queries (3 on-topic)', or why the verdict holds.")


class SystemDifference(BaseModel):
    """A later system against the reference on one column: paired difference (system - reference) over
    the queries both judged, 95% percentile bootstrap interval, and trend's minimum-effect verdict; with a
    system's failed queries at 0 (``failed``), "cannot tell" when they could change the verdict."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    system: str
    against: str
    column: str
    kind: Literal["score", "metric"]
    mean: float | None = None
    referenceMean: float | None = None
    delta: float | None = None
    ci95: list[float | None] = Field(min_length=2, max_length=2)
    n: int = Field(ge=0)
    verdict: Literal["regression", "improvement", "within noise", "too few queries", "cannot tell"]
    failed: FailedQueries | None = Field(default=None, description="Set when either system failed queries (search or judge).")


class ComparisonBlock(BaseModel):
    """The summary's ``comparison`` in a run of several systems (judge_runner/evaluation/compare.py)."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    reference: str
    minEffect: float = Field(ge=0)
    systems: list[SystemAverages]
    differences: list[SystemDifference]
