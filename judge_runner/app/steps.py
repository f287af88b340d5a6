"""The steps every job is built from: choose the roles (:func:`make_roles`), open the job
(corpus check, index), phase one (:func:`phase_one`), the ``run_start`` fields, and phase two
(:func:`evaluate_queries`). Steps print through a :class:`~judge_runner.core.printer.Printer` and fail with
:mod:`judge_runner.core.failures` errors; none exits the process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_runner.app.console import print_summary
from judge_runner.app.indexing import check_corpus, describe_index, index_fixtures, open_index
from judge_runner.app.inputs import (
    check_human_coverage,
    open_cache,
    open_run_writer,
)
from judge_runner.app.resume import (
    ResumePoint,
)
from judge_runner.app.roles import Roles, build_roles
from judge_runner.calibrate.output import calibration_folder, calibration_for_provenance, calibration_line
from judge_runner.calibrate.verdicts import status_of
from judge_runner.config import ConfigError, Settings
from judge_runner.core.failures import (
    IncompleteRunError,
    StorageError,
    UsageError,
)
from judge_runner.core.models import Query, QuerySet
from judge_runner.core.printer import Printer, Say
from judge_runner.core.query_card import QuerySetCard
from judge_runner.core.resources import prompt_sha256
from judge_runner.corpus.walk import parse_extensions
from judge_runner.estimate.start import start_estimate
from judge_runner.evaluation.compare import run_systems
from judge_runner.evaluation.context import RunContext, RunOutput
from judge_runner.evaluation.lines import Basis, provenance
from judge_runner.evaluation.loop import is_heuristic, run_evaluation
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.evaluation.state import RunFinish, RunOutcome, begin_run, end_run
from judge_runner.judging.labelling import ProtocolSettings
from judge_runner.llm.errors import LLMError
from judge_runner.querygen.card import card_lines
from judge_runner.querygen.profile import profile_corpus
from judge_runner.querygen.protocol import GenerationResult, generate_queries
from judge_runner.querygen.review import ReviewOptions, review_query_set
from judge_runner.querygen.submitted import query_set_sha256
from judge_runner.runs.write import RunWriter, utc_now
from judge_runner.search.base import SearchIndex
from judge_runner.search.systems import System

PROMPTS = (
    "generate_system.md",
    "generate_user.md",
    "judge_label_system.md",
    "judge_label_user.md",
    "judge_labels_user.md",
    "judge_list_system.md",
    "judge_list_user.md",
)


# -- providers ------------------------------------------------------------------------------------------
def make_roles(settings: Settings, need_generator: bool, say: Say, index: SearchIndex | None = None) -> Roles:
    """The run's :class:`~judge_runner.app.roles.Roles` (query writer or None, judge, budget, judge
    concurrency and price, the command's embedder) for ``settings.provider``, built by
    :func:`judge_runner.app.roles.build_roles` from the provider registry (``auto``: the first provider
    whose key or base URL is set, else offline). ``index``: the command's open index, whose embedder the
    roles share (None: the command has none; the ``embedder`` setting's, else the default). Says which
    provider and models were chosen, and why. Raises UsageError for a missing key, or for a model with no
    known price under ``--max-budget-usd``."""
    try:
        return build_roles(settings, need_generator, say=say, embedder=index.embedder if index is not None else None)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


# -- steps ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """What the phases of one job share, each built once: the settings, the roles (query writer, judge,
    budget), phase two's options (:func:`evaluate_options`), the open index (None when only other
    systems are judged), the folder for run files, where to print, and the searches under test when not
    only the built-in one. Derive a changed job with :func:`dataclasses.replace`."""

    settings: Settings
    roles: Roles
    options: EvaluateOptions
    index: Any
    out_dir: Path
    printer: Printer
    systems: list[System] | None = None


def new_job(settings: Settings, roles: Roles, index: Any, out_dir: Path, printer: Printer, systems: list[System] | None = None) -> Job:
    """A :class:`Job` with phase two's options built from ``settings`` and the roles' judge concurrency."""
    return Job(settings, roles, evaluate_options(settings, roles.concurrency), index, out_dir, printer, systems)


def open_job(settings: Settings, fixtures: Path, out_dir: Path, printer: Printer, need_generator: bool) -> Job:
    """Check the corpus, open the index (which settles the command's embedder), choose the providers
    (sharing that embedder), then index FIXTURES incrementally (pruning what is gone). The caller closes
    ``job.index``. Raises UsageError (bad corpus, an index another embedder built, provider or key)
    before anything is indexed."""
    check_corpus(settings, fixtures)
    index = open_index(settings)
    try:
        roles = make_roles(settings, need_generator, printer.err, index)
    except BaseException:
        index.close()
        raise
    printer.note(f"indexing {fixtures} into {settings.index_label} ...")
    done = index_fixtures(index, settings, fixtures, prune=True, printer=printer)
    printer.note(describe_index(done.report, done.elapsed))
    return new_job(settings, roles, done.index, out_dir, printer)


def write_queries(settings: Settings, roles: Roles, fixtures: Path, printer: Printer) -> GenerationResult:
    """Phase one: ``settings.count`` queries about FIXTURES from the roles' writer, then the review
    (:func:`judge_runner.querygen.review.review_query_set`: duplicates, non-specific queries, the judge's
    answerability check through the judgment cache, leakage and spread) and the query-set card, printed
    at the end. Raises what ``generate_queries`` raises (LLMError, KeyboardInterrupt), KeyboardInterrupt
    during the review, and UsageError for a judgment cache that cannot be used."""
    extensions = parse_extensions(settings.extensions)
    printer.note(f"phase one: writing {settings.count} queries from {fixtures} ...")
    profile = profile_corpus(fixtures, extensions)
    result = generate_queries(roles.writer, fixtures, settings.count, extensions, log=printer.log, profile=profile)  # type: ignore[arg-type]
    printer.note(f"phase one: checking {len(result.queries)} queries (duplicates, specificity, answerability with the judge) ...")
    # the judgment cache is opened only when the judge has a query to check (phase two reuses its labels)
    cache = open_cache(settings, printer) if any(q.queryType != "off-topic" for q in result.queries) else None
    try:
        options = ReviewOptions(
            settings.keep_unverified, ProtocolSettings(settings.judge_mode, settings.trials, settings.seed), roles.concurrency
        )
        result = review_query_set(result, profile, roles.judge, embedder=roles.embedder, cache=cache, options=options, log=printer.log)
    finally:
        if cache is not None:
            cache.close()
    if result.card is not None:
        for line in card_lines(result.card):
            printer.note(line)
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
        generation = write_queries(job.settings, job.roles, fixtures, job.printer)
    except (LLMError, KeyboardInterrupt) as exc:
        job.printer.err(f"error: phase one stopped: {str(exc) or 'interrupted'}")
        return write_stopped_run(job, exc)
    return require_queries(generation)


def prompt_hashes() -> dict[str, str]:
    """sha256 of each prompt file, by file name (recorded in provenance)."""
    return {name: prompt_sha256(name) for name in PROMPTS}


@dataclass(frozen=True, kw_only=True)
class RunInputs:
    """Where a run's queries came from and what it carries on. ``generation``: phase one's result (None: a
    set read from a file); ``all_queries``: the whole set, saved beside the run (None: the queries judged);
    ``card``: the card of a set read from a file (the generation's own wins); ``resume``: the run resumed;
    ``origin``: provenance fields of the run a ``rejudge`` judges again (they win); ``prior_batches``:
    ``batch`` lines of an earlier run whose results a ``--batch`` judge picks up; ``resume_hint``: what
    picks up batches left in flight (said on Ctrl+C and in the summary; None: ``evaluate --resume``)."""

    generation: GenerationResult | None = None
    all_queries: list[Query] | None = None
    card: QuerySetCard | None = None
    resume: ResumePoint | None = None
    origin: dict[str, Any] | None = None
    prior_batches: list[dict] | None = None
    resume_hint: str | None = None


def run_start_fields(
    job: Job, writer: RunWriter, queries: list[Query], inputs: RunInputs, *, generator_model: str | None = None, with_count: bool = False
) -> dict:
    """The ``run_start`` line's fields. Saves the query set with its card beside the run file
    (``<run>.queries.json``) so next week, or ``--resume``, finds it; raises StorageError (exit 3) when it
    cannot be written, the (empty) run file removed."""
    settings = job.settings
    generation, resume, all_queries, card, origin = inputs.generation, inputs.resume, inputs.all_queries, inputs.card, inputs.origin
    config: dict[str, Any] = {
        "searchMode": settings.search_mode,
        "searchLimit": settings.search_limit,
        "concurrency": job.options.concurrency,
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
        "humanQrels": list(settings.human_qrels) if settings.human_qrels is not None else None,  # None: every set
        "batch": settings.batch,
    }
    if with_count:
        config["count"] = settings.count
    saved = all_queries or queries
    card = generation.card if generation is not None and generation.card is not None else card
    if saved:
        query_file = writer.path.with_suffix(".queries.json")
        try:
            query_file.write_text(QuerySet(queries=saved, card=card).to_json(), encoding="utf-8")
        except OSError as exc:  # a full disk: the user's environment, before anything is spent (exit 3)
            writer.close()
            for made in (query_file, writer.path):
                made.unlink(missing_ok=True)
            raise StorageError("the query set", query_file, exc) from exc
        config["querySetFile"] = query_file.name
    run_start: dict[str, Any] = {
        "config": config,
        "provenance": provenance(
            job.roles.judge,
            Basis(
                prompt_hashes=prompt_hashes(),
                query_set_sha=query_set_sha256(saved),
                corpus_fingerprint=(job.index.get_meta("corpus_fingerprint") or "") if job.index is not None else "",
                search_config=settings.search.model_dump(exclude={"external"}),
                generator_provider=job.roles.writer.name if generator_model and job.roles.writer is not None else None,
                generator_model=generator_model,
                passage_embedder=str(getattr(job.roles.embedder, "name", "") or ""),
            ),
            job.options,
        ),
        "queriesGenerated": generation.generated if generation else None,
        "queriesDropped": len(generation.dropped) if generation else 0,
        "querySetCard": card.model_dump(mode="json") if card is not None else None,
    }
    if job.systems:
        run_start["provenance"]["searchSystems"] = [{"name": system.name, **system.description} for system in job.systems]
    run_start["provenance"].update(origin or {})
    if resume is not None:
        # a resumed run keeps its place in time: the original start, with the resume time beside it
        run_start["resumedFrom"] = resume.path.name
        run_start["resumedAt"] = utc_now()
        if resume.start.timestamp:
            run_start["timestamp"] = resume.start.timestamp
    return run_start


def evaluate_options(settings: Settings, concurrency: int | None = None) -> EvaluateOptions:
    """Phase two's options from the settings; ``concurrency``: the judge concurrency the roles settled on
    (:attr:`Roles.concurrency`; default the setting)."""
    return EvaluateOptions(
        settings.search_mode,
        settings.search_limit,
        settings.concurrency if concurrency is None else concurrency,
        settings.weights,
        settings.min_overall,
        settings.judge_mode,
        settings.trials,
        settings.seed,
        tuple(settings.human_qrels) if settings.human_qrels is not None else None,
    )


def evaluate_queries(job: Job, queries: list[Query], inputs: RunInputs | None = None) -> RunOutcome:
    """Phase two: judge ``queries`` into a new run file (for a resumed run: its judged lines first, same
    runId) and print the summary."""
    inputs = inputs or RunInputs()
    generation, resume, prior_batches, resume_hint = inputs.generation, inputs.resume, inputs.prior_batches, inputs.resume_hint
    cache = open_cache(job.settings, job.printer)  # first: a cache that cannot be used refuses the run before a file is written
    try:
        writer = open_run_writer(job.out_dir, run_id=resume.run_id if resume else None)
        generator = generation.model if generation else None
        run_start = run_start_fields(job, writer, queries, inputs, generator_model=generator, with_count=generation is not None)
    except BaseException:
        if cache is not None:
            cache.close()
        raise
    check_human_coverage(cache, job.settings, queries, job.printer)
    batching = getattr(job.roles.judge, "batching", None)
    if batching is not None and resume_hint:
        batching.resume_hint = resume_hint
    ctx = RunContext(
        judge=job.roles.judge,
        options=job.options,
        budget=job.roles.budget,
        cache=cache,
        output=RunOutput(echo=job.printer.progress, log=job.printer.log, alert=job.printer.problems),
    )
    try:
        if job.systems:
            outcome = run_systems(
                queries, job.systems, writer, run_start, ctx,
                prior=[line.line() for line in resume.evaluations] if resume else None,
                prior_batches=[line.line() for line in resume.batches] if resume else prior_batches,
            )  # fmt: skip
        else:
            search, estimate = start_estimate(
                queries,
                job.index,
                job.roles.judge,
                job.options,
                cache,
                price=job.roles.judge_price,
                budget_cap_usd=job.roles.budget.max_usd,
                say=job.printer.note,
            )
            outcome = run_evaluation(
                queries,
                search,
                writer,
                run_start,
                ctx,
                prior=[line.line() for line in resume.evaluations] if resume else None,
                estimate=estimate,
                prior_batches=[line.line() for line in resume.batches] if resume else prior_batches,
            )
    finally:
        if cache is not None:
            cache.close()
    print_summary(outcome, job.printer, phase_one=generation is not None, resume_hint=resume_hint)
    if job.settings.min_overall is not None:  # a quality gate on an uncalibrated or failed judge says so
        found = calibration_for_provenance(calibration_folder(job.out_dir), run_start["provenance"])
        if status_of(found) != "calibrated":
            job.printer.err(f"warning: --min-overall gates on a judge that is not calibrated; {calibration_line(found)}")
    return outcome


def write_stopped_run(job: Job, stopped_by: BaseException) -> RunOutcome:
    """The run file of a job whose phase one stopped (``stopped_by``: an LLMError or KeyboardInterrupt):
    run_start (with the generator's model) and a summary saying why; nothing is judged. The status is
    a configuration error for a refused key, else incomplete."""
    started = time.monotonic()
    writer = open_run_writer(job.out_dir)
    generator = job.roles.writer.model if job.roles.writer is not None else None
    run_start = run_start_fields(job, writer, [], RunInputs(), generator_model=generator, with_count=True)
    state = begin_run(writer, run_start, 0)
    state.phase_one_stopped(stopped_by)
    outcome = end_run(
        state, writer, job.options, RunFinish(started=started, budget=job.roles.budget, heuristic=is_heuristic(job.roles.judge))
    )
    print_summary(outcome, job.printer)
    return outcome
