"""What ``judge-runner label --budget`` draws: the question a budget narrows (a system's mean, the difference
``B - A`` of two systems, or a ranking), on whole queries (nDCG@10) or single pairs (scaled DCG@10), the run's
pool for it, the plan (:func:`judge_runner.measures.sampling.plan_budget`), the draw and the items.
:meth:`Draw.record` is what the journal's plan line keeps for :mod:`judge_runner.human.estimate`
(docs/deciding.md, "Labels where they count")."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_runner.human.plan import Item, documents, items_of, scored
from judge_runner.judging.pooled import build_pool, topic_of
from judge_runner.measures.ipw import SCALED_DCG_IDEAL, discount
from judge_runner.measures.ir import NDCG10_NAME, qrels_metrics
from judge_runner.measures.ppi import MIN_LABELLED
from judge_runner.measures.sampling import (
    LabelNoise,
    Plan,
    Unit,
    budget_text,
    choose_probabilities,
    pair_units,
    plan_budget,
    predicted_half_width,
    query_units,
    residuals,
)
from judge_runner.runs.read import RunFile

QUESTIONS = ("mean", "difference", "ranking")
UNITS = ("queries", "pairs")
Ranked = dict[str, list[tuple[str, int]]]


@dataclass(frozen=True)
class Question:
    """What a budget narrows: ``mean`` of ``systems[0]``, ``difference`` ``systems[1] - systems[0]`` or
    ``ranking`` of all; ``unit`` ``queries`` or ``pairs``; ``depth`` a ranking's pool depth. A system is None in
    a run of the built-in search alone."""

    kind: str
    systems: tuple[str | None, ...]
    unit: str
    depth: int = 10

    @property
    def measure(self) -> str:
        if self.unit == "pairs":
            return "scaled DCG@10"
        return NDCG10_NAME if self.kind != "ranking" else f"{NDCG10_NAME} on qrels pooled to depth {self.depth}"

    @property
    def bounds(self) -> tuple[float, float]:
        """(0, 1) for a mean, (-1, 1) for a difference."""
        return (-1.0, 1.0) if self.kind == "difference" else (0.0, 1.0)

    def text(self) -> str:
        """``the difference fts - hybrid in nDCG@10``, ``the mean nDCG@10 of hybrid``."""
        names = [s if s is not None else "the run" for s in self.systems]
        if self.kind == "ranking":
            return f"the ranking of {len(names)} systems by {self.measure}"
        if self.kind == "difference":
            return f"the difference {names[1]} - {names[0]} in {self.measure}"
        return f"the mean {self.measure} of {names[0]}"


class TooSmall(ValueError):
    """A budget that draws nothing to grade."""


def draws_enough(units_drawn: float) -> bool:
    """Whether a draw of ``units_drawn`` open units (in expectation) can give a corrected estimate: the one test
    behind the draw's sentence, the refusal and the smallest budget named."""
    return units_drawn >= MIN_LABELLED - 1e-9


def ask(run: RunFile, kind: str, names: Sequence[str], unit: str) -> Question:
    """The question of ``kind`` about ``names`` (none: the run's two systems for a difference, its first for a
    mean). Raises ValueError, worded for people, for an unknown kind or unit, a system the run does not hold, a
    difference of one system, or the wrong number of names."""
    if kind not in QUESTIONS or unit not in UNITS:
        raise ValueError(f"--for is one of {', '.join(QUESTIONS)} and --sample one of {', '.join(UNITS)}")
    held = list(dict.fromkeys(ev.system for ev in scored(run)))
    if not held:
        raise ValueError(f"{run.path} holds no scored query (on-topic, with nDCG@10) to label")
    shown = ", ".join("the unnamed system of a single-system run" if s is None else str(s) for s in held)
    unknown = [n for n in names if n not in held]
    if unknown:
        raise ValueError(f"{run.path} has no system {', '.join(map(repr, unknown))}; its systems: {shown}")
    if kind == "ranking":
        chosen = tuple(dict.fromkeys(names)) if names else tuple(held)
        if len(chosen) < 2 or unit != "queries":
            raise ValueError(
                f"--for ranking needs whole queries (--sample queries) and two or more systems (--systems A,B,C; default all of: {shown})"
            )
        return Question(kind, chosen, unit)
    if kind == "difference":
        if len(held) < 2:
            raise ValueError(f"a difference needs two systems, and {run.path} holds one ({shown}): use --for mean, or a compare run")
        if len(names) not in (0, 2) or (not names and len(held) > 2):
            raise ValueError(f"--for difference needs --systems A,B (two of: {shown}); the difference is B - A")
        chosen = tuple(names) if names else (held[0], held[1])
        if chosen[0] == chosen[1]:
            raise ValueError("--systems A,B needs two different systems")
        return Question(kind, chosen, unit)
    if len(names) > 1:
        raise ValueError("--for mean takes one system (--systems A); for two, --for difference")
    return Question(kind, (names[0] if names else held[0],), unit)


@dataclass
class Pool:
    """What a run holds for a question: per system ``ranked`` ``{qid: [(document, judge's grade), ...best
    first]}`` and ``judge`` ``{qid: judge's nDCG@10}``; ``human`` the people's grades given before and ``past``
    their ``(judge's, people's)`` pairs; ``qids`` the queries every system asked scored."""

    ranked: dict[str | None, Ranked] = field(default_factory=dict)
    judge: dict[str | None, dict[str, float]] = field(default_factory=dict)
    expected: dict[str, list[str]] = field(default_factory=dict)
    human: dict[tuple[str, str], int] = field(default_factory=dict)
    past: list[tuple[int, int]] = field(default_factory=list)
    qids: list[str] = field(default_factory=list)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    """``{qid: {document: grade}}``: the judge's grades pooled over the run's systems, ungraded expected sources
    at 3; both nDCG@10s are scored against it, people's grades laid over."""
    reused: dict[tuple[str, str], int] = field(default_factory=dict)
    """The grades of ``human`` known from outside the run file."""


def pool_of(run: RunFile, question: Question, known: Mapping[tuple[str, str], int] | None = None) -> Pool:
    """The :class:`Pool` of ``run`` for ``question``; ``known``: people's grades given outside the run file
    (:func:`judge_runner.human.known.known_grades`)."""
    pool = Pool(ranked={s: {} for s in question.systems}, judge={s: {} for s in question.systems})
    lines = [ev.line() for ev in scored(run)]
    pooled = build_pool([("run", lines)]).judge.qrels
    pool.qrels = {str(line["queryId"]): pooled.get(topic_of(line), {}) for line in lines}
    for ev in scored(run):
        if ev.system not in pool.ranked:
            continue
        ranked = list(dict.fromkeys(r.source for r in ev.results))
        value = qrels_metrics({ev.queryId: pool.qrels[ev.queryId]}, {ev.queryId: ranked})[ev.queryId][NDCG10_NAME]
        seen: list[tuple[str, int]] = []
        for r in ev.results:
            human = r.labelOrigin == "human" and r.judgeLabel is not None
            grade = int(r.judgeLabel if human and r.judgeLabel is not None else r.relevance)
            if human and (ev.queryId, r.source) not in pool.human:
                pool.human[(ev.queryId, r.source)] = int(r.relevance)
                pool.past.append((grade, int(r.relevance)))
            if r.source not in {d for d, _ in seen}:
                seen.append((r.source, grade))
        pool.ranked[ev.system][ev.queryId] = seen
        pool.judge[ev.system][ev.queryId] = float(value)
        pool.expected[ev.queryId] = list(ev.expectedSources)
    first, *rest = question.systems
    pool.qids = [q for q in pool.ranked[first] if all(q in pool.ranked[s] for s in rest)]
    grades = judge_grades(pool)
    for pair, grade in (known or {}).items():
        if pair in grades and pair not in pool.human:
            pool.human[pair] = int(grade)
            pool.past.append((grades[pair], int(grade)))
            pool.reused[pair] = int(grade)
    return pool


def people_ndcg(pool: Pool, system: str | None, qid: str, grades: Mapping[tuple[str, str], int]) -> float | None:
    """The people's nDCG@10 of ``system`` on ``qid`` against the pooled qrels with ``grades`` laid over, as
    ``evaluate`` scores it; None unless every returned document is graded."""
    sources = [d for d, _ in pool.ranked[system][qid]]
    if not all((qid, d) in grades for d in sources):
        return None
    qrels = {**pool.qrels.get(qid, {}), **{d: g for (q, d), g in grades.items() if q == qid}}
    return qrels_metrics({qid: qrels}, {qid: sources})[qid][NDCG10_NAME]


def query_values(pool: Pool, question: Question, grades: Mapping[tuple[str, str], int]) -> tuple[dict[str, float], dict[str, float]]:
    """``(judge, people)`` per query: the judge's value of every query, the people's of those fully in
    ``grades`` (a difference of two identical rankings is 0 for both)."""
    judge: dict[str, float] = {}
    people: dict[str, float] = {}
    systems = question.systems
    for q in pool.qids:
        values = [people_ndcg(pool, s, q, grades) for s in systems]
        if question.kind == "difference":
            judge[q] = pool.judge[systems[1]][q] - pool.judge[systems[0]][q]
            alike = [d for d, _ in pool.ranked[systems[0]][q]] == [d for d, _ in pool.ranked[systems[1]][q]]
            if alike:
                people[q] = judge[q] = 0.0
            elif values[0] is not None and values[1] is not None:
                people[q] = values[1] - values[0]
        else:
            judge[q] = pool.judge[systems[0]][q]
            if values[0] is not None:
                people[q] = values[0]
    return judge, people


def pair_coefficients(pool: Pool, question: Question) -> dict[tuple[str, str], float]:
    """``{(qid, document): coefficient}`` of scaled DCG@10 (the rank's discount over
    :data:`~judge_runner.measures.ipw.SCALED_DCG_IDEAL`; for a difference B's less A's)."""
    out: dict[tuple[str, str], float] = {}
    sign = (-1.0, 1.0) if question.kind == "difference" else (1.0,)
    for q in pool.qids:
        for s, factor in zip(question.systems, sign):
            for rank, (d, _) in enumerate(pool.ranked[s][q], start=1):
                out[(q, d)] = out.get((q, d), 0.0) + factor * discount(rank) / SCALED_DCG_IDEAL
    return {k: (0.0 if abs(c) < 1e-12 else c) for k, c in out.items()}


def judge_grades(pool: Pool) -> dict[tuple[str, str], int]:
    return {(q, d): g for ranked in pool.ranked.values() for q, docs in ranked.items() for d, g in docs}


def pair_id(qid: str, doc: str) -> str:
    return f"{qid}\t{doc}"


def units_of(pool: Pool, question: Question, *, before: bool = False) -> list[Unit]:
    """The question's units, documents graded before free (``before``: as they were before those grades, for the
    robust choice), spreads from the label noise fitted on them."""
    noise = LabelNoise.fit(pool.past) if pool.past else LabelNoise.default()
    if question.unit == "pairs":
        done = () if before else pool.human.keys()
        return pair_units(pair_coefficients(pool, question), judge_grades(pool), noise, done)
    labelled: dict[str, set[str]] = {}
    if not before:
        for q, d in pool.human:
            labelled.setdefault(q, set()).add(d)
    mine = {q: pool.ranked[question.systems[-1]][q] for q in pool.qids}
    other = {q: pool.ranked[question.systems[0]][q] for q in pool.qids} if question.kind == "difference" else None
    return query_units(mine, noise, other=other, labelled=labelled)


def past_residuals(pool: Pool, question: Question, units: Sequence[Unit]) -> list[tuple[str, float, float]]:
    """The residuals of the units graded before, taken as a uniform sample (their probabilities were not
    recorded)."""
    if question.unit == "pairs":
        coefficients = pair_coefficients(pool, question)
        grades = judge_grades(pool)
        judge = {pair_id(q, d): c * grades[(q, d)] for (q, d), c in coefficients.items() if c}
        people = {pair_id(q, d): c * pool.human[(q, d)] for (q, d), c in coefficients.items() if c and (q, d) in pool.human}
    else:
        judge, people = query_values(pool, question, pool.human)
    open_ = [u for u in units if not u.known]
    labelled = [u.id for u in open_ if u.id in people]
    if not labelled:
        return []
    share = len(labelled) / len(open_)
    return residuals(judge, {u: people[u] for u in labelled}, {u: share for u in labelled})


def judge_spread(pool: Pool, question: Question) -> float:
    """The standard deviation across queries of the judge's value, standing in for the people's."""
    if question.unit == "pairs":
        grades = judge_grades(pool)
        totals = dict.fromkeys(pool.qids, 0.0)
        for (q, d), c in pair_coefficients(pool, question).items():
            totals[q] += c * grades[(q, d)]
        values = list(totals.values())
    else:
        values = list(query_values(pool, question, {})[0].values())
    return statistics.stdev(values) if len(values) > 1 else 0.0


@dataclass(frozen=True)
class Draw:
    """A budget's draw: the open units ``drawn`` in the order shown, the ``items`` to grade, the ``expected``
    labels (``sum pi c``), the predicted ``half_width`` and the sentence of what it buys."""

    question: Question
    plan: Plan
    drawn: list[str]
    items: list[Item]
    expected: float
    half_width: float
    queries: int
    text: str
    known: dict[tuple[str, str], int] = field(default_factory=dict)
    """People's grades from outside the run file counted as known (free)."""
    units_drawn: float = 0.0
    """Open units drawn, in expectation."""
    census: bool = False
    """The budget covers every open unit: nothing is drawn at random."""

    def record(self, seed: int, seconds_per_label: float, pace_from: str) -> dict[str, Any]:
        """The ``budget`` object of the journal's plan line (every unit's probability, 1 for one known, and the
        units drawn)."""
        return {
            "question": self.question.kind,
            "systems": list(self.question.systems),
            "unit": self.question.unit,
            "measure": self.question.measure,
            "depth": self.question.depth,
            "budget": self.plan.budget,
            "design": self.plan.design,
            "rho": self.plan.rho,
            "seed": seed,
            "queries": self.queries,
            "expectedLabels": round(self.expected, 3),
            "labelsToGive": len(self.items),
            "predictedHalfWidth": round(self.half_width, 6) if math.isfinite(self.half_width) else None,
            "secondsPerLabel": seconds_per_label,
            "paceFrom": pace_from,
            "text": self.text,
            "probabilities": self.plan.probabilities,
            "drawn": self.drawn,
            "reused": len(self.known),
            "known": [[q, d, g] for (q, d), g in sorted(self.known.items())],
        }


def reused_text(pool: Pool) -> str:
    """``; 11 labels people gave before (...) reused: free``, or empty."""
    n = len(pool.reused)
    if not n:
        return ""
    return f"; {n} label{'s' if n != 1 else ''} people gave before (other sets, the labels folder) reused: free"


def _items(runs: Sequence[RunFile], pool: Pool, question: Question, drawn: Sequence[str], rng: random.Random) -> list[Item]:
    """The items of the drawn units in order: a query's documents not graded before, shuffled; a pair's
    document."""
    docs = documents(runs)
    pairs: list[tuple[str, str]] = []
    for unit in drawn:
        if question.unit == "pairs":
            q, d = unit.split("\t", 1)
            pairs.append((q, d))
            continue
        sources = list(dict.fromkeys(d for s in question.systems for d, _ in pool.ranked[s][unit] if (unit, d) not in pool.human))
        rng.shuffle(sources)
        pairs += [(unit, d) for d in sources]
    return items_of(docs, pairs)


def plan_draw(
    run: RunFile,
    question: Question,
    budget: float,
    seed: int,
    seconds_per_label: float,
    *,
    rho: float | None = None,
    known: Mapping[tuple[str, str], int] | None = None,
) -> Draw:
    """Spend ``budget`` labels (in expectation; exactly under the uniform design with equal costs) on
    ``question``, seeded. ``rho`` (tests, benchmarks) forces the weighted design with that mix. Raises
    ValueError for a budget not positive or nothing left to grade, :class:`TooSmall` for a budget that draws
    nothing."""
    if budget <= 0:
        raise ValueError("a budget of 0 labels buys nothing: give --budget N (labels) or --budget-minutes M, at least 1")
    pool = pool_of(run, question, known)
    units = units_of(pool, question)
    open_cost = sum(u.cost for u in units if not u.known and u.cost > 0)
    if open_cost <= 0:
        raise ValueError(f"nothing to label for {question.text()}: every unit is labelled already or known without a label")
    budget = min(float(budget), open_cost)
    plan = _plan(pool, question, units, budget, rho)
    rng = random.Random(seed)
    open_ids = {u.id for u in units if not u.known and u.cost > 0}
    drawn = [u for u in plan.draw(seed) if u in open_ids]
    rng.shuffle(drawn)
    expected = sum(plan.probabilities[u.id] * u.cost for u in units if not u.known and u.cost > 0)
    half = predicted_half_width(units, plan.probabilities, judge_spread(pool, question), len(pool.qids))
    items = _items([run], pool, question, drawn, rng)
    if not items and question.unit == "queries":  # a budget below the cheapest open query's cost: 0 queries drawn
        cheapest = min(u.cost for u in units if not u.known and u.cost > 0)
        raise TooSmall(
            f"a budget of {budget:g} labels buys no whole query here: the cheapest query still open needs {cheapest:g} labels "
            "(--sample pairs draws single pairs, a label each)"
        )
    if not items:  # a weighted draw of a tiny budget can draw nothing
        raise TooSmall(f"a budget of {budget:g} labels drew no pair with --seed {seed}: give a larger --budget or another --seed")
    labels = len(items) if plan.design == "uniform" else int(round(expected))
    units_drawn = sum(plan.probabilities[u.id] for u in units if not u.known and u.cost > 0)
    low, high = question.bounds
    shown = half if draws_enough(units_drawn) and math.isfinite(half) and half < (high - low) / 2 else None
    why = (
        f"a corrected estimate needs at least {MIN_LABELLED} drawn {question.unit} labelled, this budget draws about {units_drawn:.0f}"
        if not draws_enough(units_drawn)
        else "the interval it is predicted to give spans the measure's whole range"
    )
    text = budget_text(labels, shown, question.text(), seconds_per_label, why_none=why)
    if budget >= open_cost:
        text += f" (the budget covers every one of the {int(open_cost)} labels still open)"
    text += reused_text(pool)
    finite = half if math.isfinite(half) else float("nan")
    return Draw(question, plan, drawn, items, expected, finite, len(pool.qids), text, pool.reused, units_drawn, budget >= open_cost)


def _plan(pool: Pool, question: Question, units: Sequence[Unit], budget: float, rho: float | None) -> Plan:
    if rho is not None:
        return Plan("weighted", choose_probabilities(units, budget, mode="robust", rho=rho), None, rho, budget)
    past = past_residuals(pool, question, units)
    if past:
        return plan_budget(units, budget, past=past, past_units=units_of(pool, question, before=True))
    return plan_budget(units, budget)


def smallest_budget(run: RunFile, question: Question, known: Mapping[tuple[str, str], int] | None = None) -> int | None:
    """The fewest labels whose draw passes :func:`draws_enough` (bisection); None when even every open unit
    does not (fewer open units than :data:`~judge_runner.measures.ppi.MIN_LABELLED`)."""
    pool = pool_of(run, question, known)
    units = units_of(pool, question)
    open_units = [u for u in units if not u.known and u.cost > 0]
    open_cost = sum(u.cost for u in open_units)

    def enough(budget: int) -> bool:
        plan = _plan(pool, question, units, min(float(budget), open_cost), None)
        return draws_enough(sum(plan.probabilities[u.id] for u in open_units))

    high = max(math.ceil(open_cost), 1)
    if not open_units or not enough(high):
        return None
    low = 0
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high
