"""Commands ``trend``, ``baseline set`` and ``report``: reading the runs already written."""

from __future__ import annotations

from pathlib import Path

import click

from judge_runner import api
from judge_runner.analysis.trend_render import MEANINGS
from judge_runner.app.history import TrendView, named_cache, pin_baseline, show_trend, write_report
from judge_runner.cli.numbers import FiniteFloatRange
from judge_runner.cli.options import printer, setting_option, settings

READ_CACHE = setting_option(
    "cache",
    "Judgment cache whose labels and people's grades join the qrels [default: the one the newest run names, else beside the index].",
)


def known_cache(cache: str | None, results: Path, say: bool = True) -> Path | None:
    """The judgment cache joining the pooled qrels: ``--cache``, else the one the newest run in ``results``
    names when it exists, else the settings' when it exists, else None; ``say``: which, in one line on stderr
    (not beside output for tools; nothing without one)."""
    path = settings(cache=cache).cache_path
    named = named_cache(results) if cache is None else None
    if cache is not None:
        found, why = path, "--cache"
    elif named is not None:
        found, why = named[0], f"the one run {named[1]} used"
    elif path is not None and path.is_file():
        found, why = path, "beside the index"
    else:
        found, why = None, ""
    if say and found is not None:  # without one, the qrels line says the grades are the runs' own
        printer().err(f"judgment cache: {found} ({why})")
    return found


TREND_HELP = (
    "Show whether search got better or worse across the runs in RESULTS (default quality-results/).\n\n"
    "Marks: " + "; ".join(f"{m} {text}" for m, text in MEANINGS.items()) + " (beyond noise: a 95% interval clear of 0 and at "
    "least --min-effect). Runs are compared only under one judge (docs/weekly.md)."
)


@click.command(help=TREND_HELP)
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path("quality-results"))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown", "csv"]),
    default="table",
    show_default=True,
    help="table fits 100 columns; json, markdown and csv hold every column.",
)
@click.option("--wide", is_flag=True, help="The table with every column.")
@click.option("--query", "query_id", default=None, help="Show one query (by id) across runs.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write a PNG of each dimension over time.")
@click.option(
    "--min-effect",
    type=FiniteFloatRange(0, 1),
    default=0.03,
    show_default=True,
    help="Smallest change of a mean that counts.",
)
@click.option(
    "--fail-on-regression",
    is_flag=True,
    help="Exit 1 when the latest run regressed.",
)
@READ_CACHE
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
    store = known_cache(cache, results, say=fmt == "table" and query_id is None)
    built = api.trend(results, min_effect=min_effect, cache=store).trend if query_id is None else None
    view = TrendView(fmt=fmt, wide=wide, query_id=query_id, plot=plot, min_effect=min_effect, fail_on_regression=fail_on_regression)
    show_trend(results, view, printer(), store, built)


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
    help="Period of the cost table (7d, 36h, 2w).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="Folder for the report and its charts.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["files", "github"]),
    default="files",
    show_default=True,
    help="files: the report into --out; github: the latest run as Markdown.",
)
@click.option("--report-url", default=None, help="With --format github: the full report's URL [default: the Actions run].")
@READ_CACHE
def report(results: Path, since: str, out_dir: Path, fmt: str, report_url: str | None, cache: str | None) -> None:
    """Write the weekly report (Markdown and self-contained HTML) from the runs in RESULTS.

    \b
    <date> in the file names is the local date, as `date +%F` prints it:
      mail -a "Content-Type: text/html" -s "Search quality" team@example.com < reports/report-$(date +%F).html
    For a pull request (docs/ci.md):
      judge-runner report --format github >> "$GITHUB_STEP_SUMMARY"
    """
    store = known_cache(cache, results, say=fmt == "files")
    if fmt == "github":
        printer().out(api.pr_summary(results, report_url=report_url, cache=store).rstrip("\n"))
        return
    write_report(results, since, out_dir, printer(), store)
