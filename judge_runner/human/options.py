"""The sampling options of ``judge-runner label`` (:class:`Sampling`) and their checks. A session keeps the draw
it started with, so options that choose a sample, given again on resume, must agree with it
(:func:`check_resume`); a new session refuses the options its draw would ignore (:func:`check_new`). No option
given is silently dropped. Options an older plan line does not record are not compared."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from judge_runner.core.failures import UsageError
from judge_runner.human.pace import labels_for_minutes
from judge_runner.human.plan import DEFAULT_WIDTH

FLAGS = {
    "kind": "--sample",
    "queries": "--queries",
    "per_label": "--per-label",
    "width": "--width",
    "seed": "--seed",
    "budget": "--budget",
    "minutes": "--budget-minutes",
    "question": "--for",
    "systems": "--systems",
}
BUDGET_FIELDS = frozenset({"budget", "minutes", "question", "systems"})
NOT_FOR = {"pairs": ("queries", "width"), "queries": ("per_label",)}
"""The options a session drawn without a budget has no use for, by ``--sample``."""


@dataclass(frozen=True)
class Sampling:
    """How to draw a new session's items: ``kind`` (``queries`` or ``pairs``), ``queries`` (None: as many as
    ``width``, the full width of the 95% interval of mean nDCG@10, needs), ``per_label`` (pairs). With
    ``budget`` (labels) or ``minutes`` the budget is spent on ``question`` of ``systems`` instead, ``kind`` then
    the unit drawn."""

    kind: str = "queries"
    queries: int | None = None
    per_label: int = 25
    width: float = DEFAULT_WIDTH
    seed: int = 13
    budget: int | None = None
    minutes: float | None = None
    question: str = "mean"
    systems: tuple[str, ...] = ()
    given: frozenset[str] = frozenset()
    """The fields given on the command line; the others hold defaults."""

    @property
    def budgeted(self) -> bool:
        return self.budget is not None or self.minutes is not None


def check_new(sampling: Sampling) -> None:
    """Raise UsageError for options a new session's draw would ignore."""
    if sampling.budget is None and sampling.minutes is None:
        if sampling.given & {"question", "systems"}:
            raise UsageError("--for and --systems say what a budget narrows: give --budget N or --budget-minutes M with them")
        unused = [FLAGS[f] for f in NOT_FOR[sampling.kind] if f in sampling.given] if sampling.kind in NOT_FOR else []
        if unused:
            why = (
                "it draws up to --per-label pairs per judge label, not whole queries"
                if sampling.kind == "pairs"
                else "it draws whole queries (--queries, or as many as --width needs)"
            )
            raise UsageError(f"{' and '.join(unused)} cannot go with --sample {sampling.kind}: {why}")


def _budget_labels(sampling: Sampling, record: dict[str, Any]) -> float | None:
    """The labels the options would buy at the session's recorded pace (None: nothing to compare)."""
    if sampling.budget is not None:
        return float(sampling.budget)
    pace = record.get("secondsPerLabel")
    if sampling.minutes is not None and isinstance(pace, (int, float)) and pace > 0:
        return float(labels_for_minutes(sampling.minutes, pace))  # as budget_session bought them
    return None


def _recorded(plan: dict[str, Any]) -> dict[str, Any]:
    """The session's own value of each field its plan line records."""
    record = plan.get("budget") if isinstance(plan.get("budget"), dict) else None
    own: dict[str, Any] = {"kind": plan.get("sampling"), "seed": plan.get("seed")}
    if record is None and plan.get("sampling") == "pairs":
        own["per_label"] = plan.get("perLabel")
    elif record is None:
        # the queries drawn, also when --width chose how many (the plan line then records none)
        drawn = len({item.get("qid") for item in plan.get("items", []) if isinstance(item, dict)})
        own.update({"width": plan.get("width"), "queries": plan.get("queries") or drawn or None})
    else:
        own.update({"budget": record.get("budget"), "question": record.get("question"), "systems": record.get("systems")})
    return {k: v for k, v in own.items() if v is not None}


def _shown(field: str, value: Any) -> str:
    if field == "systems":
        return ",".join("(unnamed)" if s is None else str(s) for s in value) or "(the run's default)"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _same(mine: Any, wanted: Any) -> bool:
    if isinstance(mine, (list, tuple)) or isinstance(wanted, (list, tuple)):
        return list(mine) == list(wanted) if isinstance(mine, (list, tuple)) and isinstance(wanted, (list, tuple)) else False
    if isinstance(mine, (int, float)) and isinstance(wanted, (int, float)) and not isinstance(mine, bool):
        return math.isclose(float(mine), float(wanted))
    return bool(mine == wanted)


def asked(sampling: Sampling) -> dict[str, Any]:
    """The options given, as given (the plan line's ``asked``): the draw may record other values of them (a
    budget past the labels still open, a system named twice), and the same command must still resume."""
    return {f: list(v) if isinstance(v := getattr(sampling, f), tuple) else v for f in sorted(sampling.given, key=list(FLAGS).index)}


def _census(record: dict[str, Any] | None) -> bool:
    """Whether a budget session's draw took every open unit (any larger budget draws the same)."""
    probabilities = (record or {}).get("probabilities")
    return isinstance(probabilities, dict) and bool(probabilities) and all(p >= 1 for p in probabilities.values())


def conflicts(plan: dict[str, Any], sampling: Sampling) -> list[str]:
    """``["--for difference (this session: mean)", ...]``: each option given that differs from the session's
    ``plan`` line or has no place in its kind of draw; [] when all agree. An option given as the session's
    command gave it (``asked``) agrees."""
    record = plan.get("budget") if isinstance(plan.get("budget"), dict) else None
    own = _recorded(plan)
    first = plan["asked"] if isinstance(plan.get("asked"), dict) else {}
    out: list[str] = []
    given = asked(sampling)
    for field in given:
        flag = FLAGS[field]
        if field in first and _same(first[field], given[field]):
            continue
        if record is None and field in BUDGET_FIELDS:
            out.append(f"{flag} (this session was drawn without a budget)")
            continue
        if record is not None and field in ("queries", "per_label", "width"):
            out.append(f"{flag} (this session spends a budget: it has no {flag})")
            continue
        drawn_kind = plan.get("sampling")
        if record is None and field in NOT_FOR.get(str(drawn_kind), ()):
            out.append(f"{flag} (this session draws {'single pairs' if drawn_kind == 'pairs' else 'whole queries'}: it has no {flag})")
            continue
        if field == "minutes":
            field, wanted = "budget", _budget_labels(sampling, record or {})
            flag = f"--budget-minutes {sampling.minutes:g} (about {_shown('budget', wanted)} labels)"
        else:
            wanted = getattr(sampling, field)
            flag = f"{flag} {_shown(field, wanted)}"
        if field not in own or wanted is None:
            continue
        mine = own[field]
        if field == "budget" and _census(record) and isinstance(mine, (int, float)) and wanted >= mine:
            continue  # a journal without ``asked``: a larger budget draws every open unit all the same
        if not _same(mine, wanted):
            out.append(f"{flag} (this session: {_shown(field, mine)})")
    return out


def check_resume(plan: dict[str, Any], sampling: Sampling, journal: str, name: str) -> None:
    """Raise UsageError when the options given disagree with the session being resumed."""
    found = conflicts(plan, sampling)
    if found:
        raise UsageError(
            f"the label set {name!r} ({journal}) already holds a session, drawn with other sampling options: "
            f"{'; '.join(found)}. A session keeps its own draw: resume it with `judge-runner label --name {name}`, "
            "or start a new draw under another --name"
        )
