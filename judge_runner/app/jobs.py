"""The jobs behind ``generate-and-evaluate`` (:func:`main_job`), ``evaluate`` (:func:`evaluate_job`) and
``generate`` (:func:`generate_job`). A stopped phase one still leaves a run file saying why.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from judge_runner.app.indexing import check_corpus, open_index, require_folder
from judge_runner.app.inputs import (
    check_out_dir,
    close_systems,
    load_query_set,
    open_search_systems,
    reopen_search_systems,
    resolve_systems,
    warn_missing_sources,
)
from judge_runner.app.resume import (
    ResumePoint,
    check_same_systems,
    read_resume_point,
    rebuilds_systems,
    resumed_settings,
    warn_judge_change,
)
from judge_runner.app.steps import (
    RunInputs,
    evaluate_queries,
    make_roles,
    new_job,
    open_job,
    phase_one,
    require_queries,
    write_queries,
)
from judge_runner.config import Settings
from judge_runner.core.failures import (
    IncompleteRunError,
    UsageError,
)
from judge_runner.core.models import QuerySet
from judge_runner.core.printer import Printer
from judge_runner.evaluation.state import RunOutcome
from judge_runner.llm.errors import AuthError, BudgetExhausted, LLMError, SpendLimitError
from judge_runner.querygen.protocol import GenerationResult
from judge_runner.querygen.submitted import query_set_sha256
from judge_runner.search.systems import System, SystemsSpec


# -- jobs -------------------------------------------------------------------------------------------------
def main_job(settings: Settings, fixtures: Path, out_dir: Path, printer: Printer, systems: SystemsSpec | None = None) -> RunOutcome:
    """``generate-and-evaluate``: index FIXTURES, write a query set, judge the search (or ``systems``) on it."""
    require_folder(fixtures)
    check_out_dir(out_dir)
    job = open_job(settings, fixtures, out_dir, printer, need_generator=True)
    with job.index:
        # opened before phase one spends anything: a bad flag or an unset token variable stops the job here
        job = replace(job, systems=open_search_systems(settings, resolve_systems(settings, systems), job.index, fixtures, [], printer))
        try:
            first = phase_one(job, fixtures)
            if isinstance(first, RunOutcome):
                return first
            warn_missing_sources(job.index, first.queries, settings.index_label, printer.err)
            return evaluate_queries(job, first.queries, RunInputs(generation=first))
        finally:
            close_systems(job.systems)


def generate_job(settings: Settings, fixtures: Path, out: Path, force: bool, printer: Printer) -> GenerationResult:
    """``generate``: write a query set to ``out`` (never over a file without ``force``). Raises UsageError or
    IncompleteRunError; nothing is spent before ``out``'s folder is known to be writable."""
    require_folder(fixtures)
    if out.exists() and not force:
        raise UsageError(f"{out} exists; pass --force to overwrite it or --out to write elsewhere")
    check_out_dir(out.parent if str(out.parent) else Path("."))
    check_corpus(settings, fixtures)
    roles = make_roles(settings, need_generator=True, say=printer.err)
    try:
        result = write_queries(settings, roles, fixtures, printer)
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
    out.write_text(result.query_set().to_json(), encoding="utf-8")
    cost = roles.budget.total_cost_usd
    printer.out(
        f"wrote {len(result.queries)} queries to {out} ({len(result.dropped)} dropped; "
        f"cost {'unknown' if cost is None else f'${cost:.4f}'})"
    )
    return result


def evaluate_job(
    settings: Settings,
    queries_path: Path | QuerySet | None,
    resume_path: Path | None,
    out_dir: Path | None,
    printer: Printer,
    systems: SystemsSpec | None = None,
) -> RunOutcome | None:
    """``evaluate``: judge a query set (a file, or the set itself), or continue a run (``resume_path``: judged
    queries are copied, never sent again, and the rest searched with the systems the run started with); None
    when nothing is left to judge. A run of external systems alone needs no index. ``out_dir`` None: the
    resumed run's folder, else ``quality-results``."""
    resume = read_resume_point(resume_path) if resume_path is not None else None
    if out_dir is None:
        out_dir = resume.path.parent if resume is not None else Path("quality-results")
    for warning in resume.warnings if resume is not None else ():
        printer.err(f"warning: {warning}")
    searches = resolve_systems(settings, systems)
    rebuild = resume is not None and rebuilds_systems(resume, searches.ordinary)
    if resume is not None and queries_path is None:
        queries_path = resume.saved_query_set
        if queries_path is None:
            raise UsageError(f"{resume.path} has no saved query set beside it; pass --queries FILE")
    if queries_path is None:
        raise UsageError("give --queries FILE (or --resume RUN.jsonl)")
    query_set = queries_path if isinstance(queries_path, QuerySet) else load_query_set(queries_path)
    where = "the query set given" if isinstance(queries_path, QuerySet) else str(queries_path)
    check_out_dir(out_dir)
    if resume is not None and resume.query_set_sha256 != query_set_sha256(query_set.queries):
        raise UsageError(f"{where} is not the query set {resume.path} was judged on (sha256 differs)")
    recorded = resume.recorded_systems if resume is not None and rebuild else None
    needs_index = any(s.get("kind") == "builtin" for s in recorded) if recorded is not None else searches.needs_index
    index = open_index(settings, must_exist=True) if needs_index else None
    with index if index is not None else nullcontext():
        if index is not None:
            warn_missing_sources(index, query_set.queries, settings.index_label, printer.err)
        job_systems: list[System] | None
        if recorded is not None and resume is not None:
            job_systems = reopen_search_systems(
                settings, recorded, index, str(resume.config.get("searchMode") or settings.search_mode), printer
            )
        else:
            job_systems = open_search_systems(settings, searches, index, None, query_set.queries, printer)
        try:
            return _evaluate_opened(settings, query_set, resume, index, out_dir, printer, job_systems)
        finally:
            close_systems(job_systems)


def _evaluate_opened(
    settings: Settings,
    query_set: QuerySet,
    resume: ResumePoint | None,
    index: Any,
    out_dir: Path,
    printer: Printer,
    job_systems: list[System] | None,
) -> RunOutcome | None:
    """The rest of :func:`evaluate_job` once the systems are open: for a resumed run, the check that they are
    the run's own and what is left to judge."""
    queries = query_set.queries
    if resume is not None:
        if job_systems is not None:
            check_same_systems(resume, job_systems)
        names: list[str | None] = [s.name for s in job_systems] if job_systems else [None]
        left = sum(len([q for q in queries if q.id not in resume.judged_by(name)]) for name in names)
        if not left:
            printer.out(f"nothing to resume: all {len(query_set.queries)} queries of run {resume.run_id} are judged in {resume.path}")
            return None
        printer.note(f"resuming run {resume.run_id}: {len(resume.evaluations)} judged lines copied, {left} to judge")
        if job_systems is None:
            queries = [q for q in queries if q.id not in resume.judged_by(None)]
        settings = resumed_settings(settings, resume, printer)
    roles = make_roles(settings, need_generator=False, say=printer.err, index=index)
    if resume is not None:
        warn_judge_change(roles.judge, resume, printer)
    job = new_job(settings, roles, index, out_dir, printer, job_systems)
    return evaluate_queries(job, queries, RunInputs(resume=resume, all_queries=query_set.queries, card=query_set.card))
