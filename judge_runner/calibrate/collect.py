"""Labelling the pool: every pooled pair, in each mode, ``trials`` times.

Pointwise: one labeller call per document and trial. Batched: per query and trial, the pool in a seeded random
order (:func:`judge_runner.judging.requests.shuffled_order`, never a system's order), cut into batches of
``batch_size`` documents. The shown text of a document is what a run shows the judge of it: its passages for
the query by the one rule (:func:`judge_runner.search.passages.select_passages` over the record's chunks,
chunked as the indexer chunks a BEIR record, the title as anchor; the intent is unknown in a test
collection), so calibrate measures the judge on the text ``evaluate`` gives it. With ``--batch`` the queries (and a query's pointwise documents) are labelled concurrently
so that their calls share one batch per round; the probes' calls go as they come (small batches).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from judge_runner.calibrate.data import CalibrationQuery, Collection
from judge_runner.calibrate.labeling import Labeler, LabelResult, ShownDoc
from judge_runner.calibrate.pool import PoolEntry, Runs
from judge_runner.core.models import JudgeMode
from judge_runner.judging.requests import batch_seed, shuffled_order
from judge_runner.search.documents import record_chunks
from judge_runner.search.passages import select_passages
from judge_runner.search.text import make_snippet

DEFAULT_SNIPPET_CHARS = 400


def shown_doc(collection: Collection, query: CalibrationQuery, docid: str) -> ShownDoc:
    """The document as the judge sees it in a run: its passages for the query (module docstring) under
    the collection's embedder, the title as anchor."""
    title, text = collection.documents()[docid]
    shown = select_passages(query.text, record_chunks(title, text), embedder=collection.embedder)
    return ShownDoc(docid, title or None, shown.text if shown is not None else "")


def snippet_doc(collection: Collection, query: CalibrationQuery, docid: str, chars: int = DEFAULT_SNIPPET_CHARS) -> ShownDoc:
    """The document as a snippet: title as anchor, ``chars`` characters of text around the query's words
    (the length probe's variants)."""
    title, text = collection.documents()[docid]
    return ShownDoc(docid, title or None, make_snippet(text or title, query.text, chars))


_SPEND_LOCK = threading.Lock()


@dataclass
class Spend:
    """What labelling cost: logical calls per mode, HTTP requests, tokens, USD (None once any cost was unknown)."""

    calls: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0

    def add(self, purpose: str, results: Sequence[LabelResult]) -> None:
        """Count one labeller call made for ``purpose`` (a mode or a probe) and its results' usage (thread-safe:
        ``--batch`` labels concurrently)."""
        with _SPEND_LOCK:
            self.calls[purpose] = self.calls.get(purpose, 0) + 1
            for r in results:
                self.requests += r.calls
                self.input_tokens += r.input_tokens
                self.output_tokens += r.output_tokens
                self.cost_usd = None if self.cost_usd is None or r.cost_usd is None else self.cost_usd + r.cost_usd

    def as_dict(self) -> dict:
        """JSON-ready (camelCase) figures."""
        return {
            "calls": dict(self.calls),
            "totalCalls": sum(self.calls.values()),
            "requests": self.requests,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "costUsd": None if self.cost_usd is None else round(self.cost_usd, 6),
        }


class CountingLabeler:
    """A labeller that adds every call to a :class:`Spend` under a purpose (``pointwise``, ``batched``,
    ``probe:position`` ...)."""

    def __init__(self, inner: Labeler, spend: Spend):
        self.inner, self.spend = inner, spend
        self.on_labels: Callable[[int], None] | None = None  # told how many labels each call returned (progress)

    def label(self, purpose: str, query: CalibrationQuery, docs: Sequence[ShownDoc], mode: JudgeMode, trial: int) -> list[LabelResult]:
        """Labels of ``docs`` (see :class:`Labeler`); pointwise mode makes one call per document. Raises
        ValueError when the labeller returns the wrong number of labels."""
        if mode == "pointwise" and len(docs) > 1:
            if hasattr(self.inner, "prepare"):  # a local judge may batch its own work (the offline judge's embeddings)
                self.inner.prepare(query, docs)
            batching = batching_of(self)
            if batching is not None:  # --batch: the documents' calls at once, in one batch
                made = batching.map(lambda d: self.label(purpose, query, [d], mode, trial), list(docs))
                failure = next((m for m in made if isinstance(m, BaseException)), None)
                if failure is not None:
                    raise failure
                return [r for m in made for r in m]
            return [r for d in docs for r in self.label(purpose, query, [d], mode, trial)]
        results = self.inner(query, docs, mode, trial)
        if len(results) != len(docs):
            raise ValueError(f"the labeller returned {len(results)} labels for {len(docs)} documents")
        self.spend.add(purpose, results)
        if self.on_labels is not None:
            self.on_labels(len(results))
        return results

    def list_scores(self, query: CalibrationQuery, docs: Sequence[ShownDoc]) -> dict[str, float] | None:
        """The labeller's list-level dimensions of ``docs`` (counted under ``list``), or None when it has none."""
        if not hasattr(self.inner, "list_scores"):
            return None
        scores, results = self.inner.list_scores(query, docs)
        self.spend.add("list", results)
        return cast(dict[str, float] | None, scores)


@dataclass
class Labels:
    """Labels of the pool: ``trials[mode][(qid, docid)]`` = label per trial; ``flags[mode][(qid, docid)]`` =
    flagged in any trial."""

    trials: dict[str, dict[tuple[str, str], list[int]]] = field(default_factory=dict)
    flags: dict[str, dict[tuple[str, str], bool]] = field(default_factory=dict)


@dataclass(frozen=True)
class Study:
    """What a calibration measures on: the ``collection``, its sampled ``queries``, the systems' ``runs`` and
    the ``pool`` of (query, document) pairs labelled."""

    collection: Collection
    queries: Sequence[CalibrationQuery]
    runs: Runs
    pool: Mapping[str, list[PoolEntry]]


@dataclass(frozen=True)
class Labelling:
    """How the pool is labelled: in each of ``modes``, ``trials`` times, a batched call holding at most
    ``batch_size`` documents in the order ``seed`` draws."""

    modes: Sequence[JudgeMode]
    trials: int
    seed: int
    batch_size: int = 10


def label_pool(
    labeler: CountingLabeler,
    study: Study,
    how: Labelling,
    progress: Callable[[str], None] = lambda message: None,
    meter: Callable[[str, int, int], None] | None = None,
    purpose: str = "",
) -> Labels:
    """Label every pooled pair of ``study`` as ``how`` says (see the module docstring). ``meter(stage, done,
    total)`` (stage ``"labelling <mode>"``, counted in labels) is told after every judge call, from whichever
    thread made it. ``purpose``: what the calls are counted under (default: the mode)."""
    collection, queries, pool = study.collection, study.queries, study.pool
    trials, seed, batch_size = how.trials, how.seed, how.batch_size
    out = Labels()
    batching = batching_of(labeler)
    for mode in how.modes:
        if meter is not None:
            labeler.on_labels = label_counter(meter, f"labelling {mode}", trials * sum(len(pool.get(q.id, [])) for q in queries))
        table: dict[tuple[str, str], list[int]] = {}
        flags: dict[tuple[str, str], bool] = {}

        def label_query(q: CalibrationQuery, mode: JudgeMode = mode) -> list[tuple[ShownDoc, LabelResult]]:
            entries = pool.get(q.id, [])
            docs = [shown_doc(collection, q, e.docid) for e in entries]
            pairs: list[tuple[ShownDoc, LabelResult]] = []
            for trial in range(trials):
                if mode == "batched":
                    order = shuffled_order(len(docs), batch_seed(seed, q.id, trial))
                    slots: list[LabelResult | None] = [None] * len(docs)
                    for start in range(0, len(order), batch_size):
                        part = order[start : start + batch_size]
                        for i, r in zip(part, labeler.label(purpose or mode, q, [docs[i] for i in part], mode, trial)):
                            slots[i] = r
                    results = [r for r in slots if r is not None]
                else:
                    results = list(labeler.label(purpose or mode, q, docs, mode, trial))
                pairs.extend(zip(docs, results))
            return pairs

        # --batch: every query at once, so that their calls share one batch per round
        done = batching.map(label_query, list(queries)) if batching is not None else None
        for number, q in enumerate(queries, start=1):
            pairs = done[number - 1] if done is not None else label_query(q)
            if isinstance(pairs, BaseException):
                raise pairs
            for doc, r in pairs:
                key = (q.id, doc.docid)
                table.setdefault(key, []).append(r.label)
                flags[key] = flags.get(key, False) or r.flagged
            if number % 10 == 0 or number == len(queries):
                progress(f"  {mode}: {number}/{len(queries)} queries labelled")
        out.trials[mode], out.flags[mode] = table, flags
    labeler.on_labels = None
    return out


def label_counter(meter: Callable[[str, int, int], None], stage: str, total: int) -> Callable[[int], None]:
    """A thread-safe ``on_labels(count)`` for :attr:`CountingLabeler.on_labels` that adds up the labels and
    tells ``meter(stage, done, total)`` (``total`` 0: unknown); tells it ``done=0`` at once."""
    lock, done = threading.Lock(), [0]
    meter(stage, 0, total)

    def counted(count: int) -> None:
        with lock:
            done[0] += count
            meter(stage, done[0], total)

    return counted


def batching_of(labeler: Any) -> Any:
    """The :class:`~judge_runner.llm.batch.BatchCoordinator` of the judge behind ``labeler`` (a
    :class:`CountingLabeler` over a ``ProtocolLabeler``) in ``--batch`` mode, else None."""
    return getattr(getattr(getattr(labeler, "inner", labeler), "judge", None), "batching", None)
