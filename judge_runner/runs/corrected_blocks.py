"""The summary's ``biasCorrected`` block (version 2) as pydantic models, built by
:mod:`judge_runner.runs.corrected` (docs/run-file.md, docs/deciding.md). A version-1 block (the run's
``nDCG@10`` and ``relevance`` means only, normal intervals) still validates; readers recompute it from the
evaluation lines."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from judge_runner.runs.summary_blocks import FailedQueries

BLOCK_VERSION = 2

_Pair = Field(min_length=2, max_length=2)


class HumanOnly(BaseModel):
    """The graded queries' own mean and 95% t interval: what the people's grades say without the judge."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    mean: float
    ci95: list[float] = _Pair


class CorrectedMean(BaseModel):
    """A corrected mean (:class:`judge_runner.measures.ppi.MeanEstimate`)."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    estimate: float = Field(description="Power-tuned prediction-powered estimate, within the measure's range.")
    ci95: list[float] = Field(min_length=2, max_length=2, description="95% t interval, clipped to the measure's range.")
    weight: float = Field(
        default=1.0, ge=0, le=1, description="The judge's weight lambda (cross-fitted); 0: the people's own figures; 1 in version 1."
    )
    judgeInformative: bool = Field(default=True, description="False: the judge did not narrow the interval; the people's own is shown.")
    judgeMean: float = Field(description="The judge's mean over every scored query.")
    correction: float = Field(description="estimate - judgeMean.")
    queries: int = Field(ge=0, description="Queries the judge scored (N).")
    labelled: int = Field(ge=0, description="Queries graded by people (n).")
    humanOnly: HumanOnly


class Decide(BaseModel):
    """What would decide an undecided difference."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    moreLabelledQueries: int | None = Field(
        description="About how many more labelled queries would decide it; null: not on this query set."
    )
    distanceFromZero: float = Field(ge=0)
    text: str


class CorrectedDifference(CorrectedMean):
    """``system`` - ``against`` on ``column``: the corrected mean of the paired per-query differences (range
    [-1, 1]), with the verdict from its interval."""

    system: str
    against: str
    column: str
    judgeDelta: float = Field(description="The judge-only difference over every query both scored.")
    outcome: Literal["better", "worse", "cannot tell", "same"] = Field(
        description="system relative to against, from the interval; same: equal on every query for the judge and the people."
    )
    verdict: str = Field(description="'<system> better', '<against> better', 'cannot tell yet: ...' or 'cannot tell: B failed ...'.")
    decide: Decide | None = None
    failed: FailedQueries | None = Field(
        default=None, description="Set when either system failed queries; the figure has them at 0 (judge_runner/measures/failed.py)."
    )


class RankedSystem(BaseModel):
    """A system in the corrected ranking."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    name: str
    corrected: CorrectedMean | None
    rankSet: list[int] = Field(min_length=2, max_length=2, description="[best, worst] rank it could hold (1 is first).")
    couldBeFirst: bool


class CorrectedRanking(BaseModel):
    """Three or more systems by corrected mean, each with its rank set from simultaneous pairwise intervals."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    column: str
    confidence: float = Field(description="The level every pair's interval holds at together (Bonferroni).")
    pairConfidence: float = Field(description="Each pair's own level: 1 - (1 - confidence) / pairs.")
    method: str
    systems: list[RankedSystem]
    couldBeFirst: list[str]
    pairs: list[CorrectedDifference]


class SystemCorrected(BaseModel):
    """One system's corrected means in a compare run, over its own lines."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True, populate_by_name=True)

    name: str
    labelledQueries: int = Field(ge=0)
    partlyLabelledQueries: int = Field(default=0, ge=0)
    scoredQueries: int = Field(ge=0)
    ndcg10: CorrectedMean | None = Field(default=None, alias="nDCG@10")
    relevance: CorrectedMean | None = None


class DrawnDesign(BaseModel):
    """The draw whose probabilities weight the people's grades (``label --budget``: :mod:`judge_runner.runs.designed`)."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    set: str = Field(description="The human qrels set drawn.")
    design: str = Field(description="uniform (a fixed number of the open queries) or weighted (each with its own probability).")
    census: bool = Field(description="Every query graded with probability 1: each figure is the people's exact one on this query set.")
    text: str
    notes: list[str] = Field(default_factory=list, description="Why a figure is null (e.g. queries the draw knew without a label).")


class BiasCorrected(BaseModel):
    """The summary's ``biasCorrected``: means corrected with the people's grades (version 2)."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True, populate_by_name=True)

    version: int = Field(default=1, description="2: power-tuned, t intervals, per system; a file without it: 1.")
    method: str = ""
    minimumLabelled: int = Field(
        default=2, ge=1, description="Fewest labelled queries behind a corrected figure; a figure is null below it."
    )
    system: str | None = Field(
        default=None, description="The system the top-level figures are of (a compare run's reference); null for one system."
    )
    labelledQueries: int = Field(default=0, ge=0)
    partlyLabelledQueries: int = Field(default=0, ge=0)
    scoredQueries: int = Field(default=0, ge=0)
    ndcg10: CorrectedMean | None = Field(default=None, alias="nDCG@10")
    relevance: CorrectedMean | None = None
    systems: list[SystemCorrected] = Field(default_factory=list, description="Compare runs: every system's own, reference first.")
    differences: list[CorrectedDifference] = Field(
        default_factory=list, description="Compare runs: each later system - the reference, on nDCG@10 and relevance."
    )
    ranking: CorrectedRanking | None = Field(default=None, description="Three or more systems: the corrected ranking of nDCG@10.")
    design: DrawnDesign | None = Field(
        default=None, description="Grades drawn by `label --budget`: the figures weight each by the probability it was drawn with."
    )
    skipped: str | None = Field(
        default=None,
        description="Why no figure is computed: the people's grades were drawn by `label --budget` with unequal "
        "probabilities, which a uniform-sample correction would treat wrongly (label prints their estimate).",
    )
