"""What ``judge-runner label --budget`` draws: the question a budget narrows, its units, the plan and the items.

**The question** (:class:`Question`): one system's mean, or the difference ``B - A`` between two systems of a
compare run (named as the run file's ``system`` field names them), measured on whole queries (nDCG@10) or on
single (query, document) pairs (scaled DCG@10, the one measure pairs estimate without bias: docs/deciding.md,
"Labels where they count"; :mod:`judge_runner.measures.ipw`, "Pairs").

**The pool** (:func:`pool_of`): what one run file holds for the question: each system's ranked documents with
the judge's grades, the judge's per-query nDCG@10 against the run's pooled qrels (every system's labels),
the expected sources, and the grades people gave before (results with ``labelOrigin`` human), which are free.

**The plan** (:func:`plan_draw`): the units (:func:`judge_runner.measures.sampling.query_units` or
``pair_units``, the label noise fitted on the earlier labels), the design chosen by
:func:`judge_runner.measures.sampling.plan_budget` (the robust mix on the earlier labels' residuals; without
them a fixed-size uniform draw of the open units: known units and units labelled before are free), the draw,
the items to label (the drawn units in a random order, a query's documents in a random order), and what the
budget buys. :meth:`Draw.record` is what the journal's plan line keeps: every unit's probability, the units
drawn, the design; :mod:`judge_runner.human.estimate` estimates from it.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_runner.human.plan import Item, documents, scored
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
    """What a budget narrows: ``kind`` ``mean`` (of ``systems[0]``), ``difference`` (``systems[1] - systems[0]``)
    or ``ranking`` (of every system in ``systems``: :mod:`judge_runner.human.ranking`); ``unit`` ``queries``
    (nDCG@10) or ``pairs`` (scaled DCG@10). ``depth``: a ranking's pool depth (its units label each system's top
    ``depth``). A system is None in a run of the built-in search alone (its lines name none)."""

    kind: str
    systems: tuple[str | None, ...]
    unit: str
    depth: int = 10

    @property
    def measure(self) -> str:
        """``nDCG@10`` for whole queries (a ranking's on qrels pooled to its depth), ``scaled DCG@10`` for pairs."""
        if self.unit == "pairs":
            return "scaled DCG@10"
        return NDCG10_NAME if self.kind != "ranking" else f"{NDCG10_NAME} on qrels pooled to depth {self.depth}"

    @property
    def bounds(self) -> tuple[float, float]:
        """The measure's range: (0, 1) for a mean, (-1, 1) for a difference."""
        return (-1.0, 1.0) if self.kind == "difference" else (0.0, 1.0)

    def text(self) -> str:
        """``the difference fts - hybrid in nDCG@10`` or ``the mean nDCG@10 of hybrid``."""
        names = [s if s is not None else "the run" for s in self.systems]
        if self.kind == "ranking":
            return f"the ranking of {len(names)} systems by {self.measure}"
        if self.kind == "difference":
            return f"the difference {names[1]} - {names[0]} in {self.measure}"
        return f"the mean {self.measure} of {names[0]}"


class TooSmall(ValueError):
    """A budget that draws nothing to label (below the cheapest whole query, or no pair drawn)."""


def ask(run: RunFile, kind: str, names: Sequence[str], unit: str) -> Question:
    """The question of ``kind`` about the systems ``names`` of ``run`` (a difference with no names: the run's
    two systems, in the order of its lines; a mean with none: its first system). Raises ValueError (for people)
    for an unknown kind or unit, a system the run does not hold (naming the ones it does), a difference of a
    run with one system, or the wrong number of names."""
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
    """What a run holds for a question (module docstring): per system ``ranked`` ``{qid: [(document, judge's
    grade), ...best first]}`` (each document once) and ``judge`` ``{qid: judge's nDCG@10}``; ``expected``
    sources per query; ``human`` ``{(qid, document): people's grade}`` given before; ``past`` ``(judge's grade,
    people's grade)`` of those; ``qids``: the queries the question is over (scored by every system asked); ``reused``:
    how many of ``human`` came from outside the run file."""

    ranked: dict[str | None, Ranked] = field(default_factory=dict)
    judge: dict[str | None, dict[str, float]] = field(default_factory=dict)
    expected: dict[str, list[str]] = field(default_factory=dict)
    human: dict[tuple[str, str], int] = field(default_factory=dict)
    past: list[tuple[int, int]] = field(default_factory=list)
    qids: list[str] = field(default_factory=list)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    """``{qid: {document: grade}}``: the judge's grades pooled over every system of the run, expected sources
    nobody graded at 3 (:mod:`judge_runner.judging.pooled`): what the judge's and the people's nDCG@10 are scored
    against, people's grades laid over it."""
    reused: dict[tuple[str, str], int] = field(default_factory=dict)
    """The grades of ``human`` known from outside the run file (another set, the labels folder)."""


def pool_of(run: RunFile, question: Question, known: Mapping[tuple[str, str], int] | None = None) -> Pool:
    """The :class:`Pool` of ``run`` for ``question``: the judge's nDCG@10 of each system against the run's pooled
    judge's qrels (``Pool.qrels``); ``known`` ``{(qid, document): grade}``: people's grades given outside the run
    file (:func:`judge_runner.human.known.known_grades`), labelled before as well."""
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
    """The people's nDCG@10 of ``system`` on ``qid``: against the run's pooled qrels (``Pool.qrels``) with the
    people's ``grades`` laid over them, as ``evaluate`` scores it with people's grades; None unless every document
    the system returned is graded by people."""
    sources = [d for d, _ in pool.ranked[system][qid]]
    if not all((qid, d) in grades for d in sources):
        return None
    qrels = {**pool.qrels.get(qid, {}), **{d: g for (q, d), g in grades.items() if q == qid}}
    return qrels_metrics({qid: qrels}, {qid: sources})[qid][NDCG10_NAME]


def query_values(pool: Pool, question: Question, grades: Mapping[tuple[str, str], int]) -> tuple[dict[str, float], dict[str, float]]:
    """``(judge, people)`` per query of the question: the judge's value of every query, the people's of each
    query whose documents are all in ``grades`` (a difference on which both systems ranked alike is 0 for both)."""
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
    :data:`judge_runner.measures.ipw.SCALED_DCG_IDEAL`; for a difference B's less A's), over the question's queries."""
    out: dict[tuple[str, str], float] = {}
    sign = (-1.0, 1.0) if question.kind == "difference" else (1.0,)
    for q in pool.qids:
        for s, factor in zip(question.systems, sign):
            for rank, (d, _) in enumerate(pool.ranked[s][q], start=1):
                out[(q, d)] = out.get((q, d), 0.0) + factor * discount(rank) / SCALED_DCG_IDEAL
    return {k: (0.0 if abs(c) < 1e-12 else c) for k, c in out.items()}


def judge_grades(pool: Pool) -> dict[tuple[str, str], int]:
    """``{(qid, document): judge's grade}`` over every system of the pool."""
    return {(q, d): g for ranked in pool.ranked.values() for q, docs in ranked.items() for d, g in docs}


def pair_id(qid: str, doc: str) -> str:
    """A pair unit's id: ``qid<TAB>document`` (:func:`judge_runner.measures.sampling.pair_units`)."""
    return f"{qid}\t{doc}"


def units_of(pool: Pool, question: Question, *, before: bool = False) -> list[Unit]:
    """The question's units, their costs counting the documents people labelled before as free (``before``:
    as they were before those labels, for the robust choice), spreads from the label noise fitted on them."""
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
    """The residuals of the units people labelled before (:func:`judge_runner.measures.sampling.residuals`),
    taken as a uniform sample of the units that need a label (their probabilities were not recorded)."""
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
    """The standard deviation across queries of the judge's value of the question (the stand-in for the
    people's: :func:`judge_runner.measures.sampling.predicted_half_width`)."""
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
    """A budget's draw: the ``plan`` (:class:`judge_runner.measures.sampling.Plan`), the open units ``drawn``
    in the order shown, the ``items`` to label, the ``expected`` labels (``sum pi c`` over the open units), the
    ``half_width`` predicted, the ``queries`` the question is over, and the sentence of what it buys."""

    question: Question
    plan: Plan
    drawn: list[str]
    items: list[Item]
    expected: float
    half_width: float
    queries: int
    text: str
    known: dict[tuple[str, str], int] = field(default_factory=dict)
    """The people's grades given outside the run file that the draw counted as known (free)."""
    units_drawn: float = 0.0
    """Open units drawn, in expectation."""
    census: bool = False
    """The budget covers every open unit: all are labelled, nothing is drawn at random."""

    def record(self, seed: int, seconds_per_label: float, pace_from: str) -> dict[str, Any]:
        """The ``budget`` object of the journal's plan line: the question, the design and every unit's
        probability (1 for a unit labelled before or known without a label), the units drawn, the seed, the
        pace and what the budget was predicted to buy."""
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
    """``; 11 labels people gave before (other sets, the labels folder) reused: free`` (empty when none)."""
    n = len(pool.reused)
    if not n:
        return ""
    return f"; {n} label{'s' if n != 1 else ''} people gave before (other sets, the labels folder) reused: free"


def _items(runs: Sequence[RunFile], pool: Pool, question: Question, drawn: Sequence[str], rng: random.Random) -> list[Item]:
    """The items of the drawn units, in the order given: a query's documents not labelled before (every
    system's of the question), in a random order; a pair's document."""
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
    items: list[Item] = []
    for q, d in pairs:
        entry = docs[q]
        anchor, text, origin, _ = entry["docs"][d]
        items.append(Item(f"i{len(items) + 1}", q, entry["query"], entry["intent"], d, anchor, text, origin))
    return items


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
    """Spend ``budget`` labels (in expectation; exactly with pairs or queries of equal cost under the uniform
    design) on ``question`` over ``run`` (module docstring), drawn with ``seed``; ``seconds_per_label`` prices the
    labels in minutes; ``rho`` (tests, benchmarks) forces the weighted design with that robust mix instead of
    :func:`judge_runner.measures.sampling.plan_budget`'s choice; ``known``: people's grades given outside the run
    file (:func:`pool_of`), free. Raises ValueError for a budget that is not positive, a question with nothing
    left to label (every unit known or labelled before), or a budget too small for one whole query."""
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
    shown = half if units_drawn >= MIN_LABELLED and math.isfinite(half) and half < (high - low) / 2 else None
    why = (
        f"a corrected estimate needs at least {MIN_LABELLED} drawn {question.unit} labelled, this budget draws about {units_drawn:.0f}"
        if units_drawn < MIN_LABELLED
        else "the interval it is predicted to give spans the measure's whole range"
    )
    text = budget_text(labels, shown, question.text(), seconds_per_label, why_none=why)
    if budget >= open_cost:
        text += f" (the budget covers every one of the {int(open_cost)} labels still open)"
    text += reused_text(pool)
    finite = half if math.isfinite(half) else float("nan")
    return Draw(question, plan, drawn, items, expected, finite, len(pool.qids), text, pool.reused, units_drawn, budget >= open_cost)


def _plan(pool: Pool, question: Question, units: Sequence[Unit], budget: float, rho: float | None) -> Plan:
    """The plan for ``budget`` labels (:func:`plan_draw`): the robust mix on the earlier labels, ``rho`` forced."""
    if rho is not None:
        return Plan("weighted", choose_probabilities(units, budget, mode="robust", rho=rho), None, rho, budget)
    past = past_residuals(pool, question, units)
    if past:
        return plan_budget(units, budget, past=past, past_units=units_of(pool, question, before=True))
    return plan_budget(units, budget)


def smallest_budget(run: RunFile, question: Question, known: Mapping[tuple[str, str], int] | None = None) -> int:
    """The fewest labels whose draw reaches :data:`judge_runner.measures.ppi.MIN_LABELLED` drawn units (in
    expectation), or covers every open unit (a census, exact whatever their number): a bisection over the
    budgets of :func:`plan_draw`."""
    pool = pool_of(run, question, known)
    units = units_of(pool, question)
    open_units = [u for u in units if not u.known and u.cost > 0]
    open_cost = math.ceil(sum(u.cost for u in open_units))

    def enough(budget: int) -> bool:
        plan = _plan(pool, question, units, float(budget), None)
        return budget >= open_cost or sum(plan.probabilities[u.id] for u in open_units) >= MIN_LABELLED - 1e-9

    low, high = 0, max(open_cost, 1)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high
