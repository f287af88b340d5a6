"""A finished run for people: its summary lines on stdout, and on stderr why it is incomplete and a failed
quality gate.
"""

from __future__ import annotations

from pathlib import Path

from judge_runner.analysis.corrected_report import block_lines
from judge_runner.core.failures import RunStatus
from judge_runner.core.printer import Printer
from judge_runner.evaluation.compare import describe_comparison
from judge_runner.evaluation.state import RunOutcome
from judge_runner.judging.pooled import qrels_text

STORAGE_REASONS = ("disk_full", "storage_error", "cache_damaged", "cache_error")
"""Stop reasons of a run stopped by a file it could not write or read."""


def print_summary(outcome: RunOutcome, printer: Printer, phase_one: bool = False, resume_hint: str | None = None) -> None:
    """The run's summary on stdout; a failed quality gate on stderr. ``phase_one``: the cost includes query
    writing; ``resume_hint``: what picks up batches in flight (default ``--resume``). In a compare run every
    line says its scope (reference system, or the whole run)."""
    summary, out = outcome.summary, printer.out
    heuristic = " (HEURISTIC offline judge)" if summary["heuristicJudge"] else ""
    comparison = summary.get("comparison")
    # a compare run: the quality figures are the reference system's, the counts and costs the whole run's
    ref = f" (reference system {comparison['reference']})" if comparison else ""
    run = " (all systems)" if comparison else ""
    count = len(comparison["systems"]) if comparison else 1
    systems = f" ({count} systems x {summary['totalQueries'] // count} queries, all systems)" if comparison else ""
    out(
        f"\nrun {summary['runId']}{heuristic}: {summary['evaluated']} evaluated, {summary['failed']} failed{systems}"
        f"{', INTERRUPTED' if summary['interrupted'] else ''}{', BUDGET EXHAUSTED' if summary['budgetExhausted'] else ''}"
        + (f", STOPPED ({summary['stopReason']})" if summary.get("stopReason") in STORAGE_REASONS else "")
    )
    if summary["averageScores"]:
        out(f"  averages{ref}: " + ", ".join(f"{k} {v:.2f}" for k, v in summary["averageScores"].items() if v is not None))
    if summary["averageMetrics"]:  # then the qrels every figure is scored against, every system's alike
        metrics = ", ".join(f"{k} {v:.3f}" for k, v in summary["averageMetrics"].items() if v is not None)
        out(f"  IR metrics{ref}: {metrics}" + (f"\n  {qrels_text(summary['qrels'])}" if summary.get("qrels") else ""))
    a = summary["abstention"]
    out(
        f"  abstention{ref}: {a['correct']}/{a['offTopic']} off-topic queries abstained; "
        f"{a['falseAbstentions']} on-topic queries not confident"
    )
    trials = f", {summary['trials']} trials" + (
        f" (Krippendorff alpha {summary['trialsAlpha']:.2f})" if summary.get("trialsAlpha") is not None else ""
    )
    out(
        f"  judge{run}: {summary.get('judgeMode') or '?'} labels{trials if summary.get('trials', 1) > 1 else ''}; {summary['labelsJudged']} judged, "
        f"{summary['labelsCached']} from the cache, {summary['humanLabels']} human; {summary['injectionSuspected']} results flagged "
        f"as addressing the judge; {summary['expectedSourceDisagreements']} expected sources labelled 0-1"
    )
    if summary.get("judgeIsGenerator"):
        out("  note: the judge's model also wrote the queries (circular: it may favour what it expects)")
    if summary.get("comparison"):
        for line in describe_comparison(summary["comparison"]):
            out(line)
    for line in block_lines(summary.get("biasCorrected")):  # people's labels: the judge's figures corrected
        out(f"  {line}")
    for issue in summary["topIssues"][:3]:
        out(f"  issue{ref} ({issue['count']} {'query' if issue['count'] == 1 else 'queries'}): {issue['issue']}")
    if summary["recommendedFocus"]:
        out(f"  recommended focus{ref}: {summary['recommendedFocus']}")
    batch = summary.get("batch")
    if batch:
        out(
            f"  batch API: {batch['batches']} batch(es) submitted, {batch['resumedBatches']} picked up; {batch['requests']} requests"
            + (f" ({batch['pickedUpRequests']} picked up)" if batch.get("pickedUpRequests") else "")
            + ": "
            f"{batch['succeeded']} succeeded, {batch['errored']} errored, {batch['expired']} expired, {batch['canceled']} canceled"
            + (
                f", {batch['unreadResults']} unread (asked again; the provider may have billed them, not in the cost)"
                if batch.get("unreadResults")
                else ""
            )
            + (
                f"; still in flight: {', '.join(batch['inFlight'])} ({resume_hint or '--resume'} picks them up)"
                if batch["inFlight"]
                else ""
            )
        )
    cost, estimate = summary["costUsd"], (summary.get("estimate") or {}).get("costUsd")
    guess = "" if estimate is None else f" (estimate ${estimate:.4f})"
    prices = (" (judge at batch prices, phase one at sync prices)" if phase_one else " at batch prices") if batch else ""
    out(f"  cost{run}: {'unknown' if cost is None else f'${cost:.4f}'}{prices}{guess}, {summary['durationS']:.1f} s")
    print_cache(summary, printer)
    if outcome.unwritten:
        printer.err(f"error: the summary could not be written: {outcome.unwritten}; {outcome.path} keeps its complete lines")
    else:
        out(f"  written to {outcome.path}")
    saved = Path(outcome.path).with_suffix(".queries.json")
    if saved.is_file():
        out(f"  query set: {saved} (judge it again: evaluate --queries {saved})")
    print_end(outcome, printer)


def print_end(outcome: RunOutcome, printer: Printer) -> None:
    """On stderr, why a run ends incomplete (exit 3) and a failed quality gate."""
    if outcome.status is RunStatus.INCOMPLETE:
        printer.err(f"run incomplete: {'; '.join(outcome.end.reasons)}")
    gate = outcome.summary.get("qualityGate")
    if gate and not gate["passed"]:
        overall = "none evaluated" if gate["overall"] is None else f"{gate['overall']:.3f}"
        system = f" of the reference system {gate['system']}" if gate.get("system") else ""
        printer.err(f"quality gate failed: average overall{system} {overall} is below --min-overall {gate['minOverall']}")


def print_cache(summary: dict, printer: Printer) -> None:
    """The caching and cost line on stdout; the summary's ``cacheWarning`` on stderr."""
    printer.out("  " + cost_line(summary))
    if summary.get("cacheWarning"):
        printer.err(f"warning: {summary['cacheWarning']}")


def cost_line(summary: dict) -> str:
    """The cached share of input tokens, the USD caching saved and the USD per judged query (``unknown`` where
    null), in one line."""
    share, saved, per = summary.get("cachedInputShare"), summary.get("cacheSavedUsd"), summary.get("costPerJudgedQueryUsd")
    judged = summary.get("judgedQueries", 0)
    return (
        f"prompt cache: {'-' if share is None else f'{share:.0%}'} of input tokens read from it, "
        f"saved {'unknown' if saved is None else f'${saved:.4f}'}; "
        f"per judged query ({judged} judged): {'-' if not judged else 'unknown' if per is None else f'${per:.4f}'}"
    )
