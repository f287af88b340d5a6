"""Command ``weekly``: the cron job (see ``judge_runner.app.weekly.weekly_run``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from judge_runner.app.dry_run import weekly_dry_run
from judge_runner.app.inputs import load
from judge_runner.app.weekly import WeeklyPlan, weekly_run
from judge_runner.cli.options import (
    FIXTURES,
    MIN_OVERALL,
    check_flags,
    db_option,
    dry_run_options,
    merged_flags,
    printer,
    run_options,
    search_options,
    setting_option,
)
from judge_runner.cli.search_options import search_adapter_options, systems_spec
from judge_runner.core.failures import EXIT_OK, exit_code_for

PLAN_OPTIONS = ("fixtures", "queries_path", "regenerate", "results", "reports", "keep", "log_path", "fail_on_regression")
"""The options that make the :class:`~judge_runner.app.weekly.WeeklyPlan` (the others are settings and search flags)."""


@click.command()
@FIXTURES
@click.option(
    "--queries",
    "queries_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Query set to evaluate [default: the set pinned in RESULTS/pinned-queries.json].",
)
@click.option("--regenerate", is_flag=True, help="Write a fresh query set (phase one) and pin it for the following weeks.")
@setting_option("count", "Queries when generating a set (first run or --regenerate) [default: 15].")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=Path("quality-results"), show_default=True)
@click.option("--reports", type=click.Path(file_okay=False, path_type=Path), default=Path("reports"), show_default=True)
@click.option(
    "--keep",
    type=click.IntRange(min=1),
    default=52,
    show_default=True,
    help="Run files to keep (the baseline, the query set judged and files a label session needs too).",
)
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Append everything printed to this file [default: RESULTS/weekly.log].",
)
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when this run regressed against the baseline or previous run.")
@MIN_OVERALL
@db_option
@search_options
@search_adapter_options
@run_options
@dry_run_options
def weekly(quiet: bool, dry_run: bool, dry_run_json: bool, **options: Any) -> int:
    """One command for cron: evaluate, report, prune old runs, under a lock.

    \b
    1. takes RESULTS/.weekly.lock (a second, overlapping run says so and exits 0, touching nothing);
    2. indexes FIXTURES incrementally;
    3. evaluates the pinned query set (generates and pins one on the first run or with --regenerate);
    4. writes the report into --reports, then keeps only the newest --keep run files.
    Judges the systems evaluate would judge here: the built-in search, or --search-command,
    --search-url, several --search-mode values, or a [search.external] table of judge-runner.toml.
    Never prompts. Exit codes as for evaluate; with --fail-on-regression, 1 on a regression.
    \b
    crontab:  0 6 * * 1  cd /srv/kb && /opt/judge-runner/.venv/bin/judge-runner weekly --fixtures docs/ --quiet
    """
    plan = WeeklyPlan(**{name: options.pop(name) for name in PLAN_OPTIONS}, count_given=options.get("count") is not None)
    spec = systems_spec(options)
    flags = merged_flags(click.get_current_context(), options)
    if check_flags(dry_run, dry_run_json):  # no lock, no log, nothing indexed, judged, reported or pruned
        weekly_dry_run(load(flags), plan, printer(quiet), dry_run_json, systems=spec)
        return EXIT_OK
    return exit_code_for(weekly_run(flags, plan, printer(quiet), spec))
