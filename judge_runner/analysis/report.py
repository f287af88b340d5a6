"""The weekly report: Markdown plus a self-contained HTML page (charts inline as base64 PNG), built only
from run files (docs/weekly.md).
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from judge_runner.analysis.changes import comparable_columns
from judge_runner.analysis.compare_report import comparison_markdown, plot_comparison
from judge_runner.analysis.corrected_change import LABELS_CAUSE, label_change, same_results
from judge_runner.analysis.corrected_report import corrected_markdown
from judge_runner.analysis.trend import METRICS, Run, compare, latest_group, read_baseline, read_runs, versus
from judge_runner.analysis.trend_plot import plot_runs
from judge_runner.calibrate.output import calibration_folder, calibration_for_provenance, calibration_line
from judge_runner.core.mdtext import md_text
from judge_runner.core.models import DIMENSIONS
from judge_runner.core.timespan import parse_since
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.pooled import qrels_text
from judge_runner.querygen.card import card_markdown
from judge_runner.runs.lines import EvaluationLine, SummaryLine
from judge_runner.runs.read import read_run_file
from judge_runner.runs.records import Grade

__all__ = ["Report", "build_report", "local_date", "md_text"]

WORST = 5
HEADLINE = ("overall", *DIMENSIONS, *METRICS)


@dataclass
class Report:
    markdown: Path
    html: Path
    charts: list[Path]


def local_date(moment: datetime) -> str:
    """``YYYY-MM-DD`` in the machine's local time zone, as ``date +%F`` prints it."""
    return moment.astimezone().strftime("%Y-%m-%d")


def _when(run: Run) -> datetime:
    try:
        return datetime.fromisoformat(run.timestamp.replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(run.path.stat().st_mtime, UTC)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _change(old: Run | None, new: Run, column: str) -> dict | None:
    if old is None:
        return None
    if column not in comparable_columns(old, new, (column,)):
        return {"scoringVersions": f"{old.scoring_version} -> {new.scoring_version}"}
    c = compare(old, new, column).as_dict()
    if same_results(old, new) and label_change(old, new):
        c["cause"] = LABELS_CAUSE
    return c


def _change_text(change: dict | None) -> str:
    if change is None:
        return "no earlier comparable run"
    if "scoringVersions" in change:
        return f"not compared: scoring version {change['scoringVersions']}"
    if change["delta"] is None:
        return "not comparable (no values)"
    text = f"{change['delta']:+.3f}"
    if change["ci95"][0] is not None:
        text += f" [95% CI {change['ci95'][0]:+.3f}, {change['ci95'][1]:+.3f}]"
    marks = {
        "regression": "▼ regression",
        "improvement": "▲ improvement",
        "within noise": "within noise",
        "too few queries": "too few queries to tell",
    }
    cause = f" ({change['cause']})" if change.get("cause") and change["verdict"] in ("regression", "improvement") else ""
    failed = change.get("failed") or {}
    mark = failed.get("text") if change["verdict"] == "cannot tell" else marks.get(change["verdict"], change["verdict"])
    if failed.get("secondFigure") and failed.get("holds"):  # failed queries that count, and the verdict holds
        cause += f" ({failed['text']})"
    return f"{text} {mark}{cause}{' (paired)' if change['paired'] else ''}"


def build_report(
    results: Path, out_dir: Path, since: str = "7d", now: datetime | None = None, cache: JudgmentCache | None = None
) -> Report:
    """Write ``report-<date>.md``, ``report-<date>.html`` and the chart PNGs into ``out_dir``.

    ``<date>`` is the LOCAL date of ``now``, so a cron job mailing ``report-$(date +%F).html`` finds its
    file in every time zone (run files keep UTC). ``since`` is the cost table's period. A failed newest run
    is reported first, with the figures of the last run that judged queries. Runs are scored against the
    qrels known now (``cache``'s grades join them). Raises ValueError when ``results`` holds no complete run.
    """
    runs, warnings = read_runs(results, cache)
    newest = max((r for r in runs if not r.partial), key=lambda r: (r.timestamp, r.run_id), default=None)
    if newest is None:
        raise ValueError("no complete run")
    now = now or datetime.now(UTC)
    window = [r for r in runs if _when(r) >= now - parse_since(since)]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = local_date(now)
    if not any(r.comparable for r in runs):  # nothing was ever judged: the failure is the whole report
        only = [f"# Search quality report, {stamp}", "", *_failure(newest, None), "## Failed queries", "", *_errors(newest)]
        if warnings:
            only += ["", "## Notes", ""] + [f"- {md_text(w)}" for w in warnings]
        return _write(out_dir, stamp, only, [])
    group = latest_group(runs)
    latest = group[-1]
    previous = group[-2] if len(group) > 1 else None
    baseline_id = read_baseline(results)
    baseline = next((r for r in group if r.run_id == baseline_id and r is not latest), None)
    failed = newest if newest.failed else None  # the newest run failed: said first, its errors listed
    charts = _charts(group, out_dir, stamp)
    summary = latest.summary
    md: list[str] = [f"# Search quality report, {stamp}", "", *_opening(latest, failed)]
    line = calibration_line(calibration_for_provenance(calibration_folder(results), latest.provenance.model_dump()))
    md += [line[0].upper() + line[1:] + ".", ""]
    lately = versus(previous, latest) if previous is not None else None
    md += _headline(latest, previous, baseline, lately)
    scope = _scope(summary)
    md += _abstention(summary, scope)
    md += ["", *corrected_markdown(latest.bias_corrected, lately["corrected"] if lately else None, previous.run_id if previous else None)]
    md += ["", "## Over time", "", f"![judge scores]({charts[0].name})", "", f"![IR metrics]({charts[1].name})", ""]
    if latest.comparison is not None:  # a compare run: every system side by side, against the qrels known now
        charts.append(plot_comparison(latest.comparison, out_dir / f"report-{stamp}-systems.png"))
        md += comparison_markdown(latest.comparison, charts[-1], latest.bias_corrected)
    md += _worst_queries(latest)
    card = latest.file.run_start.querySetCard if latest.file.run_start is not None else None
    if card is not None:  # what phase one's checks found about the query set
        md += ["## Query set", ""] + card_markdown(card)
    md += _issues(summary, scope)
    md += _costs(window or [latest], since)
    shown = failed or latest
    md += ["", "## Failed queries", ""]
    if failed is not None and failed is not latest:
        md += [f"Of the latest run, {md_text(failed.run_id)}:", ""]
    md += _errors(shown)
    if warnings:
        md += ["", "## Notes", ""] + [f"- {md_text(w)}" for w in warnings]
    return _write(out_dir, stamp, md, charts)


def _charts(group: list[Run], out_dir: Path, stamp: str) -> list[Path]:
    """The two PNG charts: the judge's scores, and the IR metrics."""
    latest = group[-1]
    return [
        plot_runs(
            group,
            out_dir / f"report-{stamp}-dimensions.png",
            (*DIMENSIONS, "overall"),
            f"Judge scores over time (judge {latest.judge_label})",
        ),
        plot_runs(
            group, out_dir / f"report-{stamp}-ir-metrics.png", METRICS, f"IR metrics over time ({', '.join(METRICS)}; mean RR = MRR)"
        ),
    ]


def _opening(latest: Run, failed: Run | None) -> list[str]:
    """The first lines: heuristic-judge and compare-run notes, a failed run's banner, the latest run."""
    md: list[str] = []
    if latest.provenance.heuristicJudge:
        md += [
            "> **Heuristic judge.** These scores come from judge-runner's offline heuristic (embedding similarity "
            "and term overlap), not from an LLM.",
            "",
        ]
    # every value read from a run file goes through md_text: it renders as its literal text
    t = md_text
    if latest.systems:
        md += [
            f"> **Compare run** of {len(latest.systems)} search systems; the figures below are the reference system's "
            f"({t(latest.systems[0])}), every system is in “Systems compared”.",
            "",
        ]
    if failed is not None:
        md += _failure(failed, latest)
        if failed is not latest and failed.comparison is not None:  # its other systems may have been judged
            md += ["## Systems compared in the failed run", *comparison_markdown(failed.comparison, None)[1:]]
    md += [
        f"{'Latest run' if failed is None else 'Figures from run' if failed is latest else 'Latest run with judged queries'} "
        f"**{t(latest.run_id)}** ({t(latest.timestamp[:16].replace('T', ' '))} UTC), judge {t(latest.judge_label)}: "
        f"{len(latest.evaluations)} queries evaluated, {latest.errors} failed"
        + (f", **cut short ({t(latest.cut_short.replace('_', ' '))})**" if latest.cut_short else "")
        + (
            f" of the run's {latest.summary.totalQueries} queries"
            if latest.cut_short and latest.summary is not None and latest.summary.totalQueries
            else ""
        )
        + ".",
        "",
    ]
    return md


def _headline(latest: Run, previous: Run | None, baseline: Run | None, lately: dict | None) -> list[str]:
    """What the latest run is compared with, then the headline table against the previous run and the baseline."""
    t = md_text
    md: list[str] = []
    if previous is not None and lately is not None:
        md += [f"Compared with the previous comparable run {t(previous.run_id)}."]
        if lately["changes"]:
            md += ["", "What changed since then: " + "; ".join(t(c) for c in lately["changes"]) + "."]
    if baseline is not None:
        md += [f"Baseline: {t(baseline.run_id)}."]
    md += ["", "## Headline numbers", "", "| measure | latest | change since previous run | change since baseline |", "|---|---|---|---|"]
    for column in HEADLINE:
        change, base_change = _change(previous, latest, column), _change(baseline, latest, column) if baseline else None
        md.append(f"| {column} | {_fmt(latest.mean(column))} | {_change_text(change)} | {_change_text(base_change) if baseline else '–'} |")
    if latest.qrels:  # every run shown is scored against the qrels known now: say which
        md += [
            "",
            f"Every run's IR metrics, relevance and overall are scored against the qrels known now; the latest run's {qrels_text(latest.qrels)}.",
        ]
    return md


def _scope(summary: SummaryLine | None) -> str:
    """Whose figures a compare run's summary gives (reference system, or all pooled in older files); "" for
    one system."""
    # a compare run's summary gives its reference system's abstention, issues and focus; older files pooled them
    if summary is not None and summary.comparison is not None and summary.comparison.systems:
        own = "abstention" in summary.comparison.systems[0].model_fields_set
        return (
            f" (reference system {md_text(summary.comparison.reference)})"
            if own
            else " (all systems pooled, as this older run file records them)"
        )
    return ""


def _abstention(summary: SummaryLine | None, scope: str) -> list[str]:
    """The off-topic paragraph: abstentions right and wrong with their rates; nothing without the figures."""
    a = summary.abstention if summary else None
    if not a:
        return []
    return [
        "",
        f"Off-topic queries{scope}: {a.correct} of {a.offTopic} correctly got no confident answer; "
        f"{a.falseAbstentions} on-topic queries were answered without confidence."
        + (f" Abstention accuracy {a.accuracy:.0%}." if a.accuracy is not None else "")
        + (f" False-abstention rate {a.falseAbstentionRate:.0%}." if a.falseAbstentionRate is not None else ""),
    ]


def _whose(result: Grade) -> str:
    """``person 3, judge 2`` or ``judge 1``."""
    if result.labelOrigin == "human":
        return f"person {result.relevance}" + (f", judge {result.judgeLabel}" if result.judgeLabel is not None else "")
    return f"judge {result.relevance}"


def _worst_queries(latest: Run) -> list[str]:
    """The ``WORST`` on-topic queries, lowest overall first, with the judge's analysis and their top results'
    grades, each named whose."""
    t = md_text
    # unscored queries (no overall the reader could trust) are not ranked among the worst
    # nor are off-topic queries: they are scored on abstention (format-1 files gave them 0.5)
    worst = sorted(
        (e for e in latest.evaluations if e.value("overall") is not None and e.queryType != "off-topic"),
        key=lambda e: e.value("overall") or 0.0,
    )[:WORST]
    whole: dict[tuple[str | None, str], EvaluationLine] = {}
    if worst:
        try:
            whole = {(e.system, e.queryId): e for e in read_run_file(latest.path).evaluations}
        except OSError:
            pass
    md = ["## Worst queries", ""]
    for ev in worst:
        line = whole.get((ev.system, ev.queryId))
        md += [
            f"### {t(ev.queryId)}: “{t(ev.query)}” — overall {_fmt(ev.value('overall'))}",
            "",
            f"*{t(ev.queryType or '?')}*; intent: {t(ev.queryIntent or '–')}",
            "",
        ]
        for dim in DIMENSIONS:
            md.append(f"- **{dim}** {_fmt(ev.value(dim), 2)}: {t((line.analysis if line else {}).get(dim, '–'))}")
        top = ", ".join(f"{t(r.source)} ({_whose(r)})" for r in ev.results[:5]) or "no results"
        md += [f"- top results (0-3 grades, whose each is): {top}"]
        if line is not None and line.suggestions:
            md += [f"- suggestions: {'; '.join(t(s) for s in line.suggestions)}"]
        md.append("")
    return md


def _issues(summary: SummaryLine | None, scope: str) -> list[str]:
    t = md_text
    md = ["## Top issues and focus", ""]
    if scope:
        md += [f"Figures{scope}; each system's focus is under “Systems compared”.", ""]
    issues = summary.topIssues if summary else []
    for issue in issues:
        md.append(f"- {t(issue.issue)} ({issue.count} queries: {', '.join(t(q) for q in issue.queryIds[:8])})")
    if not issues:
        md.append("- none reported")
    return md + ["", f"Recommended focus: {t((summary.recommendedFocus if summary else None) or '–')}", ""]


def _costs(runs: list[Run], since: str) -> list[str]:
    """The cost table: USD per run, per query and per judged query."""
    t = md_text
    md = [
        f"## Cost (runs since {t(since)})",
        "",
        "| run | judge | queries | cost | cost per query | cost per judged query |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        n = len(run.evaluations) + run.errors
        cost = run.cost
        per = None if cost is None or not n else cost / n
        md.append(
            f"| {t(run.run_id)}{' (partial)' if run.partial else ''} | {t(run.judge_label)} | {n} | "
            f"{'unknown' if cost is None else f'${cost:.4f}'} | {'–' if per is None else f'${per:.5f}'} | "
            f"{'–' if run.cost_per_judged_query is None else f'${run.cost_per_judged_query:.5f}'} |"
        )
    return md


def _failure(run: Run, shown: Run | None) -> list[str]:
    """The banner of a failed newest run: which, when, why, and whose figures follow (``shown``; None: none)."""
    t = md_text
    system = f" (reference system {t(run.shown_system)})" if run.shown_system else ""
    where = (
        "No run has judged queries yet."
        if shown is None
        else "Its figures are below, over the queries it judged."
        if shown is run
        else f"The figures below are from the last run with judged queries, {t(shown.run_id)} "
        f"({t(shown.timestamp[:16].replace('T', ' '))} UTC)."
    )
    return [
        f"> **The latest run FAILED.** Run **{t(run.run_id)}**{system} ({t(run.timestamp[:16].replace('T', ' '))} UTC): "
        f"{t(run.failure or 'failed')}. Its errors are listed under “Failed queries”. {where}",
        "",
    ]


def _errors(run: Run) -> list[str]:
    """The failed queries as a Markdown table, or "None."."""
    t = md_text
    if not run.error_lines:
        return ["None."]
    md = ["| query | stage | error | attempts |", "|---|---|---|---|"]
    for e in run.error_lines:
        md.append(f"| {t(e.queryId)}: {t(e.query)} | {t(e.stage)} | {t(e.errorType)}: {t(e.message[:160])} | {t(e.attempts)} |")
    return md


def _write(out_dir: Path, stamp: str, md: list[str], charts: list[Path]) -> Report:
    markdown = out_dir / f"report-{stamp}.md"
    markdown.write_text("\n".join(md) + "\n", encoding="utf-8")
    page = out_dir / f"report-{stamp}.html"
    page.write_text(_html(md, charts), encoding="utf-8")
    return Report(markdown, page, charts)


_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:960px;margin:2rem auto;padding:0 1rem;
color:#1d2733;background:#fff;line-height:1.45}h1{border-bottom:3px solid #2f6fdf;padding-bottom:.3rem}
h2{margin-top:2rem;color:#2f4a6d}table{border-collapse:collapse;width:100%;margin:.5rem 0;font-size:.92rem}
th,td{border:1px solid #d5dce5;padding:.35rem .5rem;text-align:left;vertical-align:top}th{background:#eef3fa}
blockquote{background:#fff6e0;border-left:4px solid #e0a400;margin:1rem 0;padding:.5rem 1rem}img{max-width:100%;border:1px solid #e3e8ef}
.reg{color:#b3261e;font-weight:600}.imp{color:#1b7f3b;font-weight:600}"""


def _html(md: list[str], charts: list[Path]) -> str:
    """One self-contained page (markdown-it-py, CommonMark plus tables), charts as data URIs."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render("\n".join(md))
    for chart in charts:
        data = base64.b64encode(chart.read_bytes()).decode("ascii")
        body = body.replace(f'src="{chart.name}"', f'src="data:image/png;base64,{data}"')
    body = body.replace("▼ regression", '<span class="reg">▼ regression</span>').replace(
        "▲ improvement", '<span class="imp">▲ improvement</span>'
    )
    title = html.escape(md[0].lstrip("# "))
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><title>{title}</title>'
        f"<style>{_CSS}</style></head><body>\n{body}</body></html>\n"
    )
