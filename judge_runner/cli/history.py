"""Commands ``trend``, ``baseline set`` and ``report``: reading the runs already written (``trend`` and
``report --format github`` through the public API, :mod:`judge_runner.api`)."""

from __future__ import annotations

from pathlib import Path

import click

from judge_runner import api
from judge_runner.app.history import pin_baseline, show_trend, write_report
from judge_runner.cli.cache import CACHE
from judge_runner.cli.numbers import FiniteFloatRange
from judge_runner.cli.options import printer, settings


def known_cache(cache: str | None) -> Path | None:
    """The judgment cache whose labels and people's grades join the pooled qrels: ``--cache`` (which must
    exist), else the settings' cache when it exists (read only), else None."""
    path = settings(cache=cache).cache_path
    return path if cache is not None or (path is not None and path.is_file()) else None


@click.command()
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path("quality-results"))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown", "csv"]),
    default="table",
    show_default=True,
    help="table: a compact view that fits 100 columns (--wide for every column); json, markdown and csv hold every column.",
)
@click.option("--wide", is_flag=True, help="The table with every column: each dimension, abstention, both changes, cost per judged query.")
@click.option("--query", "query_id", default=None, help="Show one query (by id) across runs instead.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write a PNG of each dimension over time.")
@click.option(
    "--min-effect",
    type=FiniteFloatRange(0, 1),
    default=0.03,
    show_default=True,
    help="Smallest change of a mean (0-1) reported as a regression or improvement.",
)
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when the latest run regressed (overall or nDCG@10) against the baseline, or the previous comparable run.",
)
@CACHE
def trend(
    results: Path,
    fmt: str,
    wide: bool,
    query_id: str | None,
    plot: Path | None,
    min_effect: float,
    fail_on_regression: bool,
    cache: str | None,
) -> None:
    """Show whether search got better or worse across the runs in RESULTS.

    \b
    Runs are compared only under the same judge (provider, model, prompts) and, for the scores, the
    same scoring version. ▲/▼ mark a change beyond noise (95% bootstrap interval excludes 0) and at
    least --min-effect in size; · marks a change within noise; ? too few queries (under 5) to tell.
    Same query set: paired per-query comparison; different sets: unpaired. Every run is scored against
    the qrels known now: the labels of all runs of its judge, pooled (with --cache, the cache's labels
    and people's grades too). The note under the table names what changed (system under test, corpus,
    query set, judge, scoring version) or that a run FAILED. RESULTS defaults to quality-results/.
    """
    store = known_cache(cache)
    built = api.trend(results, min_effect=min_effect, cache=store).trend if query_id is None else None
    show_trend(results, fmt, query_id, plot, min_effect, fail_on_regression, printer(), wide, store, built)


@click.group()
def baseline() -> None:
    """Pin the run that trend compares against."""


@baseline.command("set")
@click.argument("run_id")
@click.option(
    "--results", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path("quality-results"), show_default=True
)
def baseline_set(run_id: str, results: Path) -> None:
    """Pin RUN_ID (or `latest`, the newest complete run) as the baseline of RESULTS."""
    pin_baseline(results, run_id, printer())


@click.command()
@click.argument("results", type=click.Path(file_okay=False, path_type=Path), default=Path("quality-results"))
@click.option(
    "--since",
    default="7d",
    show_default=True,
    help="Period whose runs the cost table lists (e.g. 7d, 36h, 2w); headline and charts use the latest run and all history.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="Folder for report-<date>.md, report-<date>.html and the chart PNGs (a report of the same day is replaced).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["files", "github"]),
    default="files",
    show_default=True,
    help="files: the weekly report into --out; github: the latest run as Markdown on stdout, for a PR comment or $GITHUB_STEP_SUMMARY.",
)
@click.option("--report-url", default=None, help="With --format github: where the full report is [default: the GitHub Actions run's page].")
@CACHE
def report(results: Path, since: str, out_dir: Path, fmt: str, report_url: str | None, cache: str | None) -> None:
    """Write the weekly report (Markdown and a self-contained HTML page) from the runs in RESULTS.

    \b
    <date> in the file names is the local date (the TZ of the machine), as `date +%F` prints it, e.g.
      mail -a "Content-Type: text/html" -s "Search quality" team@example.com < reports/report-$(date +%F).html
    With --format github, print the latest run's summary instead (docs/ci.md):
      judge-runner report --format github >> "$GITHUB_STEP_SUMMARY"
    """
    store = known_cache(cache)
    if fmt == "github":
        printer().out(api.pr_summary(results, report_url=report_url, cache=store).rstrip("\n"))
        return
    write_report(results, since, out_dir, printer(), store)
