"""Phase two's run loop: search each query, judge it (concurrently), record it the moment it is judged.

Exit codes (DESIGN.md): 0 ok; 1 quality gate failed (``--min-overall``); 2 configuration error (e.g.
the API key was refused before any query was judged); 3 run incomplete (interrupted, budget or spend
limit reached, or more than ``MAX_FAILED_SHARE`` of the queries failed).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from judge_runner import __version__
from judge_runner.judge import SNIPPET_CHARS_SHOWN, JudgeOutcome, judge_query, overall_score
from judge_runner.llm.errors import AuthError, BudgetExhausted, SpendLimitError
from judge_runner.metrics import query_metrics
from judge_runner.models import DIMENSIONS, Query
from judge_runner.results import RunWriter, build_summary, utc_now
from judge_runner.runlines import ErrorLine, EvaluationLine, EvaluationUsage, Provenance, ResultLabel, Scores, run_start_line
from judge_runner.search.base import SearchAnswer, SearchBackend

EXIT_OK, EXIT_GATE, EXIT_CONFIG, EXIT_INCOMPLETE = 0, 1, 2, 3
MAX_FAILED_SHARE = 0.25
RELEVANT_GRADE = 2  # a result labelled 2 (highly relevant) or 3 (perfectly relevant) counts as relevant


@dataclass
class EvaluateOptions:
    """Phase-two settings: search mode and depth, judge concurrency, dimension weights, CI gate."""

    search_mode: str = "hybrid"
    search_limit: int = 10
    concurrency: int = 5
    weights: dict[str, float] | None = None
    min_overall: float | None = None


@dataclass
class RunOutcome:
    """What a run produced: the summary line, the exit code, and the run file's path."""

    summary: dict
    exit_code: int
    path: str
    evaluations: list[dict] = field(default_factory=list)


def evaluation_line(run_id: str, query: Query, answer: SearchAnswer, outcome: JudgeOutcome, weights) -> dict:
    """The ``evaluation`` line for a judged query (DESIGN.md JSONL contract), built as an
    :class:`~judge_runner.runlines.EvaluationLine` and serialised by alias."""
    verdict = outcome.verdict
    scores = {d: getattr(verdict.scores, d) for d in DIMENSIONS}
    grades = [label.relevance for label in verdict.labels]
    off_topic = query.queryType == "off-topic"
    return EvaluationLine(
        runId=run_id,
        timestamp=utc_now(),
        queryId=query.id,
        query=query.query,
        queryIntent=query.queryIntent,
        queryType=query.queryType,
        expectedSources=query.expectedSources,
        searchMode=answer.mode,
        resultCount=len(answer.results),
        confident=answer.confident,
        latencyMs=answer.latencyMs,
        scores=Scores(**scores, overall=overall_score(scores, weights), judgeOverall=verdict.scores.overall),
        analysis=verdict.analysis.model_dump(),
        suggestions=verdict.suggestions,
        results=[
            ResultLabel(rank=h.rank, source=h.source, anchor=h.anchor, score=h.score, relevance=g, relevant=g >= RELEVANT_GRADE,
                        reason=label.reason, snippet=h.snippet[:SNIPPET_CHARS_SHOWN])
            for h, g, label in zip(answer.results, grades, verdict.labels)
        ],
        metrics=None if off_topic else query_metrics([h.source for h in answer.results], grades, query.expectedSources),
        abstained=(not answer.confident or not answer.results) if off_topic else None,
        usage=EvaluationUsage(inputTokens=outcome.usage.input_tokens + outcome.usage.cache_write_tokens + outcome.usage.cache_read_tokens,
                              outputTokens=outcome.usage.output_tokens,
                              costUsd=None if outcome.cost_usd is None else round(outcome.cost_usd, 6)),
        **({"judgeRecoveries": outcome.recoveries} if outcome.recoveries else {}),
    ).line()


def error_line(run_id: str, query: Query, stage: str, exc: BaseException) -> dict:
    """The ``error`` line for a query that could not be searched or judged (an
    :class:`~judge_runner.runlines.ErrorLine` serialised by alias; ``stage`` is "search" or "judge",
    else pydantic.ValidationError)."""
    return ErrorLine.model_validate({
        "runId": run_id,
        "timestamp": utc_now(),
        "queryId": query.id,
        "query": query.query,
        "stage": stage,
        "errorType": getattr(exc, "kind", type(exc).__name__),
        "message": str(exc)[:1000],
        "attempts": getattr(exc, "attempts", 0),
    }).line()


class _Stop(Exception):
    """Raised in the main thread by SIGTERM, handled like Ctrl+C."""


def run_evaluation(
    queries: list[Query],
    search: SearchBackend,
    provider,
    writer: RunWriter,
    run_start: dict,
    options: EvaluateOptions,
    budget=None,
    echo: Callable[[str], None] = print,
    log: Callable[[str], None] = lambda m: None,
    stopped_before: BaseException | None = None,
    prior: list[dict] | None = None,
) -> RunOutcome:
    """Evaluate ``queries``; writes run_start, one line per query as it is judged, and the summary.

    Never raises for a failed query: it becomes an ``error`` line. Ctrl+C or SIGTERM stop new calls,
    keep what is judged, write the summary marked interrupted (exit 3). ``stopped_before`` is the
    error (or KeyboardInterrupt) that stopped phase one: the run file then holds run_start and a
    summary saying why, and the exit code follows from it. ``prior`` are evaluation lines of an
    interrupted run being resumed: they are copied first and count in the summary.
    """
    started = time.monotonic()
    run_id = writer.run_id
    writer.write(run_start_line(run_id, utc_now(), run_start))
    evaluations: list[dict] = []
    for line in prior or []:
        line = {**line, "runId": run_id}
        writer.write(line)
        evaluations.append(line)
    errors: list[dict] = []
    interrupted = budget_exhausted = False
    stop_code: int | None = None
    stop_reason: str | None = None
    if stopped_before is not None:
        interrupted = isinstance(stopped_before, (KeyboardInterrupt, _Stop))
        budget_exhausted = isinstance(stopped_before, BudgetExhausted)
        stop_code = EXIT_CONFIG if isinstance(stopped_before, AuthError) else EXIT_INCOMPLETE
        stop_reason = "interrupted" if interrupted else f"phase one: {getattr(stopped_before, 'kind', type(stopped_before).__name__)}"
        queries = []
    heuristic = bool(getattr(provider, "heuristic", False))
    label = " (heuristic judge)" if heuristic else ""
    total = len(queries) + len(evaluations)
    done = len(evaluations)

    def record(query: Query, answer: SearchAnswer | None, future: Future | None, exc: BaseException | None) -> None:
        nonlocal done, budget_exhausted, stop_code, stop_reason
        done += 1
        if exc is None and future is not None:
            try:
                outcome = future.result()
            except BaseException as caught:  # noqa: BLE001 - every failure is recorded, none stops the run by itself
                exc = caught
            else:
                line = evaluation_line(run_id, query, answer, outcome, options.weights)
                writer.write(line)
                evaluations.append(line)
                echo(f"[{done}/{total}] \"{query.query}\" - overall: {line['scores']['overall']:.2f}{label}")
                return
        stage = "search" if future is None else "judge"
        line = error_line(run_id, query, stage, exc)
        writer.write(line)
        errors.append(line)
        echo(f"[{done}/{total}] \"{query.query}\" - {stage} failed: {line['errorType']}: {line['message'][:160]}")
        if isinstance(exc, BudgetExhausted):
            budget_exhausted = True
            stop_code, stop_reason = EXIT_INCOMPLETE, stop_reason or exc.kind
        elif isinstance(exc, SpendLimitError):
            stop_code, stop_reason = EXIT_INCOMPLETE, stop_reason or exc.kind
        elif isinstance(exc, AuthError):
            stop_code, stop_reason = EXIT_CONFIG, stop_reason or exc.kind

    previous_term = None
    if threading.current_thread() is threading.main_thread():
        def on_term(signum, frame):  # noqa: ARG001
            raise _Stop()
        previous_term = signal.signal(signal.SIGTERM, on_term)

    # the heuristic judge shares one embedding model and is CPU-bound: one at a time
    concurrency = 1 if heuristic else max(1, options.concurrency)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="judge")
    in_flight: dict[Future, tuple[Query, SearchAnswer]] = {}

    def record_finished(finished: set[Future]) -> None:
        for future in [f for f in in_flight if f in finished]:  # in submission order
            q, a = in_flight.pop(future)
            if not future.cancelled():
                record(q, a, future, None)

    try:
        for query in queries:
            while len(in_flight) >= concurrency:
                record_finished(wait(in_flight, return_when=FIRST_COMPLETED)[0])
            if stop_code is not None or (budget is not None and budget.exhausted):
                break  # no new call starts; calls in flight finish and are recorded below
            try:
                answer = search.search(query.query, mode=options.search_mode, limit=options.search_limit)
            except Exception as exc:  # noqa: BLE001
                record(query, None, None, exc)
                continue
            in_flight[pool.submit(judge_query, provider, query, answer, log)] = (query, answer)
        while in_flight:
            record_finished(wait(in_flight, return_when=FIRST_COMPLETED)[0])
    except (KeyboardInterrupt, _Stop):
        interrupted = True
        stop_reason = stop_reason or "interrupted"
        echo("interrupted: no new calls; waiting up to 5 s for calls in flight")
        deadline = time.monotonic() + 5
        for future in list(in_flight):
            future.cancel()
        while in_flight and time.monotonic() < deadline:
            record_finished(wait(in_flight, timeout=max(0.0, deadline - time.monotonic()), return_when=FIRST_COMPLETED)[0])
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)

    if budget is not None and budget.exhausted:
        budget_exhausted = True
    usage = {"inputTokens": 0, "outputTokens": 0, "calls": 0}
    if budget is not None:
        u = budget.usage
        usage = {"inputTokens": u.input_tokens + u.cache_write_tokens + u.cache_read_tokens, "outputTokens": u.output_tokens,
                 "calls": u.calls, "cacheWriteTokens": u.cache_write_tokens, "cacheReadTokens": u.cache_read_tokens}
    cost = budget.total_cost_usd if budget is not None else 0.0
    if budget_exhausted and stop_reason is None:
        stop_reason = "budget_exhausted"
    summary = build_summary(
        run_id, evaluations, errors, total, interrupted=interrupted, budget_exhausted=budget_exhausted, cost_usd=cost,
        usage=usage, duration_s=time.monotonic() - started, heuristic=heuristic, stop_reason=stop_reason,
    )
    gate_passed = None
    if options.min_overall is not None:
        overall = summary["averageScores"]["overall"] if summary["averageScores"] else None
        gate_passed = overall is not None and overall >= options.min_overall
        summary["qualityGate"] = {"minOverall": options.min_overall, "overall": overall, "passed": gate_passed}
    writer.write(summary)
    writer.close()

    if stop_code == EXIT_CONFIG:
        code = EXIT_CONFIG
    elif interrupted or budget_exhausted or stop_code == EXIT_INCOMPLETE or (total and len(errors) / total > MAX_FAILED_SHARE):
        code = EXIT_INCOMPLETE
    elif gate_passed is False:
        code = EXIT_GATE
    else:
        code = EXIT_OK
    return RunOutcome(summary, code, str(writer.path), evaluations)


def provenance(provider, generator_model: str | None, prompt_hashes: dict, query_set_sha: str, corpus_fingerprint: str,
               search_config: dict) -> dict:
    """The ``provenance`` block of ``run_start`` (a :class:`~judge_runner.runlines.Provenance` serialised
    by alias): who judged, with which prompts, on what."""
    return Provenance(
        provider=provider.name,
        generatorModel=generator_model,
        judgeModel=provider.model,
        heuristicJudge=bool(getattr(provider, "heuristic", False)),
        promptSha256=prompt_hashes,
        querySetSha256=query_set_sha,
        corpusFingerprint=corpus_fingerprint,
        searchConfig=search_config,
        judgeRunnerVersion=__version__,
    ).model_dump(by_alias=True, mode="json")
