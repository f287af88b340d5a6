"""The labelling protocol calibrate uses, and adapters for today's judges.

A :class:`Labeler` labels documents for one query: ``labeler(query, docs, mode, trial) -> [LabelResult]``, one
result per document in the order given. ``mode`` is ``pointwise`` (the caller passes one document per call)
or ``batched`` (several documents, shown in the order given: the caller shuffles or rotates them). The judge
never sees a system's rank or score: documents come from the pool, not from a ranking.

Adapters (to be swapped for the judge protocol's single entry point, issue 14, when it lands):

- :class:`HeuristicLabeler`: the offline heuristic judge (:func:`judge_runner.heuristic.judge.judge_verdict`)
  fed what :func:`judge_runner.fence.without_suspected_lines` leaves of each rendered document (as the wired
  offline judge will be; see tests/test_injection_offline.py). Deterministic, so labels are memoised per
  (query, shown text) and its trials agree by construction.
- :class:`VerdictLabeler`: any :class:`judge_runner.roles.Judge` (today's :class:`judge_runner.judge.LLMJudge`
  single-call verdict) given the documents as a search answer in the order shown, every engine score 0 and
  the rank the shown slot, so neither reveals a system's ranking.

``flagged`` is the fence's instruction detector (:func:`judge_runner.fence.render_document`) on the shown
document, OR'd with the judge's own flag where its protocol has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from judge_runner.calibrate.data import CalibrationQuery
from judge_runner.fence import render_document, without_suspected_lines

MODES = ("pointwise", "batched")


@dataclass(frozen=True)
class ShownDoc:
    """A document as the judge is shown it: its id (``source``), title (``anchor``) and text (the shown
    snippet or passage; untrusted)."""

    docid: str
    anchor: str | None
    text: str


@dataclass
class LabelResult:
    """One label: grade 0-3, whether injection was suspected, the judge's reason, and what the call cost
    (tokens, USD or None when unknown, HTTP requests). A batched call's cost is put on its first result."""

    label: int
    flagged: bool = False
    reason: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    calls: int = 0


class Labeler(Protocol):
    """Labels documents for a query (see the module docstring). ``name``/``model``: the judge's provider and
    model; ``heuristic``: True for the offline judge; ``deterministic``: True when trials cannot differ."""

    name: str
    model: str
    heuristic: bool
    deterministic: bool

    def __call__(self, query: CalibrationQuery, docs: Sequence[ShownDoc], mode: str, trial: int) -> list[LabelResult]:
        """One LabelResult per document of ``docs``, in order. Raises an LLMError kind when no valid label
        can be had."""
        ...


def injection_flag(doc: ShownDoc) -> bool:
    """The fence's detector on the document as rendered for the judge (instructions, spoofed delimiters or
    headers in its source, anchor or text)."""
    return render_document(doc.docid, doc.anchor, doc.text).injection_suspected


class MemoEmbedder:
    """An embedder that remembers every text's vector (calibration shows the same passages many times)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name = getattr(inner, "name", "")
        self.dimension: int = getattr(inner, "dimension", 0)
        self._memo: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Vectors of ``texts`` (rows in order), encoding only texts not seen before."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            for text, vector in zip(missing, self.inner.encode(missing, batch_size=batch_size)):
                self._memo[text] = vector
        return np.vstack([self._memo[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)


class _LabelOnly:
    """What the heuristic judge is given when only its per-document label is wanted: for one result,
    ``judge_verdict`` encodes ``[query, anchor + snippet, snippet]`` and the label uses only the first two, so the
    snippet's row is a copy of the second (saving half of MiniLM's work; tested against the full verdict)."""

    def __init__(self, memo: MemoEmbedder):
        self.memo = memo
        self.name, self.dimension = memo.name, memo.dimension

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        if len(texts) != 3:
            return self.memo.encode(texts, batch_size)
        vectors = self.memo.encode(texts[:2], batch_size)
        return np.vstack([vectors, vectors[1:2]])


class HeuristicLabeler:
    """The offline heuristic judge as a :class:`Labeler` (see the module docstring). Free; no network."""

    name = "offline"
    heuristic = True
    deterministic = True

    def __init__(self, embedder: Any, model: str | None = None):
        from judge_runner.heuristic import MODEL_NAME

        self.embedder = MemoEmbedder(embedder)
        self.model = model or MODEL_NAME
        self._memo: dict[tuple[str, str, str, str], LabelResult] = {}

    @staticmethod
    def _result(doc: ShownDoc) -> tuple[dict, bool]:
        rendered = render_document(doc.docid, doc.anchor, doc.text)
        scored = without_suspected_lines(rendered)
        anchor = None if scored.anchor == "-" else scored.anchor
        return {"rank": 1, "source": scored.source, "anchor": anchor, "snippet": scored.body}, rendered.injection_suspected

    def prepare(self, query: CalibrationQuery, docs: Sequence[ShownDoc]) -> None:
        """Embed, in one batch, every text labelling ``docs`` will need (MiniLM is many times faster on a batch
        than on pointwise calls of two texts each)."""
        texts = [query.text]
        for doc in docs:
            result, _ = self._result(doc)
            texts.append(f"{result['anchor'] or ''}\n{result['snippet']}")
        self.embedder.encode(texts)

    def _one(self, query: CalibrationQuery, doc: ShownDoc) -> LabelResult:
        key = (query.text, doc.docid, doc.anchor or "", doc.text)
        if key not in self._memo:
            from judge_runner.heuristic.judge import judge_verdict

            result, suspected = self._result(doc)
            label = judge_verdict(query.text, "natural-language", True, [result], _LabelOnly(self.embedder))["labels"][0]
            self._memo[key] = LabelResult(int(label["relevance"]), suspected, label["reason"])
        return self._memo[key]

    def __call__(self, query: CalibrationQuery, docs: Sequence[ShownDoc], mode: str, trial: int) -> list[LabelResult]:
        """Labels of ``docs``; the heuristic scores every document on its own, so both modes agree."""
        if len(docs) > 1:
            self.prepare(query, docs)
        return [self._one(query, d) for d in docs]

    def list_scores(self, query: CalibrationQuery, docs: Sequence[ShownDoc]) -> tuple[dict[str, float], list[LabelResult]]:
        """The heuristic's list-level dimensions (coverage, snippetQuality, ...) of ``docs`` in search order,
        and the call's (free) results."""
        from judge_runner.heuristic.judge import judge_verdict

        results = [{"rank": i + 1, "source": d.docid, "anchor": d.anchor, "snippet": d.text} for i, d in enumerate(docs)]
        verdict = judge_verdict(query.text, "natural-language", True, results, self.embedder)
        return dict(verdict["scores"]), [LabelResult(int(label["relevance"])) for label in verdict["labels"]]


class VerdictLabeler:
    """Any :class:`judge_runner.roles.Judge` (today's LLM judge: one ``record_verdict`` call per list) as a
    :class:`Labeler`: ``pointwise`` makes one call per document, ``batched`` one call for the documents in
    the order given. The shown rank is the slot; every engine score is 0."""

    heuristic = False
    deterministic = False

    def __init__(self, judge: Any):
        self.judge = judge
        self.name = judge.name
        self.model = judge.model

    def _call(self, query: CalibrationQuery, docs: Sequence[ShownDoc]) -> list[LabelResult]:
        from judge_runner.models import Query
        from judge_runner.search.base import HitScores, SearchAnswer, SearchHit

        hits = [SearchHit(rank=i + 1, source=d.docid, anchor=d.anchor, lineStart=1, lineEnd=1, snippet=d.text, score=0.0,
                          scores=HitScores(), matchedBy=[]) for i, d in enumerate(docs)]
        answer = SearchAnswer(query=query.text, mode="hybrid", results=hits, confident=True, latencyMs=0.0)
        q = Query(id=query.id, query=query.text, queryIntent="Find documents that answer this query (from a test collection).",
                  queryType="natural-language")
        outcome = self.judge.judge(q, answer)
        self.last_scores = outcome.verdict.scores.model_dump()
        out = []
        for i, (doc, label) in enumerate(zip(docs, outcome.verdict.labels)):
            first = i == 0
            out.append(LabelResult(int(label.relevance), injection_flag(doc), label.reason,
                                   outcome.usage.input_tokens + outcome.usage.cache_read_tokens + outcome.usage.cache_write_tokens if first else 0,
                                   outcome.usage.output_tokens if first else 0,
                                   (outcome.cost_usd if first else 0.0), outcome.attempts if first else 0))
        return out

    def __call__(self, query: CalibrationQuery, docs: Sequence[ShownDoc], mode: str, trial: int) -> list[LabelResult]:
        """Labels of ``docs`` (see the class docstring)."""
        if mode == "pointwise":
            return [self._call(query, [d])[0] for d in docs]
        return self._call(query, docs)

    def list_scores(self, query: CalibrationQuery, docs: Sequence[ShownDoc]) -> tuple[dict[str, float], list[LabelResult]]:
        """The verdict's own four dimensions for ``docs`` in search order (one call), and the call's results
        (their usage)."""
        results = self._call(query, docs)
        return dict(self.last_scores), results


def labeler_for(judge: Any, embedder: Any = None) -> Labeler:
    """The adapter for a judge built by :func:`judge_runner.roles.build_roles`: the heuristic judge gets
    :class:`HeuristicLabeler` (with its own embedder), any other :class:`VerdictLabeler`."""
    if getattr(judge, "heuristic", False):
        return HeuristicLabeler(embedder if embedder is not None else judge.embedder, judge.model)
    return VerdictLabeler(judge)
