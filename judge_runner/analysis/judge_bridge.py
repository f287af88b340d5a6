"""A judge change bridged by a re-judged run (``judge-runner rejudge``).

A run A' re-judging A under a new judge shows A → A' as a judge change (the same results, two judges),
and stands in A's place in time, so the new judge's next run B is compared against A' and a baseline
pinned on A carries over to A'. docs/weekly.md ("Judge upgrades") tells the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from judge_runner.analysis.changes import GATED
from judge_runner.measures.paired import MIN_EFFECT, compare_values
from judge_runner.runs.lines import Provenance, RejudgeOrigin


class Run(Protocol):
    """What the bridge reads of a run."""

    @property
    def run_id(self) -> str: ...

    @property
    def timestamp(self) -> str: ...

    @property
    def provenance(self) -> Provenance: ...

    @property
    def partial(self) -> bool: ...

    @property
    def comparable(self) -> bool: ...

    @property
    def judge(self) -> str: ...

    @property
    def judge_label(self) -> str: ...

    @property
    def system(self) -> str | None: ...

    def values(self, column: str) -> dict[str, float]: ...

    def mean(self, column: str) -> float | None: ...

    def system_views(self) -> Sequence[Any]: ...


R = TypeVar("R", bound=Run)

STEP_COLUMNS = GATED
"""The columns a judge change is shown on: what ``--fail-on-regression`` watches."""


def origin(run: Run) -> RejudgeOrigin | None:
    """The run ``run`` re-judges (``provenance.rejudgeOf``), None for any other run."""
    return run.provenance.rejudgeOf


def series_key(run: Run) -> tuple[str, int, str]:
    """A run's place in a series: its start; a re-judged run stands just after the run it re-judges."""
    was = origin(run)
    if was is not None and was.timestamp:
        return (was.timestamp, 1, run.run_id)
    return (run.timestamp, 0, run.run_id)


def latest_key(run: Run) -> tuple[str, int, str]:
    """:func:`series_key`, except that a re-judged run is never the latest of its time."""
    time, rejudged, run_id = series_key(run)
    return (time, 1 - rejudged, run_id)


def in_series_order(runs: list[R]) -> list[R]:
    return sorted(runs, key=series_key)


def bridged_baseline(members: list[R], baseline_id: str | None) -> R | None:
    """The pinned run when among ``members``, else the one of theirs re-judging it, else None."""
    if baseline_id is None:
        return None
    pinned = next((r for r in members if r.run_id == baseline_id and r.comparable), None)
    if pinned is not None:
        return pinned
    return next((r for r in members if r.comparable and (o := origin(r)) is not None and o.runId == baseline_id), None)


def _step_comparisons(old: Run, new: Run, min_effect: float) -> dict[str, dict]:
    """``{column: comparison}`` of one system's judge change, paired by query, with ``oldMean`` and ``newMean``."""
    out = {}
    for column in STEP_COLUMNS:
        comparison = compare_values(old.values(column), new.values(column), column, paired=True, min_effect=min_effect).as_dict()
        out[column] = comparison | {"oldMean": old.mean(column), "newMean": new.mean(column)}
    return out


def _step(source: Run | None, rejudged: Run, was: RejudgeOrigin, min_effect: float) -> dict[str, Any]:
    """One judge change: ``from`` and ``to``, their judges, and the comparisons (``systems`` for a compare run)."""
    step: dict[str, Any] = {
        "from": was.runId,
        "fromJudge": was.judge or (source.judge_label if source is not None else "?"),
        "to": rejudged.run_id,
        "toJudge": rejudged.judge_label,
        "timestamp": was.timestamp,
        "found": source is not None,
        "sameJudge": source is not None and source.judge == rejudged.judge,
        "stopReason": was.stopReason,
        "comparisons": {},
        "systems": {},
    }
    if source is None or not source.comparable or not rejudged.comparable:
        return step
    step["comparisons"] = _step_comparisons(source, rejudged, min_effect)
    theirs = {view.system: view for view in source.system_views()}
    for view in rejudged.system_views()[1:]:
        if view.system in theirs:
            step["systems"][view.system] = _step_comparisons(theirs[view.system], view, min_effect)
    return step


def judge_steps(runs: Sequence[Run], min_effect: float = MIN_EFFECT) -> list[dict[str, Any]]:
    """Every judge change a re-judged run bridges, in series order (``found`` false when the re-judged run is
    not among ``runs``)."""
    by_id = {r.run_id: r for r in runs if not r.partial}
    steps = []
    for run in in_series_order(list(runs)):
        was = origin(run)
        if was is not None and not run.partial:
            steps.append(_step(by_id.get(was.runId), run, was, min_effect))
    return steps


def through_note(against: Run) -> str | None:
    was = origin(against)
    if was is None:
        return None
    return f"compared through {against.run_id}: run {was.runId} ({was.judge or 'another judge'}) re-judged by this judge"


def annotate(groups: list[dict[str, Any]], runs: Sequence[Run]) -> None:
    """Note, in every comparison against a re-judged run, that it goes through it; mark each re-judged row
    with ``rejudgeOf``."""
    by_id = {r.run_id: r for r in runs}
    for group in groups:
        for row in group["runs"]:
            run = by_id.get(row["runId"])
            was = origin(run) if run is not None else None
            if was is not None and not row.get("vsReference"):
                row["rejudgeOf"] = was.model_dump(mode="json")
            for key in ("vsPrevious", "vsBaseline"):
                against = row.get(key)
                note = through_note(by_id[against["runId"]]) if against and against["runId"] in by_id else None
                if note and note not in against["changes"]:
                    against["changes"].insert(0, note)


def rejudge_note(row: dict[str, Any]) -> str:
    """A re-judged run's row note; empty for another row."""
    was = row.get("rejudgeOf")
    if not was:
        return ""
    return f"re-judges run {was['runId']} ({was.get('judge') or 'another judge'}): the same results, this judge's labels"


def step_lines(steps: list[dict[str, Any]]) -> list[str]:
    """Each judge change in words: the runs, the judges, each column's change, and what it means."""

    def change(comparison: dict) -> str:
        if comparison.get("delta") is None:
            return f"{comparison['column']} -"
        old, new = comparison.get("oldMean"), comparison.get("newMean")
        means = f" {old:.3f} -> {new:.3f}" if old is not None and new is not None else ""
        beyond = "beyond noise" if comparison["verdict"] in ("regression", "improvement") else comparison["verdict"]
        return f"{comparison['column']}{means} ({comparison['delta']:+.3f}, {beyond})"

    lines = []
    for step in steps:
        head = f"judge change at {step['timestamp'][:16].replace('T', ' ')}: run {step['from']} ({step['fromJudge']}) re-judged as {step['to']} ({step['toJudge']})"
        if not step["found"]:
            lines.append(head + f": run {step['from']} is not in this folder, so the step cannot be measured")
            continue
        if step["sameJudge"]:
            head += " [the same judge]"
        parts = [change(c) for c in step["comparisons"].values()]
        for system, comparisons in step["systems"].items():
            parts.append(f"[{system}] " + ", ".join(change(c) for c in comparisons.values()))
        body = "; ".join(parts) if parts else "not comparable (no judged query)"
        lines.append(f"{head}: {body}. The same results under two judges: this step is the judge's, not the search's.")
    return lines
