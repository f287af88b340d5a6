"""Answerability, checked by the judge (issue 22, item 1): a round trip in the spirit of Promptagator's
filter (Dai et al. 2022, "Promptagator: Few-shot Dense Retrieval From 8 Examples": keep a synthetic query
only when its source comes back), with the judge in the place of the retriever.

Each on-topic query is labelled against each of its expected sources as phase two shows a document to the
judge: its passages for the query by the one rule (:func:`judge_runner.search.passages.select_passages`:
the document's chunks, chunked as the indexer chunks them, ranked by BM25 of the query's terms in their
own text, path words not counted, as many as fit the shown-text cap, in document order), rendered exactly
as phase two renders a result (:func:`judge_runner.judging.fence.render_document`). The labels go through
:func:`judge_runner.judging.labelling.label_documents`: the run's judge, judge mode, trials and seed, and
its judgment cache. In pointwise mode a label's cache key depends only on the query, its intent and the
text shown, and phase two shows the same text for the document whichever system returns it, so the label
is read from the cache there: no second call. (In batched mode a label is keyed by the whole batch it was
given in, so phase two's labels are its own.)

A query is verified when its best label is at least :data:`VERIFIED_LABEL` (2, "relevant" on the 0-3
scale). A judge call that fails leaves its query unchecked (kept, never dropped for a failure); a spent
budget, a spending limit or a refused key stops phase one, as it does when the writer meets them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_runner.core.models import Query
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.fence import RenderedDocument, render_document
from judge_runner.judging.labelling import ProtocolSettings, Tally, label_documents
from judge_runner.judging.protocol import Judge
from judge_runner.llm.errors import AuthError, BudgetExhausted, LLMError, SpendLimitError
from judge_runner.search.documents import FolderDocuments

VERIFIED_LABEL = 2
"""The least label (0-3) of an expected source's passage that verifies a query: 2 is "relevant" on the
TREC/UMBRELA scale the judge uses (docs/judge-protocol.md)."""


@dataclass
class AnswerCheck:
    """The judge's labels of one query's passages: ``labels`` and ``reasons`` by expected source, the
    labels the cache already held (``cached``), and ``error`` when a judge call failed (unchecked)."""

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
        """Whether the best label is at least :data:`VERIFIED_LABEL`."""
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
    """``[(source, its passages as the judge sees them)]`` of ``query``'s expected sources (a source that
    cannot be read as a document is left out)."""
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
    embedder: Any = None,
) -> tuple[list[AnswerCheck], Tally]:
    """``(one AnswerCheck per query in order, what the calls cost)``: each on-topic query of ``queries``
    labelled against its expected sources' passages in the corpus at ``root`` (off-topic queries are
    not checked and get no entry). ``concurrency`` queries are checked at once (one for a heuristic
    judge); under ``--batch`` all at once, so their calls share a batch. A failed call (an LLMError) is
    recorded as the query's ``error``, except BudgetExhausted, SpendLimitError and AuthError, which stop
    the check and are raised (no later call could succeed), as is KeyboardInterrupt. ``protocol``:
    default pointwise, one trial. ``embedder``: the command's, under which the passages are chosen (as a
    run chooses them)."""
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
            outcomes = label_documents(
                judge,
                query.query,
                query.queryIntent,
                [doc for _, doc in shown],
                mode=protocol.mode,
                trials=protocol.trials,
                cache=cache,
                seed=protocol.seed,
                query_id=query.id,
                tally=tally,
                log=log,
            )
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
