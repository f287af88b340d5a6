"""The real run's estimate at its start (:func:`start_estimate`): the ``--dry-run`` figures from the run's
own searches, handed on to the run (:class:`MemoSearch`) so no query is searched twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from judge_runner.core.models import Query, SearchMode
from judge_runner.estimate.answers import estimate_answers, search_all
from judge_runner.estimate.costs import ModelEstimate, costs
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.labelling import ProtocolSettings
from judge_runner.judging.protocol import Judge
from judge_runner.judging.qrels import human_grades
from judge_runner.llm.pricing import DEFAULT_EFFORT, Price, price_for
from judge_runner.search.base import SearchAnswer, SearchBackend, SearchIndex

__all__ = ["MemoSearch", "RunOptions", "budget_warning", "start_estimate"]


class RunOptions(Protocol):
    """What the estimate reads of a run's options."""

    @property
    def search_mode(self) -> SearchMode: ...

    @property
    def search_limit(self) -> int: ...

    @property
    def protocol(self) -> ProtocolSettings: ...

    @property
    def human_qrels(self) -> tuple[str, ...] | None: ...


class MemoSearch:
    """A search backend answering each (query, mode, limit, intent) once from :meth:`remember`; every other
    attribute is the backend's. Once ``interrupted``, its first search raises KeyboardInterrupt, so the run
    stops as on its own Ctrl+C."""

    def __init__(self, backend: SearchBackend):
        self.backend = backend
        self.answers: dict[tuple[str, str, int, str], SearchAnswer] = {}
        self.interrupted = False

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10, *, intent: str = "") -> SearchAnswer:
        """The remembered answer (then forgotten), else the backend's. Raises KeyboardInterrupt once ``interrupted``."""
        if self.interrupted:
            self.interrupted = False
            raise KeyboardInterrupt
        answer = self.answers.pop((query, mode, limit, intent), None)
        return answer if answer is not None else self.backend.search(query, mode=mode, limit=limit, intent=intent)

    def remember(self, query: str, mode: SearchMode, limit: int, answer: SearchAnswer, intent: str = "") -> None:
        self.answers[(query, mode, limit, intent)] = answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


def budget_warning(estimate: ModelEstimate, price: Price | None, cap: float | None, batch: bool) -> str:
    """The start line's word on ``--max-budget-usd`` (``cap``, USD) in the run's mode; empty when the worst
    case fits."""
    if cap is None or price is None:
        return ""
    cost = costs(estimate.calls, price)["batch" if batch else "sync"]
    mode = "at batch prices" if batch else "at sync prices"
    if (cost.expected or 0) > cap:
        return f"; expected ${cost.expected:.4f} {mode} is above --max-budget-usd {cap:.2f}: the run will stop early"
    if (cost.worst or 0) > cap:
        held = "requests that do not fit wait for a later batch" if batch else "the run may stop early"
        return f"; worst case ${cost.worst:.4f} {mode} is above --max-budget-usd {cap:.2f}: {held}"
    return ""


def start_estimate(
    queries: Sequence[Query],
    index: SearchIndex,
    judge: Judge,
    options: RunOptions,
    cache: JudgmentCache | None,
    *,
    price: Price | None,
    budget_cap_usd: float | None,
    say: Callable[[str], None] = lambda m: None,
) -> tuple[Any, dict[str, Any] | None]:
    """``(search backend for the run, summary block or None)``, said in one line. ``price``: standard price
    (None: the pricing table's); ``budget_cap_usd`` (USD) is warned about. None for the heuristic judge and
    when the estimate fails (said; the run goes on). Ctrl+C here is handed on to the run loop."""
    if getattr(judge, "heuristic", False):
        return index, None

    memo = MemoSearch(index)
    try:
        answers, _, _ = search_all(queries, [(index, options.search_mode)], options.search_limit)
        for query, answer in answers:
            memo.remember(query.query, options.search_mode, options.search_limit, answer, query.queryIntent)
        batch = getattr(judge, "batching", None) is not None
        price = price or price_for(judge.model)  # the standard price: batch mode halves it in the estimate
        effort = getattr(judge, "reasoning_effort", None) or DEFAULT_EFFORT  # what a reasoning judge is sent
        [estimate] = estimate_answers(
            answers,
            [(judge.name, judge.model, price, True)],
            options.protocol,
            cache,
            human_grades(cache, options.human_qrels, {q.id: q.query for q in queries}),
            effort,
        )
    except KeyboardInterrupt:
        memo.interrupted = True
        return memo, None
    except Exception as exc:  # noqa: BLE001 - the estimate is advice: the run must not fail for it
        say(f"note: no cost estimate ({type(exc).__name__}: {str(exc)[:200]})")
        return memo, None
    block = estimate.summary_block(batch)
    cost = "unknown" if block["costUsd"] is None else f"${block['costUsd']:.4f} (worst case ${block['worstCaseCostUsd']:.4f})"
    over = budget_warning(estimate, price, budget_cap_usd, batch=batch)
    say(f"estimate: {block['calls']} judge calls, about {block['inputTokens']:,} input tokens, {cost}{over}")
    return memo, block
