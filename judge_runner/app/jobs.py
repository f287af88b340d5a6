"""The jobs judge-runner runs, each built from the same steps.

- :func:`main_job` (``generate-and-evaluate``): check the corpus, choose the providers, index, phase
  one (write a query set), warn about expected sources missing from the index, phase two (evaluate).
- :func:`weekly_run` (``weekly``): under a lock and with everything printed mirrored into a log, the
  same steps with the pinned query set (or a regenerated one), then the report, pruning and the
  regression check.
- :func:`evaluate_job` (``evaluate``, with resume) and :func:`generate_job` (``generate``).

A stopped phase one still leaves a run file (run_start plus a summary saying why):
:func:`write_stopped_run`. Steps print through a :class:`~judge_runner.core.printer.Printer` and fail with
:mod:`judge_runner.core.failures` errors; none exits the process.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from judge_runner.app.indexing import check_corpus, describe_index, index_fixtures, open_index, require_folder
from judge_runner.config import ConfigError, Settings, load_settings
from judge_runner.core.failures import (
    EXIT_CONFIG,
    EXIT_INCOMPLETE,
    GateFailedError,
    IncompleteRunError,
    JudgeRunnerError,
    RunStatus,
    UsageError,
    exit_code_for,
)
from judge_runner.core.models import Query, QuerySet
from judge_runner.core.printer import Printer, Say
from judge_runner.evaluation.loop import EvaluateOptions, RunOutcome, begin_run, end_run, is_heuristic, provenance, run_evaluation
from judge_runner.llm.budget import Budget
from judge_runner.llm.errors import AuthError, BudgetExhausted, LLMError, SpendLimitError

if TYPE_CHECKING:
    from judge_runner.judging.protocol import Judge
    from judge_runner.querygen.protocol import GenerationResult, QueryWriter
    from judge_runner.search.systems import System, SystemsSpec

PROMPTS = (
    "generate_system.md",
    "generate_user.md",
    "judge_label_system.md",
    "judge_label_user.md",
    "judge_labels_user.md",
    "judge_list_system.md",
    "judge_list_user.md",
)


def load(flags: dict[str, Any]) -> Settings:
    """Settings from the config file, the environment and ``flags`` (None means not given); raises
    UsageError for settings that cannot be used."""
    try:
        return load_settings(flags)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


# -- providers ------------------------------------------------------------------------------------------
def make_providers(settings: Settings, need_generator: bool, say: Say) -> tuple[QueryWriter | None, Judge, Budget]:
    """``(query writer or None, judge, budget)`` for ``settings.provider``, built by
    :func:`judge_runner.app.roles.build_roles` from the provider registry (``auto``: the first provider whose
    key or base URL is set, else offline). Says which provider and models were chosen, and why. Raises
    UsageError for a missing key, or for a model with no known price under ``--max-budget-usd``."""
    from judge_runner.app.roles import build_roles

    try:
        roles = build_roles(settings, need_generator, say=say)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return roles.writer, roles.judge, roles.budget


# -- steps ------------------------------------------------------------------------------------------------
@dataclass
class Job:
    """What the phases of one job share: settings, the open index, the providers, the budget, the folder
    for run files, and where to print."""

    settings: Settings
    index: Any
    generator: Any
    judge: Any
    budget: Budget
    out_dir: Path
    printer: Printer
    systems: list[System] | None = None  # the searches under test when not only the built-in one (issue 12)


def check_out_dir(out_dir: Path) -> None:
    """Raise UsageError when run files could not be written to ``out_dir`` (checked before any indexing
    or spending): the nearest existing ancestor must be a writable folder."""
    probe = out_dir
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write run files to {out_dir}: {probe} is not a writable folder")


def open_job(settings: Settings, fixtures: Path, out_dir: Path, printer: Printer, need_generator: bool) -> Job:
    """Check the corpus, choose the providers, then index FIXTURES incrementally (pruning what is gone).
    The caller closes ``job.index``. Raises UsageError (bad corpus, provider or key) before the index
    is touched."""
    check_corpus(settings, fixtures)
    generator, judge, budget = make_providers(settings, need_generator, printer.err)
    printer.note(f"indexing {fixtures} into {settings.index_label} ...")
    done = index_fixtures(settings, fixtures, prune=True, printer=printer)
    printer.note(describe_index(done.report, done.elapsed))
    return Job(settings, done.index, generator, judge, budget, out_dir, printer)


def write_queries(settings: Settings, generator: Any, fixtures: Path, printer: Printer) -> GenerationResult:
    """Phase one: ``settings.count`` queries about FIXTURES from ``generator``. Raises what
    ``generate_queries`` raises (LLMError, KeyboardInterrupt)."""
    from judge_runner.corpus.walk import parse_extensions
    from judge_runner.querygen.agent import generate_queries

    printer.note(f"phase one: writing {settings.count} queries from {fixtures} ...")
    result = generate_queries(generator, fixtures, settings.count, parse_extensions(settings.extensions), log=printer.log)
    printer.note(f"phase one: {len(result.queries)} queries kept, {len(result.dropped)} dropped")
    return result


def require_queries(generation: GenerationResult) -> GenerationResult:
    """``generation`` when it kept at least one query. Every job that runs phase one (``generate``,
    ``generate-and-evaluate``, ``weekly``) checks its result here, so an empty phase one is one error
    everywhere. Raises IncompleteRunError (exit 3) naming how many queries were written and dropped, with
    the first three reasons."""
    if generation.queries:
        return generation
    if not generation.dropped:
        raise IncompleteRunError(f"phase one produced no usable query: the query writer wrote {generation.generated} queries")
    reasons = "; ".join(f"{d.get('id', '?')}: {d.get('reason', '?')}" for d in generation.dropped[:3])
    more = f"; {len(generation.dropped) - 3} more" if len(generation.dropped) > 3 else ""
    raise IncompleteRunError(
        f"phase one produced no usable query: all {len(generation.dropped)} written queries were dropped ({reasons}{more})"
    )


def phase_one(job: Job, fixtures: Path) -> GenerationResult | RunOutcome:
    """Write the query set; when an LLM error or Ctrl+C stops phase one, write the stopped run instead
    and return its outcome. Raises IncompleteRunError when no usable query was written
    (:func:`require_queries`)."""
    try:
        generation = write_queries(job.settings, job.generator, fixtures, job.printer)
    except (LLMError, KeyboardInterrupt) as exc:
        job.printer.err(f"error: phase one stopped: {str(exc) or 'interrupted'}")
        return write_stopped_run(job, exc)
    return require_queries(generation)


def warn_missing_sources(index: Any, queries: list[Query], index_label: str, say: Say) -> None:
    """Warn about expected sources of ``queries`` that are not in ``index``: their recall will be 0."""
    indexed = set(index.document_hashes())
    missing = sorted({s for q in queries for s in q.expectedSources if s not in indexed})
    if missing:
        say(
            f"warning: {len(missing)} expected source(s) are not in the index {index_label} (their recall will be 0): "
            + ", ".join(missing[:5])
            + (" ..." if len(missing) > 5 else "")
        )


def prompt_hashes() -> dict[str, str]:
    """sha256 of each prompt file, by file name (recorded in provenance)."""
    from judge_runner.core.resources import prompt_sha256

    return {name: prompt_sha256(name) for name in PROMPTS}


def open_run_writer(out_dir: Path, run_id: str | None = None):
    """A new run file in ``out_dir``; raises UsageError when it cannot be created."""
    from judge_runner.runs.write import RunWriter

    try:
        return RunWriter(out_dir, run_id=run_id)
    except OSError as exc:
        raise UsageError(f"cannot write to {out_dir}: {exc}") from None


def run_start_fields(
    job: Job,
    writer,
    queries: list[Query],
    *,
    generation: GenerationResult | None = None,
    generator_model: str | None = None,
    with_count: bool = False,
    resume: ResumePoint | None = None,
    all_queries: list[Query] | None = None,
) -> dict:
    """The ``run_start`` line's fields (config, provenance, phase-one counts, resume origin). Saves the
    query set beside the run file (``<run>.queries.json``) so next week, or ``--resume``, finds it."""
    from judge_runner.querygen.agent import query_set_sha256
    from judge_runner.runs.write import utc_now

    settings = job.settings
    config: dict[str, Any] = {
        "searchMode": settings.search_mode,
        "searchLimit": settings.search_limit,
        "concurrency": settings.concurrency,
        "weights": settings.weights,
        "timeoutS": settings.timeout,
        "callDeadlineS": settings.deadline,
        "maxRetries": settings.max_retries,
        "maxBudgetUsd": settings.max_budget_usd,
        "perCallCapUsd": settings.per_call_cap_usd,
        "minOverall": settings.min_overall,
        "index": settings.index_label,
        "judgeMode": settings.judge_mode,
        "trials": settings.trials,
        "seed": settings.seed,
        "judgmentCache": str(settings.cache_path) if settings.cache_path is not None else None,
        "batch": settings.batch,
    }
    if with_count:
        config["count"] = settings.count
    saved = all_queries or queries
    if saved:
        query_file = writer.path.with_suffix(".queries.json")
        query_file.write_text(QuerySet(queries=saved).model_dump_json(indent=2) + "\n", encoding="utf-8")
        config["querySetFile"] = query_file.name
    run_start: dict[str, Any] = {
        "config": config,
        "provenance": provenance(
            job.judge,
            generator_model,
            prompt_hashes(),
            query_set_sha256(saved),
            (job.index.get_meta("corpus_fingerprint") or "") if job.index is not None else "",
            settings.search.model_dump(exclude={"external"}),
            evaluate_options(settings),
            getattr(job.generator, "name", None) if generator_model else None,
        ),
        "queriesGenerated": generation.generated if generation else None,
        "queriesDropped": len(generation.dropped) if generation else 0,
    }
    if job.systems:
        run_start["provenance"]["searchSystems"] = [{"name": system.name, **system.description} for system in job.systems]
    if resume is not None:
        # a resumed run keeps its place in time: the original start, with the resume time beside it
        run_start["resumedFrom"] = resume.path.name
        run_start["resumedAt"] = utc_now()
        if resume.start.get("timestamp"):
            run_start["timestamp"] = resume.start["timestamp"]
    return run_start


def evaluate_options(settings: Settings) -> EvaluateOptions:
    """Phase two's options from the settings."""
    return EvaluateOptions(
        settings.search_mode,
        settings.search_limit,
        settings.concurrency,
        settings.weights,
        settings.min_overall,
        settings.judge_mode,
        settings.trials,
        settings.seed,
        tuple(settings.human_qrels) if settings.human_qrels is not None else None,
    )


def open_cache(settings: Settings, printer: Printer):
    """The judgment cache of ``settings`` (None with ``--no-cache``); raises UsageError when the file
    cannot be used."""
    from judge_runner.judging.cache import CacheError, JudgmentCache

    path = settings.cache_path
    if path is None:
        return None
    try:
        cache = JudgmentCache(path)
    except CacheError as exc:
        raise UsageError(str(exc)) from None
    printer.note(f"judgment cache: {path}")
    return cache


def evaluate_queries(
    job: Job,
    queries: list[Query],
    *,
    generation: GenerationResult | None = None,
    resume: ResumePoint | None = None,
    all_queries: list[Query] | None = None,
    prior_batches: list[dict] | None = None,
    resume_hint: str | None = None,
) -> RunOutcome:
    """Phase two: judge ``queries`` into a new run file (for a resumed run: its judged lines first, same
    runId) and print the summary. ``prior_batches``: ``batch`` lines of an earlier run whose results a
    ``--batch`` judge picks up (a resumed run's own, or weekly's previous run's); ``resume_hint``: what
    picks up batches left in flight (said on Ctrl+C and in the summary; default ``evaluate --resume``)."""
    writer = open_run_writer(job.out_dir, run_id=resume.run_id if resume else None)
    run_start = run_start_fields(
        job,
        writer,
        queries,
        generation=generation,
        with_count=generation is not None,
        generator_model=generation.model if generation else None,
        resume=resume,
        all_queries=all_queries,
    )
    cache = open_cache(job.settings, job.printer)
    batching = getattr(job.judge, "batching", None)
    if batching is not None and resume_hint:
        batching.resume_hint = resume_hint
    try:
        if job.systems:
            from judge_runner.evaluation.compare import run_systems

            outcome = run_systems(
                queries,
                job.systems,
                job.judge,
                writer,
                run_start,
                evaluate_options(job.settings),
                budget=job.budget,
                echo=job.printer.progress,
                log=job.printer.log,
                cache=cache,
            )
        else:
            from judge_runner.app.dry_run import start_estimate

            search, estimate = start_estimate(queries, job.index, job.judge, evaluate_options(job.settings), cache, job.printer.note)
            outcome = run_evaluation(
                queries,
                search,
                job.judge,
                writer,
                run_start,
                evaluate_options(job.settings),
                budget=job.budget,
                echo=job.printer.progress,
                log=job.printer.log,
                prior=resume.evaluations if resume else None,
                cache=cache,
                estimate=estimate,
                prior_batches=list(resume.batches) if resume else prior_batches,
            )
    finally:
        if cache is not None:
            cache.close()
    print_summary(outcome, job.printer, phase_one=generation is not None, resume_hint=resume_hint)
    if job.settings.min_overall is not None:  # a quality gate on an uncalibrated or failed judge says so
        from judge_runner.calibrate.output import calibration_folder, calibration_for_provenance, calibration_line

        found = calibration_for_provenance(calibration_folder(job.out_dir), run_start["provenance"])
        if (found or {}).get("verdict", {}).get("status") != "calibrated":
            job.printer.err(f"warning: --min-overall gates on a judge that is not calibrated; {calibration_line(found)}")
    return outcome


def write_stopped_run(job: Job, stopped_by: BaseException) -> RunOutcome:
    """The run file of a job whose phase one stopped (``stopped_by``: an LLMError or KeyboardInterrupt):
    run_start (with the generator's model) and a summary saying why; nothing is judged. The status is
    a configuration error for a refused key, else incomplete."""
    started = time.monotonic()
    writer = open_run_writer(job.out_dir)
    run_start = run_start_fields(job, writer, [], generator_model=getattr(job.generator, "model", None), with_count=True)
    state = begin_run(writer, run_start, 0)
    state.phase_one_stopped(stopped_by)
    outcome = end_run(state, writer, evaluate_options(job.settings), started=started, budget=job.budget, heuristic=is_heuristic(job.judge))
    print_summary(outcome, job.printer)
    return outcome


def print_summary(outcome: RunOutcome, printer: Printer, phase_one: bool = False, resume_hint: str | None = None) -> None:
    """The run's summary for people on stdout; a failed quality gate on stderr. ``phase_one``: the cost
    includes phase one's query writing (always synchronous, at standard prices); ``resume_hint``: what
    picks up batches still in flight (default ``--resume``)."""
    summary, out = outcome.summary, printer.out
    heuristic = " (HEURISTIC offline judge)" if summary["heuristicJudge"] else ""
    out(
        f"\nrun {summary['runId']}{heuristic}: {summary['evaluated']} evaluated, {summary['failed']} failed"
        f"{', INTERRUPTED' if summary['interrupted'] else ''}{', BUDGET EXHAUSTED' if summary['budgetExhausted'] else ''}"
    )
    if summary["averageScores"]:
        out("  averages: " + ", ".join(f"{k} {v:.2f}" for k, v in summary["averageScores"].items()))
    if summary["averageMetrics"]:
        out("  IR metrics: " + ", ".join(f"{k} {v:.3f}" for k, v in summary["averageMetrics"].items()))
    a = summary["abstention"]
    out(f"  abstention: {a['correct']}/{a['offTopic']} off-topic queries abstained; {a['falseAbstentions']} on-topic queries not confident")
    trials = f", {summary['trials']} trials" + (
        f" (Krippendorff alpha {summary['trialsAlpha']:.2f})" if summary.get("trialsAlpha") is not None else ""
    )
    out(
        f"  judge: {summary.get('judgeMode') or '?'} labels{trials if summary.get('trials', 1) > 1 else ''}; {summary['labelsJudged']} judged, "
        f"{summary['labelsCached']} from the cache, {summary['humanLabels']} human; {summary['injectionSuspected']} results flagged "
        f"as addressing the judge; {summary['expectedSourceDisagreements']} expected sources labelled 0-1"
    )
    if summary.get("judgeIsGenerator"):
        out("  note: the judge's model also wrote the queries (circular: it may favour what it expects)")
    if summary.get("comparison"):
        from judge_runner.evaluation.compare import describe_comparison

        for line in describe_comparison(summary["comparison"]):
            out(line)
    for issue in summary["topIssues"][:3]:
        out(f"  issue ({issue['count']}x): {issue['issue']}")
    if summary["recommendedFocus"]:
        out(f"  recommended focus: {summary['recommendedFocus']}")
    batch = summary.get("batch")
    if batch:
        out(
            f"  batch API: {batch['batches']} batch(es) submitted, {batch['resumedBatches']} picked up; {batch['requests']} requests"
            + (f" ({batch['pickedUpRequests']} picked up)" if batch.get("pickedUpRequests") else "")
            + ": "
            f"{batch['succeeded']} succeeded, {batch['errored']} errored, {batch['expired']} expired, {batch['canceled']} canceled"
            + (
                f"; still in flight: {', '.join(batch['inFlight'])} ({resume_hint or '--resume'} picks them up)"
                if batch["inFlight"]
                else ""
            )
        )
    cost, estimate = summary["costUsd"], (summary.get("estimate") or {}).get("costUsd")
    guess = "" if estimate is None else f" (estimate ${estimate:.4f})"
    prices = (" (judge at batch prices, phase one at sync prices)" if phase_one else " at batch prices") if batch else ""
    out(f"  cost: {'unknown' if cost is None else f'${cost:.4f}'}{prices}{guess}, {summary['durationS']:.1f} s")
    out("  " + cost_line(summary))
    out(f"  written to {outcome.path}")
    gate = summary.get("qualityGate")
    if gate and not gate["passed"]:
        overall = "none evaluated" if gate["overall"] is None else f"{gate['overall']:.3f}"
        printer.err(f"quality gate failed: average overall {overall} is below --min-overall {gate['minOverall']}")


def cost_line(summary: dict) -> str:
    """The summary's caching and per-query cost figures as one line for people: the cached share of input
    tokens, the USD caching saved, and the USD per judged query (``unknown`` where the figure is null)."""
    share, saved, per = summary.get("cachedInputShare"), summary.get("cacheSavedUsd"), summary.get("costPerJudgedQueryUsd")
    judged = summary.get("judgedQueries", 0)
    return (
        f"prompt cache: {'-' if share is None else f'{share:.0%}'} of input tokens read from it, "
        f"saved {'unknown' if saved is None else f'${saved:.4f}'}; "
        f"per judged query ({judged} judged): {'-' if not judged else 'unknown' if per is None else f'${per:.4f}'}"
    )


def load_query_set(path: Path) -> QuerySet:
    """The query set in ``path``; raises UsageError listing (at most five) problems."""
    from pydantic import ValidationError

    try:
        return QuerySet.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError, OSError) as exc:
        problems = (
            "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
            if isinstance(exc, ValidationError)
            else str(exc)
        )
        raise UsageError(f"{path} is not a valid query set: {problems}") from None


def open_search_systems(
    settings: Settings, spec: SystemsSpec | None, index: Any, corpus: Path | None, queries: list[Query], printer: Printer
) -> list[System] | None:
    """The searches under test (:func:`judge_runner.search.systems.open_systems`), or None for an
    ordinary run of the built-in search in one mode. ``corpus`` is where text-less results are looked
    up by default (the fixtures folder). Raises UsageError for systems that cannot be opened."""
    from judge_runner.search.systems import SystemsError, open_systems

    if (spec is None or (not spec.external and len(spec.modes) <= 1)) and not settings.search.external:
        return None
    try:
        systems = open_systems(
            spec or _no_spec(),
            settings,
            index,
            corpus=corpus,
            query_ids={q.query: q.id for q in queries},
            open_builtin=lambda search: open_index(settings.model_copy(update={"search": search}), must_exist=True),
        )
    except SystemsError as exc:
        raise UsageError(str(exc)) from None
    printer.note(f"judging {len(systems)} search system(s) on the same queries: " + ", ".join(s.name for s in systems))
    return systems


def _no_spec() -> SystemsSpec:
    from judge_runner.search.systems import SystemsSpec

    return SystemsSpec()


def systems_spec(**asked: Any) -> SystemsSpec | None:
    """A :class:`~judge_runner.search.systems.SystemsSpec` of the command line's search-system flags
    (``modes``, ``configs``, ``commands``, ``urls``, ``runs``, ``headers``, ``fields``, ``timeout``,
    ``corpus``), or None when they ask only for the built-in search in one mode."""
    from judge_runner.search.systems import SystemsSpec

    spec = SystemsSpec(**asked)
    return spec if (spec.external or len(spec.modes) > 1) else None


def needs_builtin_index(settings: Settings, spec: SystemsSpec | None) -> bool:
    """Whether the run judges the built-in search (so an index must exist)."""
    if spec is None or not (spec.external or settings.search.external):
        return True
    return bool(spec.modes or spec.configs)


def close_systems(systems: list[System] | None) -> None:
    """Close what the systems opened (extra index connections for --compare configurations)."""
    for system in systems or []:
        system.close()


# -- run-file readers (resume, prune) ---------------------------------------------------------------------
@dataclass(frozen=True)
class ResumePoint:
    """An interrupted run to continue: its file, its ``run_start`` line, its judged ``evaluation``
    lines (one per query id), its ``batch`` lines (a ``--batch`` run's batches, picked up again) and
    the reader's warnings about damaged lines (``file:line: ...``)."""

    path: Path
    start: dict
    evaluations: list[dict]
    batches: tuple[dict, ...] = ()
    warnings: tuple[str, ...] = ()  # the reader's words on damaged lines (file:line), said when resuming

    @property
    def run_id(self) -> str:
        """The run's id, kept by the resumed run."""
        return self.start["runId"]

    @property
    def saved_query_set(self) -> Path | None:
        """The query set saved beside the run file, when it is there."""
        saved = self.start.get("config", {}).get("querySetFile")
        return self.path.parent / saved if saved and (self.path.parent / saved).is_file() else None


PROTOCOL_SETTINGS = (
    ("judgeMode", "judge_mode", "judge mode"),
    ("trials", "trials", "trials"),
    ("seed", "seed", "seed"),
    ("searchLimit", "search_limit", "search limit"),
    ("searchMode", "search_mode", "search mode"),
)
"""The run_start ``config`` keys a resumed run takes from its run (``Settings`` field, words for people):
the settings that decide what is asked of the judge and what it sees."""


def inherit_protocol(settings: Settings, resume: ResumePoint, printer: Printer) -> None:
    """A resumed run (sync or ``--batch``) judges its remaining queries as the run judged the others: each
    setting of :data:`PROTOCOL_SETTINGS` not set for this run (flag, environment or config file) is taken
    from the run's ``run_start`` config, and said in one note. A setting set to another value is kept
    and warned about: the run mixes two protocols, and the requests of its batches in flight differ from
    the new ones, so those batches cannot be picked up (their results are paid for and not used)."""
    config = resume.start.get("config") or {}
    taken, differ = [], []
    for key, name, words in PROTOCOL_SETTINGS:
        if key not in config or config[key] is None:
            continue
        if name not in settings.model_fields_set:
            setattr(settings, name, config[key])
            taken.append(f"{words} {config[key]}" if key != "trials" else f"{config[key]} trials")
        elif getattr(settings, name) != config[key]:
            differ.append((words, getattr(settings, name), config[key]))
    if taken:
        printer.note(f"resuming with the run's own protocol: {', '.join(taken)}")
    for words, now, was in differ:
        flag = "--" + words.replace(" ", "-")
        batches = (
            f"; its {len(resume.batches)} batch(es) in flight hold other requests and cannot be reused (their results are paid for, "
            f"not used)"
            if resume.batches
            else ""
        )
        printer.err(
            f"warning: {flag} {now} differs from the run's {was}: the remaining queries are judged differently from "
            f"the {len(resume.evaluations)} already judged{batches}"
        )


def warn_judge_change(judge: Any, resume: ResumePoint, printer: Printer) -> None:
    """Warn when a resumed run's judge (provider or model) is not the one that judged the run so far:
    the run mixes two judges, and its batches of another provider's batch API cannot be picked up
    (they stay unclaimed in that provider's account; their requests are sent again)."""
    was = resume.start.get("provenance") or {}
    provider, model = was.get("provider"), was.get("judgeModel")
    if (provider, model) == (judge.name, judge.model) or provider is None:
        return
    elsewhere = [b for b in resume.batches if b.get("provider") not in (None, judge.name)]
    lost = (
        f"; its {len(elsewhere)} {elsewhere[0].get('provider')} batch(es) cannot be picked up by {judge.name}: "
        f"their requests are sent again (resume with --provider {provider} to use them)"
        if elsewhere
        else ""
    )
    printer.err(
        f"warning: run {resume.run_id} was judged by {provider} ({model}); the remaining queries are judged by "
        f"{judge.name} ({judge.model}){lost}"
    )


def inherit_batch_mode(settings: Settings, resume: ResumePoint, printer: Printer) -> None:
    """A resumed ``--batch`` run stays in batch mode unless ``batch`` was set for this run (flag,
    environment or config file), so its batches in flight are picked up rather than paid for again."""
    was_batch = bool((resume.start.get("config") or {}).get("batch")) or bool(resume.batches)
    if was_batch and "batch" not in settings.model_fields_set:
        settings.batch = True
        printer.note(f"resuming a --batch run: batch mode on ({len(resume.batches)} batch(es) in its file are picked up, not resubmitted)")
    elif resume.batches and not settings.batch:
        printer.err(
            f"warning: {resume.path.name} holds {len(resume.batches)} batch(es) of --batch mode; judging synchronously "
            f"pays again for the requests they hold (resume with --batch to pick them up)"
        )


def read_resume_point(path: Path) -> ResumePoint:
    """Read the run file to resume; raises UsageError when it has no run_start line."""
    from judge_runner.runs.read import resume_state
    from judge_runner.runs.write import batch_lines, judged_lines

    start, evaluations = judged_lines(path)
    if start is None or "provenance" not in start:
        raise UsageError(f"{path} is not a judge-runner run file (no run_start line)")
    return ResumePoint(path, start, evaluations, tuple(batch_lines(path)), tuple(resume_state(path).warnings))


def prune_runs(results: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` run files (and their saved query sets); never the baseline.
    Returns the deleted run files."""
    from judge_runner.analysis.trend import read_baseline
    from judge_runner.runs.read import is_baseline

    baseline = read_baseline(results)
    # oldest first by the UTC stamp in the name: "...T194229Z" sorts before "...T194229.730Z" (the same
    # second, milliseconds added on a clash) only once the "Z" is dropped
    runs = sorted(results.glob("*.jsonl"), key=lambda p: p.stem.replace("Z", ""))
    deleted = []
    for path in runs[: max(0, len(runs) - keep)]:
        if is_baseline(path, baseline):
            continue
        path.unlink()
        path.with_suffix(".queries.json").unlink(missing_ok=True)
        deleted.append(path)
    return deleted


# -- jobs -------------------------------------------------------------------------------------------------
def main_job(settings: Settings, fixtures: Path, out_dir: Path, printer: Printer, systems: SystemsSpec | None = None) -> RunOutcome:
    """``generate-and-evaluate``: index FIXTURES, write a query set, judge the search on it (or the
    ``systems`` asked for: external adapters, several modes; text-less results come from FIXTURES)."""
    require_folder(fixtures)
    check_out_dir(out_dir)
    job = open_job(settings, fixtures, out_dir, printer, need_generator=True)
    with job.index:
        # opened before phase one spends anything: a bad flag or an unset token variable stops the job here
        job.systems = open_search_systems(settings, systems, job.index, fixtures, [], printer)
        try:
            first = phase_one(job, fixtures)
            if isinstance(first, RunOutcome):
                return first
            warn_missing_sources(job.index, first.queries, settings.index_label, printer.err)
            return evaluate_queries(job, first.queries, generation=first)
        finally:
            close_systems(job.systems)


def generate_job(settings: Settings, fixtures: Path, out: Path, force: bool, printer: Printer) -> GenerationResult:
    """``generate``: write a query set to ``out`` (never over an existing file without ``force``).
    Raises UsageError (bad input, refused key) or IncompleteRunError (budget, spend limit, failure,
    Ctrl+C, no usable query: :func:`require_queries`); nothing is spent before the output folder is known to be writable."""
    require_folder(fixtures)
    if out.exists() and not force:
        raise UsageError(f"{out} exists; pass --force to overwrite it or --out to write elsewhere")
    check_out_dir(out.parent if str(out.parent) else Path("."))
    check_corpus(settings, fixtures)
    generator, _, budget = make_providers(settings, need_generator=True, say=printer.err)
    try:
        result = write_queries(settings, generator, fixtures, printer)
    except AuthError as exc:
        raise UsageError(f"{exc}; check the API key") from None
    except (BudgetExhausted, SpendLimitError) as exc:
        raise IncompleteRunError(str(exc)) from None
    except LLMError as exc:
        raise IncompleteRunError(f"phase one failed: {exc}") from None
    except KeyboardInterrupt:
        raise IncompleteRunError("interrupted; no query set written") from None
    require_queries(result)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(result.query_set().model_dump_json(indent=2) + "\n", encoding="utf-8")
    cost = budget.total_cost_usd
    printer.out(
        f"wrote {len(result.queries)} queries to {out} ({len(result.dropped)} dropped; "
        f"cost {'unknown' if cost is None else f'${cost:.4f}'})"
    )
    return result


def evaluate_job(
    settings: Settings,
    queries_path: Path | None,
    resume_path: Path | None,
    out_dir: Path,
    printer: Printer,
    systems: SystemsSpec | None = None,
) -> RunOutcome | None:
    """``evaluate``: judge a saved query set, or continue an interrupted run (``resume_path``: judged
    queries are copied, never sent again). Returns None when a resumed run has nothing left to judge.
    ``systems``: the searches to judge when not only the built-in one (a run of external systems and
    TREC runs alone needs no index)."""
    from judge_runner.querygen.agent import query_set_sha256

    resume = read_resume_point(resume_path) if resume_path is not None else None
    for warning in resume.warnings if resume is not None else ():
        printer.err(f"warning: {warning}")
    if resume is not None and systems is not None and (systems.external or len(systems.modes) > 1):
        raise UsageError("--resume continues a run of the built-in search; it cannot be combined with other search systems")
    if resume is not None and queries_path is None:
        queries_path = resume.saved_query_set
        if queries_path is None:
            raise UsageError(f"{resume.path} has no saved query set beside it; pass --queries FILE")
    if queries_path is None:
        raise UsageError("give --queries FILE (or --resume RUN.jsonl)")
    query_set = load_query_set(queries_path)
    check_out_dir(out_dir)
    if not needs_builtin_index(settings, systems):
        job_systems = open_search_systems(settings, systems, None, None, query_set.queries, printer)
        _, judge, budget = make_providers(settings, need_generator=False, say=printer.err)
        job = Job(settings, None, None, judge, budget, out_dir, printer, job_systems)
        try:
            return evaluate_queries(job, query_set.queries, all_queries=query_set.queries)
        finally:
            close_systems(job_systems)
    index = open_index(settings, must_exist=True)
    with index:
        warn_missing_sources(index, query_set.queries, settings.index_label, printer.err)
        job_systems = open_search_systems(settings, systems, index, None, query_set.queries, printer)
        queries = query_set.queries
        if resume is not None:
            if resume.start["provenance"].get("querySetSha256") != query_set_sha256(queries):
                raise UsageError(f"{queries_path} is not the query set {resume.path} was judged on (sha256 differs)")
            done = {line["queryId"] for line in resume.evaluations}
            queries = [q for q in queries if q.id not in done]
            if not queries:
                printer.out(f"nothing to resume: all {len(done)} queries of run {resume.run_id} are judged in {resume.path}")
                return None
            printer.note(f"resuming run {resume.run_id}: {len(resume.evaluations)} judged queries copied, {len(queries)} to judge")
            inherit_protocol(settings, resume, printer)
            inherit_batch_mode(settings, resume, printer)
        _, judge, budget = make_providers(settings, need_generator=False, say=printer.err)
        if resume is not None:
            warn_judge_change(judge, resume, printer)
        job = Job(settings, index, None, judge, budget, out_dir, printer, job_systems)
        try:
            return evaluate_queries(job, queries, resume=resume, all_queries=query_set.queries)
        finally:
            close_systems(job_systems)


# -- weekly -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WeeklyPlan:
    """The ``weekly`` command's options (folders, pinned or given query set, retention, log)."""

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
    """Mirror a text stream into a log file (weekly runs log everything they print)."""

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


def weekly_run(flags: dict[str, Any], plan: WeeklyPlan, printer: Printer) -> RunStatus:
    """``weekly``: take ``RESULTS/.weekly.lock`` (held: IncompleteRunError at once, nothing touched),
    mirror stdout and stderr into the log, then run :func:`weekly_steps` with the settings of ``flags``.
    The log ends with ``=== exit N ===`` whatever happened; a failure is logged and raised again (an
    unexpected exception with its scrubbed traceback, raised as an InternalError naming this log: exit 4)."""
    import fcntl

    plan.results.mkdir(parents=True, exist_ok=True)
    log_path = plan.log_path or plan.results / "weekly.log"
    with open(plan.results / ".weekly.lock", "w") as lock_file:  # released when the file closes, even on a crash
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IncompleteRunError(f"another weekly run holds {plan.results / '.weekly.lock'}; not starting a second one") from None
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"\n=== judge-runner weekly {datetime.now(UTC).isoformat(timespec='seconds')} ===\n")
            real_out, real_err = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = _Tee(real_out, log), _Tee(real_err, log)
            code = EXIT_CONFIG
            try:
                status = weekly_steps(load(flags), plan, printer)
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
                from judge_runner.app.crashlog import internal_error, traceback_text

                error = internal_error(exc, log_path)
                code = error.exit_code
                log.write(traceback_text(exc) + error.display() + "\n")
                raise error from exc
            finally:
                sys.stdout, sys.stderr = real_out, real_err
                log.write(f"=== exit {code} ===\n")


def weekly_batches_in_flight(results: Path, printer: Printer) -> list[dict] | None:
    """The ``batch`` lines of weekly's previous run when it stopped with batches in flight: the newest
    run file in ``results`` that holds batch lines and whose summary lists ``batch.inFlight`` (Ctrl+C)
    or that has no summary (killed). Its requests are the ones this run makes again when the query set
    and protocol are the same (same ``custom_id``), so their results are picked up, not paid twice.
    None when there is none (said in a note when there is)."""
    from judge_runner.runs.read import read_run_file

    for path in sorted(results.glob("*.jsonl"), key=lambda p: p.stem.replace("Z", ""), reverse=True):
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


def weekly_steps(settings: Settings, plan: WeeklyPlan, printer: Printer) -> RunStatus:
    """The weekly job without lock and log: index; the pinned set (or generate and pin one: first run,
    ``--regenerate``); evaluate; report; prune; regression check (GateFailedError)."""
    from judge_runner.analysis.report import build_report
    from judge_runner.analysis.trend import build_trend

    pinned = plan.results / "pinned-queries.json"
    regenerate = plan.regenerate
    if plan.count_given and not regenerate and (plan.queries_path or pinned.is_file()):
        printer.err("note: --count applies only when a query set is generated; using the pinned set (--regenerate for a new one)")
    if plan.queries_path is None and not regenerate and not pinned.is_file():
        printer.err(f"no pinned query set in {plan.results}: generating one (phase one) and pinning it")
        regenerate = True
    require_folder(plan.fixtures)
    job = open_job(settings, plan.fixtures, plan.results, printer, need_generator=regenerate)
    with job.index:
        generation = None
        if regenerate:
            first = phase_one(job, plan.fixtures)
            if isinstance(first, RunOutcome):
                return first.status
            pinned.write_text(QuerySet(queries=first.queries).model_dump_json(indent=2) + "\n", encoding="utf-8")
            generation, queries = first, first.queries
        else:
            queries = load_query_set(plan.queries_path or pinned).queries
        warn_missing_sources(job.index, queries, settings.index_label, printer.err)
        prior = weekly_batches_in_flight(plan.results, printer) if settings.batch else None
        hint = "the next `judge-runner weekly ... --batch` (same query set)"
        outcome = evaluate_queries(job, queries, generation=generation, prior_batches=prior, resume_hint=hint)
    try:
        written = build_report(plan.results, plan.reports)
        printer.out(f"report written to {written.html}")
    except ValueError as exc:
        printer.err(f"no report: {exc}")
    prune_runs(plan.results, plan.keep)
    if outcome.status is RunStatus.OK and plan.fail_on_regression:
        latest = build_trend(plan.results).latest_verdict
        if latest and latest["regression"]:
            raise GateFailedError(f"regression: run {latest['runId']} is worse than {latest['against']}")
    return outcome.status
