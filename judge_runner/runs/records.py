"""Evaluation lines as the figures use them: what ``trend`` and ``report`` keep of each line of every run they
read (:func:`judge_runner.runs.read.read_run_records`), so that hundreds of run files fit in bounded memory.

A :class:`Record` holds a line's query, system, expected sources, scores, metrics, the judge's and people's
grades of its results (:class:`Grade`: document, grade, whose, the judge's own), and the counts and cost a
trend row shows; not the texts the judge was shown, its reasons, the snippets or the list-level analysis
(``report`` reads the latest run whole for those). Both are read-only :class:`~collections.abc.Mapping` views
by the run file's field names (``record["metrics"]``, ``grade["labelOrigin"]``), so code written for lines as
dicts (:mod:`judge_runner.runs.corrected`) reads them as they are, with no copy.
"""

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
"""The result fields a record keeps (and the reader validates); the rest of a result is dropped unread."""
LINE_DROP = ("analysis", "suggestions")
"""The evaluation fields a record never holds, dropped before the line is validated."""


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
    """One returned result: its document (``source``), the grade used (``relevance``, 0-3), whose it is
    (``labelOrigin``: judge or human) and the judge's own label beside a person's (``judgeLabel``)."""

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
    """One evaluation line as the figures use it (module docstring); field names and values as the line's."""

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
        """The record of a validated line."""
        record = cls.__new__(cls)
        for name in RECORD_FIELDS:
            if name not in ("scores", "results", "usage"):
                setattr(record, name, getattr(line, name))
        record.scores = {k: v for k, v in line.scores.model_dump().items() if v is not None}
        record.results = [Grade(r.source, r.relevance, r.labelOrigin, r.judgeLabel, r.injectionSuspected) for r in line.results]
        record.usage = {"costUsd": line.usage.costUsd} if line.usage is not None else None
        return record

    def value(self, column: str) -> float | None:
        """A score (a dimension, ``overall``, ``judgeOverall``) or a metric (ir-measures name, or an older key
        such as ``Recall@10``); None when the query has none or it was unscored (as
        :meth:`judge_runner.runs.lines.EvaluationLine.value`)."""
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
