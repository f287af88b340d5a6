"""Failed queries in a difference: one side failed a query the other answered, and it is never silently dropped.
The one rule every difference follows (docs/run-file.md, "Failed queries in a difference"): the figure shown
counts them at 0 (trec_eval's ``-c``), and its verdict stands only when the figure with them at the other side's
value (unpaired: left out) agrees; else :data:`CANNOT_TELL`."""

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
    return canonical_metric_name(column) in METRIC_NAMES


@dataclass(frozen=True)
class Failed:
    """One side's failed queries: ``queries`` ``{query id: on-topic}`` (None where the line does not say) and
    ``of``, the queries it was given."""

    name: str
    queries: Mapping[str, bool | None] = field(default_factory=dict)
    of: int = 0

    @property
    def on_topic(self) -> int:
        return sum(1 for v in self.queries.values() if v is True)

    def words(self) -> str:
        """``"B failed 5 of 14 queries (3 on-topic)"``."""
        unknown = sum(1 for v in self.queries.values() if v is None)
        kinds = f"{self.on_topic} on-topic" + (f", {unknown} of unrecorded type" if unknown else "")
        return f"{self.name} failed {len(self.queries)} of {self.of} queries ({kinds})"

    def as_dict(self, counted: int) -> dict[str, Any]:
        """JSON-ready; ``counted``: those the figure counts."""
        return {"name": self.name, "failed": len(self.queries), "onTopic": self.on_topic, "of": self.of, "counted": counted}


def failed_of(name: str, errors: Iterable[Mapping[str, Any]], answered: int, types: Mapping[str, str] | None = None) -> Failed:
    """One side's :class:`Failed` from its ``error`` lines (dicts by alias); a query's type from its line, else
    from ``types`` ``{query id: queryType}``."""
    queries: dict[str, bool | None] = {}
    for line in errors:
        qid = str(line.get("queryId"))
        kind = line.get("queryType") or (types or {}).get(qid)
        queries[qid] = None if not kind else kind != "off-topic"
    return Failed(name, queries, answered + len(queries))


def failed_by_system(
    evaluations: Iterable[Mapping[str, Any]], errors: Iterable[Mapping[str, Any]], names: Iterable[str | None]
) -> dict[str, Failed]:
    """``{system: Failed}`` of a compare run's lines; a failed query's type from its error line, else from
    another system's line."""
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
    """A difference under the rule: ``shown`` (failed queries at 0), ``second`` (None when no failed query
    counts), whether the verdict ``holds``, and the ``failed`` block."""

    shown: T
    second: T | None
    holds: bool
    failed: dict[str, Any] | None


@dataclass(frozen=True)
class Failures:
    """Both sides' failed queries in one difference ``system`` - ``against``, and those that count: paired,
    where the other side has a value; unpaired, every one for a score and every one not known off-topic for a
    metric."""

    against: Failed
    system: Failed
    counted_against: tuple[str, ...]
    counted_system: tuple[str, ...]
    paired: bool
    column: str

    @classmethod
    def of(cls, a: Mapping[str, float], b: Mapping[str, float], against: Failed, system: Failed, *, paired: bool, column: str) -> Failures:

        def counted(failed: Failed, own: Mapping[str, float], other: Mapping[str, float]) -> tuple[str, ...]:
            if paired:
                return tuple(q for q in failed.queries if q in other and q not in own)
            return tuple(q for q, on in failed.queries.items() if on is not False or not is_metric(column))

        return cls(against, system, counted(against, a, b), counted(system, b, a), paired, column)

    @property
    def second_fill(self) -> str:
        return AT_OTHER if self.paired else LEFT_OUT

    def fill(self, a: Mapping[str, float], b: Mapping[str, float], how: str) -> tuple[dict[str, float], dict[str, float]]:
        """``(a, b)`` with the counted failed queries put ``how``; paired, only where the other side has a
        value."""
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
        """Apply the rule: ``figure(how)`` is the difference with the failed queries put ``how``, ``word`` its
        verdict, ``summary`` what the block keeps of the second. None when there is no shown figure."""
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
        """The failures in words: "cannot tell: ..." when they can change the verdict, else who failed and why
        it does not matter."""
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
        """The ``failed`` block of a difference (docs/run-file.md)."""
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
