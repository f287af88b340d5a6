"""Commands ``generate`` (phase one), ``evaluate`` (phase two), ``generate-and-evaluate`` (the main job) and
``rejudge`` (a past run's results judged again), each ending in the public API (:mod:`judge_runner.api`).

Each returns the process exit code: 0, or the code of the run's status (``judge_runner.core.failures.exit_code_for``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from judge_runner import api
from judge_runner.app.dry_run import evaluate_dry_run, main_dry_run
from judge_runner.app.rejudge import rejudge_dry_run
from judge_runner.cli.options import (
    COUNT,
    FIXTURES,
    MIN_OVERALL,
    OUT_DIR,
    check_flags,
    db_option,
    dry_run_options,
    evaluate_options,
    generate_options,
    printer,
    run_options,
    search_options,
    settings,
)
from judge_runner.cli.search_options import compare_options, search_adapter_options, systems_spec
from judge_runner.core.failures import EXIT_OK


@click.command()
@click.option(
    "--fixtures", type=click.Path(path_type=Path), default=Path("fixtures"), show_default=True, help="Knowledge-base folder to explore."
)
@COUNT
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("queries.json"),
    show_default=True,
    help="Query-set file to write.",
)
@click.option("--force", is_flag=True, help="Overwrite --out if it exists.")
@generate_options
def generate(fixtures: Path, count: int | None, out: Path, force: bool, quiet: bool, **flags: Any) -> int:
    """Phase one: have the LLM explore FIXTURES and write a query set (JSON).

    \b
    The agent can only list, glob, read and grep files inside FIXTURES. The set is then checked and its
    card printed and saved (docs/query-sets.md); when no query is left, nothing is written (exit 3).
    Exit codes: 0 ok; 2 usage error or API key refused; 3 stopped (budget, interrupt, failure, no
    usable query); 4 internal error.
    """
    api.generate(fixtures, out=out, force=force, settings=settings(count=count, **flags), printer=printer(quiet))
    return EXIT_OK


@click.command()
@click.option(
    "--queries",
    "queries_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Query-set JSON written by `generate` (or saved beside a run as <run>.queries.json).",
)
@click.option(
    "--resume",
    "resume_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Continue an interrupted run file; its judged queries are not sent again.",
)
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the run file and its query set [default: quality-results; with --resume, the run file's folder].",
)
@MIN_OVERALL
@db_option
@search_options
@search_adapter_options
@compare_options
@evaluate_options
@dry_run_options
def evaluate(
    queries_path: Path | None, resume_path: Path | None, out_dir: Path | None, quiet: bool, dry_run: bool, dry_run_json: bool, **flags: Any
) -> int:
    """Phase two: search each query of a query set and have the judge grade the results.

    \b
    Needs an index (`judge-runner index FIXTURES`) unless only other systems are judged. One JSONL
    line per query is written the moment it is judged; a failed query becomes an error line and the
    run goes on. Other systems: --search-command, --search-url, --run RUN.trec --corpus C; several
    systems (or --search-mode fts,vector,hybrid, or --compare a.toml,b.toml) are judged side by side
    in one run, the summary giving each one's paired difference to the first.
    Exit codes: 0 ok; 1 --min-overall not met; 2 usage or configuration error (or API key refused);
    3 run incomplete (interrupted, budget exhausted, more than a quarter of the queries failed);
    4 internal error.
    """
    spec = systems_spec(flags)
    if check_flags(dry_run, dry_run_json):
        evaluate_dry_run(settings(**flags), queries_path, resume_path, printer(quiet), spec, dry_run_json)
        return EXIT_OK
    result = api.evaluate(
        queries_path,
        resume=resume_path,
        out_dir=out_dir,
        systems=spec,
        settings=settings(**flags),
        printer=printer(quiet),
    )
    return EXIT_OK if result is None else result.exit_code


@click.command("generate-and-evaluate")
@FIXTURES
@COUNT
@OUT_DIR
@MIN_OVERALL
@db_option
@search_options
@search_adapter_options
@run_options
@dry_run_options
def generate_and_evaluate(fixtures: Path, out_dir: Path, quiet: bool, dry_run: bool, dry_run_json: bool, **flags: Any) -> int:
    """The main job: index FIXTURES (incrementally), write a query set, judge the search on it.

    \b
    Writes quality-results/<run id>.jsonl (one line per query as it is judged, a summary last; the id is
    the UTC start and a random suffix) and the query set beside it as <run id>.queries.json, to re-run
    with `evaluate --queries`.
    Exit codes: 0 ok; 1 --min-overall not met; 2 usage or configuration error (or API key refused);
    3 run incomplete (interrupted, budget exhausted, more than a quarter of the queries failed);
    4 internal error.
    """
    spec = systems_spec(flags)
    if check_flags(dry_run, dry_run_json):
        main_dry_run(settings(**flags), fixtures, printer(quiet), dry_run_json, systems=spec)
        return EXIT_OK
    result = api.generate_and_evaluate(
        fixtures,
        out_dir=out_dir,
        systems=spec,
        settings=settings(**flags),
        printer=printer(quiet),
    )
    return result.exit_code


@click.command()
@click.argument("run", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@OUT_DIR
@db_option
@evaluate_options
@dry_run_options
def rejudge(run: Path, out_dir: Path, db: Path | None, quiet: bool, dry_run: bool, dry_run_json: bool, **flags: Any) -> int:
    """Judge the results of the run file RUN again with today's judge (a new model, prompt or protocol).

    \b
    Nothing is searched: every query gets the results RUN recorded, each shown to the judge with the
    text the first judge was shown (shownText). The new run file names RUN in provenance.rejudgeOf, and
    trend uses it to bridge the judge change: RUN -> the new run is the judge's step; the new judge's
    next runs are compared against the new run. Refused for a file without shown text.
    Exit codes: 0 ok; 2 usage or configuration error; 3 run incomplete; 4 internal error.
    """
    if check_flags(dry_run, dry_run_json):
        rejudge_dry_run(settings(db=db, **flags), run, printer(quiet), dry_run_json)
        return EXIT_OK
    return api.rejudge(run, out_dir=out_dir, settings=settings(db=db, **flags), printer=printer(quiet)).exit_code
