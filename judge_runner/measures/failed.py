"""Failed queries in a difference: a query one side failed (its search or its judge) and the other answered is
never silently dropped. The one rule every difference follows (the paired bootstrap,
:func:`judge_runner.measures.paired.compare_values`; the corrected difference and ranking,
:mod:`judge_runner.measures.ppi_compare`), whoever calls it (a compare run, ``trend``, the report).

**Which failed queries count.** For a difference ``system`` - ``against`` on one column, a failed query counts
when the other side has a value for it (paired: the same queries); unpaired (two runs of different query sets),
when it would have had one: every failed query for a score, for a metric every one not known to be off-topic
(off-topic queries have no metrics, so a failed off-topic query does not move nDCG@10).

**Two figures.** The difference is computed with the counted failed queries at 0 (the search gave nothing:
trec_eval's ``-c`` rule for a query without results) and at the other side's value (the failure cost nothing;
unpaired: left out, as if they were like the answered ones). The first is the figure shown. Its verdict stands
only when the second gives the same verdict word; else the verdict is :data:`CANNOT_TELL`, said as "cannot
tell: B failed 5 of 14 queries (3 on-topic)".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from judge_runner.measures.ir import METRIC_NAMES, canonical_metric_name

AT_ZERO = "at 0"
AT_OTHER = "at the other's value"
LEFT_OUT = "left out"
CANNOT_TELL = "cannot tell"

T = TypeVar("T")


def is_metric(column: str) -> bool:
    """Whether ``column`` is an IR metric (off-topic queries have none), not a score."""
    return canonical_metric_name(column) in METRIC_NAMES


@dataclass(frozen=True)
class Failed:
    """One side's failed queries: ``name`` (a system, a run), ``queries`` (``{query id: on-topic}``, None where
    the line does not say) and ``of`` (the queries it was given: answered and failed)."""

    name: str
    queries: Mapping[str, bool | None] = field(default_factory=dict)
    of: int = 0

    @property
    def on_topic(self) -> int:
        """Failed queries known to be on-topic."""
        return sum(1 for v in self.queries.values() if v is True)

    def words(self) -> str:
        """``"B failed 5 of 14 queries (3 on-topic)"``."""
        unknown = sum(1 for v in self.queries.values() if v is None)
        kinds = f"{self.on_topic} on-topic" + (f", {unknown} of unrecorded type" if unknown else "")
        return f"{self.name} failed {len(self.queries)} of {self.of} queries ({kinds})"

    def as_dict(self, counted: int) -> dict[str, Any]:
        """JSON-ready: ``name``, ``failed``, ``onTopic``, ``of``, ``counted`` (those the figure counts)."""
        return {"name": self.name, "failed": len(self.queries), "onTopic": self.on_topic, "of": self.of, "counted": counted}


def failed_of(name: str, errors: Iterable[Mapping[str, Any]], answered: int, types: Mapping[str, str] | None = None) -> Failed:
    """One side's :class:`Failed` from its ``error`` lines (dicts by alias; on-topic from a line's ``queryType``, else
    from ``types``, ``{query id: queryType}`` known from other lines of the same query set) and its number of
    ``answered`` queries."""
    queries: dict[str, bool | None] = {}
    for line in errors:
        qid = str(line.get("queryId"))
        kind = line.get("queryType") or (types or {}).get(qid)
        queries[qid] = None if not kind else kind != "off-topic"
    return Failed(name, queries, answered + len(queries))


def failed_by_system(
    evaluations: Iterable[Mapping[str, Any]], errors: Iterable[Mapping[str, Any]], names: Iterable[str | None]
) -> dict[str, Failed]:
    """``{system: Failed}`` of a compare run's ``evaluation`` and ``error`` lines (dicts by alias, tagged ``system``):
    a failed query's type from its error line, else from another system's line of the same query."""
    answered, failed = list(evaluations), list(errors)
    types = {str(line.get("queryId")): str(line.get("queryType") or "") for line in answered}
    return {
        str(name): failed_of(
            str(name), [e for e in failed if e.get("system") == name], sum(1 for e in answered if e.get("system") == name), types
        )
        for name in names
    }


@dataclass(frozen=True)
class Decided(Generic[T]):
    """A difference under the rule: ``shown`` (failed queries at 0), ``second`` (at the other's value, or left
    out; None when no failed query counts), whether the verdict ``holds``, and the ``failed`` block."""

    shown: T
    second: T | None
    holds: bool
    failed: dict[str, Any] | None


@dataclass(frozen=True)
class Failures:
    """The failed queries of both sides of one difference ``system`` - ``against`` and the ones that count."""

    against: Failed
    system: Failed
    counted_against: tuple[str, ...]
    counted_system: tuple[str, ...]
    paired: bool
    column: str

    @classmethod
    def of(cls, a: Mapping[str, float], b: Mapping[str, float], against: Failed, system: Failed, *, paired: bool, column: str) -> Failures:
        """Which failed queries of ``against`` (values ``a``) and ``system`` (values ``b``) count on ``column``."""

        def counted(failed: Failed, own: Mapping[str, float], other: Mapping[str, float]) -> tuple[str, ...]:
            if paired:
                return tuple(q for q in failed.queries if q in other and q not in own)
            return tuple(q for q, on in failed.queries.items() if on is not False or not is_metric(column))

        return cls(against, system, counted(against, a, b), counted(system, b, a), paired, column)

    @property
    def second_fill(self) -> str:
        return AT_OTHER if self.paired else LEFT_OUT

    def fill(self, a: Mapping[str, float], b: Mapping[str, float], how: str) -> tuple[dict[str, float], dict[str, float]]:
        """``(a, b)`` with the counted failed queries put in ``how`` (:data:`AT_ZERO`, :data:`AT_OTHER`; :data:`LEFT_OUT`
        leaves them out); paired, only where the other side has a value (``a`` and ``b`` may be a subset, such as
        the labelled queries)."""
        a2, b2 = dict(a), dict(b)
        if how == LEFT_OUT:
            return a2, b2
        for ids, own, other in ((self.counted_against, a2, b), (self.counted_system, b2, a)):
            for q in ids:
                if not self.paired:
                    own[f"failed:{q}"] = 0.0  # unpaired keys need not match the other side's
                elif q in other:
                    own[q] = 0.0 if how == AT_ZERO else float(other[q])
        return a2, b2

    def decide(self, figure: Callable[[str], T | None], word: Callable[[T], str], summary: Callable[[T], dict]) -> Decided[T] | None:
        """Apply the rule: ``figure(how)`` computes the difference with the failed queries put in ``how``; ``word``
        is its verdict word; ``summary`` what the ``failed`` block keeps of the second figure. None when the shown
        figure is None (too few queries for one)."""
        shown = figure(AT_ZERO)
        if shown is None:
            return None
        if not (self.against.queries or self.system.queries):
            return Decided(shown, None, True, None)
        if not (self.counted_against or self.counted_system):
            return Decided(shown, None, True, self.block(word(shown), None, True))
        second = figure(self.second_fill)
        holds = second is not None and word(second) == word(shown)
        return Decided(shown, second, holds, self.block(word(shown), summary(second) if second is not None else None, holds))

    def text(self, holds: bool) -> str:
        """The failures in words: "cannot tell: B failed 5 of 14 queries (3 on-topic)" when they can change the
        verdict; else who failed and why it does not matter here."""
        sides = [f for f in (self.system, self.against) if f.queries]
        said = "; ".join(f.words() for f in sides)
        if not holds:
            return f"{CANNOT_TELL}: {said}"
        if not (self.counted_against or self.counted_system):
            failed = [*self.system.queries.values(), *self.against.queries.values()]
            if is_metric(self.column) and all(on is False for on in failed):
                return f"{said}: off-topic queries have no {self.column}, so they do not move it"
            return f"{said}: none has a {self.column} on the other side, so none moves it"
        other = "the other side's value" if self.paired else "left out"
        return f"{said}; the verdict holds with them at 0 and {other}"

    def block(self, shown: str, second: dict | None, holds: bool) -> dict[str, Any]:
        """The ``failed`` block of a difference (docs/run-file.md): ``shown`` is the shown figure's own verdict word."""
        return {
            "system": self.system.as_dict(len(self.counted_system)),
            "against": self.against.as_dict(len(self.counted_against)),
            "shown": AT_ZERO,
            "shownVerdict": shown,
            "second": self.second_fill,
            "secondFigure": second,
            "holds": holds,
            "text": self.text(holds),
        }
