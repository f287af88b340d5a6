"""The labelling protocol calibrate uses, and its adapter for the judges. A :class:`Labeler` labels one query's
documents, one result each in the order given, ``pointwise`` or ``batched`` (the caller shuffles or rotates
them); the judge never sees a system's rank or score. ``flagged`` is the fence's injection detector on the shown
document OR the judge's own flag."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from judge_runner.calibrate.data import CalibrationQuery
from judge_runner.core.models import JudgeMode
from judge_runner.judging.fence import RenderedDocument, render_document
from judge_runner.judging.fingerprint import DEFAULT_SEED, sampling_settings
from judge_runner.judging.protocol import Judge, LabelReply
from judge_runner.judging.requests import ListItem


@dataclass(frozen=True)
class ShownDoc:
    """A document as the judge is shown it; ``text`` is untrusted."""

    docid: str
    anchor: str | None
    text: str


@dataclass
class LabelResult:
    """One label (0-3), the injection flag, the judge's reason and what the call cost (USD, None when unknown);
    a batched call's cost is put on its first result."""

    label: int
    flagged: bool = False
    reason: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    calls: int = 0


class Labeler(Protocol):
    """Labels a query's documents. ``deterministic``: trials cannot differ."""

    name: str
    model: str
    heuristic: bool
    deterministic: bool

    def __call__(self, query: CalibrationQuery, docs: Sequence[ShownDoc], mode: JudgeMode, trial: int) -> list[LabelResult]:
        """One result per document, in order. Raises an LLMError kind when no valid label can be had."""
        ...


def injection_flag(doc: ShownDoc) -> bool:
    """The fence's detector on the document as rendered for the judge."""
    return render_document(doc.docid, doc.anchor, doc.text).injection_suspected


INTENT = "Find documents that answer this query (from a test collection)."


class ProtocolLabeler:
    """A judge through the label-first protocol (``label_one``, ``label_batch``, ``list_verdict``), so calibrate
    measures exactly the judge ``evaluate`` uses. The offline judge is deterministic, so its labels are
    memoised. The judgment cache is not used: calibration measures the judge, not the cache."""

    def __init__(self, judge: Judge, seed: int | None = None):

        self.judge = judge
        self.name, self.model, self.heuristic = judge.name, judge.model, judge.heuristic
        self.deterministic = bool(judge.heuristic)
        self.seed = DEFAULT_SEED if seed is None else seed
        self._memo: dict[tuple[str, str, str, str], LabelResult] = {}

    @staticmethod
    def _rendered(docs: Sequence[ShownDoc]) -> list[Any]:
        return [render_document(d.docid, d.anchor, d.text) for d in docs]

    @staticmethod
    def _result(reply: LabelReply, rendered: RenderedDocument) -> LabelResult:
        usage = reply.usage
        return LabelResult(
            int(reply.label),
            bool(reply.injection_suspected or rendered.injection_suspected),
            reply.reason,
            usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
            usage.output_tokens,
            reply.cost_usd,
            reply.attempts,
        )

    def __call__(self, query: CalibrationQuery, docs: Sequence[ShownDoc], mode: JudgeMode, trial: int) -> list[LabelResult]:
        sampling = sampling_settings(self.judge.name, trial, self.seed)
        rendered = self._rendered(docs)
        if self.deterministic:
            keys = [(query.text, d.docid, d.anchor or "", d.text) for d in docs]
            todo = [i for i, k in enumerate(keys) if k not in self._memo]
            for i in todo:  # the heuristic scores each document on its own: both modes agree
                self._memo[keys[i]] = self._result(self.judge.label_one(query.text, INTENT, rendered[i], sampling), rendered[i])
            return [self._memo[k] for k in keys]
        if mode == "pointwise":
            batching = getattr(self.judge, "batching", None)
            if batching is not None and len(rendered) > 1:  # --batch: the documents' calls at once, in one batch
                made = batching.map(lambda r: self._result(self.judge.label_one(query.text, INTENT, r, sampling), r), rendered)
                failure = next((m for m in made if isinstance(m, BaseException)), None)
                if failure is not None:
                    raise failure
                return list(made)
            return [self._result(self.judge.label_one(query.text, INTENT, r, sampling), r) for r in rendered]
        replies = self.judge.label_batch(query.text, INTENT, rendered, list(range(len(rendered))), sampling)
        return [self._result(reply, r) for reply, r in zip(replies, rendered)]

    def with_output(self, output: str) -> ProtocolLabeler | None:
        """This labeller under other output rules (``grade-only``), or None for a judge that writes no reasoning
        (the offline judge)."""
        other = getattr(self.judge, "with_output", None)
        return ProtocolLabeler(other(output), self.seed) if other is not None and not self.heuristic else None

    def list_scores(self, query: CalibrationQuery, docs: Sequence[ShownDoc]) -> tuple[dict[str, float], list[LabelResult]]:
        """The list-level call's figures for ``docs`` in search order, after labelling them pointwise, and the
        results of every call made."""
        labels = self(query, docs, "pointwise", 0)
        items = [ListItem(r, label.label, label.reason) for r, label in zip(self._rendered(docs), labels)]
        verdict = self.judge.list_verdict(query.text, INTENT, [], items, sampling_settings(self.judge.name, 0, self.seed))
        scores = {"coverage": verdict.coverage, "snippetQuality": verdict.snippet_quality, **dict(verdict.holistic)}
        usage = verdict.usage
        paid = LabelResult(
            0,
            False,
            "",
            usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
            usage.output_tokens,
            verdict.cost_usd,
            verdict.attempts,
        )
        return scores, [*labels, paid]


def labeler_for(judge: Judge) -> Labeler:
    return ProtocolLabeler(judge)
