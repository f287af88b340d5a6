"""The sampling options of ``judge-runner label`` (:class:`Sampling`), and their checks for a new session and a
resumed one.

Resuming: the sampling options given again must agree with the session's own draw.

A session keeps the items it drew when it started (its journal's plan line), so options that choose a sample
(``--sample``, ``--queries``, ``--per-label``, ``--width``, ``--seed``, ``--budget``,
``--budget-minutes``, ``--for``, ``--systems``) cannot change it later. Given again with the values the session
was drawn with (the same command run twice), they are accepted; given with other values, they ask for another
draw, which this session is not: :func:`check_resume` refuses them (exit 2), naming the session's own values,
instead of labelling a question the person did not ask. Options a session's plan line does not record (a plan
written before they were kept) are not compared. A new session refuses the options its draw would ignore
(:func:`check_new`), so that no option given is silently dropped, new or resumed.
"""

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
"""The command-line flag of each :class:`Sampling` field."""
BUDGET_FIELDS = frozenset({"budget", "minutes", "question", "systems"})
NOT_FOR = {"pairs": ("queries", "width"), "queries": ("per_label",)}
"""The options a session drawn without a budget has no use for, by what it draws (``--sample``)."""


@dataclass(frozen=True)
class Sampling:
    """How to draw the items of a new session: ``kind`` (``queries`` or ``pairs``), ``queries`` (None: the
    number recommended for ``width``), ``per_label`` (pairs mode), ``width`` (full width of the 95% interval
    of mean nDCG@10 aimed at), ``seed``. With ``budget`` (labels) or ``minutes`` (at the labeller's pace) the
    budget is spent on ``question`` (``mean`` or ``difference``) of ``systems`` instead
    (:mod:`judge_runner.human.pace`), ``kind`` then the unit drawn (whole queries or single pairs). Raises
    nothing itself: :func:`check_new` and :func:`check_resume` check the fields in ``given``."""

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
    """The fields given on the command line (the others hold defaults): compared with a session resumed
    (:func:`check_resume`)."""

    @property
    def budgeted(self) -> bool:
        """Whether a budget is to be spent (``--budget`` or ``--budget-minutes``)."""
        return self.budget is not None or self.minutes is not None


def check_new(sampling: Sampling) -> None:
    """Raise UsageError (exit 2) for sampling options given to a new session that its draw would ignore:
    ``--queries``/``--width`` with ``--sample pairs``, ``--per-label`` with whole queries, ``--for``/``--systems``
    without a budget."""
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
    """The labels the options given would buy, at the pace the session recorded (None: nothing to compare)."""
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


def conflicts(plan: dict[str, Any], sampling: Sampling) -> list[str]:
    """``["--for difference (this session: mean)", ...]``: each sampling option given on the command line
    (``sampling.given``) whose value differs from what the session's ``plan`` line recorded, or that the
    session's kind of draw has no place for (a budget for a session drawn without one, ``--queries`` for a
    budgeted one); [] when they all agree."""
    record = plan.get("budget") if isinstance(plan.get("budget"), dict) else None
    own = _recorded(plan)
    out: list[str] = []
    for field in sorted(sampling.given, key=list(FLAGS).index):
        flag = FLAGS[field]
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
        if not _same(mine, wanted):
            out.append(f"{flag} (this session: {_shown(field, mine)})")
    return out


def check_resume(plan: dict[str, Any], sampling: Sampling, journal: str, name: str) -> None:
    """Raise UsageError (exit 2) when the sampling options given disagree with the session being resumed
    (:func:`conflicts`), naming each and the two ways on."""
    found = conflicts(plan, sampling)
    if found:
        raise UsageError(
            f"the label set {name!r} ({journal}) already holds a session, drawn with other sampling options: "
            f"{'; '.join(found)}. A session keeps its own draw: resume it with `judge-runner label --name {name}`, "
            "or start a new draw under another --name"
        )
