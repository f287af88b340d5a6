"""The latest run as Markdown for a pull request comment or ``$GITHUB_STEP_SUMMARY``
(``report --format github``, docs/ci.md). Every value from a run file is literal text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from judge_runner.analysis.changes import SYSTEM_CHANGE, lineup_change, system_under_test
from judge_runner.analysis.corrected_change import same_results
from judge_runner.analysis.judge_bridge import step_lines
from judge_runner.analysis.trend import Run, Trend
from judge_runner.analysis.trend_render import arrow, fmt, legend
from judge_runner.core.mdtext import md_text
from judge_runner.measures.failed import CANNOT_TELL
from judge_runner.measures.ir import NDCG10_NAME, RECALL10_NAME
from judge_runner.runs.read import read_run_records

HEADLINE = ("overall", NDCG10_NAME, RECALL10_NAME)
GATED = ("overall", NDCG10_NAME)


def _code(value: object) -> str:
    """``value`` as a one-line code span (backticks inside become quotes: a span cannot escape them)."""
    return "`" + " ".join(str(value).replace("`", "'").split()) + "`"


def _rows(trend: Trend, run_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]], dict[str, Any] | None]:
    for group in trend.groups:
        rows = [r for r in group["runs"] if r["runId"] == run_id]
        main = next((r for r in rows if not r.get("vsReference")), None)
        if main is not None:
            return main, [r for r in rows if r.get("vsReference")], group
    return None, [], None


def _run(folder: Path, row: dict[str, Any] | None) -> Run | None:
    """The run of a trend row, read from ``folder``; None when unreadable."""
    if row is None:
        return None
    try:
        return Run(read_run_records(folder / row["file"]))
    except OSError:
        return None


def unchanged(old: Run | None, new: Run | None) -> bool:
    """Whether ``new`` returned the same results in the same order as ``old`` on every query, every system
    included, and failed no query ``old`` answered."""
    if old is None or new is None or not new.evaluations:
        return False
    pairs = list(zip(old.system_views(), new.system_views())) if old.systems == new.systems else []
    for was, now in pairs or [(old, new)]:
        answered = {e.queryId for e in was.evaluations}
        if {e.queryId for e in now.evaluations} - answered or {e.queryId for e in now.error_lines} & answered:
            return False
        if not same_results(was, now):
            return False
    return True


def _change_text(comparison: dict[str, Any], words: dict[str, str] | None = None) -> str:
    low, high = comparison.get("ci95") or [None, None]
    interval = f", 95% CI [{low:+.3f}, {high:+.3f}]" if low is not None and high is not None else ""
    verdict = (words or {}).get(comparison["verdict"], comparison["verdict"])
    return f"{md_text(comparison['column'])} {comparison['delta']:+.3f}{interval} ({verdict})"


BETWEEN_SYSTEMS = {"regression": "worse beyond noise", "improvement": "better beyond noise"}
"""A difference between two systems' words: neither got worse."""


def _headline(row: dict[str, Any], change: dict[str, Any], label: str) -> str:
    """One system's table row: name, queries, overall, nDCG@10, R@10 and the gated columns' change."""
    deltas = ", ".join(f"{c} {arrow(change[c])}" for c in GATED if change.get(c) and arrow(change[c]))
    queries = f"{row['evaluated']}" + (f" ({row['failed']} failed)" if row["failed"] else "")
    cells = [md_text(label), queries, *(fmt(row["means"].get(c)) for c in HEADLINE), md_text(deltas or "-")]
    return "| " + " | ".join(cells) + " |"


def _verdict_lines(latest: dict[str, Any], row: dict[str, Any], same: bool, against: str | None, systems: str | None) -> list[str]:
    """The verdict in words; ``systems``: ``A -> B`` when the run judged another system than ``against``, whose
    difference is then two searches', not a change of one."""
    if latest.get("failed"):
        return [f"**FAILED**: {md_text(latest['failure'])}"]
    if against is None:
        return ["**First run** of this judge: nothing to compare with yet."]
    beyond = [c for c in latest["comparisons"].values() if c.get("verdict") in ("regression", "improvement")]
    if same:
        text = f"**No change**: the search returned the same results as run {_code(against)} on all {row['evaluated']} queries."
        if beyond:  # the same results labelled otherwise (people's labels, a judge that answers differently)
            text += " Their labels changed, not the search: " + "; ".join(map(_change_text, beyond))
        return [text]
    unsure = dict.fromkeys(
        str((c.get("failed") or {}).get("text")) for c in latest["comparisons"].values() if c.get("verdict") == CANNOT_TELL
    )
    if not beyond and unsure:
        return [
            f"**Cannot tell**: {md_text('; '.join(t.removeprefix(CANNOT_TELL + ': ') for t in unsure))}; its failed queries could turn the change."
        ]
    if not beyond:
        return ["**Within noise**: no change of overall or nDCG@10 beyond noise (95% bootstrap interval, and at least --min-effect)."]
    if systems is not None:
        texts = "; ".join(_change_text(c, BETWEEN_SYSTEMS) for c in beyond)
        lines = [f"**Another system under test** ({md_text(systems)}), two searches compared, not a change of one: {texts}"]
    else:
        lines = [("**Regression**: " if latest["regression"] else "**Changed beyond noise**: ") + "; ".join(map(_change_text, beyond))]
    if latest.get("regressions"):
        lines.append(f"Gated by `trend --fail-on-regression`: {md_text(', '.join(latest['regressions']))}.")
    return lines


def _changes(row: dict[str, Any], against: str | None) -> list[str]:
    """What differs from the run ``against`` (:func:`judge_runner.analysis.changes.what_changed`)."""
    compared = next((v for v in (row.get("vsBaseline"), row.get("vsPrevious")) if v and v["runId"] == against), None)
    return list(compared["changes"]) if compared else []


def judge_calls(run: Run) -> int:
    """The run's judge calls, every system together: ``usage.calls``, or for the offline judge the labels and
    verdicts it computed rather than read from the cache."""
    summary = run.summary
    if summary is not None and not summary.heuristicJudge:
        return summary.usage.calls if summary.usage is not None else 0
    return sum(e.labelsJudged + (e.listCached is False) for e in run.file.evaluations)


def _cost_line(run: Run | None, row: dict[str, Any]) -> str:
    """The run's cost in USD, its judge calls and its labels, every system together."""
    cost = "unknown" if row.get("costUsd") is None else f"${row['costUsd']:.4f}"
    summary = run.summary if run is not None else None
    if run is None or summary is None:
        return f"**Cost**: {cost}."
    calls = judge_calls(run)
    return (
        f"**Cost**: {cost}; {calls} judge call{'s' if calls != 1 else ''}; labels: {summary.labelsJudged} judged, "
        f"{summary.labelsCached} from the judgment cache."
    )


def github_summary(trend: Trend, folder: Path, report_url: str | None = None) -> str:
    """The latest complete run in ``folder`` as ``trend`` compares it, with its headline, changes beyond noise,
    judge changes and cost. ``report_url``: where the full report is. Raises ValueError when the folder
    holds no complete run."""
    latest = trend.latest_verdict
    if latest is None:
        raise ValueError("no complete run")
    row, others, group = _rows(trend, latest["runId"])
    if row is None or group is None:
        raise ValueError(f"run {latest['runId']} is not in the trend")
    against = latest.get("against")
    against_row = next((r for r in group["runs"] if r["runId"] == against and not r.get("vsReference")), None)
    run = _run(folder, row)
    before = _run(folder, against_row)
    same = against is not None and unchanged(before, run)
    kind = "the baseline" if group.get("baseline") and against == group.get("baseline") else "the previous run"
    lines = ["## Search quality", ""]
    lines.append(f"Run {_code(row['runId'])}, judge {md_text(row['judge'])}" + (f", against {kind} {_code(against)}." if against else "."))
    lines += ["", "| system | queries | overall | nDCG@10 | R@10 | change |", "| --- | ---: | ---: | ---: | ---: | --- |"]
    lines.append(_headline(row, latest["comparisons"], row.get("system") or (system_under_test(run) if run is not None else "search")))
    for other in others:
        lines.append(_headline(other, other["vsReference"]["comparisons"], f"{other['system']} (vs {other['vsReference']['system']})"))
    marks = legend(
        [*(latest["comparisons"].get(c) for c in GATED), *(o["vsReference"]["comparisons"].get(c) for o in others for c in GATED)]
    )
    lines += ["", *([md_text(marks[0].upper() + marks[1:]) + ".", ""] if marks else [])]
    changes = _changes(row, against)
    lineup = run is not None and before is not None and lineup_change(before, run)
    systems = next((c.removeprefix(SYSTEM_CHANGE) for c in changes if c.startswith(SYSTEM_CHANGE)), None) if lineup else None
    lines += _verdict_lines(latest, row, same, against, systems)
    besides = [c for c in changes if systems is None or not c.startswith(SYSTEM_CHANGE)]
    if besides:
        lines += ["", f"What changed since {_code(against)}: " + md_text("; ".join(besides)) + "."]
    steps = [s for s in trend.judge_changes if against is not None and s["to"] == against]
    lines += [md_text(text[0].upper() + text[1:]) for text in step_lines(steps)]
    lines += ["", _cost_line(run, row), ""]
    link = (report_url or "").replace(" ", "%20").replace("(", "%28").replace(")", "%29")
    where = f"[the full report]({link})" if link else _code(f"judge-runner trend {folder}")
    lines.append(f"**Full report**: {where}; run file {_code(row['file'])}.")
    return "\n".join(lines) + "\n"
