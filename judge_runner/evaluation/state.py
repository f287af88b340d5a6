"""A run's state from its first line to its summary: what was judged and failed, why it stopped
(interrupted, budget exhausted, phase one stopped), the run's end status and exit code, and the summary
line written at the end (:func:`end_run`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from judge_runner.core.failures import RunStatus, StorageError, exit_code_for
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.judging.advice import recommended_focus
from judge_runner.judging.fingerprint import fingerprint_key
from judge_runner.judging.pooled import Sources, build_pool, rescore, rescored_line, topic_of
from judge_runner.llm.budget import Budget
from judge_runner.llm.errors import AuthError, BudgetExhausted, SpendLimitError
from judge_runner.runs.corrected import bias_corrected
from judge_runner.runs.designed import LabelDesign
from judge_runner.runs.lines import SummaryLine, run_start_line
from judge_runner.runs.write import RunWriter, SummaryInputs, build_summary, utc_now

MAX_FAILED_SHARE = 0.25


@dataclass(frozen=True)
class RunEnd:
    """How a run ended: its status and the reasons for it (empty when ok), e.g. ``("interrupted",)``."""

    status: RunStatus
    reasons: tuple[str, ...] = ()


@dataclass
class RunOutcome:
    """What a run produced: the summary line, how it ended, and the run file's path (``unwritten``: why
    the summary could not be written into it, None when it was)."""

    summary: dict
    end: RunEnd
    path: str
    evaluations: list[dict] = field(default_factory=list)
    unwritten: str | None = None  # why the summary is not in the file (its disk is full), None when it is

    @property
    def status(self) -> RunStatus:
        """The run's status (ok, gate failed, incomplete, config error)."""
        return self.end.status

    @property
    def exit_code(self) -> int:
        """The process exit code the status maps to (``judge_runner.core.failures.exit_code_for``)."""
        return exit_code_for(self.end.status)


def stops_run(exc: BaseException | None) -> bool:
    """Whether a query that failed with ``exc`` stops the run when its line is recorded
    (:meth:`RunState.record_error`): a spent budget, a spend limit, a refused API key."""
    return isinstance(exc, (BudgetExhausted, SpendLimitError, AuthError))


# when two stops meet (a refused key and a spent budget in flight at once), the graver one wins
_GRAVITY = {RunStatus.OK: 0, RunStatus.GATE_FAILED: 1, RunStatus.INCOMPLETE: 2, RunStatus.CONFIG_ERROR: 3}


@dataclass
class RunState:
    """What a run has recorded so far and whether (and why) it must stop starting calls.

    Its operations are pure (no I/O, no clock, no threads): the run loop writes a line, then records it
    here. ``total`` counts the queries of the run, copied ones of a resumed run included.
    """

    total: int
    systems: int = 1
    """Search systems the run judges the queries on (a compare run's; ``total`` counts every system's queries)."""
    evaluations: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    interrupted: bool = False
    budget_exhausted: bool = False
    stop_status: RunStatus | None = None
    stop_reason: str | None = None
    label_designs: dict[str, LabelDesign] = field(default_factory=dict)
    """Human qrels sets in use drawn by ``label --budget`` (:func:`judge_runner.judging.qrels.drawn_designs`): their
    labels are weighted by the probabilities they were drawn with."""
    sources: Sources = field(default_factory=Sources)
    """Where the pooled qrels take grades from beyond the run's lines (the judgment cache, people's sets, the judge key)."""
    said: set[str] = field(default_factory=set)
    """Warnings already said (one per run, not one per system)."""
    scored: list[dict] | None = None
    """The evaluation lines re-scored against the run's pooled qrels (:func:`pooled_lines`), set by :func:`end_run`."""
    summarised: bool = False
    """True once :func:`end_run` wrote (or tried to write) the summary."""

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
    queries of a system failed: :func:`over_failed_share`); then a failed quality gate (``gate`` is the
    summary's ``qualityGate`` block)."""
    if state.stop_status is RunStatus.CONFIG_ERROR:
        return RunEnd(RunStatus.CONFIG_ERROR, (state.stop_reason or "config_error",))
    reasons: list[str] = []
    if state.interrupted:
        reasons.append("interrupted")
    if budget_exhausted and "budget_exhausted" not in reasons:
        reasons.append("budget_exhausted")
    if state.stop_status is RunStatus.INCOMPLETE and state.stop_reason and state.stop_reason not in reasons:
        reasons.append(state.stop_reason)
    per_system = state.total / state.systems
    counts: dict[str | None, tuple[int, int]] = {}
    for line in state.errors:
        failed, _ = counts.get(line.get("system"), (0, 0))
        counts[line.get("system")] = (failed + 1, round(per_system))
    for system, (failed, of) in over_failed_share(counts).items():
        named = f"{system}: " if system else ""
        reasons.append(f"{named}{failed} of {of} queries failed (more than {MAX_FAILED_SHARE:.0%})")
    if reasons:
        return RunEnd(RunStatus.INCOMPLETE, tuple(reasons))
    if gate is not None and not gate["passed"]:
        overall = "none evaluated" if gate["overall"] is None else f"{gate['overall']:.3f}"
        return RunEnd(RunStatus.GATE_FAILED, (f"average overall {overall} is below --min-overall {gate['minOverall']}",))
    return RunEnd(RunStatus.OK)


def over_failed_share(counts: Mapping[str | None, tuple[int, int]]) -> dict[str | None, tuple[int, int]]:
    """The failure gate, per system: of ``counts`` (``{system: (failed, queries)}``, None for a run's one
    unnamed search), the systems more than ``MAX_FAILED_SHARE`` of whose queries failed. Per system, so a
    system that failed 5 of its 14 queries fails the run though the run's other system failed none."""
    return {system: (failed, of) for system, (failed, of) in counts.items() if of and failed / of > MAX_FAILED_SHARE}


def begin_run(writer: RunWriter, run_start: dict, new_queries: int, prior: list[dict] | None = None, *, systems: int = 1) -> RunState:
    """Write the ``run_start`` line and copy ``prior`` (evaluation lines of a run being resumed, given the
    new file's runId); returns the state of a run of ``new_queries`` more queries (every system's: ``systems``)."""
    writer.write(run_start_line(writer.run_id, utc_now(), run_start))
    state = RunState(total=new_queries + len(prior or []), systems=systems)
    fingerprint = (run_start.get("provenance") or {}).get("judgeFingerprint")
    state.sources = Sources(judge_key=fingerprint_key(fingerprint) if fingerprint else None)
    for line in prior or []:
        line = {**line, "runId": writer.run_id}
        writer.write(line)
        state.record_evaluation(line)
    return state


@dataclass(frozen=True, kw_only=True)
class RunFinish:
    """What the summary needs beside the run's state: ``started``, a ``time.monotonic()`` value (the
    duration is counted from it, in seconds); the ``budget`` (usage and cost; None: not tracked);
    ``estimate``, the start's :meth:`judge_runner.estimate.costs.ModelEstimate.summary_block`; ``batch``,
    :meth:`judge_runner.llm.batch_exchange.BatchStats.as_dict` of a ``--batch`` run; ``carried``, the
    evaluation lines a resumed run copied (their usage and cost, paid by the earlier process, are added:
    :func:`carried_usage`)."""

    started: float
    budget: Budget | None = None
    heuristic: bool = False
    judge_is_generator: bool = False
    estimate: dict | None = None
    batch: dict | None = None
    carried: list[dict] | None = None


def end_run(state: RunState, writer: RunWriter, options: EvaluateOptions, finish: RunFinish) -> RunOutcome:
    """Build the ``summary`` line from the lines scored against the run's pooled qrels (:func:`pooled_lines`),
    with the quality gate and the recommended focus; write it, close the file, and return the outcome. A
    summary the file cannot take (a full disk) makes the run incomplete."""
    budget, carried = finish.budget, finish.carried
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
    scored, qrels = pooled_lines(state, options)
    focus = recommended_focus(scored, options.weights, options.search_limit)
    summary = build_summary(
        writer.run_id,
        scored,
        state.errors,
        state.total,
        SummaryInputs(
            interrupted=state.interrupted,
            budget_exhausted=budget_exhausted,
            cost_usd=cost,
            usage=usage,
            duration_s=time.monotonic() - finish.started,
            heuristic=finish.heuristic,
            stop_reason=stop_reason,
            judge_mode=options.judge_mode,
            trials=options.trials,
            judge_is_generator=finish.judge_is_generator,
            cache_saved_usd=budget.total_saved_usd if budget is not None else 0.0,
            recommended_focus=focus.text() if focus is not None else None,
            focus_evidence=focus.block() if focus is not None else None,
        ),
    )
    gate = None
    if options.min_overall is not None:
        overall = summary["averageScores"]["overall"] if summary["averageScores"] else None
        gate = {"minOverall": options.min_overall, "overall": overall, "passed": overall is not None and overall >= options.min_overall}
        summary["qualityGate"] = gate
    summary["estimate"], summary["qrels"] = finish.estimate, qrels
    summary["cacheWarning"] = cache_warning(finish.estimate, usage)
    if state.label_designs:  # labels drawn by a budget: weighted by their probabilities (a compare run's writer alike)
        summary["biasCorrected"] = bias_corrected(scored, designs=state.label_designs)
    if finish.batch is not None:
        summary["batch"] = finish.batch
    unwritten = None
    try:
        writer.write(summary)
    except StorageError as exc:  # a full disk: the run is incomplete, and says so where it can (stderr)
        unwritten = exc.message
        state.stop(RunStatus.INCOMPLETE, exc.reason)
    state.summarised = True
    writer.close()
    end = end_status(state, budget_exhausted=budget_exhausted, gate=gate)
    return RunOutcome(summary, end, str(writer.path), state.evaluations, unwritten)


@contextmanager
def summary_on_crash(state: RunState, writer: RunWriter) -> Iterator[None]:
    """Around a run from its first line to its summary: an exception that escapes before :func:`end_run` wrote
    the summary (a bug) leaves a summary saying the run was cut short (``stopReason``: ``internal error: <type>``,
    never the message, which may hold a secret), so the file reads as incomplete and ``evaluate --resume``
    continues it. The exception is raised again."""
    try:
        yield
    except BaseException as exc:
        if not state.summarised:
            cut = SummaryLine(
                runId=writer.run_id,
                timestamp=utc_now(),
                totalQueries=state.total,
                evaluated=len(state.evaluations),
                failed=len(state.errors),
                interrupted=state.interrupted,
                budgetExhausted=state.budget_exhausted,
                stopReason=f"internal error: {type(exc).__name__}",
            )
            try:
                writer.write(cut.model_dump(by_alias=True, mode="json"))
            except (StorageError, ValueError):  # a full disk or a closed file: the exception below says what failed
                pass
        writer.close()
        raise


def pooled_lines(state: RunState, options: EvaluateOptions) -> tuple[list[dict], dict | None]:
    """``(lines, qrels block)``: the run's evaluation lines re-scored against its pooled qrels
    (:mod:`judge_runner.judging.pooled`: every system's labels, ``state.sources``' judgment cache and people's
    grades), as new dicts (kept as ``state.scored``), and the summary's ``qrels`` block (None without a scored
    query)."""
    lines = state.evaluations
    models = {m for line in lines for m in line.get("judgeModelsReturned") or []}
    pool = build_pool([("run", lines)], state.sources, models)
    new = rescore(lines, pool, depth=options.search_limit, weights=options.weights)
    scored = state.scored = [rescored_line(line, n) for line, n in zip(lines, new)]
    topics = [topic_of(line) for line in scored if line.get("metrics") is not None]
    return scored, pool.block(topics) if topics else None


def carried_usage(lines: list[dict]) -> dict[str, Any]:
    """The usage of evaluation lines copied from an interrupted run: ``inputTokens``, ``outputTokens``,
    ``calls`` (0 for lines written before they recorded it) and ``costUsd`` (USD; None when any line's cost is
    unknown). A resumed file's summary adds them to its own process's usage: the resumed file carries
    the whole run, each request paid once (docs/batch.md: which file carries what)."""
    out: dict[str, Any] = {"inputTokens": 0, "outputTokens": 0, "calls": 0, "costUsd": 0.0}
    for line in lines:
        usage = line.get("usage") or {}
        out["inputTokens"] += int(usage.get("inputTokens") or 0)
        out["outputTokens"] += int(usage.get("outputTokens") or 0)
        out["calls"] += int(usage.get("calls") or 0)
        if out["costUsd"] is not None and usage:
            out["costUsd"] = None if usage.get("costUsd") is None else out["costUsd"] + float(usage["costUsd"])
    return out


def cache_warning(estimate: dict | None, usage: dict) -> str | None:
    """The summary's ``cacheWarning``: the start's estimate expected prompt-cache reads (its
    ``cacheReadTokens``) and the run made calls, but the provider reported no token read from the cache;
    None otherwise (no estimate, none expected, or reads reported)."""
    expected = int((estimate or {}).get("cacheReadTokens") or 0)
    if expected <= 0 or usage.get("calls", 0) < 2 or usage.get("cacheReadTokens", 0) > 0:
        return None
    return (
        f"the estimate expected about {expected:,} input tokens read from the prompt cache, the provider reported none: "
        "the cached prefix (tool schema and system prompt) changed between calls, or the provider did not cache it "
        "(a minimum above the prefix, a cache that expired between calls)"
    )
