"""Two runs over the same queries compared with people's grades (``trend``, ``report``), and grade changes
named as a cause.

A grade belongs to a (query, document), so people's grades of either run count for both: an older run is
compared on the grades given since. When both runs returned the same ranked documents, a change of a
judge-side figure comes from the grades, and ``trend`` names it so and does not gate on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judge_runner.analysis.changes import RunLike, failed_side
from judge_runner.measures.ir import NDCG10_NAME
from judge_runner.measures.paired import MIN_EFFECT
from judge_runner.measures.ppi_compare import Arm, Method, corrected_difference
from judge_runner.runs.corrected import CORRECTED, labelled, scored_lines

LABELS_CAUSE = "labels changed, not the search"


def _lines(run: RunLike) -> list[Mapping[str, Any]]:
    """The run's evaluation records of the system it shows."""
    shown = run.shown_system
    return [e for e in run.file.evaluations if shown is None or e.system == shown]


def run_values(run: RunLike) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """``(judge, human)``: per column of :data:`CORRECTED` ``{query id: value}``; a query has a human value when
    every document the run returned carries a person's grade."""
    judge: dict[str, dict[str, float]] = {c: {} for c in CORRECTED}
    human: dict[str, dict[str, float]] = {c: {} for c in CORRECTED}
    for line in scored_lines(_lines(run)):
        qid = str(line["queryId"])
        own = line.get("judgeOnly") or {}
        values = {NDCG10_NAME: (line.get("metrics") or {}).get(NDCG10_NAME), "relevance": (line.get("scores") or {}).get("relevance")}
        for column in CORRECTED:
            value = own.get(column, values[column]) if own else values[column]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                judge[column][qid] = float(value)
        if labelled(line) is not True:
            continue
        theirs = values
        for column in CORRECTED:
            value = theirs[column]
            if isinstance(value, (int, float)) and not isinstance(value, bool) and qid in judge[column]:
                human[column][qid] = float(value)
    return judge, human


def corrected_change(old: RunLike, new: RunLike) -> dict[str, dict]:
    """``{column: corrected difference (new - old)}`` for nDCG@10 and relevance, prediction-powered on paired
    per-query differences, failed queries counted; empty for different query sets or too few graded queries
    (:data:`judge_runner.measures.ppi.MIN_LABELLED`)."""
    if not old.provenance.querySetSha256 or old.provenance.querySetSha256 != new.provenance.querySetSha256:
        return {}
    old_judge, old_human = run_values(old)
    new_judge, new_human = run_values(new)
    if not old_human[NDCG10_NAME] and not new_human[NDCG10_NAME]:
        return {}
    failed = (failed_side(old, f"run {old.file.run_id}", new), failed_side(new, "this run", old))
    out = {}
    for column in CORRECTED:
        diff = corrected_difference(
            Arm("old run", old_judge[column], old_human[column]),
            Arm("new run", new_judge[column], new_human[column]),
            Method(column=column),
            failed,
        )
        if diff is not None:
            out[column] = diff.as_dict()
    return out


def corrected_regression(change: Mapping[str, Any] | None, min_effect: float = MIN_EFFECT) -> bool:
    """Whether the gate counts a corrected change as a regression: interval below 0 and the estimate at least
    ``min_effect`` below it."""
    return change is not None and change.get("outcome") == "worse" and float(change["estimate"]) <= -min_effect


def same_results(old: RunLike, new: RunLike) -> bool:
    """Whether both runs returned the same documents in the same order on every common query (at least one)."""

    def ranked(run: RunLike) -> dict[str, list[str]]:
        return {str(line["queryId"]): [str(r["source"]) for r in line.get("results") or []] for line in _lines(run)}

    a, b = ranked(old), ranked(new)
    common = set(a) & set(b)
    return bool(common) and all(a[q] == b[q] for q in common)


def label_change(old: RunLike, new: RunLike) -> str | None:
    """What changed in the grades between two runs, in words, or None: queries with people's grades (before ->
    now), and common documents whose label changed."""

    def labels(run: RunLike) -> tuple[int, dict[tuple[str, str], tuple[int, str]]]:
        lines = _lines(run)
        with_people = sum(1 for line in lines if int(line.get("humanLabels") or 0))
        grades = {
            (str(line["queryId"]), str(r["source"])): (int(r.get("relevance") or 0), str(r.get("labelOrigin") or "judge"))
            for line in lines
            for r in line.get("results") or []
        }
        return with_people, grades

    before, old_grades = labels(old)
    now, new_grades = labels(new)
    moved = [k for k in old_grades.keys() & new_grades.keys() if old_grades[k][0] != new_grades[k][0]]
    if before == now and not moved:
        return None
    parts = []
    if before != now:
        parts.append(f"people's labels on {now} queries (were on {before})")
    if moved:
        relabelled = sum(1 for k in moved if old_grades[k][1] == new_grades[k][1] == "human")
        parts.append(
            f"{len(moved)} labels of documents both returned changed" + (f" ({relabelled} relabelled by people)" if relabelled else "")
        )
    return "labels changed: " + "; ".join(parts)
