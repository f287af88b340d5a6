"""The jobs that read past runs: show the trend (``trend``), pin the baseline (``baseline set``), write
the weekly report (``report``). Failures raise :mod:`judge_runner.core.failures` errors."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from judge_runner.analysis.report import build_report
from judge_runner.analysis.trend import Trend, build_trend, plot_trend, query_history, set_baseline
from judge_runner.analysis.trend_render import print_table, render_csv, render_history, render_json, render_markdown, trend_rows
from judge_runner.core.failures import GateFailedError, UsageError
from judge_runner.core.printer import Printer, rich_text
from judge_runner.core.timespan import parse_since


def show_trend(
    results: Path,
    fmt: str,
    query_id: str | None,
    plot: Path | None,
    min_effect: float,
    fail_on_regression: bool,
    printer: Printer,
    wide: bool = False,
    built: Trend | None = None,
) -> None:
    """Print the runs in ``results`` as ``fmt`` (table: compact unless ``wide``; json, markdown, csv: every
    column), or one query's history;
    optionally plot each dimension over time (PNG). ``built``: the trend already built from ``results``
    (:func:`judge_runner.api.trend`). Raises UsageError when there is nothing to show,
    GateFailedError when ``fail_on_regression`` and the latest run failed (:attr:`judge_runner.analysis.trend.Run.failed`)
    or regressed."""
    if query_id is not None:
        history = query_history(results, query_id)
        if not history:
            raise UsageError(f"query {query_id!r} appears in no run in {results}")
        printer.out(render_history(history, as_json=fmt == "json"))
        return
    trend = built if built is not None else build_trend(results, min_effect)
    for warning in trend.warnings:
        printer.err(f"warning: {warning}")
    rows = trend_rows(trend)
    if not rows:
        raise UsageError(f"no judge-runner runs in {results}")
    if fmt == "json":
        printer.out(render_json(trend))
    elif fmt == "csv":
        printer.out(render_csv(rows))
    elif fmt == "markdown":
        printer.out(render_markdown(trend, rows))
    else:
        printer.out(rich_text(lambda console: print_table(trend, rows, console, wide)))
        for group in trend.groups:
            printer.err(f"{group['judge']}: {group['calibration']}")
    if plot is not None:
        try:
            printer.err(f"plot written to {plot_trend(results, plot)}")
        except ValueError as exc:
            printer.err(f"no plot: {exc}")
    latest = trend.latest_verdict
    if fail_on_regression and latest and latest.get("failed"):
        raise GateFailedError(f"the latest run {latest['runId']} failed: {latest['failure']}")
    if fail_on_regression and latest and latest["regression"]:
        bad = latest.get("regressions") or [c for c, v in latest["comparisons"].items() if v["verdict"] == "regression"]
        raise GateFailedError(f"regression: run {latest['runId']} is worse than {latest['against']} on {', '.join(bad)}")


def pin_baseline(results: Path, run_id: str, printer: Printer) -> None:
    """Pin ``run_id`` (or ``latest``) as the baseline of ``results``; raises UsageError for an unknown run."""
    try:
        chosen = set_baseline(results, run_id)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    printer.out(f"baseline set to {chosen.run_id} ({chosen.timestamp[:16]}, judge {chosen.judge_label})")


def write_report(results: Path, since: str, out_dir: Path, printer: Printer) -> None:
    """Write the weekly report (Markdown and HTML) of ``results`` into ``out_dir``; ``since`` is the cost
    table's period (``7d``, ``36h``, ``2w``). Raises UsageError for a bad period, a missing folder or no
    complete run."""
    try:
        parse_since(since)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not results.is_dir():
        raise UsageError(f"results folder not found: {results}")
    try:
        written = build_report(results, out_dir, since)
    except ValueError as exc:
        raise UsageError(f"no report: {exc} in {results}") from None
    printer.out(f"report written to {written.markdown} and {written.html}")


def ci_report_url(environ: Mapping[str, str] | None = None) -> str | None:
    """The page of the CI run that wrote the report, from GitHub Actions' variables (``GITHUB_SERVER_URL``,
    ``GITHUB_REPOSITORY``, ``GITHUB_RUN_ID``: its artifacts are there); None outside a workflow."""
    env = os.environ if environ is None else environ
    parts = [env.get(name) for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    return f"{parts[0]}/{parts[1]}/actions/runs/{parts[2]}" if all(parts) else None
