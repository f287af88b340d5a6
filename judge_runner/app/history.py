"""The jobs that read past runs: show the trend (``trend``), pin the baseline (``baseline set``), write
the weekly report (``report``). Failures raise :mod:`judge_runner.core.failures` errors."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from judge_runner.analysis.report import build_report
from judge_runner.analysis.trend import Trend, build_trend, query_history, set_baseline
from judge_runner.analysis.trend_plot import plot_trend
from judge_runner.analysis.trend_render import (
    print_table,
    query_texts_warning,
    render_csv,
    render_history,
    render_json,
    render_markdown,
    trend_rows,
)
from judge_runner.core.failures import GateFailedError, UsageError
from judge_runner.core.printer import Printer, rich_text
from judge_runner.core.timespan import parse_since
from judge_runner.judging.cache import JudgmentCache


@contextmanager
def reading_cache(path: Path | None, must_exist: bool = True) -> Iterator[JudgmentCache | None]:
    """The judgment cache at ``path`` opened read-only, whose labels and people's grades join the pooled qrels
    of ``trend`` and ``report``; None without a path (or, unless ``must_exist``, without a file there). Raises
    UsageError for a missing file, and the cache's own CacheError for one that cannot be read."""
    if path is None or (not must_exist and not path.exists()):
        yield None
        return
    if not path.exists():
        raise UsageError(f"no judgment cache at {path}")
    with JudgmentCache(path, readonly=True) as cache:
        yield cache


def named_cache(results: Path) -> tuple[Path, str] | None:
    """``(path, run id)``: the judgment cache the newest run in ``results`` that names an existing one recorded
    (``run_start.config.judgmentCache``); a relative path is read from the current folder, then from the
    results folder's parent (where a run started in the default layout, ``quality-results/`` beside
    ``.judge-runner/``). None when no run names one that exists."""
    for file in sorted(Path(results).glob("*.jsonl"), reverse=True):  # run ids sort by their start
        try:
            with file.open("rb") as handle:
                first = json.loads(handle.readline())
        except (OSError, ValueError):
            continue
        config = first.get("config") if isinstance(first, dict) and first.get("type") == "run_start" else None
        named = config.get("judgmentCache") if isinstance(config, dict) else None
        if not isinstance(named, str) or not named:
            continue
        path = Path(named)
        for candidate in [path] if path.is_absolute() else [path, Path(results).parent / path]:
            if candidate.is_file():
                return candidate.resolve(), str(first.get("runId"))
    return None


@dataclass(frozen=True, kw_only=True)
class TrendView:
    """How ``trend`` shows the runs: ``fmt`` (table: compact unless ``wide``; json, markdown, csv: every
    column), or one query's history (``query_id``); ``plot``: a PNG of each dimension over time;
    ``min_effect``: the smallest change of a mean that counts (0-1); ``fail_on_regression``: the gate."""

    fmt: str = "table"
    wide: bool = False
    query_id: str | None = None
    plot: Path | None = None
    min_effect: float = 0.03
    fail_on_regression: bool = False


def show_trend(results: Path, view: TrendView, printer: Printer, cache: Path | None = None, built: Trend | None = None) -> None:
    """Print the runs in ``results`` as ``view`` asks, every run scored against the qrels known now
    (``cache``: the judgment cache whose labels and people's grades join them). ``built``: the trend
    already built from ``results`` (:func:`judge_runner.api.trend`). Raises UsageError when there is
    nothing to show, GateFailedError when ``view.fail_on_regression`` and the latest run failed
    (:attr:`judge_runner.analysis.trend.Run.failed`) or regressed."""
    with reading_cache(cache) as store:
        _show_trend(results, view, printer, store, built)


def _show_trend(results: Path, view: TrendView, printer: Printer, cache: JudgmentCache | None, built: Trend | None) -> None:
    fmt, query_id, fail_on_regression = view.fmt, view.query_id, view.fail_on_regression
    if query_id is not None:
        history = query_history(results, query_id, cache)
        if not history:
            raise UsageError(f"query {query_id!r} appears in no run in {results}")
        warning = query_texts_warning(history, query_id)
        if warning is not None:
            printer.err(f"warning: {warning}")
        printer.out(render_history(history, fmt))
        return
    trend = built if built is not None else build_trend(results, view.min_effect, cache)
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
        printer.out(rich_text(lambda console: print_table(trend, rows, console, view.wide)))
        for group in trend.groups:
            printer.err(f"{group['judge']}: {group['calibration']}")
    if view.plot is not None:
        try:
            printer.err(f"plot written to {plot_trend(results, view.plot, cache)}")
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


def write_report(results: Path, since: str, out_dir: Path, printer: Printer, cache: Path | None = None) -> None:
    """Write the weekly report (Markdown and HTML) of ``results`` into ``out_dir``; ``since`` is the cost
    table's period (``7d``, ``36h``, ``2w``); ``cache``: the judgment cache whose labels and people's grades
    join the pooled qrels. Raises UsageError for a bad period, a missing folder or no complete run."""
    try:
        parse_since(since)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not results.is_dir():
        raise UsageError(f"results folder not found: {results}")
    try:
        with reading_cache(cache) as store:
            written = build_report(results, out_dir, since, cache=store)
    except ValueError as exc:
        raise UsageError(f"no report: {exc} in {results}") from None
    printer.out(f"report written to {written.markdown} and {written.html}")


def ci_report_url(environ: Mapping[str, str] | None = None) -> str | None:
    """The page of the CI run that wrote the report, from GitHub Actions' variables (``GITHUB_SERVER_URL``,
    ``GITHUB_REPOSITORY``, ``GITHUB_RUN_ID``: its artifacts are there); None outside a workflow."""
    env = os.environ if environ is None else environ
    parts = [env.get(name) for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    return f"{parts[0]}/{parts[1]}/actions/runs/{parts[2]}" if all(parts) else None
