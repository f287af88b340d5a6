"""The ``weekly`` job (the cron job): under a lock, with everything printed mirrored into a log, index,
judge the pinned query set (or write and pin one), report, prune, and fail on a regression when asked.
"""

from __future__ import annotations

import fcntl
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from judge_runner.analysis.report import build_report
from judge_runner.analysis.trend import build_trend, read_baseline
from judge_runner.app.crashlog import internal_error, traceback_text
from judge_runner.app.history import reading_cache
from judge_runner.app.indexing import require_folder
from judge_runner.app.inputs import (
    close_systems,
    load,
    load_query_set,
    open_search_systems,
    resolve_systems,
    warn_missing_sources,
)
from judge_runner.app.steps import (
    RunInputs,
    evaluate_queries,
    open_job,
    phase_one,
)
from judge_runner.config import Settings
from judge_runner.core.failures import (
    EXIT_CONFIG,
    EXIT_INCOMPLETE,
    GateFailedError,
    JudgeRunnerError,
    RunStatus,
    exit_code_for,
)
from judge_runner.core.ids import sort_key
from judge_runner.core.printer import Printer
from judge_runner.evaluation.state import RunOutcome
from judge_runner.human.sessions import needed_runs, session_journals
from judge_runner.runs.read import is_baseline, read_run_file, run_id_of
from judge_runner.search.systems import SystemsSpec


def prune_runs(
    results: Path,
    keep: int,
    needed: Mapping[str, str] | None = None,
    say: Callable[[str], None] | None = None,
    given: Mapping[Path, str] | None = None,
) -> list[Path]:
    """Delete all but the newest ``keep`` run files and their query sets; never the baseline, a file a label
    session still needs (``needed``: ``{file name: why}``), a file the command was given (``given``: ``{path:
    why}``), nor a ``.jsonl`` file that is no run. Returns the deleted run files."""
    baseline = read_baseline(results)
    kept_files = {path.resolve(): why for path, why in (given or {}).items()}
    runs = [path for path in results.glob("*.jsonl") if run_id_of(path) is not None]
    runs.sort(key=lambda p: sort_key(p.stem))  # oldest first, old names among new
    deleted = []
    for path in runs[: max(0, len(runs) - keep)]:
        why = "the baseline" if is_baseline(path, baseline) else (needed or {}).get(path.name) or kept_files.get(path.resolve())
        if why is not None:
            if say is not None:
                say(f"weekly --keep {keep}: kept {path.name}: {why}")
            continue
        path.unlink()
        deleted.append(path)
        if say is not None:
            say(f"weekly --keep {keep}: deleted {path.name} (older than the newest {keep}; no label session or baseline needs it)")
        queries = path.with_suffix(".queries.json")
        if queries.resolve() in kept_files:
            if say is not None:
                say(f"weekly --keep {keep}: kept {queries.name}: {kept_files[queries.resolve()]}")
        else:
            queries.unlink(missing_ok=True)
    return deleted


# -- weekly -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WeeklyPlan:
    """The ``weekly`` command's options."""

    fixtures: Path
    queries_path: Path | None
    regenerate: bool
    count_given: bool
    results: Path
    reports: Path
    keep: int
    log_path: Path | None
    fail_on_regression: bool


class _Tee:
    """Mirror a text stream into a log file."""

    def __init__(self, stream: IO[str], log: IO[str]):
        self.stream, self.log = stream, log

    def write(self, text: str) -> int:
        self.log.write(text)
        self.log.flush()
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()
        self.log.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def weekly_run(flags: dict[str, Any], plan: WeeklyPlan, printer: Printer, systems: SystemsSpec | None = None) -> RunStatus:
    """``weekly``: take ``RESULTS/.weekly.lock`` (held: one stderr line and RunStatus.SKIPPED, nothing
    touched), mirror output into the log, run :func:`weekly_steps`. The log ends ``=== exit N ===``; a
    failure is logged and raised again (an unexpected one as an InternalError naming the log: exit 4)."""
    plan.results.mkdir(parents=True, exist_ok=True)
    log_path = plan.log_path or plan.results / "weekly.log"
    with open(plan.results / ".weekly.lock", "w") as lock_file:  # released when the file closes, even on a crash
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            printer.err(f"weekly skipped: another weekly run holds {plan.results / '.weekly.lock'}")
            return RunStatus.SKIPPED  # that run is doing the job: exit 0, so cron reports no failure
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"\n=== judge-runner weekly {datetime.now(UTC).isoformat(timespec='seconds')} ===\n")
            real_out, real_err = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = _Tee(real_out, log), _Tee(real_err, log)
            code = EXIT_CONFIG
            try:
                status = weekly_steps(load(flags), plan, printer, systems)
                code = exit_code_for(status)
                return status
            except JudgeRunnerError as exc:
                code = exc.exit_code
                log.write(exc.display() + "\n")  # the entry point prints it once the streams are restored
                raise
            except KeyboardInterrupt:
                code = EXIT_INCOMPLETE
                raise
            except Exception as exc:  # a bug: its traceback goes into this log, the entry point prints one line
                error = internal_error(exc, log_path)
                code = error.exit_code
                log.write(traceback_text(exc) + error.display() + "\n")
                raise error from exc
            finally:
                sys.stdout, sys.stderr = real_out, real_err
                log.write(f"=== exit {code} ===\n")


def weekly_batches_in_flight(results: Path, printer: Printer) -> list[dict] | None:
    """The ``batch`` lines of weekly's previous run if it stopped with batches in flight (Ctrl+C, or killed),
    so this run picks their results up rather than paying twice; None when there is none."""
    for path in sorted(results.glob("*.jsonl"), key=lambda p: sort_key(p.stem), reverse=True):
        try:
            run = read_run_file(path)
        except OSError:
            continue
        if not run.is_run:
            continue
        summary = run.summary.model_dump(by_alias=True) if run.summary is not None else None
        in_flight = ((summary or {}).get("batch") or {}).get("inFlight") if summary is not None else None
        if run.batches and (summary is None or in_flight):
            printer.note(f"weekly: the previous run {path.name} left {len(run.batches)} batch(es) in flight; picking their results up")
            return [line.line() for line in run.batches]
        return None  # the newest run ended with nothing in flight
    return None


def weekly_steps(settings: Settings, plan: WeeklyPlan, printer: Printer, systems: SystemsSpec | None = None) -> RunStatus:
    """The weekly job without lock and log: index; the pinned set (or generate and pin one); evaluate the
    systems chosen as ``evaluate`` chooses them; report; prune. Raises GateFailedError on a regression."""
    pinned = plan.results / "pinned-queries.json"
    regenerate = plan.regenerate
    if plan.count_given and not regenerate and (plan.queries_path or pinned.is_file()):
        printer.err("note: --count applies only when a query set is generated; using the pinned set (--regenerate for a new one)")
    if plan.queries_path is None and not regenerate and not pinned.is_file():
        printer.err(f"no pinned query set in {plan.results}: generating one (phase one) and pinning it")
        regenerate = True
    require_folder(plan.fixtures)
    given = None if regenerate else load_query_set(plan.queries_path or pinned)
    job = open_job(settings, plan.fixtures, plan.results, printer, need_generator=regenerate)
    with job.index:
        # opened before phase one spends anything: a bad flag or an unset token variable stops the job here
        job = replace(
            job,
            systems=open_search_systems(
                settings, resolve_systems(settings, systems), job.index, plan.fixtures, given.queries if given else [], printer
            ),
        )
        try:
            generation, card = None, None
            if given is None:
                first = phase_one(job, plan.fixtures)
                if isinstance(first, RunOutcome):
                    return first.status
                pinned.write_text(first.query_set().to_json(), encoding="utf-8")
                generation, queries = first, first.queries
            else:
                queries, card = given.queries, given.card
            warn_missing_sources(job.index, queries, settings.index_label, printer.err)
            prior = weekly_batches_in_flight(plan.results, printer) if settings.batch else None
            hint = "the next `judge-runner weekly ... --batch` (same query set)"
            outcome = evaluate_queries(job, queries, RunInputs(generation=generation, prior_batches=prior, resume_hint=hint, card=card))
        finally:
            close_systems(job.systems)
    try:
        with reading_cache(settings.cache_path, must_exist=False) as cache:
            written = build_report(plan.results, plan.reports, cache=cache)
        printer.out(f"report written to {written.html}")
    except ValueError as exc:
        printer.err(f"no report: {exc}")
    needed = needed_runs(session_journals(Path("labels"), settings.cache_path))
    prune_runs(plan.results, plan.keep, needed, printer.err, {plan.queries_path or pinned: "the query set this command judges"})
    if outcome.status is RunStatus.OK and plan.fail_on_regression:
        with reading_cache(settings.cache_path, must_exist=False) as cache:
            latest = build_trend(plan.results, cache=cache).latest_verdict
        if latest and latest.get("failed"):
            raise GateFailedError(f"the latest run {latest['runId']} failed: {latest['failure']}")
        if latest and latest["regression"]:
            worse = ", ".join(latest.get("regressions") or [])
            raise GateFailedError(
                f"regression: run {latest['runId']} is worse than {latest['against']}" + (f" on {worse}" if worse else "")
            )
    return outcome.status
