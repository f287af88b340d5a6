"""Phase two's run loop: search each query, judge it (concurrently), record it the moment it is judged.

In parts: :class:`RunState` (pure record and stop operations), :func:`begin_run` (run_start and the
copied lines of a resumed run), :class:`RunLoop` (one pass over a query set: owns the workers, records
the lines in order, stops), :func:`end_run` (the summary and the run's :class:`RunEnd`: a
:class:`~judge_runner.core.failures.RunStatus` with reasons). What a run is given is one
:class:`~judge_runner.evaluation.context.RunContext`, built by the job. The command line maps the status
to an exit code (``judge_runner.core.failures.exit_code_for``) and installs the signal handlers; this
module installs none.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any

from judge_runner.core.failures import EXIT_CONFIG, EXIT_GATE, EXIT_INCOMPLETE, EXIT_OK, JudgeRunnerError, RunStatus, StorageError
from judge_runner.core.interrupts import STOP
from judge_runner.core.models import Query
from judge_runner.evaluation.context import RunContext, RunOutput
from judge_runner.evaluation.lines import batch_line, error_line, evaluation_line, provenance
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.evaluation.state import (
    MAX_FAILED_SHARE,
    RunEnd,
    RunFinish,
    RunOutcome,
    RunState,
    begin_run,
    end_run,
    end_status,
    stops_run,
    summary_on_crash,
)
from judge_runner.judging.cache_failures import CacheError
from judge_runner.judging.call_pool import CallPool, detached
from judge_runner.judging.labelling import Channel, QueryJudgment, Tally, judge_query
from judge_runner.judging.protocol import Judge
from judge_runner.judging.qrels import drawn_designs, people_grades
from judge_runner.llm.errors import CallsStopped
from judge_runner.runs.write import RunWriter
from judge_runner.search.base import SearchAnswer, SearchBackend
from judge_runner.search.prepare import prepare_search

__all__ = [
    "EXIT_CONFIG",
    "EXIT_GATE",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "MAX_FAILED_SHARE",
    "EvaluateOptions",
    "RunContext",
    "RunEnd",
    "RunLoop",
    "RunOutcome",
    "RunOutput",
    "RunState",
    "RunStatus",
    "begin_run",
    "end_run",
    "end_status",
    "error_line",
    "evaluation_line",
    "is_heuristic",
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


class RunLoop:
    """One pass of phase two over a query set into ``writer`` (lines counted in ``state``), as ``ctx`` says.
    :meth:`run` searches each query in the calling thread and judges it; lines are written in query order.

    Scheduling: every query in flight shares one :class:`~judge_runner.judging.call_pool.CallPool` of
    ``options.concurrency`` call slots (earlier queries first), up to ``concurrency`` queries at once. The
    heuristic judge takes one query at a time. A batching judge (``--batch``) takes every query at once, so
    their calls leave together; each ``batch`` line is written the moment its batch exists.

    Stops: no new call starts once ``state.stopped``, the budget is exhausted or the judgment cache failed;
    calls in flight finish and are recorded. A failed query never raises: it becomes an ``error`` line with
    what it spent. A stop request (:data:`judge_runner.core.interrupts.STOP`, or KeyboardInterrupt from a
    search) waits up to :data:`STOP_WAIT_S` for calls in flight (a second signal ends the wait) and marks
    the state interrupted; queries still waiting get no line. Under ``--batch`` the wait ends at once and
    stderr says the batch was not canceled (``--resume`` takes its results). A run file that cannot take a
    line (StorageError) stops the run the same way, said on stderr with the file's path.
    """

    def __init__(self, ctx: RunContext, state: RunState, writer: RunWriter) -> None:
        self.ctx, self.state, self.writer = ctx, state, writer
        self.options = ctx.options
        self.out: RunOutput = ctx.output
        self.human: dict[str, dict[str, int]] = {}
        state.sources = replace(state.sources, cache=ctx.cache, names=ctx.options.human_qrels)  # the pooled qrels' sources
        self.said: set[str] = set()  # storage failures already said on stderr
        self.resume = f"`judge-runner evaluate --resume {writer.path}` continues the run"
        self.batching: Any = getattr(ctx.judge, "batching", None)  # --batch: every query at once, so their calls share batches
        self.in_flight: dict[Future, tuple[Query, SearchAnswer, Tally]] = {}
        self.concurrency = 1
        self.task: Callable[..., Any] = judge_query
        self.calls: CallPool | None = None
        self.pool: ThreadPoolExecutor | None = None
        self.holding = False  # the loop's own place with the batch coordinator (no batch leaves while queries start)

    # -- the pass ---------------------------------------------------------------------------------------

    def run(self, queries: list[Query], search: SearchBackend) -> None:
        """Search and judge every query of ``queries`` on ``search`` (see the class): returns when each is
        recorded or the run stopped. Raises nothing for a failed query or a stop."""
        self._people(queries)
        self._open_workers(len(queries))
        try:
            self._search_and_start(queries, search)
            self._release_hold()
            while self.in_flight:
                self.wait_any()
                self.record_finished()
            self.must_stop()  # a judgment cache that failed with the last queries is said too
        except KeyboardInterrupt:
            self.state.interrupt()
            self.stop_in_flight("interrupted")
        except StorageError as exc:  # the run file cannot be written (raised by wait_any): stop as Ctrl+C does
            self.storage_failed(exc, f"the run stops (the file keeps its complete lines); once there is room, {self.resume}")
            self.stop_in_flight("stopped")
        finally:
            self._release_hold()
            if self.pool is not None:
                self.pool.shutdown(wait=False, cancel_futures=True)
            if self.calls is not None:
                self.calls.shutdown()

    def _open_workers(self, n_queries: int) -> None:
        """How many queries are judged at once and by what: the heuristic judge shares one embedding model
        and is CPU-bound (one at a time); a batching judge takes every query at once; the LLM judge's calls
        share one pool of call slots."""
        self.concurrency = 1 if self.ctx.heuristic else max(1, self.options.concurrency)
        if self.batching is not None:
            run_id = self.writer.run_id
            self.batching.record = lambda fields: self.writer.write(batch_line(run_id, fields))
            self.batching.note = self.out.log
            self.concurrency = max(1, n_queries)
            self.task = self.batching.as_unit(judge_query)
            self.batching.expect()  # the loop's own place: no batch leaves while queries are still being started
            self.holding = True
        if self.batching is None and not self.ctx.heuristic:
            self.calls = CallPool(self.concurrency, stop=STOP.requested)
        else:
            self.pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="judge")

    def _release_hold(self) -> None:
        if self.holding and self.batching is not None:
            self.holding = False
            self.batching.release()

    def _search_and_start(self, queries: list[Query], search: SearchBackend) -> None:
        """Search each query in turn and start judging it, at most ``concurrency`` at once. The queries are
        embedded ahead of their searches (:func:`~judge_runner.search.prepare.prepare_search`) in two steps:
        the first ``concurrency`` before the first search, the rest once those are being judged, so
        embedding overlaps the model's replies and no search waits for the model. Raises KeyboardInterrupt
        on a stop request."""
        mode, log = self.options.search_mode, self.out.log
        with STOP.raising():  # embedding the queries may take seconds: Ctrl+C stops it
            prepared = prepare_search(search, queries[: self.concurrency], mode, log)
        for number, query in enumerate(queries):
            if number == self.concurrency and prepared:  # the first calls are in flight: embed the rest while they wait for the model
                with STOP.raising():
                    prepare_search(search, queries[self.concurrency :], mode, log)
            while len(self.running()) >= self.concurrency:
                self.wait_any()
                self.record_finished()
            if STOP.requested.is_set():
                raise KeyboardInterrupt
            if self.must_stop():
                return  # no new call starts; calls in flight finish and are recorded by the caller
            tally = Tally()
            try:
                with STOP.raising():  # a search may block for long and holds none of the run's locks
                    answer = search.search(query.query, mode=mode, limit=self.options.search_limit, intent=query.queryIntent)
            except Exception as exc:  # noqa: BLE001
                self.record(query, None, None, exc, None)
                continue
            if self.batching is not None:
                self.batching.expect()
            self.in_flight[self.start(number, query, answer, tally)] = (query, answer, tally)

    def _people(self, queries: list[Query]) -> None:
        """People's grades of ``queries``, matched by id and text (:class:`~judge_runner.judging.qrels.PeopleGrades`);
        grades stored without a text are bound to these queries' texts. Sets left out are warned of once."""
        cache, names = self.ctx.cache, self.options.human_qrels
        texts = {q.id: q.query for q in queries}
        try:
            people = people_grades(cache, names)
            self.state.label_designs.update(drawn_designs(cache, names, texts))
            unbound = people.unbound(texts)
            if cache is not None and unbound:
                cache.bind_human_texts(names, unbound)
        except CacheError:
            return  # the cache's failure is kept on it and stops the run
        self.human = {qid: grades for qid, text in texts.items() if (grades := people.for_query(qid, text))}
        for line in people.warnings():
            if line not in self.state.said:
                self.state.said.add(line)
                self.out.problems(line)

    def start(self, number: int, query: Query, answer: SearchAnswer, tally: Tally) -> Future:
        """Start judging one query: in the pool of query workers, or (shared call pool) a thread of its own."""
        args = (self.ctx.judge, query, answer, self.options.protocol, self.human.get(query.id))
        via = Channel(self.ctx.cache, tally, self.out.log, self.calls.lane(number) if self.calls is not None else None)
        if self.calls is None:
            assert self.pool is not None
            return self.pool.submit(self.task, *args, via=via)
        return detached(self.task, *args, via=via, name=f"judge-query-{number + 1}")

    # -- waiting and recording --------------------------------------------------------------------------

    def running(self) -> list[Future]:
        """The queries still being judged (the others wait for their line: an earlier query is not done)."""
        return [f for f in self.in_flight if not f.done()]

    def wait_any(self) -> None:
        """Wait for a query in flight to end. A stop request (Ctrl+C, SIGTERM: held, so they raise nothing
        by themselves) or a run file that can no longer be written raises here, at a safe point."""
        while True:
            if STOP.requested.is_set():
                raise KeyboardInterrupt
            failure = self.writer.failure
            if failure is not None:
                raise failure
            if not self.running() or wait(self.running(), timeout=POLL_S, return_when=FIRST_COMPLETED)[0]:
                return

    def record_finished(self, everything: bool = False) -> None:
        """Record the queries done, in submission order: those before the first still running (all the
        done ones with ``everything``, at a stop: a query that did not finish gets no line)."""
        for future in list(self.in_flight):
            if not future.done():
                if everything:
                    continue
                return
            q, a, t = self.in_flight.pop(future)
            if not future.cancelled():
                self.record(q, a, future, None, t)

    def record(
        self, query: Query, answer: SearchAnswer | None, future: Future | None, exc: BaseException | None, tally: Tally | None
    ) -> None:
        """Write one query's line: its evaluation, else (a failed search or judge) its error line. A line is
        written, then counted: a run file that cannot take it (a full disk) stops the run, and the summary
        counts only the lines in the file (no signal lands in between: the run is held). A query stopped
        before all its calls were made gets no line (``--resume`` judges it)."""
        if exc is None and future is not None and answer is not None:
            try:
                outcome = future.result()
            except CallsStopped:
                return
            except BaseException as caught:  # noqa: BLE001 - every failure is recorded, none stops the run by itself
                exc = caught
            else:
                self._record_evaluation(query, answer, outcome)
                return
        stage = "search" if future is None else "judge"
        failure = exc if exc is not None else RuntimeError("no outcome")
        line = error_line(self.writer.run_id, query, stage, failure, tally)
        if not self.write(line):
            return
        self.state.record_error(line, failure)
        self.out.problems(
            f'[{self.state.done}/{self.state.total}] "{query.query}" - {stage} failed: {line["errorType"]}: {line["message"][:160]}'
        )

    def _record_evaluation(self, query: Query, answer: SearchAnswer, outcome: QueryJudgment) -> None:
        line = evaluation_line(self.writer.run_id, query, answer, outcome, self.options.search_limit)
        if not self.write(line):
            return
        self.state.record_evaluation(line)
        overall = line["scores"]["overall"]
        shown = f"overall: {overall:.2f}" if overall is not None else f"off-topic, {'abstained' if line['abstained'] else 'ANSWERED'}"
        cached = f" ({line['labelsCached']} labels cached)" if line["labelsCached"] else ""
        label = " (heuristic judge)" if self.ctx.heuristic else ""
        self.out.echo(f'[{self.state.done}/{self.state.total}] "{query.query}" - {shown}{cached}{label}')

    def write(self, line: dict) -> bool:
        """Write ``line`` to the run file; False (the run stopping, said once) when the file cannot take it."""
        try:
            self.writer.write(line)
        except StorageError as exc:
            self.storage_failed(exc, f"the run stops (the file keeps its complete lines); once there is room, {self.resume}")
            return False
        return True

    # -- stopping ---------------------------------------------------------------------------------------

    def storage_failed(self, error: JudgeRunnerError, consequence: str) -> None:
        """A file the run writes failed (the run file, the judgment cache): stop starting work, say it once."""
        self.state.stop(RunStatus.INCOMPLETE, getattr(error, "reason", "storage_error"))
        if error.message not in self.said:
            self.said.add(error.message)
            print(f"error: {error.message}. {consequence[0].upper()}{consequence[1:]}", file=sys.stderr, flush=True)

    def must_stop(self) -> bool:
        """Whether no new query may start: the run is stopped, the budget spent, or the judgment cache
        failed; or a query failed in a way that stops the run, its line waiting for an earlier query's."""
        failure = self.ctx.cache.failure if self.ctx.cache is not None else None
        if failure is not None:
            consequence = f"no new query starts (those started finish, their labels in their lines); once it is fixed, {self.resume}"
            self.storage_failed(failure, consequence)
        held = any(f.done() and not f.cancelled() and stops_run(f.exception()) for f in self.in_flight)
        return self.state.stopped or held or self.ctx.stopped_by_budget

    def stop_in_flight(self, why: str) -> None:
        """Stop at once (Ctrl+C, SIGTERM, a run file that cannot be written): no new call. A batch run
        abandons its batches (:meth:`_abandon_batches`); a synchronous run waits for the calls in flight
        (:meth:`_drain`). Then no call still in a worker may start another request (``Budget.halt``)."""
        if self.batching is not None:
            self._abandon_batches(why)
        else:
            self._drain(why)
        if self.ctx.budget is not None:
            self.ctx.budget.halt(why)

    def _abandon_batches(self, why: str) -> None:
        """Record the queries already judged; those waiting on a batch get no line (``--resume`` takes their
        results from the batch, which is NOT canceled); say so on stderr, even with ``--quiet``."""
        finished = {future for future in self.in_flight if future.done()}
        pending = self.batching.abandon(hurry=STOP.urgent)
        for future in [f for f in self.in_flight if f not in finished]:
            self.in_flight.pop(future)  # waiting on a batch: no line
        self.record_finished(everything=True)
        for future in self.in_flight:
            future.cancel()
        self.in_flight.clear()
        picker = self.batching.resume_hint or f"`judge-runner evaluate --resume {self.writer.path}`"
        picks = "picks its results up" if why == "interrupted" else "picks up those the run file records"
        print(
            f"{why}: batch {', '.join(pending)} is still in flight and was NOT canceled; {picker} "
            f"{picks} without submitting again (cancel it in the provider's console or API to stop it)"
            if pending
            else f"{why}: no new calls",
            file=sys.stderr,
            flush=True,
        )

    def _drain(self, why: str) -> None:
        """Wait up to STOP_WAIT_S seconds for the calls in flight (a second signal ends the wait) and record
        the queries they finish; no waiting call starts (the queries waiting for one end without a line)."""
        self.out.problems(f"{why}: no new calls; waiting up to {STOP_WAIT_S:g} s for calls in flight (Ctrl+C again: no wait)")
        deadline = time.monotonic() + STOP_WAIT_S
        if self.calls is not None:
            self.calls.close(why)
        for future in list(self.in_flight):
            future.cancel()
        while time.monotonic() < deadline and not STOP.urgent.is_set():
            self.record_finished()
            if not self.running():
                break
            wait(self.running(), timeout=min(POLL_S, max(0.0, deadline - time.monotonic())), return_when=FIRST_COMPLETED)
        self.record_finished(everything=True)


def pick_up_batches(ctx: RunContext, writer: RunWriter, prior_batches: list[dict] | None) -> Any:
    """The judge's batching (None: not batched), after copying ``prior_batches`` (an earlier process's
    ``batch`` lines) into ``writer`` and handing them to it, so their results are picked up, not asked again."""
    batching = getattr(ctx.judge, "batching", None)
    for line in prior_batches or []:
        writer.write({**line, "runId": writer.run_id})
    if batching is not None and prior_batches:
        batching.resume(prior_batches)
    return batching


@STOP.held()  # from the first line to the summary a signal only asks to stop (RunLoop checks)
def run_evaluation(
    queries: list[Query],
    search: SearchBackend,
    writer: RunWriter,
    run_start: dict,
    ctx: RunContext,
    *,
    prior: list[dict] | None = None,
    estimate: dict | None = None,
    prior_batches: list[dict] | None = None,
) -> RunOutcome:
    """Evaluate ``queries`` on ``search`` as ``ctx`` says; writes run_start, one line per query as it is
    judged (:class:`RunLoop`), and the summary.

    Never raises for a failed query: it becomes an ``error`` line. Ctrl+C stops new calls, keeps what
    is judged, writes the summary marked interrupted (status incomplete); the CLI turns SIGTERM into
    Ctrl+C. ``prior`` are evaluation lines of an interrupted run being resumed: they are copied first
    and count in the summary. A stopped phase one writes its run with ``judge_runner.app.steps.write_stopped_run``.
    ``estimate``: what the run was estimated to cost at its start
    (:func:`judge_runner.estimate.start.start_estimate`), kept in the summary. ``prior_batches``: the ``batch``
    lines of the run being resumed (copied; a ``--batch`` judge picks their results up instead of submitting
    those requests again).
    """
    started = time.monotonic()
    state = begin_run(writer, run_start, len(queries), prior)
    with summary_on_crash(state, writer):
        batching = pick_up_batches(ctx, writer, prior_batches)
        RunLoop(ctx, state, writer).run(queries, search)
        circular = bool((run_start.get("provenance") or {}).get("judgeIsGenerator"))
        batch = batching.stats.as_dict() if batching is not None else None
        finish = RunFinish(
            started=started,
            budget=ctx.budget,
            heuristic=ctx.heuristic,
            judge_is_generator=circular,
            estimate=estimate,
            batch=batch,
            carried=prior,
        )
        return end_run(state, writer, ctx.options, finish)
