"""A judge change bridged by a re-judged run (``judge-runner rejudge``).

Runs are compared only under one judge (:mod:`judge_runner.analysis.trend`), so a new judge model starts a
new series. A run written by ``rejudge`` (``provenance.rejudgeOf``: A judged again by the new judge, A')
joins the two: it holds A's results, labelled by the new judge, so

- **A → A'** is the judge change: the same results on the same queries, labelled by two judges. It is
  shown as a step of its own (:func:`judge_steps`, paired by query), never as a change of the search;
- **A' → B** is a search change under one judge: A' stands in A's place in time (:func:`series_key`), so
  the new judge's next run B is compared against it as its previous run, and a baseline pinned on A is
  carried over to A' (:func:`bridged_baseline`); the comparison says it goes through A'
  (:func:`annotate`).

A compare run is bridged system by system; a run cut short is compared on the queries both judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from judge_runner.analysis.changes import GATED
from judge_runner.measures.paired import MIN_EFFECT, compare_values
from judge_runner.runs.lines import Provenance, RejudgeOrigin


class Run(Protocol):
    """What the bridge reads of a run (:class:`judge_runner.analysis.trend.Run`)."""

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
    """The run ``run`` re-judges (its ``provenance.rejudgeOf``), None for any other run."""
    return run.provenance.rejudgeOf


def series_key(run: Run) -> tuple[str, int, str]:
    """Where a run stands in a series: its start, except that a re-judged run stands at the start of the
    run it re-judges, just after it."""
    was = origin(run)
    if was is not None and was.timestamp:
        return (was.timestamp, 1, run.run_id)
    return (run.timestamp, 0, run.run_id)


def latest_key(run: Run) -> tuple[str, int, str]:
    """:func:`series_key`, except that of a run and its re-judging the run is the later: a re-judged run is
    never the latest of its time (the latest is what a search change is gated on)."""
    time, rejudged, run_id = series_key(run)
    return (time, 1 - rejudged, run_id)


def in_series_order(runs: list[R]) -> list[R]:
    """``runs`` ordered by :func:`series_key` (oldest first)."""
    return sorted(runs, key=series_key)


def bridged_baseline(members: list[R], baseline_id: str | None) -> R | None:
    """The baseline of one judge's runs: the pinned run when it is among them, else the comparable run of
    theirs that re-judges the pinned run (the baseline carried over a judge change), else None."""
    if baseline_id is None:
        return None
    pinned = next((r for r in members if r.run_id == baseline_id and r.comparable), None)
    if pinned is not None:
        return pinned
    return next((r for r in members if r.comparable and (o := origin(r)) is not None and o.runId == baseline_id), None)


def _step_comparisons(old: Run, new: Run, min_effect: float) -> dict[str, dict]:
    """``{column: comparison}`` of one system's judge change, paired by query (the same results), with
    each side's mean (``oldMean``, ``newMean``)."""
    out = {}
    for column in STEP_COLUMNS:
        comparison = compare_values(old.values(column), new.values(column), column, paired=True, min_effect=min_effect).as_dict()
        out[column] = comparison | {"oldMean": old.mean(column), "newMean": new.mean(column)}
    return out


def _step(source: Run | None, rejudged: Run, was: RejudgeOrigin, min_effect: float) -> dict[str, Any]:
    """One judge change: ``from`` (the re-judged run) and ``to`` (its re-judging), their judges, the
    comparisons (the shown system's, and ``systems`` for each other system of a compare run)."""
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
    """Every judge change a re-judged run in ``runs`` bridges (:func:`_step`), in series order; the
    re-judged run is looked up among ``runs`` by id (``found`` false when it is not there: no comparison)."""
    by_id = {r.run_id: r for r in runs if not r.partial}
    steps = []
    for run in in_series_order(list(runs)):
        was = origin(run)
        if was is not None and not run.partial:
            steps.append(_step(by_id.get(was.runId), run, was, min_effect))
    return steps


def through_note(against: Run) -> str | None:
    """What a comparison against ``against`` must say when it is a re-judged run, else None."""
    was = origin(against)
    if was is None:
        return None
    return f"compared through {against.run_id}: run {was.runId} ({was.judge or 'another judge'}) re-judged by this judge"


def annotate(groups: list[dict[str, Any]], runs: Sequence[Run]) -> None:
    """Say, in the ``changes`` of every comparison against a re-judged run, that it goes through it
    (:func:`through_note`); mark each re-judged run's own row with ``rejudgeOf`` (the run it re-judges)."""
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
    """A re-judged run's row note: which run it re-judges (under which judge), or empty for another row."""
    was = row.get("rejudgeOf")
    if not was:
        return ""
    return f"re-judges run {was['runId']} ({was.get('judge') or 'another judge'}): the same results, this judge's labels"


def step_lines(steps: list[dict[str, Any]]) -> list[str]:
    """Each judge change in words: the runs, the judges, the change of each column, and what it means."""

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
