"""Phase two's calls estimated from real search answers: each query searched once per system
(:func:`search_all`), then judged by the recording judge through the real protocol
(:func:`estimate_answers`), so the estimate makes exactly the calls the run would make.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from judge_runner.core.models import Query, SearchMode
from judge_runner.estimate.costs import DryRunCache, ModelEstimate, RecordingJudge
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.labelling import Channel, ProtocolSettings, cache_model, judge_query
from judge_runner.judging.protocol import Judge
from judge_runner.llm.pricing import DEFAULT_EFFORT, Price
from judge_runner.search.base import SearchAnswer
from judge_runner.search.prepare import prepare_search

__all__ = ["estimate_answers", "estimate_labels", "search_all"]


def search_all(
    queries: Sequence[Query], searches: Sequence[tuple[Any, ...]], limit: int
) -> tuple[list[tuple[Query, SearchAnswer]], int, str | None]:
    """``([(query, answer)], failures, first failure's ``ErrorType: message`` (at most 300 characters) or
    None)``: each query searched with each ``(backend, mode)``, or ``(backend, mode, its own queries)`` (a
    resumed run's system searches only what it has not judged); a failed search makes no call."""
    answers, failed, first = [], 0, None
    for backend, mode, *own in searches:
        mine = list(own[0]) if own else list(queries)
        # the whole set embedded first, as the run loop does: the searches then do no model
        # work, and a real run's own preparation finds these queries done (prepare_queries skips them)
        prepare_search(backend, mine, cast("SearchMode", mode))  # checked when the system was opened
        for query in mine:
            try:
                answers.append((query, backend.search(query.query, mode=mode, limit=limit, intent=query.queryIntent)))
            except Exception as exc:  # noqa: BLE001 - the run records it as an error line; here it is counted
                failed += 1
                first = first or f"{type(exc).__name__}: {str(exc)[:300]}"
    return answers, failed, first


def estimate_answers(
    answers: Sequence[tuple[Query, SearchAnswer]],
    judges: Sequence[tuple[str, str, Price | None, bool]],
    protocol: ProtocolSettings,
    cache: JudgmentCache | None = None,
    human: dict[str, dict[str, int]] | None = None,
    effort: str = DEFAULT_EFFORT,
) -> list[ModelEstimate]:
    """One :class:`ModelEstimate` per judge: the calls :func:`judge_query` would make on ``answers``.
    ``cache`` is only read. A result with a person's grade is still judged, as in the run."""
    out = []
    for provider, model, price, chosen in judges:
        judge = RecordingJudge(provider, model, effort=effort)
        estimate = ModelEstimate(provider, model, price, chosen=chosen)
        _judge_all(answers, judge, protocol, cache, human, estimate)
        estimate.calls = judge.calls
        out.append(estimate)
    return out


def estimate_labels(
    answers: Sequence[tuple[Query, SearchAnswer]],
    judge: Judge,
    protocol: ProtocolSettings,
    cache: Any = None,
    human: dict[str, dict[str, int]] | None = None,
) -> ModelEstimate:
    """The labels the run's own ``judge`` would find in ``cache`` or make on ``answers``, counted under its
    cache identity (name, model, cache model, heuristic: every part of the judgment-cache key the judge
    brings), so a dry run counts what the run will reuse; ``model`` is its cache model. Nothing is sent."""
    twin = RecordingJudge(judge.name, judge.model, cache_model=cache_model(judge), heuristic=bool(getattr(judge, "heuristic", False)))
    estimate = ModelEstimate(judge.name, cache_model(judge), None, chosen=True)
    _judge_all(answers, twin, protocol, cache, human, estimate)
    return estimate


def _judge_all(
    answers: Sequence[tuple[Query, SearchAnswer]],
    judge: RecordingJudge,
    protocol: ProtocolSettings,
    cache: Any,
    human: dict[str, dict[str, int]] | None,
    estimate: ModelEstimate,
) -> None:
    overlay = DryRunCache(cache)
    for query, answer in answers:
        # the overlay answers the cache calls judge_query makes (get, get_many, put, put_many)
        judged = judge_query(judge, query, answer, protocol, (human or {}).get(query.id), Channel(cast("JudgmentCache", overlay)))
        estimate.labels_cached += sum(o.labels_cached for o in judged.labels)
        estimate.labels_to_judge += sum(o.labels_judged for o in judged.labels)
        estimate.human_labels += sum(1 for o in judged.labels if o.origin == "human")
