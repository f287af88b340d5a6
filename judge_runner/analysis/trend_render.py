"""A trend rendered for people and tools: rows, a rich table, JSON, Markdown or CSV; one query's history."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from judge_runner.analysis.corrected_report import block_lines, difference_text
from judge_runner.analysis.judge_bridge import rejudge_note, step_lines
from judge_runner.core.mdtext import md_text
from judge_runner.judging.pooled import qrels_text

if TYPE_CHECKING:
    from judge_runner.analysis.trend import Trend

SHORT = {"relevance": "rel", "ranking": "rank", "coverage": "cov", "snippetQuality": "snip", "Recall@10": "R@10", "nDCG@10": "nDCG@10"}


MEANINGS = {
    "▲": "better beyond noise",
    "▼": "worse beyond noise",
    "·": "within noise",
    "?": "too few queries to tell",
    "!": "cannot tell: failed queries could turn it",
    "L": "the labels changed, not the search",
}
"""Each mark a change can carry, and its one meaning (the legend under every table that shows them)."""
MARKS = {"improvement": "▲", "regression": "▼", "within noise": "·", "too few queries": "?", "cannot tell": "!"}
"""The mark of each verdict."""
COMPARED = ("vsPrevious", "vsBaseline", "vsReference")


def mark(comparison: dict | None) -> str:
    """The mark of a comparison (:data:`MEANINGS`); empty without one."""
    if not comparison or comparison["delta"] is None:
        return ""
    if comparison.get("cause") and comparison["verdict"] in ("regression", "improvement"):
        return "L"
    return MARKS.get(comparison["verdict"], "·")


def arrow(comparison: dict | None) -> str:
    """``▲+0.050``: the comparison's :func:`mark` and its delta; empty without a comparison."""
    sign = mark(comparison)
    return f"{sign}{comparison['delta']:+.3f}" if sign and comparison else ""


def legend(comparisons: Iterable[dict | None]) -> str:
    """``marks: ▲ better beyond noise; ? too few queries to tell``: the meaning of each mark ``comparisons``
    carry, in :data:`MEANINGS`' order; "" when they carry none."""
    shown = {mark(c) for c in comparisons} - {""}
    return "marks: " + "; ".join(f"{m} {text}" for m, text in MEANINGS.items() if m in shown) if shown else ""


def row_comparisons(rows: Iterable[dict], columns: tuple[str, ...] = ("overall", "nDCG@10")) -> list[dict]:
    """The comparisons of ``columns`` the trend rows carry (against the previous run, the baseline, the reference)."""
    return [c for row in rows for key in COMPARED for name, c in ((row.get(key) or {}).get("comparisons") or {}).items() if name in columns]


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def corrected_lines(row: dict, gate_only: bool = False) -> str:
    """A row's corrected figures, one per line, then its corrected change against the baseline and the
    previous run (``gate_only``: only against what the gate compares with)."""
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
    """One flat row per run (str values; keys are the column headers), grouped by judge."""
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
    """The failed queries' words of the gated comparisons they make "cannot tell", once each."""
    texts = [(c.get("failed") or {}).get("text") for c in comparisons.values() if c and c.get("verdict") == "cannot tell"]
    return "; ".join(dict.fromkeys(t for t in texts if t))


def qrels_counts(block: dict | None) -> str:
    """``judge 40 + people 12 + expected 3``."""
    if not block:
        return "-"
    return " + ".join(f"{name} {block.get(name, 0)}" for name in ("judge", "people", "expected") if block.get(name))


def group_qrels_line(group: dict) -> str:
    """The line under a judge group's table: the qrels its runs are scored against."""
    text = qrels_text(group.get("qrels"))
    return f"figures against pooled qrels; the latest run's {text}" if text else ""


def row_note(row: dict) -> str:
    """A row's note: the compare system, a partial, failed, empty or cut-short run, or what changed since the
    previous comparable run."""
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
    """The compact view's rows (``trend`` without ``--wide``), one per run and system, with one change column
    against what ``--fail-on-regression`` compares with."""
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
    """Groups, baseline, the latest verdict and warnings as indented JSON."""
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
    """RFC 4180 line endings, without the final one."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().removesuffix("\r\n")


def render_markdown(trend: Trend, rows: list[dict]) -> str:
    """One ``### Judge`` section and table per judge group; every value is literal text."""
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
    marks = legend(row_comparisons(r for g in trend.groups for r in g["runs"]))
    if marks:
        parts.append("\n" + md_text(marks))
    if trend.judge_changes:
        parts.append("\n### Judge changes\n\n" + "\n".join(f"- {md_text(line)}" for line in step_lines(trend.judge_changes)))
    return "\n".join(parts)


def print_table(trend: Trend, rows: list[dict], console: Any, wide: bool = False) -> None:
    """One rich table per judge group, notes under it, then the baseline. Values from run files are never read
    as markup, and no number or run id is folded: the compact view fits :data:`COMPACT_WIDTH` columns,
    ``wide`` makes the console as wide as the widest table."""
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
    marks = legend(row_comparisons(r for g in trend.groups for r in g["runs"]))
    if marks:
        console.print(escape(marks), highlight=False)
    for line in step_lines(trend.judge_changes):
        console.print(escape(line), highlight=False)
    if trend.baseline:
        console.print(f"baseline: {escape(str(trend.baseline))}")


def whose_labels(entry: dict) -> str:
    """``[3, p2, 0]``: a person's grade marked ``p``, the rest the judge's."""
    origins = entry.get("labelOrigins") or ["judge"] * len(entry["labels"])
    return "[" + ", ".join(("p" if o == "human" else "") + str(g) for g, o in zip(entry["labels"], origins)) + "]"


def query_texts_warning(history: list[dict], query_id: str) -> str | None:
    """A warning when ``query_id`` names more than one query text across ``history`` (the query set changed
    between runs: its figures are of different queries); None when it names one."""
    texts = list(dict.fromkeys(str(h["query"]) for h in history))
    if len(texts) < 2:
        return None
    newest = history[-1]["query"]
    other = sum(1 for h in history if h["query"] != newest)
    return (
        f"{query_id} names {len(texts)} different queries across these runs (the query set changed); "
        f"{other} of {len(history)} runs asked another query than the newest run's {newest!r}"
    )


def render_history(history: list[dict], style: str) -> str:
    """One query across runs: JSON (``style`` json), a Markdown table (markdown), else one line per run; the
    query's text first and again wherever it changes."""
    if style == "json":
        return json.dumps(history, indent=2, ensure_ascii=False)
    markdown = style == "markdown"
    lines = (
        ["| date | run | query | overall | nDCG@10 | labels | judge |", "| --- | --- | --- | --- | --- | --- | --- |"] if markdown else []
    )
    for i, h in enumerate(history):
        scores = h["scores"] or {}
        metrics = h["metrics"] or {}
        text = h["query"] if i == 0 or h.get("queryChanged") else None
        if markdown:
            cells = [h["timestamp"][:16], h["runId"], md_text(text) if text is not None else "″", fmt(scores.get("overall"))]
            cells += [fmt(metrics.get("nDCG@10")), whose_labels(h), md_text(str(h["judge"]))]
            lines.append("| " + " | ".join(cells) + " |")
            continue
        if text is not None:
            lines.append(f"query: {text!r}" + (" (another query under this id)" if i else ""))
        lines.append(
            f"{h['timestamp'][:16]} {h['runId']}  overall {fmt(scores.get('overall'))}  "
            f"nDCG@10 {fmt(metrics.get('nDCG@10'))}  labels {whose_labels(h)}  ({h['judge']})"
        )
    return "\n".join(lines)
