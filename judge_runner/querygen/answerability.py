"""Answerability, checked by the judge: a round trip after Promptagator's filter (Dai et al. 2022: keep a
synthetic query only when its source comes back), with the judge in the retriever's place.

Each on-topic query's expected sources are shown and labelled exactly as phase two shows and labels a
result, so in pointwise mode phase two reads the labels from the cache. A failed judge call leaves its
query unchecked (kept); a spent budget, a spending limit or a refused key stops phase one.
docs/query-sets.md tells the whole check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from judge_runner.core.models import Query
from judge_runner.embed.base import TextEmbedder
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.fence import RenderedDocument, render_document
from judge_runner.judging.labelling import Channel, LabelTask, ProtocolSettings, Tally, label_documents
from judge_runner.judging.protocol import Judge
from judge_runner.llm.errors import AuthError, BudgetExhausted, LLMError, SpendLimitError
from judge_runner.search.documents import FolderDocuments

VERIFIED_LABEL = 2
"""The least label (0-3) of an expected source that verifies a query: 2, "relevant" on the UMBRELA scale."""


@dataclass
class AnswerCheck:
    """The judge's labels and reasons by expected source, those read from the cache (``cached``), and
    ``error`` when a judge call failed (the query is then unchecked)."""

    query: Query
    labels: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    cached: int = 0
    error: str | None = None

    @property
    def best(self) -> int | None:
        """The best label over the expected sources, or None when nothing was labelled."""
        return max(self.labels.values()) if self.labels else None

    @property
    def verified(self) -> bool:
        return self.best is not None and self.best >= VERIFIED_LABEL

    def reason(self) -> str:
        """Why the query is not verified, naming each source's label and the judge's reason."""
        if self.error is not None:
            return f"not checked: the judge call failed ({self.error})"
        if not self.labels:
            return "no passage of its expected sources could be read"
        said = "; ".join(f"{s} labelled {label} ({self.reasons.get(s, '')[:160]})" for s, label in self.labels.items())
        return f"the judge labelled every expected source below {VERIFIED_LABEL}: {said}"


def passages(query: Query, documents: FolderDocuments) -> list[tuple[str, RenderedDocument]]:
    """``[(source, its passages as the judge sees them)]``; a source that cannot be read is left out."""
    out = []
    for source in query.expectedSources:
        shown = documents.passages(source, query.query, query.queryIntent)
        if shown is not None:
            out.append((source, render_document(source, shown.anchor, shown.text)))
    return out


def check_answerability(
    queries: Sequence[Query],
    root: Path,
    judge: Judge,
    *,
    protocol: ProtocolSettings | None = None,
    cache: JudgmentCache | None = None,
    concurrency: int = 1,
    log: Callable[[str], None] = lambda message: None,
    embedder: TextEmbedder | None = None,
) -> tuple[list[AnswerCheck], Tally]:
    """``(one AnswerCheck per on-topic query in order, what the calls cost)``. A failed call (an LLMError)
    becomes the query's ``error``, except BudgetExhausted, SpendLimitError and AuthError, which are raised,
    as is KeyboardInterrupt. ``protocol``: default pointwise, one trial."""
    protocol = protocol or ProtocolSettings()
    documents = FolderDocuments(root, embedder)
    tally = Tally()
    todo = [q for q in queries if q.queryType != "off-topic" and q.expectedSources]
    lock = threading.Lock()

    def check(query: Query) -> AnswerCheck:
        result = AnswerCheck(query)
        shown = passages(query, documents)
        if not shown:
            return result
        try:
            task = LabelTask(query.query, query.queryIntent, [doc for _, doc in shown], query.id)
            outcomes = label_documents(judge, task, protocol, Channel(cache, tally, log))
        except (BudgetExhausted, SpendLimitError, AuthError):
            raise  # the run cannot go on: phase one stops as it does for the writer's own calls
        except LLMError as exc:
            result.error = f"{type(exc).__name__}: {str(exc)[:200]}"
            with lock:
                log(f"answerability check of {query.id} failed: {result.error}")
            return result
        for (source, _), outcome in zip(shown, outcomes):
            result.labels[source] = outcome.label
            result.reasons[source] = outcome.reason
            result.cached += outcome.labels_cached
        return result

    batching = getattr(judge, "batching", None)
    if batching is not None and len(todo) > 1:
        made = batching.map(check, todo)
        for item in made:
            if isinstance(item, BaseException):
                raise item
        return [item for item in made if isinstance(item, AnswerCheck)], tally
    workers = 1 if getattr(judge, "heuristic", False) else max(1, concurrency)
    if workers == 1 or len(todo) < 2:
        return [check(q) for q in todo], tally
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="answerability")
    try:
        futures = [pool.submit(check, q) for q in todo]
        results = [f.result() for f in futures]
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return results, tally
