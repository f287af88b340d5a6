"""Phase two's run loop: search each query, judge it (concurrently), record it the moment it is judged.

In parts: :class:`RunState` (pure record and stop operations), :func:`begin_run` (run_start and the
copied lines of a resumed run), :func:`judge_all` (owns the thread pool), :func:`end_run` (the summary
and the run's :class:`RunEnd`: a :class:`~judge_runner.core.failures.RunStatus` with reasons). The
command line maps the status to an exit code (``failures.exit_code_for``) and installs the signal
handlers; this module installs none.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from judge_runner import __version__
from judge_runner.core.failures import EXIT_CONFIG, EXIT_GATE, EXIT_INCOMPLETE, EXIT_OK, RunStatus, exit_code_for
from judge_runner.core.models import Query
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.fingerprint import DEFAULT_SEED, build_fingerprint, judge_is_generator
from judge_runner.judging.labelling import ProtocolSettings, QueryJudgment, judge_query
from judge_runner.judging.llm_judge import SNIPPET_CHARS_SHOWN
from judge_runner.judging.protocol import Judge
from judge_runner.judging.qrels import human_labels
from judge_runner.llm.errors import AuthError, BudgetExhausted, SpendLimitError
from judge_runner.measures.ir import query_metrics
from judge_runner.runs.lines import BatchLine, ErrorLine, EvaluationLine, EvaluationUsage, Provenance, ResultLabel, Scores, run_start_line
from judge_runner.runs.write import RunWriter, build_summary, utc_now
from judge_runner.search.base import PreparesQueries, SearchAnswer, SearchBackend, SearchMode

__all__ = [
    "EXIT_CONFIG",
    "EXIT_GATE",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "MAX_FAILED_SHARE",
    "EvaluateOptions",
    "RunEnd",
    "RunOutcome",
    "RunState",
    "RunStatus",
    "begin_run",
    "end_run",
    "end_status",
    "error_line",
    "evaluation_line",
    "is_heuristic",
    "judge_all",
    "prepare_search",
    "provenance",
    "run_evaluation",
]

MAX_FAILED_SHARE = 0.25
RELEVANT_GRADE = 2  # a result labelled 2 (highly relevant) or 3 (perfectly relevant) counts as relevant


@dataclass
class EvaluateOptions:
    """Phase-two settings: search mode and depth, judge concurrency, dimension weights, CI gate, and the
    judge protocol: ``judge_mode`` (pointwise|batched), ``trials`` (>= 1), base ``seed``,
    ``human_qrels`` (names of imported human qrels to apply; None: every imported set)."""

    search_mode: SearchMode = "hybrid"
    search_limit: int = 10
    concurrency: int = 5
    weights: dict[str, float] | None = None
    min_overall: float | None = None
    judge_mode: str = "pointwise"
    trials: int = 1
    seed: int = DEFAULT_SEED
    human_qrels: tuple[str, ...] | None = None

    @property
    def protocol(self) -> ProtocolSettings:
        """The judge protocol these options ask for."""
        return ProtocolSettings(self.judge_mode, self.trials, self.seed, self.weights)


@dataclass(frozen=True)
class RunEnd:
    """How a run ended: its status and the reasons for it (empty when ok), e.g. ``("interrupted",)``."""

    status: RunStatus
    reasons: tuple[str, ...] = ()


@dataclass
class RunOutcome:
    """What a run produced: the summary line, how it ended, and the run file's path."""

    summary: dict
    end: RunEnd
    path: str
    evaluations: list[dict] = field(default_factory=list)

    @property
    def status(self) -> RunStatus:
        """The run's status (ok, gate failed, incomplete, config error)."""
        return self.end.status

    @property
    def exit_code(self) -> int:
        """The process exit code the status maps to (``failures.exit_code_for``)."""
        return exit_code_for(self.end.status)


def evaluation_line(run_id: str, query: Query, answer: SearchAnswer, judged: QueryJudgment) -> dict:
    """The ``evaluation`` line (format version 2) for a judged query (DESIGN.md JSONL contract), built as
    an :class:`~judge_runner.runs.lines.EvaluationLine` and serialised by alias. An off-topic query has
    null scores and metrics and ``abstained`` instead; its results are still labelled."""
    grades = [o.label for o in judged.labels]
    off_topic = query.queryType == "off-topic"
    tally = judged.tally
    usage = tally.usage
    models = set().union(*(o.models_returned for o in judged.labels)) | tally.models_returned
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
        scores=Scores(**(judged.scores or {})),
        analysis=judged.analysis,
        suggestions=judged.suggestions,
        results=[
            ResultLabel(
                rank=h.rank,
                source=h.source,
                anchor=h.anchor,
                score=h.score,
                relevance=o.label,
                relevant=o.label >= RELEVANT_GRADE,
                reason=o.reason,
                injectionSuspected=o.injection_suspected,
                cached=o.cached,
                labelOrigin=o.origin,
                trialLabels=o.trial_labels,
                labelSpread=o.spread,
                shownAs=o.shown_as,
                shownFrom=shown_from,
                shownChars=o.shown_chars,
                truncated=o.truncated,
                snippet=h.snippet[:SNIPPET_CHARS_SHOWN],
            )
            for h, o, shown_from in zip(answer.results, judged.labels, judged.shown_from)
        ],
        metrics=None if off_topic else query_metrics([h.source for h in answer.results], grades, query.expectedSources),
        abstained=(not answer.confident or not answer.results) if off_topic else None,
        usage=EvaluationUsage(
            inputTokens=usage.input_tokens + usage.cache_write_tokens + usage.cache_read_tokens,
            outputTokens=usage.output_tokens,
            costUsd=None if tally.cost_usd is None else round(tally.cost_usd, 6),
            calls=usage.calls,
        ),
        labelsCached=sum(o.labels_cached for o in judged.labels),
        labelsJudged=sum(o.labels_judged for o in judged.labels),
        humanLabels=sum(1 for o in judged.labels if o.origin == "human"),
        listCached=judged.list_cached,
        expectedSourceDisagreements=judged.disagreements,
        judgeModelsReturned=sorted(models),
        **({"judgeRecoveries": tally.recoveries} if tally.recoveries else {}),
    ).line()


def error_line(run_id: str, query: Query, stage: str, exc: BaseException) -> dict:
    """The ``error`` line for a query that could not be searched or judged (an
    :class:`~judge_runner.runs.lines.ErrorLine` serialised by alias; ``stage`` is "search" or "judge",
    else pydantic.ValidationError)."""
    return ErrorLine.model_validate(
        {
            "runId": run_id,
            "timestamp": utc_now(),
            "queryId": query.id,
            "query": query.query,
            "stage": stage,
            "errorType": getattr(exc, "kind", type(exc).__name__),
            "message": str(exc)[:1000],
            "attempts": getattr(exc, "attempts", 0),
        }
    ).line()


# when two stops meet (a refused key and a spent budget in flight at once), the graver one wins
_GRAVITY = {RunStatus.OK: 0, RunStatus.GATE_FAILED: 1, RunStatus.INCOMPLETE: 2, RunStatus.CONFIG_ERROR: 3}


@dataclass
class RunState:
    """What a run has recorded so far and whether (and why) it must stop starting calls.

    Its operations are pure (no I/O, no clock, no threads): the run loop writes a line, then records it
    here. ``total`` counts the queries of the run, copied ones of a resumed run included.
    """

    total: int
    evaluations: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    interrupted: bool = False
    budget_exhausted: bool = False
    stop_status: RunStatus | None = None
    stop_reason: str | None = None

    @property
    def done(self) -> int:
        """Queries recorded so far (evaluated or failed)."""
        return len(self.evaluations) + len(self.errors)

    @property
    def stopped(self) -> bool:
        """True once no new call may start (a refused key, a spent budget or spend limit, an interrupt)."""
        return self.stop_status is not None

    def record_evaluation(self, line: dict) -> None:
        """Count a judged query's ``evaluation`` line."""
        self.evaluations.append(line)

    def record_error(self, line: dict, exc: BaseException) -> None:
        """Count a failed query's ``error`` line; a spent budget or spend limit stops the run (incomplete),
        a refused API key stops it as a configuration error. Any other failure lets the run go on."""
        self.errors.append(line)
        if isinstance(exc, BudgetExhausted):
            self.budget_exhausted = True
            self.stop(RunStatus.INCOMPLETE, exc.kind)
        elif isinstance(exc, SpendLimitError):
            self.stop(RunStatus.INCOMPLETE, exc.kind)
        elif isinstance(exc, AuthError):
            self.stop(RunStatus.CONFIG_ERROR, exc.kind)

    def stop(self, status: RunStatus, reason: str) -> None:
        """Start no new call. The first reason is kept (it is the cause; later ones are consequences);
        the graver status wins (a configuration error over an incomplete run)."""
        if self.stop_status is None or _GRAVITY[status] > _GRAVITY[self.stop_status]:
            self.stop_status = status
        self.stop_reason = self.stop_reason or reason

    def interrupt(self) -> None:
        """Ctrl+C (or SIGTERM, which the CLI turns into Ctrl+C): the run is incomplete."""
        self.interrupted = True
        self.stop(RunStatus.INCOMPLETE, "interrupted")

    def phase_one_stopped(self, exc: BaseException) -> None:
        """Phase one ended with ``exc`` (an LLMError or KeyboardInterrupt), so nothing will be judged; the
        reason is ``interrupted`` or ``phase one: <error kind>``."""
        if isinstance(exc, KeyboardInterrupt):
            self.interrupt()
            return
        self.budget_exhausted = isinstance(exc, BudgetExhausted)
        status = RunStatus.CONFIG_ERROR if isinstance(exc, AuthError) else RunStatus.INCOMPLETE
        self.stop(status, f"phase one: {getattr(exc, 'kind', type(exc).__name__)}")


def end_status(state: RunState, *, budget_exhausted: bool, gate: dict | None) -> RunEnd:
    """The status a finished run ends with, and why (pure). Graver first: a configuration error (a refused
    key); then incomplete (interrupted, budget or spend limit, more than ``MAX_FAILED_SHARE`` of the
    queries failed); then a failed quality gate (``gate`` is the summary's ``qualityGate`` block)."""
    if state.stop_status is RunStatus.CONFIG_ERROR:
        return RunEnd(RunStatus.CONFIG_ERROR, (state.stop_reason or "config_error",))
    reasons: list[str] = []
    if state.interrupted:
        reasons.append("interrupted")
    if budget_exhausted and "budget_exhausted" not in reasons:
        reasons.append("budget_exhausted")
    if state.stop_status is RunStatus.INCOMPLETE and state.stop_reason and state.stop_reason not in reasons:
        reasons.append(state.stop_reason)
    if state.total and len(state.errors) / state.total > MAX_FAILED_SHARE:
        reasons.append(f"{len(state.errors)} of {state.total} queries failed (more than {MAX_FAILED_SHARE:.0%})")
    if reasons:
        return RunEnd(RunStatus.INCOMPLETE, tuple(reasons))
    if gate is not None and not gate["passed"]:
        overall = "none evaluated" if gate["overall"] is None else f"{gate['overall']:.3f}"
        return RunEnd(RunStatus.GATE_FAILED, (f"average overall {overall} is below --min-overall {gate['minOverall']}",))
    return RunEnd(RunStatus.OK)


def is_heuristic(judge: Judge) -> bool:
    """True for the offline heuristic judge (labelled as such in the run file; judged one query at a time)."""
    return judge.heuristic


def begin_run(writer: RunWriter, run_start: dict, new_queries: int, prior: list[dict] | None = None) -> RunState:
    """Write the ``run_start`` line and copy ``prior`` (evaluation lines of a run being resumed, given the
    new file's runId); returns the state of a run of ``new_queries`` more queries."""
    writer.write(run_start_line(writer.run_id, utc_now(), run_start))
    state = RunState(total=new_queries + len(prior or []))
    for line in prior or []:
        line = {**line, "runId": writer.run_id}
        writer.write(line)
        state.record_evaluation(line)
    return state


def human_grades(cache: JudgmentCache | None, names: tuple[str, ...] | None) -> dict[str, dict[str, int]]:
    """``{query id: {source: grade}}`` of the imported human qrels (``names``; None: every imported set,
    see :func:`judge_runner.judging.qrels.human_labels`); empty without a cache."""
    if cache is None:
        return {}

    out: dict[str, dict[str, int]] = {}
    for (qid, docid), grade in human_labels(cache, list(names) if names is not None else None).items():
        out.setdefault(qid, {})[docid] = grade
    return out


def prepare_search(search: SearchBackend, queries: list[Query], mode: SearchMode, log: Callable[[str], None] = lambda m: None) -> bool:
    """Let a search that can (:class:`~judge_runner.search.base.PreparesQueries`) embed ``queries``
    ahead of their searches (each alone, so its answer is the unprepared one bit for bit), so no model
    work (nor the embedder's lock) sits between one judge call and the next. Returns False when the preparation failed: that is logged, never raised,
    and each search embeds its own query as before (and records its own error if that fails too)."""
    if not queries or not isinstance(search, PreparesQueries):
        return True
    started = time.perf_counter()
    try:
        embedded = search.prepare_queries([q.query for q in queries], mode)
    except Exception as exc:  # noqa: BLE001 - the searches will embed (and fail) one by one, each recorded
        log(f"could not embed the queries up front ({type(exc).__name__}: {str(exc)[:200]}); each search embeds its own")
        return False
    if embedded:
        log(f"embedded {embedded} queries in {time.perf_counter() - started:.2f} s ahead of their searches")
    return True


def judge_all(
    queries: list[Query],
    search: SearchBackend,
    judge: Judge,
    state: RunState,
    writer: RunWriter,
    options: EvaluateOptions,
    *,
    budget=None,
    heuristic: bool = False,
    echo: Callable[[str], None] = print,
    log: Callable[[str], None] = lambda m: None,
    cache: JudgmentCache | None = None,
) -> None:
    """Search each query (in this thread) and judge it in a thread pool of ``options.concurrency`` workers
    (one for the CPU-bound heuristic judge), writing each line the moment its query is done, in
    submission order. The queries are embedded ahead of their searches (:func:`prepare_search`) in two
    steps: the first ``concurrency`` before the first search, the rest once those are being judged,
    so embedding overlaps the model's replies and no search waits for the model. Starts no new call once
    ``state.stopped`` or the budget is exhausted; calls in flight finish and are recorded. Never raises
    for a failed query (it becomes an ``error`` line). KeyboardInterrupt stops new calls and waits up
    to 5 s for calls in flight; the state is marked interrupted. Each query is judged by
    :func:`judge_runner.judging.labelling.judge_query` under ``options.protocol``, labels through ``cache``
    (None: no cache), imported human labels first.

    With a batching judge (``judge.batching``, ``--batch``) every query is judged at once (one worker each,
    counted by the coordinator, so their calls leave together: labels, then list verdicts); each batch's
    ``batch`` line is written the moment it exists; Ctrl+C abandons the wait at once, records nothing for
    the queries still waiting (``--resume`` takes their results from the batch) and says on stderr that
    the batch was not canceled."""
    run_id = writer.run_id
    human = human_grades(cache, options.human_qrels)
    label = " (heuristic judge)" if heuristic else ""

    def record(query: Query, answer: SearchAnswer | None, future: Future | None, exc: BaseException | None) -> None:
        if exc is None and future is not None and answer is not None:
            try:
                outcome = future.result()
            except BaseException as caught:  # noqa: BLE001 - every failure is recorded, none stops the run by itself
                exc = caught
            else:
                line = evaluation_line(run_id, query, answer, outcome)
                writer.write(line)
                state.record_evaluation(line)
                overall = line["scores"]["overall"]
                shown = (
                    f"overall: {overall:.2f}" if overall is not None else f"off-topic, {'abstained' if line['abstained'] else 'ANSWERED'}"
                )
                cached = f" ({line['labelsCached']} labels cached)" if line["labelsCached"] else ""
                echo(f'[{state.done}/{state.total}] "{query.query}" - {shown}{cached}{label}')
                return
        stage = "search" if future is None else "judge"
        failure = exc if exc is not None else RuntimeError("no outcome")
        line = error_line(run_id, query, stage, failure)
        writer.write(line)
        state.record_error(line, failure)
        echo(f'[{state.done}/{state.total}] "{query.query}" - {stage} failed: {line["errorType"]}: {line["message"][:160]}')

    # the heuristic judge shares one embedding model and is CPU-bound: one at a time
    concurrency = 1 if heuristic else max(1, options.concurrency)
    batching = getattr(judge, "batching", None)  # --batch: every query at once, so their calls share batches
    task: Callable = judge_query
    if batching is not None:
        batching.record = lambda fields: writer.write(batch_line(run_id, fields))
        batching.note = log
        concurrency = max(1, len(queries))
        task = batching.as_unit(judge_query)
        batching.expect()  # the loop's own place: no batch leaves while queries are still being started
    holding = batching is not None
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="judge")
    in_flight: dict[Future, tuple[Query, SearchAnswer]] = {}

    def record_finished(finished: set[Future]) -> None:
        for future in [f for f in in_flight if f in finished]:  # in submission order
            q, a = in_flight.pop(future)
            if not future.cancelled():
                record(q, a, future, None)

    try:
        prepared = prepare_search(search, queries[:concurrency], options.search_mode, log)
        for number, query in enumerate(queries):
            if number == concurrency and prepared:  # the first calls are in flight: embed the rest while they wait for the model
                prepare_search(search, queries[concurrency:], options.search_mode, log)
            while len(in_flight) >= concurrency:
                record_finished(wait(in_flight, return_when=FIRST_COMPLETED)[0])
            if state.stopped or (budget is not None and budget.exhausted):
                break  # no new call starts; calls in flight finish and are recorded below
            try:
                answer = search.search(query.query, mode=options.search_mode, limit=options.search_limit)
            except Exception as exc:  # noqa: BLE001
                record(query, None, None, exc)
                continue
            if batching is not None:
                batching.expect()
            in_flight[pool.submit(task, judge, query, answer, options.protocol, cache, human.get(query.id), log)] = (query, answer)
        if holding and batching is not None:
            holding = False
            batching.release()
        while in_flight:
            record_finished(wait(in_flight, return_when=FIRST_COMPLETED)[0])
    except KeyboardInterrupt:
        state.interrupt()
        if batching is not None:
            # queries already judged are recorded; those waiting on a batch are not: --resume takes
            # their results from the batch
            finished = {future for future in in_flight if future.done()}
            pending = batching.abandon()
            record_finished(finished)
            for future in in_flight:
                future.cancel()
            in_flight.clear()
            # on stderr even with --quiet (a weekly cron run): what is paid for and how to get it
            picker = batching.resume_hint or f"`judge-runner evaluate --resume {getattr(writer, 'path', 'RUN.jsonl')}`"
            print(
                f"interrupted: batch {', '.join(pending)} is still in flight and was NOT canceled; {picker} "
                f"picks its results up without submitting again (cancel it in the provider's console or API to stop it)"
                if pending
                else "interrupted: no new calls",
                file=sys.stderr,
                flush=True,
            )
            return
        echo("interrupted: no new calls; waiting up to 5 s for calls in flight")
        deadline = time.monotonic() + 5
        for future in list(in_flight):
            future.cancel()
        while in_flight and time.monotonic() < deadline:
            record_finished(wait(in_flight, timeout=max(0.0, deadline - time.monotonic()), return_when=FIRST_COMPLETED)[0])
    finally:
        if holding and batching is not None:
            batching.release()
        pool.shutdown(wait=False, cancel_futures=True)


def batch_line(run_id: str, fields: dict) -> dict:
    """The ``batch`` line (a :class:`~judge_runner.runs.lines.BatchLine` serialised by alias) for a batch a
    ``--batch`` run just submitted: ``fields`` are ``batchId``, ``provider``, ``requests``, ``customIds``."""
    return BatchLine.model_validate({"runId": run_id, "timestamp": utc_now(), **fields}).line()


def end_run(
    state: RunState,
    writer: RunWriter,
    options: EvaluateOptions,
    *,
    started: float,
    budget=None,
    heuristic: bool = False,
    judge_is_generator: bool = False,
    estimate: dict | None = None,
    batch: dict | None = None,
    carried: list[dict] | None = None,
) -> RunOutcome:
    """The finish step: build the ``summary`` line (usage and cost from ``budget``; duration since the
    ``time.monotonic()`` value ``started``, in seconds; the quality gate; ``estimate``, the start's
    :meth:`judge_runner.estimate.costs.ModelEstimate.summary_block`; ``batch``: the ``batch`` block of a
    ``--batch`` run, :meth:`judge_runner.llm.batch.BatchStats.as_dict`; ``carried``: the evaluation
    lines a resumed run copied, whose usage and cost the earlier process paid and are added here, so a
    resumed file's summary carries the whole run, :func:`carried_usage`), write it, close the file, and
    return the run's outcome with its :class:`RunEnd`."""
    budget_exhausted = state.budget_exhausted or (budget is not None and budget.exhausted)
    usage = {"inputTokens": 0, "outputTokens": 0, "calls": 0}
    if budget is not None:
        u = budget.usage
        usage = {
            "inputTokens": u.input_tokens + u.cache_write_tokens + u.cache_read_tokens,
            "outputTokens": u.output_tokens,
            "calls": u.calls,
            "cacheWriteTokens": u.cache_write_tokens,
            "cacheReadTokens": u.cache_read_tokens,
        }
    cost = budget.total_cost_usd if budget is not None else 0.0
    if carried:
        earlier = carried_usage(carried)
        for key in ("inputTokens", "outputTokens", "calls"):
            usage[key] += earlier[key]
        cost = None if cost is None or earlier["costUsd"] is None else round(cost + earlier["costUsd"], 6)
    stop_reason = state.stop_reason or ("budget_exhausted" if budget_exhausted else None)
    summary = build_summary(
        writer.run_id,
        state.evaluations,
        state.errors,
        state.total,
        interrupted=state.interrupted,
        budget_exhausted=budget_exhausted,
        cost_usd=cost,
        usage=usage,
        duration_s=time.monotonic() - started,
        heuristic=heuristic,
        stop_reason=stop_reason,
        judge_mode=options.judge_mode,
        trials=options.trials,
        judge_is_generator=judge_is_generator,
        cache_saved_usd=budget.total_saved_usd if budget is not None else 0.0,
    )
    gate = None
    if options.min_overall is not None:
        overall = summary["averageScores"]["overall"] if summary["averageScores"] else None
        gate = {"minOverall": options.min_overall, "overall": overall, "passed": overall is not None and overall >= options.min_overall}
        summary["qualityGate"] = gate
    summary["estimate"] = estimate
    if batch is not None:
        summary["batch"] = batch
    writer.write(summary)
    writer.close()
    return RunOutcome(summary, end_status(state, budget_exhausted=budget_exhausted, gate=gate), str(writer.path), state.evaluations)


def carried_usage(lines: list[dict]) -> dict[str, Any]:
    """The usage of evaluation lines copied from an interrupted run: ``inputTokens``, ``outputTokens``,
    ``calls`` (0 for lines written before they recorded it) and ``costUsd`` (USD; None when any line's cost is
    unknown). A resumed file's summary adds them to its own process's usage: the resumed file carries
    the whole run, each request paid once (README "Batch mode": which file carries what)."""
    out: dict[str, Any] = {"inputTokens": 0, "outputTokens": 0, "calls": 0, "costUsd": 0.0}
    for line in lines:
        usage = line.get("usage") or {}
        out["inputTokens"] += int(usage.get("inputTokens") or 0)
        out["outputTokens"] += int(usage.get("outputTokens") or 0)
        out["calls"] += int(usage.get("calls") or 0)
        if out["costUsd"] is not None and usage:
            out["costUsd"] = None if usage.get("costUsd") is None else out["costUsd"] + float(usage["costUsd"])
    return out


def run_evaluation(
    queries: list[Query],
    search: SearchBackend,
    judge: Judge,
    writer: RunWriter,
    run_start: dict,
    options: EvaluateOptions,
    budget=None,
    echo: Callable[[str], None] = print,
    log: Callable[[str], None] = lambda m: None,
    prior: list[dict] | None = None,
    cache: JudgmentCache | None = None,
    estimate: dict | None = None,
    prior_batches: list[dict] | None = None,
) -> RunOutcome:
    """Evaluate ``queries``; writes run_start, one line per query as it is judged, and the summary.

    Never raises for a failed query: it becomes an ``error`` line. Ctrl+C stops new calls, keeps what
    is judged, writes the summary marked interrupted (status incomplete); the CLI turns SIGTERM into
    Ctrl+C. ``prior`` are evaluation lines of an interrupted run being resumed: they are copied first
    and count in the summary. A stopped phase one writes its run with ``pipeline.write_stopped_run``.
    ``cache``: the judgment cache labels go through (None: none). ``estimate``: what the run was estimated
    to cost at its start (:func:`judge_runner.app.dry_run.start_estimate`), kept in the summary.
    ``prior_batches``: the ``batch`` lines of the run being resumed (copied; a ``--batch`` judge picks
    their results up instead of submitting those requests again).
    """
    started = time.monotonic()
    heuristic = is_heuristic(judge)
    state = begin_run(writer, run_start, len(queries), prior)
    batching = getattr(judge, "batching", None)
    for line in prior_batches or []:
        writer.write({**line, "runId": writer.run_id})
    if batching is not None and prior_batches:
        batching.resume(prior_batches)
    judge_all(queries, search, judge, state, writer, options, budget=budget, heuristic=heuristic, echo=echo, log=log, cache=cache)
    circular = bool((run_start.get("provenance") or {}).get("judgeIsGenerator"))
    batch = batching.stats.as_dict() if batching is not None else None
    return end_run(
        state,
        writer,
        options,
        started=started,
        budget=budget,
        heuristic=heuristic,
        judge_is_generator=circular,
        estimate=estimate,
        batch=batch,
        carried=prior,
    )


def provenance(
    judge: Judge,
    generator_model: str | None,
    prompt_hashes: dict,
    query_set_sha: str,
    corpus_fingerprint: str,
    search_config: dict,
    options: EvaluateOptions | None = None,
    generator_provider: str | None = None,
) -> dict:
    """The ``provenance`` block of ``run_start`` (a :class:`~judge_runner.runs.lines.Provenance` serialised
    by alias): who judged, with which prompts, on what; the judge fingerprint of ``options``' protocol
    (:func:`judge_fingerprint.build_fingerprint`), and whether the judge's model wrote the queries."""
    options = options or EvaluateOptions()
    return Provenance(
        provider=judge.name,
        generatorModel=generator_model,
        judgeModel=judge.model,
        heuristicJudge=judge.heuristic,
        promptSha256=prompt_hashes,
        querySetSha256=query_set_sha,
        corpusFingerprint=corpus_fingerprint,
        searchConfig=search_config,
        judgeRunnerVersion=__version__,
        judgeFingerprint=build_fingerprint(
            judge.name, judge.model, options.judge_mode, options.trials, options.seed, judge.heuristic
        ).as_dict(),
        # the heuristic judge is no model: the offline writer sharing its provider name is no circularity
        judgeIsGenerator=not judge.heuristic and judge_is_generator(generator_provider, generator_model, judge.name, judge.model),
    ).model_dump(by_alias=True, mode="json")
