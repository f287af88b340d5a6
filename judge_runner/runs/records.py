"""Evaluation lines as ``trend`` and ``report`` keep them, so hundreds of run files fit in bounded memory: the
query, scores, metrics and the grade of each result, not the texts, reasons or snippets. Read-only mappings by
the run file's field names, so code written for lines as dicts reads them as they are."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from judge_runner.measures.ir import canonical_metric_name
from judge_runner.runs.lines import SCORE_KEYS, EvaluationLine

GRADE_FIELDS = ("source", "relevance", "labelOrigin", "judgeLabel", "injectionSuspected")
RECORD_FIELDS = (
    "runId",
    "queryId",
    "query",
    "queryIntent",
    "queryType",
    "system",
    "expectedSources",
    "confident",
    "abstained",
    "scores",
    "metrics",
    "results",
    "humanLabels",
    "judgeOnly",
    "labelsJudged",
    "listCached",
    "usage",
)
RESULT_KEEP = frozenset(("rank", "source", "score", "relevance", "relevant", "labelOrigin", "judgeLabel", "injectionSuspected"))
"""The result fields a record keeps; the rest is dropped unread."""
LINE_DROP = ("analysis", "suggestions")
"""Evaluation fields dropped before the line is validated."""


class _View(Mapping[str, Any]):
    __slots__ = ()
    FIELDS: tuple[str, ...] = ()

    def __getitem__(self, key: str) -> Any:
        if key not in self.FIELDS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.FIELDS)

    def __len__(self) -> int:
        return len(self.FIELDS)


class Grade(_View):
    """One result: its ``source``, the grade used (``relevance``, 0-3), whose it is (``labelOrigin``) and the
    judge's label beside an assessor's grade (``judgeLabel``)."""

    __slots__ = GRADE_FIELDS
    FIELDS = GRADE_FIELDS
    source: str
    relevance: int
    labelOrigin: str
    judgeLabel: int | None
    injectionSuspected: bool

    def __init__(
        self, source: str, relevance: int, labelOrigin: str = "judge", judgeLabel: int | None = None, injectionSuspected: bool = False
    ):
        self.source, self.relevance, self.labelOrigin = source, relevance, labelOrigin
        self.judgeLabel, self.injectionSuspected = judgeLabel, injectionSuspected


class Record(_View):
    """One evaluation line as the figures use it."""

    __slots__ = RECORD_FIELDS
    FIELDS = RECORD_FIELDS
    runId: str
    queryId: str
    query: str
    queryIntent: str
    queryType: str
    system: str | None
    expectedSources: list[str]
    confident: bool
    abstained: bool | None
    scores: dict[str, float | None]
    metrics: dict[str, float | None] | None
    results: list[Grade]
    humanLabels: int
    judgeOnly: dict[str, Any] | None
    labelsJudged: int
    listCached: bool | None
    usage: dict[str, Any] | None

    @classmethod
    def of(cls, line: EvaluationLine) -> Record:
        record = cls.__new__(cls)
        for name in RECORD_FIELDS:
            if name not in ("scores", "results", "usage"):
                setattr(record, name, getattr(line, name))
        record.scores = {k: v for k, v in line.scores.model_dump().items() if v is not None}
        record.results = [Grade(r.source, r.relevance, r.labelOrigin, r.judgeLabel, r.injectionSuspected) for r in line.results]
        record.usage = {"costUsd": line.usage.costUsd} if line.usage is not None else None
        return record

    def value(self, column: str) -> float | None:
        """A score or a metric (an ir-measures name or an older key such as ``Recall@10``); None when the query
        has none or it was unscored."""
        found = self.scores.get(column) if column in SCORE_KEYS else (self.metrics or {}).get(canonical_metric_name(column))
        return found if isinstance(found, float) else None

    def rescored(self, new: Mapping[str, Any] | None) -> None:
        """Take the figures :func:`judge_runner.judging.pooled.rescore` gave this line (None: keep its own)."""
        if new is None:
            return
        self.metrics, self.judgeOnly = new["metrics"], new["judgeOnly"]
        if "scores" in new:
            self.scores = new["scores"]
        for i, grade in new["people"].items():
            was = self.results[i]
            judge = was.judgeLabel if was.labelOrigin == "human" else was.relevance
            self.results[i] = Grade(was.source, grade, "human", judge, was.injectionSuspected)
        if new["people"]:
            self.humanLabels = sum(1 for r in self.results if r.labelOrigin == "human")
