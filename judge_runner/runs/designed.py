"""The summary's corrected figures when people's grades were drawn by ``label --budget``: each graded query
weighted by the probability it was drawn with (:func:`judge_runner.measures.ipw.planned_mean`), not the
uniform-sample correction. The newest draw the lines use is the design; a query the draw was certain of but has
no people's value leaves the figure null, with a note (docs/deciding.md, "Labels where they count")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from judge_runner.measures.ipw import planned_mean
from judge_runner.measures.ppi import MeanEstimate, tuned_mean

Pair = tuple[str, str]


@dataclass(frozen=True)
class LabelDesign:
    """How a human qrels set was drawn (the judgment cache's ``labelDesign:NAME``). ``probabilities``: ``{unit:
    probability}``, None for a marker written before they were kept; ``pairs``: the set's graded pairs;
    ``created``: ISO time of the draw; ``uniform``: the graded queries are a uniform sample of the run's scored
    queries."""

    name: str
    design: str
    unit: str
    probabilities: dict[str, float] | None
    drawn: frozenset[str] = frozenset()
    pairs: frozenset[Pair] = frozenset()
    created: str = ""
    uniform: bool = False
    depth: int = 10
    """A ranking's pool depth: below 10 its queries have only each system's top ``depth`` graded."""

    @classmethod
    def from_marker(cls, name: str, marker: Mapping[str, Any], pairs: Iterable[Pair]) -> LabelDesign:
        """From the cache's marker of the set ``name`` (:func:`judge_runner.human.pace.design_marker`)."""
        raw = marker.get("probabilities")
        probabilities = {str(k): float(v) for k, v in raw.items()} if isinstance(raw, Mapping) else None
        return cls(
            name,
            str(marker.get("design") or ""),
            str(marker.get("unit") or "queries"),
            probabilities,
            frozenset(str(u) for u in marker.get("drawn") or []),
            frozenset(pairs),
            str(marker.get("createdAt") or ""),
            bool(marker.get("uniform")),
            int(marker.get("depth") or 10),
        )


def _labelled_pairs(lines: Iterable[Mapping[str, Any]]) -> set[Pair]:
    return {
        (str(line.get("queryId")), str(r.get("source")))
        for line in lines
        for r in line.get("results") or []
        if r.get("labelOrigin") == "human"
    }


def choose_design(lines: Iterable[Mapping[str, Any]], designs: Mapping[str, LabelDesign]) -> tuple[LabelDesign | None, str | None]:
    """``(design, None)``: the draw that weights the lines' grades; ``(None, None)``: none drawn with unequal
    probabilities (the uniform correction holds); ``(None, why)``: grades from which no corrected nDCG@10 can be
    computed (single pairs, a shallow pool, probabilities not kept)."""
    pairs = _labelled_pairs(lines)
    used = sorted((d for d in designs.values() if not d.uniform and d.pairs & pairs), key=lambda d: (d.created, d.name))
    if not used:
        return None, None
    command = f"`judge-runner label --name {used[-1].name}`"
    by_pairs = [d.name for d in used if d.unit == "pairs"]
    if by_pairs:
        return None, (
            f"the people's labels of {', '.join(map(repr, by_pairs))} were drawn as single (query, document) pairs by "
            "`label --budget --sample pairs`: they estimate scaled DCG@10, not each query's nDCG@10; their estimate is the "
            f"last line of `judge-runner label --name {by_pairs[0]}`"
        )
    shallow = [d for d in used if d.depth < 10]
    if shallow:
        return None, (
            f"the people's labels of {shallow[0].name!r} were drawn for a ranking pooled to depth {shallow[0].depth} (each system's top "
            f"{shallow[0].depth}): a query's nDCG@10 here needs every result labelled; the ranking's estimate is the last line of "
            f"`judge-runner label --name {shallow[0].name}`"
        )
    unkept = [d.name for d in used if d.probabilities is None]
    if unkept:
        return None, (
            f"the people's labels of {', '.join(map(repr, unkept))} were drawn by `label --budget` with unequal probabilities "
            "that the judgment cache does not hold (a draw recorded before they were kept); their estimate, from the probabilities "
            f"in the journal, is the last line of {command}"
        )
    return used[-1], None


@dataclass
class Weighted:
    """The estimator of one :class:`LabelDesign` (:func:`judge_runner.measures.ppi_compare.Estimator`). A
    stopped session's drawn probabilities are scaled by the share graded. ``notes``: why a figure is null;
    ``census``: every figure so far was a census."""

    design: LabelDesign
    notes: list[str] = field(default_factory=list)
    census: bool = True

    def __call__(
        self, judge: Mapping[str, float], human: Mapping[str, float], bounds: tuple[float, float], confidence: float
    ) -> MeanEstimate | None:
        probabilities = self.design.probabilities or {}
        outside = [q for q in judge if q not in probabilities]
        if outside:
            self._note(f"{len(outside)} scored queries the draw of {self.design.name!r} did not cover (e.g. {outside[0]})")
            return None
        drawn = [q for q in judge if q in self.design.drawn]
        share = sum(1 for q in drawn if q in human) / len(drawn) if drawn else 1.0
        scaled = {q: probabilities[q] * share if q in self.design.drawn else probabilities[q] for q in judge}
        used = {q: human[q] for q in judge if q in human and (q in self.design.drawn or probabilities[q] >= 1)}
        missing = [q for q in judge if scaled[q] >= 1 and q not in used]
        if missing:
            self._note(
                f"{len(missing)} queries the draw of {self.design.name!r} was certain of have no people's value here "
                "(known without a label: ranked alike by the two systems of its question, whose difference is 0 but whose means are not known)"
            )
            return None
        if all(scaled[q] >= 1 for q in judge):
            qids = list(judge)
            return tuned_mean(
                [judge[q] for q in qids],
                [judge[q] for q in qids],
                [used[q] for q in qids],
                bounds=bounds,
                weight=0.0,
                confidence=confidence,
            )
        self.census = False
        return planned_mean(self.design.design, judge, used, scaled, bounds=bounds, confidence=confidence)

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def block(self) -> dict[str, Any]:
        """The summary block's ``design``."""
        how = (
            "a census: every query labelled with probability 1, so each figure is the people's exact one on this query set, "
            "its interval the people's own over queries like these"
            if self.census
            else "each labelled query weighted by the probability it was drawn with (inverse-probability weights)"
        )
        return {
            "set": self.design.name,
            "design": self.design.design,
            "census": self.census,
            "text": f"labels drawn by `label --budget` ({self.design.name!r}, {self.design.design} design): {how}",
            "notes": list(self.notes),
        }


def alike_zeros(lines: Iterable[Mapping[str, Any]], a: str | None, b: str | None) -> dict[str, float]:
    """``{query: 0.0}`` where systems ``a`` and ``b`` returned the same ranking (their difference is 0 without a
    grade)."""
    ranked: dict[tuple[str | None, str], list[str]] = {}
    for line in lines:
        ranked[(line.get("system"), str(line.get("queryId")))] = [str(r.get("source")) for r in line.get("results") or []]
    return {q: 0.0 for (s, q), docs in ranked.items() if s == a and ranked.get((b, q)) == docs}


def system_view(block: dict[str, Any], system: str | None) -> dict[str, Any] | None:
    """A compare run's draw-weighted block seen from ``system``: its own figures from ``systems``, never
    recomputed as if the grades were a uniform sample; None when it has none."""
    entry = next((s for s in block.get("systems") or [] if s.get("name") == system), None)
    if entry is None:
        return None
    return {**block, **entry, "system": system, "differences": [], "ranking": None, "systems": []}
