"""A trend (``trend.build_trend``) rendered for people and tools: rows, then a rich table, JSON,
Markdown or CSV; and one query's history across runs."""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING, Any

from judge_runner.analysis.corrected_report import block_lines, difference_text
from judge_runner.analysis.judge_bridge import rejudge_note, step_lines
from judge_runner.core.mdtext import md_text
from judge_runner.judging.pooled import qrels_text

if TYPE_CHECKING:
    from judge_runner.analysis.trend import Trend

SHORT = {"relevance": "rel", "ranking": "rank", "coverage": "cov", "snippetQuality": "snip", "Recall@10": "R@10", "nDCG@10": "nDCG@10"}


def arrow(comparison: dict | None) -> str:
    """A comparison as ``▲+0.050`` (improvement), ``▼-0.050`` (regression), ``?`` (too few queries, or failed
    queries that could change the verdict: :func:`failed_note`), ``·`` (within noise) or ``L`` (a change whose
    cause is the labels, not the search: both runs returned the same results) with the signed change of the
    mean; empty when there is none."""
    if not comparison or comparison["delta"] is None:
        return ""
    sign = {"regression": "▼", "improvement": "▲", "too few queries": "?", "cannot tell": "?"}.get(comparison["verdict"], "·")
    if comparison.get("cause") and comparison["verdict"] in ("regression", "improvement"):
        sign = "L"
    return f"{sign}{comparison['delta']:+.3f}"


def fmt(value: float | None) -> str:
    """A score with three decimals, ``-`` when missing."""
    return "-" if value is None else f"{value:.3f}"


def corrected_lines(row: dict, gate_only: bool = False) -> str:
    """A trend row's people-corrected figures, one per line (:func:`judge_runner.analysis.corrected_report.block_lines`:
    the corrected nDCG@10 of its system, a compare run's differences and ranking), then the corrected change of
    nDCG@10 against the baseline and the previous run (``gate_only``: only against what the gate compares
    with); empty without any."""
    lines = block_lines(row.get("biasCorrected"), others=False)  # each other system of a compare run has its row
    keys: tuple[str, ...] = ("vsBaseline", "vsPrevious")
    if gate_only:
        keys = ("vsBaseline",) if row.get("vsBaseline") else ("vsPrevious",)
    seen = set()
    for key in keys:
        against = row.get(key) or {}
        change = (against.get("corrected") or {}).get("nDCG@10")
        if change and against["runId"] not in seen:
            seen.add(against["runId"])
            lines.append(f"vs {against['runId']}: " + difference_text(change, "new - old"))
    return "\n".join(lines)


def trend_rows(trend: Trend) -> list[dict]:
    """One flat row per run (str values; keys are the column headers), grouped by judge (``group``)."""
    rows = []
    for group in trend.groups:
        for row in group["runs"]:
            prev = (row.get("vsPrevious") or {}).get("comparisons", {})
            base = (row.get("vsBaseline") or {}).get("comparisons", {})
            rows.append(
                {
                    "group": group["judge"],
                    "date": row["timestamp"][:16].replace("T", " "),
                    "run": row["runId"] + (f" [{row['system']}]" if row.get("system") else ""),
                    "judge": row["judge"],
                    "eval/fail": f"{row['evaluated']}/{row['failed']}",
                    **{SHORT.get(c, c): fmt(row["means"][c]) for c in row["means"]},
                    "abstain": fmt(row.get("abstentionAccuracy")),  # off-topic queries abstained on (share)
                    "Δprev overall nDCG": " ".join(filter(None, [arrow(prev.get("overall")), arrow(prev.get("nDCG@10"))])) if prev else "",
                    "Δbaseline": " ".join(filter(None, [arrow(base.get("overall")), arrow(base.get("nDCG@10"))])) if base else "",
                    "cost": "unknown"
                    if row["costUsd"] is None and not row["partial"]
                    else ("-" if row["costUsd"] is None else f"${row['costUsd']:.4f}"),
                    # USD per query that made at least one judge call (blank when none did or the cost is unknown)
                    "USD/judged q": "-" if row.get("costPerJudgedQueryUsd") is None else f"${row['costPerJudgedQueryUsd']:.4f}",
                    # a --batch run pays half price: its costs are not the synchronous runs' beside it
                    "prices": "batch" if row.get("batch") else "sync",
                    "qrels": qrels_counts(row.get("qrels")),
                    "note": row_note(row),
                    "corrected": corrected_lines(row),
                }
            )
    return rows


def failed_note(comparisons: dict) -> str:
    """The failed queries' words of the gated comparisons whose verdict they make "cannot tell"
    (:mod:`judge_runner.measures.failed`), once each; empty when there are none."""
    texts = [(c.get("failed") or {}).get("text") for c in comparisons.values() if c and c.get("verdict") == "cannot tell"]
    return "; ".join(dict.fromkeys(t for t in texts if t))


def qrels_counts(block: dict | None) -> str:
    """Whose grades a row's figures used (its ``qrels`` block): ``judge 40 + people 12 + expected 3``."""
    if not block:
        return "-"
    return " + ".join(f"{name} {block.get(name, 0)}" for name in ("judge", "people", "expected") if block.get(name))


def group_qrels_line(group: dict) -> str:
    """The line under a judge group's table: the qrels its runs are scored against (the latest run's queries)."""
    text = qrels_text(group.get("qrels"))
    return f"figures against pooled qrels; the latest run's {text}" if text else ""


def row_note(row: dict) -> str:
    """What a trend row's note says: a compare run's other system against the reference, a partial run,
    a failed run (with what else changed), a run without judged queries, a run cut short (its stop reason,
    how many of its queries were judged, and what else changed), or what changed since the
    previous comparable run (:func:`judge_runner.analysis.changes.what_changed`)."""
    ref = (row.get("vsReference") or {}).get("comparisons", {})
    changes = "; ".join(filter(None, [rejudge_note(row), *(row.get("vsPrevious") or {}).get("changes", [])]))
    failed = failed_note((row.get("vsBaseline") or row.get("vsPrevious") or {}).get("comparisons", {}))
    changes = "; ".join(filter(None, [failed, changes]))
    if row.get("vsReference"):
        deltas = " ".join(filter(None, [arrow(ref.get("overall")), arrow(ref.get("nDCG@10"))]))
        failed = failed_note(ref)
        return f"compare run: vs {row['vsReference']['system']} {deltas} (not chained over time)" + (f"; {failed}" if failed else "")
    if row["partial"]:
        return "partial (no summary): not compared"
    if row.get("runFailed"):
        return f"FAILED: {row['failure']}" + (f"; {changes}" if changes else "")
    if not row["comparable"]:
        return "no judged queries: not compared"
    if row.get("stopReason"):
        done = f"{row['evaluated']} of {row['totalQueries']} queries" if row.get("totalQueries") else f"{row['evaluated']} queries"
        short = f"cut short ({row['stopReason']}): {done} judged, compared on those"
        return short + (f"; {changes}" if changes else "")
    return changes


COMPACT_WIDTH = 100


def compact_rows(trend: Trend) -> list[dict]:
    """The rows of the compact view (``trend`` without ``--wide``), one per run and system: the run id
    whole (a compare run as a tree: its id over its reference system, each other system under it),
    queries evaluated/failed, overall, nDCG@10, R@10, one change
    column (overall and nDCG@10) against what ``--fail-on-regression`` compares with, the pinned baseline
    when there is one, else the previous comparable run, the cost, and the note (:func:`row_note`)."""
    out = []
    for group in trend.groups:
        for row in group["runs"]:
            against = row.get("vsBaseline") if group.get("baseline") else row.get("vsPrevious")
            comparisons = (against or {}).get("comparisons", {})
            system = row.get("system")
            # a compare run as a tree: the run id over its reference system, the other systems under it
            run = row["runId"] if not system else f"{row['runId']}\n└ {system}" if not row.get("vsReference") else f"└ {system}"
            out.append(
                {
                    "group": group["judge"],
                    "run": run,
                    "runId": row["runId"],
                    "system": system or "",
                    "eval/fail": f"{row['evaluated']}/{row['failed']}",
                    "overall": fmt(row["means"]["overall"]),
                    "nDCG@10": fmt(row["means"]["nDCG@10"]),
                    "R@10": fmt(row["means"]["R@10"]),
                    "Δ": " ".join(filter(None, [arrow(comparisons.get("overall")), arrow(comparisons.get("nDCG@10"))])),
                    "cost": "unknown"
                    if row["costUsd"] is None and not row["partial"]
                    else "-"
                    if row["costUsd"] is None
                    else f"${row['costUsd']:.4f}",
                    "note": row_note(row),
                    "corrected": corrected_lines(row, gate_only=True),
                }
            )
    return out


def render_json(trend: Trend) -> str:
    """Groups, baseline, the latest run's verdict and warnings as indented JSON."""
    return json.dumps(
        {
            "groups": trend.groups,
            "baseline": trend.baseline,
            "latest": trend.latest_verdict,
            "judgeChanges": trend.judge_changes,
            "warnings": trend.warnings,
        },
        indent=2,
        ensure_ascii=False,
    )


def render_csv(rows: list[dict]) -> str:
    """The rows as CSV with a header line (RFC 4180 line endings), without the final line ending."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().removesuffix("\r\n")


def render_markdown(trend: Trend, rows: list[dict]) -> str:
    """One ``### Judge`` section and table per judge group, the bias-corrected figures listed under it; every
    value is literal text (``md_text``)."""
    headers = [h for h in rows[0] if h not in ("group", "corrected")]
    parts = []
    for group in trend.groups:
        parts.append(f"\n### Judge {md_text(group['judge'])}" + (f" — {md_text(group['reason'])}" if group["reason"] else ""))
        parts.append("| " + " | ".join(md_text(h) for h in headers) + " |\n|" + "---|" * len(headers))
        members = [r for r in rows if r["group"] == group["judge"]]
        for row in members:
            parts.append("| " + " | ".join(md_text(row[h]) if str(row[h]) else " " for h in headers) + " |")
        corrected = [
            f"- {md_text(row['run'])}: {md_text(text)}" for row in members for text in str(row.get("corrected") or "").splitlines()
        ]
        if group_qrels_line(group):
            parts.append("\n" + md_text(group_qrels_line(group)))
        if corrected:
            parts.append("\n" + "\n".join(corrected))
    if trend.judge_changes:
        parts.append("\n### Judge changes\n\n" + "\n".join(f"- {md_text(line)}" for line in step_lines(trend.judge_changes)))
    return "\n".join(parts)


def print_table(trend: Trend, rows: list[dict], console: Any, wide: bool = False) -> None:
    """One rich table per judge group on ``console`` (a rich Console; the CLI's renders for stdout,
    :func:`judge_runner.core.printer.rich_text`), notes under it, then the baseline. Values from run files
    are shown as text, never read as rich markup (``[link=...]``). Never folds a number or a run id:

    - the compact view (default, :func:`compact_rows`) fits :data:`COMPACT_WIDTH` (100) columns: the
      console is made at least that wide (a pipe's default is 80), every column but the system's keeps its
      whole text, and overall/nDCG@10 changes are shown against the gate's reference;
    - ``wide``: every column of ``rows`` (:func:`trend_rows`: each dimension, abstention, both changes,
      cost per judged query, prices), the console made as wide as the widest table needs."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    shown = rows if wide else compact_rows(trend)
    hidden = {"group", "judge", "note", "corrected"} | ({"date", "runId", "system"} if not wide else {"qrels"})
    tables = []
    for group in trend.groups:
        table = Table(
            title=f"judge {escape(str(group['judge']))}" + (f"\n({escape(str(group['reason']))})" if group["reason"] else ""),
            title_justify="left",
            box=box.HEAVY_HEAD if wide else box.SIMPLE_HEAD,  # compact: no side borders, one space between columns
            show_edge=wide,
            pad_edge=wide,
        )
        group_rows = [r for r in shown if r["group"] == group["judge"]]
        headers = [h for h in shown[0] if h not in hidden]
        for header in headers:
            title = header
            if header == "Δ":
                title = "Δ vs baseline" if group.get("baseline") else "Δ vs previous"
            longest = max([len(title), *(len(part) for r in group_rows for part in str(r[header]).splitlines())])
            table.add_column(title, no_wrap=True, min_width=longest)
        for row in group_rows:
            table.add_row(*[escape(str(row[h])) for h in headers])
        tables.append((table, group_rows))
    unbounded = console.options.update_width(10_000)  # a measure is capped at the width it is given
    needed = max((console.measure(table, options=unbounded).maximum for table, _ in tables), default=0) if wide else COMPACT_WIDTH
    console.width = max(console.width, needed)
    for (table, group_rows), group in zip(tables, trend.groups):
        console.print(table)
        if group_qrels_line(group):
            console.print(f"  {escape(group_qrels_line(group))}", highlight=False)
        for row in group_rows:
            if row["note"]:
                name = f"{row['runId']} [{row['system']}]" if not wide and row.get("system") else str(row["run"])
                console.print(f"  {escape(name)}: {escape(str(row['note']))}", highlight=False)
            for text in str(row.get("corrected") or "").splitlines():
                name = f"{row['runId']} [{row['system']}]" if not wide and row.get("system") else str(row["run"])
                console.print(f"  {escape(name)}: {escape(text)}", highlight=False)
    for line in step_lines(trend.judge_changes):
        console.print(escape(line), highlight=False)
    if trend.baseline:
        console.print(f"baseline: {escape(str(trend.baseline))}")


def whose_labels(entry: dict) -> str:
    """A history entry's labels, a person's marked ``p`` (``[3, p2, 0]``): the rest are the judge's."""
    origins = entry.get("labelOrigins") or ["judge"] * len(entry["labels"])
    return "[" + ", ".join(("p" if o == "human" else "") + str(g) for g, o in zip(entry["labels"], origins)) + "]"


def render_history(history: list[dict], as_json: bool) -> str:
    """One query across runs (``trend.query_history``): JSON, or one line per run."""
    if as_json:
        return json.dumps(history, indent=2, ensure_ascii=False)
    lines = []
    for h in history:
        scores = h["scores"] or {}
        metrics = h["metrics"] or {}
        lines.append(
            f"{h['timestamp'][:16]} {h['runId']}  overall {fmt(scores.get('overall'))}  "
            f"nDCG@10 {fmt(metrics.get('nDCG@10'))}  labels {whose_labels(h)}  ({h['judge']})"
        )
    return "\n".join(lines)
