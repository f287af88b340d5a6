"""Phase two's run loop: search each query, judge it (concurrently), record it the moment it is judged.

In parts: :class:`RunState` (pure record and stop operations), :func:`begin_run` (run_start and the
copied lines of a resumed run), :func:`judge_all` (owns the thread pool), :func:`end_run` (the summary
and the run's :class:`RunEnd`: a :class:`~judge_runner.core.failures.RunStatus` with reasons). The
command line maps the status to an exit code (``judge_runner.core.failures.exit_code_for``) and installs the signal
handlers; this module installs none.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from judge_runner.core.failures import EXIT_CONFIG, EXIT_GATE, EXIT_INCOMPLETE, EXIT_OK, JudgeRunnerError, RunStatus, StorageError
from judge_runner.core.interrupts import STOP
from judge_runner.core.models import Query, SearchMode
from judge_runner.evaluation.lines import batch_line, error_line, evaluation_line, provenance
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.evaluation.state import MAX_FAILED_SHARE, RunEnd, RunOutcome, RunState, begin_run, end_run, end_status, stops_run
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.call_pool import CallPool, detached
from judge_runner.judging.labelling import Tally, judge_query
from judge_runner.judging.protocol import Judge
from judge_runner.judging.qrels import human_grades
from judge_runner.llm.budget import Budget
from judge_runner.llm.errors import CallsStopped
from judge_runner.runs.write import RunWriter
from judge_runner.search.base import PreparesQueries, SearchAnswer, SearchBackend

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


STOP_WAIT_S = 5.0
"""Seconds a stopped synchronous run waits for the calls in flight to end (and be recorded)."""
POLL_S = 0.2
"""Seconds between two checks for a stop request while the loop waits for its queries."""


def is_heuristic(judge: Judge) -> bool:
    """True for the offline heuristic judge (labelled as such in the run file; judged one query at a time)."""
    return judge.heuristic


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
    budget: Budget | None = None,
    heuristic: bool = False,
    echo: Callable[[str], None] = print,
    log: Callable[[str], None] = lambda m: None,
    cache: JudgmentCache | None = None,
    alert: Callable[[str], None] | None = None,
) -> None:
    """Search each query (in this thread) and judge it, writing each line once its query and those before
    it are done (lines in the order of ``queries``). The judge calls of every query in flight share one
    pool of ``options.concurrency`` call slots (:class:`~judge_runner.judging.call_pool.CallPool`; a
    query's label calls run side by side, earlier queries' calls first) and up to ``concurrency``
    queries are being judged at once, so a small query set or the run's tail still fills every slot.
    The CPU-bound heuristic judge is one query at a time, its calls one after another. The queries are
    embedded ahead of their searches (:func:`prepare_search`) in two steps: the first ``concurrency`` before the first search, the rest once those are being judged,
    so embedding overlaps the model's replies and no search waits for the model. Starts no new call once
    ``state.stopped``, the budget is exhausted or the judgment cache failed (a full disk: its
    ``failure``); calls in flight finish and are recorded. Never raises for a failed query (it becomes an
    ``error`` line, with what its calls spent). A stop request (Ctrl+C, SIGTERM: checked at the loop's
    waits, :data:`judge_runner.core.interrupts.STOP`; or KeyboardInterrupt from a search) starts no new
    call (none waiting in the pool either: a query left waiting gets no line) and waits up to
    STOP_WAIT_S for calls in flight (a second signal ends the wait); the state is marked interrupted. A run file that cannot take a line (StorageError) stops the run the same way (reason
    ``disk_full`` or ``storage_error``), said on stderr with the file's path. Each query is judged by
    :func:`judge_runner.judging.labelling.judge_query` under ``options.protocol``, labels through ``cache``
    (None: no cache), imported human labels first. ``echo`` takes the per-query progress lines, ``alert``
    (default ``echo``) the lines of failed queries and of an interrupt, which ``--quiet`` still shows.

    With a batching judge (``judge.batching``, ``--batch``) every query is judged at once (one worker each,
    counted by the coordinator, so their calls leave together: labels, then list verdicts); each batch's
    ``batch`` line is written the moment it exists; Ctrl+C abandons the wait at once, records nothing for
    the queries still waiting (``--resume`` takes their results from the batch) and says on stderr that
    the batch was not canceled."""
    run_id = writer.run_id
    alert = alert or echo
    human = human_grades(cache, options.human_qrels)
    label = " (heuristic judge)" if heuristic else ""
    said: set[str] = set()  # storage failures already said on stderr
    resume = f"`judge-runner evaluate --resume {getattr(writer, 'path', 'RUN.jsonl')}` continues the run"

    def record(query: Query, answer: SearchAnswer | None, future: Future | None, exc: BaseException | None, tally: Tally | None) -> None:
        # a line is written, then counted: a run file that cannot take it (a full disk) stops the run, and
        # the summary counts only the lines in the file (no signal lands in between: the run is held)
        if exc is None and future is not None and answer is not None:
            try:
                outcome = future.result()
            except CallsStopped:
                return  # stopped before all its calls were made: no line (--resume judges it)
            except BaseException as caught:  # noqa: BLE001 - every failure is recorded, none stops the run by itself
                exc = caught
            else:
                line = evaluation_line(run_id, query, answer, outcome, options.search_limit)
                if not write(line):
                    return
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
        line = error_line(run_id, query, stage, failure, tally)
        if not write(line):
            return
        state.record_error(line, failure)
        alert(f'[{state.done}/{state.total}] "{query.query}" - {stage} failed: {line["errorType"]}: {line["message"][:160]}')

    def write(line: dict) -> bool:
        try:
            writer.write(line)
        except StorageError as exc:
            storage_failed(exc, f"the run stops (the file keeps its complete lines); once there is room, {resume}")
            return False
        return True

    def storage_failed(error: JudgeRunnerError, consequence: str) -> None:
        """A file the run writes failed (the run file, the judgment cache): stop starting work, say it once."""
        state.stop(RunStatus.INCOMPLETE, getattr(error, "reason", "storage_error"))
        if error.message not in said:
            said.add(error.message)
            print(f"error: {error.message}. {consequence[0].upper()}{consequence[1:]}", file=sys.stderr, flush=True)

    def must_stop() -> bool:
        """Whether no new query may start: the run is stopped, the budget spent, or the judgment cache
        failed; or a query failed in a way that stops the run, its line waiting for an earlier query's."""
        failure = getattr(cache, "failure", None)
        if failure is not None:
            storage_failed(failure, f"no new query starts (those started finish, their labels in their lines); once it is fixed, {resume}")
        held = any(f.done() and not f.cancelled() and stops_run(f.exception()) for f in in_flight)
        return state.stopped or held or (budget is not None and budget.exhausted)

    def wait_any() -> None:
        """Wait for a query in flight to end. A stop request (Ctrl+C, SIGTERM: held, so they raise nothing
        by themselves) or a run file that can no longer be written raises here, at a safe point."""
        while True:
            if STOP.requested.is_set():
                raise KeyboardInterrupt
            failure = getattr(writer, "failure", None)
            if failure is not None:
                raise failure
            if not running() or wait(running(), timeout=POLL_S, return_when=FIRST_COMPLETED)[0]:
                return

    def running() -> list[Future]:
        """The queries still being judged (the others wait for their line: an earlier query is not done)."""
        return [f for f in in_flight if not f.done()]

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
    # the LLM judge's calls share one pool of call slots (a batching judge shares batches instead)
    calls = CallPool(concurrency, stop=STOP.requested) if batching is None and not heuristic else None
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="judge") if calls is None else None
    in_flight: dict[Future, tuple[Query, SearchAnswer, Tally]] = {}

    def record_finished(everything: bool = False) -> None:
        """Record the queries done, in submission order: those before the first still running (all the
        done ones with ``everything``, at a stop: a query that did not finish gets no line)."""
        for future in list(in_flight):
            if not future.done():
                if everything:
                    continue
                return
            q, a, t = in_flight.pop(future)
            if not future.cancelled():
                record(q, a, future, None, t)

    def start(number: int, query: Query, answer: SearchAnswer, tally: Tally) -> Future:
        """Start judging one query: in the pool of query workers, or (shared call pool) a thread of its own."""
        args = (judge, query, answer, options.protocol, cache, human.get(query.id), log)
        if calls is None:
            assert pool is not None
            return pool.submit(task, *args, tally=tally)
        return detached(task, *args, tally=tally, calls=calls.lane(number), name=f"judge-query-{number + 1}")

    def stop_in_flight(why: str) -> None:
        """Stop at once (Ctrl+C, SIGTERM, a run file that cannot be written): no new call. A batch run
        abandons its batches (not canceled: ``--resume`` takes their results); a synchronous run waits up
        to 5 s for the calls in flight (a second signal ends the wait) and records them. Then no call
        still in a worker may start another request (``Budget.halt``)."""
        if batching is not None:
            # queries already judged are recorded; those waiting on a batch are not: --resume takes
            # their results from the batch
            finished = {future for future in in_flight if future.done()}
            pending = batching.abandon(hurry=STOP.urgent)
            for future in [f for f in in_flight if f not in finished]:
                in_flight.pop(future)  # waiting on a batch: no line
            record_finished(everything=True)
            for future in in_flight:
                future.cancel()
            in_flight.clear()
            # on stderr even with --quiet (a weekly cron run): what is paid for and how to get it
            picker = batching.resume_hint or f"`judge-runner evaluate --resume {getattr(writer, 'path', 'RUN.jsonl')}`"
            picks = "picks its results up" if why == "interrupted" else "picks up those the run file records"
            print(
                f"{why}: batch {', '.join(pending)} is still in flight and was NOT canceled; {picker} "
                f"{picks} without submitting again (cancel it in the provider's console or API to stop it)"
                if pending
                else f"{why}: no new calls",
                file=sys.stderr,
                flush=True,
            )
        else:
            alert(f"{why}: no new calls; waiting up to {STOP_WAIT_S:g} s for calls in flight (Ctrl+C again: no wait)")
            deadline = time.monotonic() + STOP_WAIT_S
            if calls is not None:
                calls.close(why)  # no waiting call starts: the queries waiting for one end without a line
            for future in list(in_flight):
                future.cancel()
            while time.monotonic() < deadline and not STOP.urgent.is_set():
                record_finished()
                if not running():
                    break
                wait(running(), timeout=min(POLL_S, max(0.0, deadline - time.monotonic())), return_when=FIRST_COMPLETED)
            record_finished(everything=True)
        if budget is not None:
            budget.halt(why)

    try:
        with STOP.raising():  # embedding the queries may take seconds: Ctrl+C stops it
            prepared = prepare_search(search, queries[:concurrency], options.search_mode, log)
        for number, query in enumerate(queries):
            if number == concurrency and prepared:  # the first calls are in flight: embed the rest while they wait for the model
                with STOP.raising():
                    prepare_search(search, queries[concurrency:], options.search_mode, log)
            while len(running()) >= concurrency:
                wait_any()
                record_finished()
            if STOP.requested.is_set():
                raise KeyboardInterrupt
            if must_stop():
                break  # no new call starts; calls in flight finish and are recorded below
            tally = Tally()
            try:
                with STOP.raising():  # a search may block for long and holds none of the run's locks
                    answer = search.search(query.query, mode=options.search_mode, limit=options.search_limit)
            except Exception as exc:  # noqa: BLE001
                record(query, None, None, exc, None)
                continue
            if batching is not None:
                batching.expect()
            in_flight[start(number, query, answer, tally)] = (query, answer, tally)
        if holding and batching is not None:
            holding = False
            batching.release()
        while in_flight:
            wait_any()
            record_finished()
        must_stop()  # a judgment cache that failed with the last queries is said too
    except KeyboardInterrupt:
        state.interrupt()
        stop_in_flight("interrupted")
    except StorageError as exc:  # the run file cannot be written (raised by wait_any): stop as Ctrl+C does
        storage_failed(exc, f"the run stops (the file keeps its complete lines); once there is room, {resume}")
        stop_in_flight("stopped")
    finally:
        if holding and batching is not None:
            batching.release()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if calls is not None:
            calls.shutdown()


@STOP.held()  # from the first line to the summary a signal only asks to stop (judge_all checks)
def run_evaluation(
    queries: list[Query],
    search: SearchBackend,
    judge: Judge,
    writer: RunWriter,
    run_start: dict,
    options: EvaluateOptions,
    budget: Budget | None = None,
    echo: Callable[[str], None] = print,
    log: Callable[[str], None] = lambda m: None,
    prior: list[dict] | None = None,
    cache: JudgmentCache | None = None,
    estimate: dict | None = None,
    prior_batches: list[dict] | None = None,
    alert: Callable[[str], None] | None = None,
) -> RunOutcome:
    """Evaluate ``queries``; writes run_start, one line per query as it is judged, and the summary.

    Never raises for a failed query: it becomes an ``error`` line. Ctrl+C stops new calls, keeps what
    is judged, writes the summary marked interrupted (status incomplete); the CLI turns SIGTERM into
    Ctrl+C. ``prior`` are evaluation lines of an interrupted run being resumed: they are copied first
    and count in the summary. A stopped phase one writes its run with ``judge_runner.app.steps.write_stopped_run``.
    ``cache``: the judgment cache labels go through (None: none). ``estimate``: what the run was estimated
    to cost at its start (:func:`judge_runner.app.dry_run.start_estimate`), kept in the summary.
    ``prior_batches``: the ``batch`` lines of the run being resumed (copied; a ``--batch`` judge picks
    their results up instead of submitting those requests again). ``alert``: where failed queries are
    said (default ``echo``; :attr:`judge_runner.core.printer.Printer.problems`).
    """
    started = time.monotonic()
    heuristic = is_heuristic(judge)
    state = begin_run(writer, run_start, len(queries), prior)
    batching = getattr(judge, "batching", None)
    for line in prior_batches or []:
        writer.write({**line, "runId": writer.run_id})
    if batching is not None and prior_batches:
        batching.resume(prior_batches)
    judge_all(
        queries, search, judge, state, writer, options, budget=budget, heuristic=heuristic, echo=echo, log=log, cache=cache, alert=alert
    )
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
