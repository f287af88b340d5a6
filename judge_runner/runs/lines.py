"""The run file's line types as pydantic models (docs/run-file.md): the writers build them, the reader validates
into them, and ``schemas/*.schema.json`` are generated from them (``python -m judge_runner.runs.lines
schemas/``). Written, every declared field is present (the schemas require them all); read, every field but
``type`` has a default and unknown fields are kept, so older files validate and nothing written is lost."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema, field_validator

from judge_runner.core.models import DIMENSIONS, QueryType, SearchMode
from judge_runner.core.query_card import QuerySetCard
from judge_runner.llm.registry import PROVIDER_NAMES
from judge_runner.measures.ir import METRIC_NAMES, canonical_metric_name
from judge_runner.runs.corrected_blocks import BiasCorrected
from judge_runner.runs.summary_blocks import (
    Abstention,
    ComparisonBlock,
    FocusEvidence,
    Issue,
    QrelsBlock,
    RunEstimate,
    RunUsage,
)
from judge_runner.runs.values import _UNIT_SCHEMA, MaybeUnit, MetricValue, Unit

FORMAT_VERSION = 2
"""2: the label-first judge (per-result reasons, flags, cache and trial fields, judge fingerprint, null scores
for off-topic queries). Readers accept 1 and 2."""
SCHEMA_BASE_URL = "https://judge-runner.dev/schemas/"
LINE_TYPES = ("run_start", "evaluation", "error", "batch", "summary")
SCORE_KEYS: tuple[str, ...] = (*DIMENSIONS, "overall", "gradedPrecision", "judgeRelevance", "judgeRanking", "judgeOverall")

_METRICS_SCHEMA = {
    "type": "object",
    "required": list(METRIC_NAMES),
    "additionalProperties": {"anyOf": [_UNIT_SCHEMA, {"type": "null"}]},
    "description": "ir-measures names (str(measure)). R@10 is null only in files written before scoring version 3, for a query "
    "without expected sources.",
}


class _Line(BaseModel):
    """Fields every line has. Unknown fields are kept (``extra="allow"``)."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    type: str  # each line type narrows it to its Literal (declared here so that it is written first)
    runId: str = Field(
        default="",
        description="The run's id, the same on every line of the run and of a resumed run's second file: the UTC start "
        "to the millisecond plus six random hex digits (20261201T090000.123Z-3f9a0c; judge_runner.core.ids.time_id); "
        "files written before this format have 20261201T090000Z. An opaque string to readers.",
    )
    timestamp: str = Field(default="", json_schema_extra={"format": "date-time"})

    def line(self) -> dict[str, Any]:
        """The line as written: a JSON-ready dict by alias, extra fields after the declared ones."""
        return self.model_dump(by_alias=True, mode="json")


def _metrics_by_name(value: Any) -> Any:
    """``Recall@10`` -> ``R@10`` and the other older metric keys."""
    if isinstance(value, dict):
        return {canonical_metric_name(str(k)): v for k, v in value.items()}
    return value


# -- run_start -------------------------------------------------------------------------------------


class RejudgeOrigin(BaseModel):
    """The ``provenance.rejudgeOf`` block of a run written by ``judge-runner rejudge``: the run whose results
    (and the text its judge was shown) were judged again by this run's judge. ``timestamp`` is that run's start:
    where this run stands in a series (``trend`` compares the next run of the new judge against it)."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    runId: str = Field(description="The re-judged run's id.")
    file: str = Field(default="", description="Its run file's name.")
    timestamp: str = Field(
        default="", description="Its start (run_start timestamp; for a run itself written by rejudge, its own rejudgeOf.timestamp)."
    )
    judge: str = Field(default="", description="Its judge as trend names it (provider/model mode).")
    judgeKey: str = Field(default="", description="Its judge's comparability key (judge_runner.judging.fingerprint).")
    queriesRejudged: int = Field(default=0, ge=0, description="Its judged queries (per system) judged again here.")
    queriesNotRejudged: int = Field(
        default=0, ge=0, description="Its queries without results to judge again (error lines, or never reached: a run cut short)."
    )
    stopReason: str | None = Field(
        default=None, description="Why the re-judged run stopped early (its summary's); null when it ran to the end."
    )


def _not_required(*names: str) -> Any:
    """A ``json_schema_extra`` that leaves ``names`` out of ``required`` (fields an older file may lack)."""

    def edit(schema: dict[str, Any]) -> None:
        schema["required"] = [n for n in schema.get("required", []) if n not in names]

    return edit


class Provenance(BaseModel):
    """Who judged, with which prompts, on what: the ``provenance`` block of ``run_start``. Written only
    sometimes (an extra field): ``searchSystems``, the systems judged when not only the built-in search
    (external adapters, run files, compare runs), each ``{name, kind, ...}`` as the adapter describes
    itself, never a secret. ``rejudgeOf`` is declared but not required (null, or absent in files written
    before it)."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True, json_schema_extra=_not_required("rejudgeOf"))

    # the schema's enum is the provider registry's names (what is written); the reader also accepts
    # 'legacy' for adapted old files, so the Python type stays a plain string
    provider: Annotated[str, WithJsonSchema({"type": "string", "enum": list(PROVIDER_NAMES)})] = Field(
        default="", description="Provider name (a registry name; 'legacy' for adapted old files)."
    )
    generatorModel: str | None = None
    judgeModel: str | None = None
    heuristicJudge: bool = Field(default=False, description="True for the offline provider: scores come from a heuristic, not an LLM.")
    promptSha256: dict[str, str] = Field(default_factory=dict, description="sha256 (hex) of each prompt template, by file name.")
    querySetSha256: str = ""
    corpusFingerprint: str = ""
    searchConfig: dict[str, Any] = Field(default_factory=dict)
    judgeRunnerVersion: str = ""
    judgeFingerprint: dict[str, Any] | None = Field(
        default=None,
        description="Format 2: provider, requested model, judge mode, "
        "trials, sampling sent, prompt and schema sha256, render version "
        "(judge_fingerprint.JudgeFingerprint); trend compares only runs whose "
        "fingerprints (plus the returned model ids) are equal.",
    )
    judgeIsGenerator: bool = Field(default=False, description="True when the model that wrote the queries also judges them (circularity).")
    scoringVersion: int = Field(
        default=1,
        ge=1,
        description="How labels became scores (judge_runner.judging.scores.SCORING_VERSION); a file without it was scored "
        "under 1 (relevance = graded precision). trend never compares scores of two scoring versions.",
    )
    rejudgeOf: RejudgeOrigin | None = Field(
        default=None,
        description="A run written by `judge-runner rejudge`: the run whose results it judges again with this run's judge; "
        "null for any other run.",
    )


class RunStartLine(_Line):
    """First line of a run file: when, with what configuration, under which judge."""

    model_config = ConfigDict(title="RunStartLine")

    type: Literal["run_start"] = "run_start"
    formatVersion: int = Field(
        default=1, ge=1, description="Run-file format (written: FORMAT_VERSION); files written before it existed are 1."
    )
    config: dict[str, Any] = Field(default_factory=dict)
    provenance: Provenance | None = None
    queriesGenerated: int | None = Field(default=None, ge=0, description="Queries phase one returned (null when the set came from a file).")
    queriesDropped: int = Field(default=0, ge=0, description="Queries phase one dropped, e.g. because an expected source does not exist.")
    querySetCard: QuerySetCard | None = Field(
        default=None,
        description="The query-set card (docs/query-sets.md): spread against the corpus, answerability, duplicates, "
        "non-specific queries, leakage by type, dropped queries; null for a query set without one.",
    )


# -- evaluation ------------------------------------------------------------------------------------


class Scores(BaseModel):
    """The four dimensions, ``overall`` (computed by code from the configured weights), ``gradedPrecision``
    (scoring version 2: the mean label / 3, the relevance of version 1; null in older files) and the
    list-level call's own holistic figures ``judgeRelevance``, ``judgeRanking``, ``judgeOverall``; each
    in [0, 1]. Format 2: relevance and ranking are computed from the labels
    (:mod:`judge_runner.judging.scores`); every score is null for an off-topic query."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    relevance: MaybeUnit = None
    ranking: MaybeUnit = None
    coverage: MaybeUnit = None
    snippetQuality: MaybeUnit = None
    overall: MaybeUnit = None
    gradedPrecision: MaybeUnit = None
    judgeRelevance: MaybeUnit = None
    judgeRanking: MaybeUnit = None
    judgeOverall: MaybeUnit = None


class ResultLabel(BaseModel):
    """One returned result as the judge labelled it (0-3, TREC/UMBRELA scale); ``relevant`` is grade >= 2."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    rank: int = Field(ge=1)
    source: str
    anchor: str | None = None
    score: float
    relevance: Literal[0, 1, 2, 3]
    relevant: bool
    reason: str = ""
    injectionSuspected: bool = Field(
        default=False, description="The code's detector or the judge flagged text addressed to the judge; never raises a label."
    )
    cached: bool = Field(default=False, description="Every trial's label came from the judgment cache (no call, no cost).")
    labelOrigin: Literal["judge", "human"] = Field(default="judge", description="human: an assessor's imported grade, which wins.")
    trialLabels: list[int] = Field(default_factory=list, description="The label of each trial; relevance is their median (lower middle).")
    labelSpread: int = Field(default=0, ge=0, le=3, description="Highest minus lowest trial label.")
    shownAs: list[str] = Field(default_factory=list, description="Batched mode: the local id the result had in each trial.")
    shownFrom: Literal["document", "result", "chunk", "snippet"] = Field(
        default="chunk",
        description="What the label was given on: document, the document's passages by the one rule whoever returned it "
        "(judge fingerprint passageRule); result, the text the system returned (no document store holds the document); "
        "chunk (files before passageRule), the best chunk the system matched; snippet, the snippet.",
    )
    shownChars: int = Field(default=0, ge=0, description="Characters of text the judge was shown (capped at fence.SHOWN_TEXT_CAP).")
    truncated: bool = False
    shownText: str | None = Field(default=None, description="The text the judge was shown (what `judge-runner label` shows a person).")
    shownAnchor: str | None = Field(
        default=None,
        description="The anchor line the judge was shown with shownText ('-' for none); null in files written before it was "
        "recorded. `rejudge` shows both again.",
    )
    judgeLabel: Literal[0, 1, 2, 3] | None = Field(
        default=None, description="A result an assessor graded: the judge's own label beside it (relevance keeps the grade)."
    )
    outputOrder: Literal["reason-first", "grade-first", "grade-only"] | None = Field(
        default=None,
        description="How the judge wrote its first trial's reply: reason-first or grade-first by the order of its keys as "
        "written, grade-only when no reason was asked; null for the offline judge and labels stored before it was recorded.",
    )


class EvaluationUsage(BaseModel):
    """Tokens and cost of judging one query (cost None when the model's price is unknown, never 0)."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    inputTokens: int = Field(ge=0)
    outputTokens: int = Field(ge=0)
    costUsd: float | None = Field(default=None, ge=0, description="Null when the model's price is unknown (never shown as 0).")
    calls: int = Field(default=0, ge=0, description="Judge requests made for this query (0 in files written before it was recorded).")


class EvaluationLine(_Line):
    """One judged query, written and flushed as soon as it is judged."""

    model_config = ConfigDict(title="EvaluationLine")

    type: Literal["evaluation"] = "evaluation"
    queryId: str = ""
    query: str = ""
    queryIntent: str = ""
    # read as plain text (an older or newer file may hold another value); written from the Literal types
    queryType: Annotated[str, WithJsonSchema({"enum": list(get_args(QueryType))})] = ""
    expectedSources: list[str] = Field(default_factory=list)
    searchMode: Annotated[str, WithJsonSchema({"enum": list(get_args(SearchMode))})] = ""
    resultCount: int = Field(default=0, ge=0)
    confident: bool = True
    latencyMs: float = Field(default=0.0, ge=0)
    scores: Scores = Field(default_factory=Scores)
    analysis: dict[str, str] = Field(default_factory=dict)
    suggestions: list[str] = Field(default_factory=list)
    results: list[ResultLabel] = Field(default_factory=list)
    metrics: Annotated[dict[str, MetricValue] | None, WithJsonSchema({"anyOf": [{"type": "null"}, _METRICS_SCHEMA]})] = Field(
        default=None,
        description="Against the qrels known when the line was written (its labels, the judgment cache's of the same judge, "
        "people's grades, expected sources at 3); every reader re-scores against the pooled qrels. Null for an off-topic query.",
    )
    abstained: bool | None = Field(
        default=None,
        description="Off-topic queries only: true when the search returned nothing or "
        "said it was not confident. Null for other query types.",
    )
    usage: EvaluationUsage | None = None
    labelsCached: int = Field(default=0, ge=0, description="Trial labels taken from the judgment cache.")
    labelsJudged: int = Field(default=0, ge=0, description="Trial labels paid for by a judge call in this run.")
    humanLabels: int = Field(default=0, ge=0, description="Results whose grade is an assessor's imported one.")
    listCached: bool | None = Field(default=None, description="The list-level verdict came from the cache; null when none was needed.")
    expectedSourceDisagreements: list[str] = Field(default_factory=list, description="Expected sources the judge labelled 0 or 1.")
    judgeModelsReturned: list[str] = Field(default_factory=list, description="Model ids the API returned for this query's calls.")
    system: str | None = Field(
        default=None,
        description="The search system this line is about (compare runs and external "
        "searches: a name from provenance.searchSystems); null for the built-in search alone.",
    )
    searchNotes: list[str] = Field(
        default_factory=list,
        description="What was noticed reading an external search's reply (decoded from another encoding than "
        "UTF-8, a process it left holding its output open); empty for a plain reply.",
    )
    judgeOnly: dict[str, MetricValue] | None = Field(
        default=None,
        description="When people graded something of the query: nDCG@10 and relevance from the judge's grades alone "
        "(runs/corrected.py); else null.",
    )

    @field_validator("metrics", mode="before")
    @classmethod
    def _metric_names(cls, value: Any) -> Any:
        return _metrics_by_name(value)

    def value(self, column: str) -> float | None:
        """A score or a metric (an ir-measures name or an older key); None when the query has none or it was
        unscored."""
        if column in SCORE_KEYS:
            found = getattr(self.scores, column)
        else:
            found = (self.metrics or {}).get(canonical_metric_name(column))
        return found if isinstance(found, float) else None


# -- error -----------------------------------------------------------------------------------------


class ErrorLine(_Line):
    """A query that could not be searched or judged. Never scored, never averaged as zero."""

    model_config = ConfigDict(title="ErrorLine")

    type: Literal["error"] = "error"
    queryId: str = ""
    query: str = ""
    stage: Literal["search", "judge"] | None = None
    queryType: Annotated[str | None, WithJsonSchema({"enum": [*get_args(QueryType), None]})] = Field(
        default=None, description="The query's type (off-topic queries have no metrics); null in files written before it was recorded."
    )
    errorType: str = ""
    message: str = ""
    attempts: int = Field(default=0, ge=0)
    usage: EvaluationUsage | None = Field(
        default=None,
        description="What the query's judge calls spent before it failed, failed calls included (the summary counts it too); "
        "null for a search failure and in files written before it was recorded.",
    )
    system: str | None = Field(
        default=None,
        description="The search system this line is about (compare runs and external "
        "searches: a name from provenance.searchSystems); null for the built-in search alone.",
    )


# -- batch ---------------------------------------------------------------------------------------


class BatchLine(_Line):
    """A batch of judge requests submitted to a provider's batch API (``--batch``), written the moment
    the API returns its id, before any result is known. ``--resume`` reads these lines: a request whose
    ``customIds`` entry is here takes that batch's result instead of being submitted again. Readers
    that aggregate scores (trend, report) ignore these lines."""

    model_config = ConfigDict(title="BatchLine")

    type: Literal["batch"] = "batch"
    batchId: str = Field(default="", description="The batch API's id (msgbatch_… for Anthropic, batch_… for OpenAI).")
    provider: Annotated[str, WithJsonSchema({"type": "string", "enum": list(PROVIDER_NAMES)})] = Field(
        default="", description="Provider whose batch API holds the batch."
    )
    requests: int = Field(default=0, ge=0, description="Requests in the batch.")
    customIds: list[str] = Field(
        default_factory=list,
        description="custom_id of each request: a hash of the request body with the fence delimiter taken out "
        "(judge_runner.llm.batch.custom_id), the same for the same call in another process.",
    )


# -- summary ---------------------------------------------------------------------------------------


class SummaryLine(_Line):
    """Last line of a run file, also written after Ctrl+C or a spent budget. Averages cover evaluated queries only."""

    model_config = ConfigDict(title="SummaryLine")

    type: Literal["summary"] = "summary"
    totalQueries: int = Field(default=0, ge=0)
    evaluated: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)
    interrupted: bool = False
    budgetExhausted: bool = False
    stopReason: str | None = Field(
        default=None,
        description="Why the run stopped early (interrupted, budget_exhausted, spend_limit, "
        "auth_error, phase one: <kind>); null when it ran to the end.",
    )
    heuristicJudge: bool = False
    averageScores: dict[str, Unit] | None = Field(
        default=None, description="Mean of each dimension over evaluated queries; null when none was."
    )
    averageMetrics: dict[str, Unit] | None = Field(
        default=None,
        description="Mean of each metric (ir-measures names) over the evaluated queries that have it (off-topic queries excluded), "
        "against the run's pooled qrels (qrels).",
    )
    qrels: QrelsBlock | None = Field(
        default=None,
        description="Scoring version 3: the pooled qrels averageMetrics, relevance, overall, the comparison and biasCorrected were "
        "computed against; null in older files (their lines' own qrels).",
    )
    abstention: Abstention = Field(default_factory=Abstention)
    topIssues: list[Issue] = Field(default_factory=list)
    recommendedFocus: str | None = None
    cacheWarning: str | None = Field(
        default=None,
        description="Set when the start's estimate expected prompt-cache reads and the provider reported none: the prefix "
        "changed between calls, or the provider did not cache it (a model whose minimum is unknown, a cache that expired).",
    )
    focusEvidence: FocusEvidence | None = Field(
        default=None, description="What recommendedFocus rests on (scoring version 2); null without scored on-topic queries."
    )
    costUsd: float | None = Field(default=None, ge=0, description="Null when a model's price is unknown (never shown as 0).")
    usage: RunUsage | None = None
    cachedInputShare: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="usage.cacheReadTokens / usage.inputTokens: the share of input tokens read from the provider's prompt "
        "cache; null without input tokens.",
    )
    cacheSavedUsd: float | None = Field(
        default=None,
        description="USD prompt caching saved: the cache reads at the input price minus at the cache-read price, minus the "
        "cache writes' premium over the input price (negative when writes were not read back); null when costUsd is.",
    )
    judgedQueries: int = Field(
        default=0,
        ge=0,
        description="Evaluated queries for which this run made at least one judge call (labelsJudged > 0 or listCached false); "
        "a query labelled wholly from the judgment cache or assessors' grades is evaluated but not judged.",
    )
    costPerJudgedQueryUsd: float | None = Field(
        default=None,
        ge=0,
        description="The judge calls' cost (the evaluation lines' usage.costUsd) of the judged queries / judgedQueries, in USD; "
        "null when no query was judged or a cost is unknown. Query writing (phase one) is not in it.",
    )
    durationS: float = Field(default=0.0, ge=0)
    judgeMode: str | None = Field(default=None, description="pointwise or batched (format 2).")
    trials: int = Field(default=1, ge=1)
    trialsAlpha: float | None = Field(
        default=None, ge=-1, le=1, description="Krippendorff's alpha (ordinal) between trials; null with one trial."
    )
    labelsCached: int = Field(default=0, ge=0)
    labelsJudged: int = Field(default=0, ge=0)
    humanLabels: int = Field(default=0, ge=0)
    injectionSuspected: int = Field(default=0, ge=0, description="Results flagged as holding text addressed to the judge.")
    expectedSourceDisagreements: int = Field(default=0, ge=0, description="Expected sources the judge labelled 0 or 1, over all queries.")
    judgeReturnedModels: list[str] = Field(default_factory=list, description="Model ids the judge API returned during the run.")
    judgeIsGenerator: bool = Field(default=False, description="The queries were written by the judge's own model (circularity).")
    comparison: ComparisonBlock | None = Field(
        default=None,
        description="Compare runs only (several systems on one query set). averageScores, averageMetrics, abstention, topIssues, "
        "recommendedFocus and focusEvidence are then the reference system's (every system's are in comparison.systems); "
        "totalQueries, evaluated, failed, the label counts, usage and cost are the whole run's, every system together.",
    )
    estimate: RunEstimate | None = Field(
        default=None,
        description="The cost estimated at the start (LLM judge, built-in search); null for the heuristic judge and compare runs.",
    )
    biasCorrected: BiasCorrected | None = Field(
        default=None,
        description="Mean nDCG@10 and relevance corrected by queries assessors graded wholly (power-tuned prediction-powered "
        "inference, runs/corrected.py), per system in a compare run, with the corrected differences and ranking; null without "
        "such queries.",
    )

    @field_validator("averageMetrics", mode="before")
    @classmethod
    def _metric_names(cls, value: Any) -> Any:
        return _metrics_by_name(value)


RunLine = Annotated[RunStartLine | EvaluationLine | ErrorLine | BatchLine | SummaryLine, Field(discriminator="type")]
RUN_LINE = TypeAdapter(RunLine)
MODELS: dict[str, type[_Line]] = {
    "run_start": RunStartLine,
    "evaluation": EvaluationLine,
    "error": ErrorLine,
    "batch": BatchLine,
    "summary": SummaryLine,
}


def run_start_line(run_id: str, timestamp: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The ``run_start`` line as written (a ``timestamp`` in ``fields`` wins; fields not given are not written).
    Raises pydantic.ValidationError for a field that breaks the contract."""
    line = RunStartLine.model_validate(
        {"type": "run_start", "runId": run_id, "timestamp": timestamp, "formatVersion": FORMAT_VERSION, **fields}
    )
    return line.model_dump(by_alias=True, mode="json", exclude_unset=True)


def parse_line(data: dict[str, Any]) -> RunStartLine | EvaluationLine | ErrorLine | BatchLine | SummaryLine:
    """One decoded line validated by its ``type``. Raises pydantic.ValidationError, also for an unknown type."""
    return RUN_LINE.validate_python(data)


# -- JSON Schemas ------------------------------------------------------------------------------------


def json_schemas() -> dict[str, dict[str, Any]]:
    """``{file name: JSON Schema}`` of the line types, in serialisation mode."""
    out = {}
    for name, model in MODELS.items():
        schema = model.model_json_schema(mode="serialization")
        file_name = f"{name}.schema.json"
        head = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_BASE_URL + file_name}
        out[file_name] = {**head, **schema}
    return out


def write_schemas(folder: Path) -> list[Path]:
    paths = []
    for file_name, schema in json_schemas().items():
        path = Path(folder) / file_name
        path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":  # pragma: no cover - ``python -m judge_runner.runs.lines schemas/``
    for written in write_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "schemas")):
        print(f"wrote {written}")
