"""``judge-runner label --budget``: a session that spends a budget of labels where they narrow one question. It
turns labels or minutes (at the assessor's pace) into a draw, says what it buys before the page starts, records
the draw's probabilities in the journal's plan line, and prints the corrected estimate when the session ends
(docs/deciding.md, "Labels where they count")."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_runner.core.failures import UsageError
from judge_runner.core.printer import Printer
from judge_runner.human.budget import Draw, Question, TooSmall, ask, draws_enough, plan_draw, smallest_budget
from judge_runner.human.estimate import estimate_budget
from judge_runner.human.journal import FAST_LABEL_S, LabelSession
from judge_runner.human.ranking import plan_ranking, smallest_ranking_budget
from judge_runner.measures.ppi import MIN_LABELLED
from judge_runner.runs.read import RunFile, read_judged_runs

DEFAULT_SECONDS_PER_LABEL = 10.0
"""Seconds a grade takes when no earlier session measured the pace: a short passage read and one of four grades
chosen."""
MAX_LABELS = 10**9
"""The largest budget minutes buy (more than any run holds)."""
MIN_PACE_LABELS = 20
"""Grades an earlier session must hold before its pace is trusted over the default."""


def measured_pace(folder: Path, labeller: str) -> tuple[float, str]:
    """``(seconds per grade, where it comes from)``: the median over ``folder``'s journals, the assessor's own
    when they hold :data:`MIN_PACE_LABELS`, else everyone's, else the default. Grades flagged ``fast`` are no
    pace, so the pace is never below :data:`~judge_runner.human.journal.FAST_LABEL_S`."""
    mine: list[float] = []
    everyone: list[float] = []
    too_fast = 0  # labels given faster than a person reads (flagged fast, or under the floor): no pace
    for journal in sorted(folder.glob("*.journal.jsonl")) if folder.is_dir() else []:
        try:
            text = journal.read_text(encoding="utf-8")
        except OSError:
            continue
        for raw in text.splitlines():
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:
                continue
            seconds = line.get("seconds") if isinstance(line, dict) and line.get("type") == "label" else None
            if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds):
                continue  # no label, or no time kept with it: neither a pace nor too fast
            if line.get("fast") or seconds < FAST_LABEL_S:
                too_fast += 1
                continue
            everyone.append(float(seconds))
            if line.get("labeller") == labeller:
                mine.append(float(seconds))
    for values, whose in ((mine, f"{labeller}'s"), (everyone, "everyone's")):
        if len(values) >= MIN_PACE_LABELS:
            return round(statistics.median(values), 1), f"the median of {whose} {len(values)} earlier labels in {folder}"
    left_out = f"; {too_fast} given in under {FAST_LABEL_S:g} s, no person's pace, left out" if too_fast else ""
    return (
        DEFAULT_SECONDS_PER_LABEL,
        f"the default {DEFAULT_SECONDS_PER_LABEL:g} s (fewer than {MIN_PACE_LABELS} earlier labels in {folder}{left_out})",
    )


def labels_for_minutes(minutes: float, seconds_per_label: float) -> int:
    """Rounded down, at most :data:`MAX_LABELS` (``minutes * 60`` can overflow to inf)."""
    return int(min(minutes * 60 / seconds_per_label, MAX_LABELS))


@dataclass(frozen=True)
class Prepared:
    """A new budget session's draw, made before the set is taken."""

    draw: Draw
    runs: Sequence[RunFile]
    seconds: float
    pace_from: str
    sampling: Any


def _too_small(run: RunFile, question: Question, seconds: float, known: Mapping[tuple[str, str], int], why: str) -> str:
    """``why``, then the smallest budget whose draw passes :func:`~judge_runner.human.budget.draws_enough` (or
    that none does) and that nothing was started."""
    smallest = (smallest_ranking_budget if question.kind == "ranking" else smallest_budget)(run, question, known)
    unit = question.unit
    needs = f"{why}; a corrected estimate needs at least {MIN_LABELLED} drawn {unit} labelled"
    if smallest is None:
        return f"{needs}, and fewer {unit} than that are open here: no budget gives one; nothing was started"
    return (
        f"{needs}: the smallest budget that works here is --budget {smallest} "
        f"(about {math.ceil(smallest * seconds / 60)} min at {seconds:g} s a label); nothing was started"
    )


def prepare_budget(
    runs: Sequence[RunFile], sampling: Any, labeller: str, folder: Path, known: Mapping[tuple[str, str], int] | None = None
) -> Prepared:
    """The draw of a new budget session, before anything is locked or written; ``known``: the people's grades
    from outside the run file (free). Raises UsageError for more than one run file, a question the run cannot
    answer, a budget of 0, nothing left to grade, or a budget too small for an estimate (naming the smallest
    that works)."""
    if len(runs) != 1:
        raise UsageError(f"--budget draws from one run file (a compare run for a difference or a ranking); {len(runs)} were given")
    seconds, pace_from = measured_pace(folder, labeller)
    budget = sampling.budget if sampling.budget is not None else labels_for_minutes(sampling.minutes, seconds)
    if budget < 1:
        raise UsageError(f"--budget-minutes {sampling.minutes:g} at {seconds:g} s a label buys no label: give more minutes")
    try:
        question = ask(runs[0], sampling.question, sampling.systems, sampling.kind)
        plan = plan_ranking if question.kind == "ranking" else plan_draw
        draw = plan(runs[0], question, budget, sampling.seed, seconds, known=known)
    except TooSmall as exc:
        raise UsageError(_too_small(runs[0], question, seconds, known or {}, str(exc))) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not draw.census and not draws_enough(draw.units_drawn):
        asked = f"--budget {sampling.budget}" if sampling.budget is not None else f"--budget-minutes {sampling.minutes:g}"
        why = f"{asked} draws about {draw.units_drawn:.0f} {question.unit} for {question.text()}"
        raise UsageError(_too_small(runs[0], question, seconds, known or {}, why))
    return Prepared(draw, runs, seconds, pace_from, sampling)


def budget_session(
    session: LabelSession, prepared: Prepared, labeller: str, printer: Printer, asked: Mapping[str, Any] | None = None
) -> None:
    """Start ``session`` with a prepared draw, saying first what it buys; ``asked``: the options as given."""
    draw, sampling = prepared.draw, prepared.sampling
    question = draw.question
    printer.out(draw.text)
    over = overspend(draw, sampling)
    if over:
        printer.out(over)
    units = "whole queries" if question.unit == "queries" else "single pairs"
    if question.kind == "ranking":
        units = f"whole queries pooled to depth {question.depth} (each system's top {question.depth})"
    printer.note(
        f"{units}, {draw.plan.design} design: {len(draw.drawn)} {question.unit} drawn ({len(draw.items)} labels to give); "
        f"pace {prepared.seconds:g} s a label, {prepared.pace_from}"
    )
    details = {
        "sampling": sampling.kind,
        "seed": sampling.seed,
        # the page shows this: never the systems' names (labels are given blind), so not the budget's sentence
        "recommended": f"{len(draw.items)} labels drawn at random where they narrow the question asked (its systems are not named here)",
        "runs": [str(Path(r.path).resolve()) for r in prepared.runs],
        "runIds": [r.run_id for r in prepared.runs],
        "labeller": labeller,
        "budget": draw.record(sampling.seed, prepared.seconds, prepared.pace_from),
        "asked": dict(asked or {}),
    }
    session.start(draw.items, details)


def overspend(draw: Draw, sampling: Any) -> str:
    """Why the draw asks for more labels than the budget bought, or empty: each unit is drawn whole at random,
    and units differ in cost (a query needs a label per document), so only a draw of equal-cost units at a fixed
    size spends it exactly; a draw cut to fit would no longer have the recorded probabilities."""
    budget, labels = draw.plan.budget, len(draw.items)
    if labels <= budget:
        return ""
    asked = f"--budget {sampling.budget}" if sampling.budget is not None else f"--budget-minutes {sampling.minutes:g} ({budget:g} labels)"
    how = (
        "each unit drawn on its own with its probability"
        if draw.plan.design == "weighted"
        else f"a fixed number of {draw.question.unit} drawn at random, whole"
    )
    cost = "its documents not graded before" if draw.question.unit == "queries" else "one label"
    return (
        f"this draw takes {labels} labels, {labels - budget:g} more than {asked}: {how} ({cost} each), so a draw's labels vary "
        "around the budget; cutting it to fit would bias the estimate"
    )


def design_marker(session: LabelSession) -> dict[str, Any] | None:
    """What the judgment cache keeps beside the set so ``evaluate`` weights its grades by their probabilities
    (:mod:`judge_runner.runs.designed`); None without a budget. ``uniform``: whole queries, the uniform design,
    none known, so the uniform correction holds as it is."""
    record = session.plan.get("budget")
    if not isinstance(record, dict):
        return None
    known = any(p >= 1 for p in record.get("probabilities", {}).values())
    uniform = record.get("unit") == "queries" and record.get("design") == "uniform" and not known
    return {
        "design": record.get("design"),
        "unit": record.get("unit"),
        "question": record.get("question"),
        "systems": record.get("systems"),
        "depth": record.get("depth"),
        "probabilities": record.get("probabilities"),
        "drawn": record.get("drawn"),
        "createdAt": session.plan.get("createdAt"),
        "journal": str(session.journal.resolve()),
        "uniform": uniform,
    }


def estimate_lines(session: LabelSession) -> list[str]:
    """The corrected estimate of a budgeted session's question from its recorded probabilities; [] without a
    budget; a line saying why when its run file cannot be read."""
    record = session.plan.get("budget")
    runs = session.plan.get("runs") or []
    if not isinstance(record, dict) or not runs:
        return []
    try:
        run = read_judged_runs([Path(runs[0])])[0]
    except (UsageError, OSError, IndexError) as exc:
        return [f"no corrected estimate: the run file {runs[0]} cannot be read ({exc})"]
    given = {(session.items[i].qid, session.items[i].source): g for i, g in session.state.labels.items()}
    try:
        found = estimate_budget(run, record, given)
    except (KeyError, ValueError) as exc:
        return [f"no corrected estimate: {session.journal}'s budget record does not fit {runs[0]} ({exc})"]
    return found.lines()
