"""``label --budget N --for ranking``: one budget for the ranking of every system of a compare run
(docs/deciding.md, "A budget for a ranking"). The unit is a whole query pooled as TREC pools, to the deepest
depth (10 down to 3) at which the budget buys :data:`TARGET_QUERIES`; every system's nDCG@10 is scored against
the same pooled qrels. Grades go first to queries where the closest pairs differ; the estimate ranks the
corrected means, and Holm's procedure decides the pairs, 95% together."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any

from judge_runner.human.budget import (
    Draw,
    Pool,
    Question,
    TooSmall,
    draws_enough,
    judge_grades,
    pool_of,
    reused_text,
)
from judge_runner.human.plan import Item, documents, items_of
from judge_runner.judging.qrels import pooled_metrics
from judge_runner.measures.ir import NDCG10_NAME
from judge_runner.measures.ppi import MIN_LABELLED
from judge_runner.measures.ppi_compare import Method, Ranking, corrected_ranking
from judge_runner.measures.sampling import LabelNoise, Plan, Unit, budget_text, plan_budget, predicted_half_width, query_units, residuals
from judge_runner.runs.designed import LabelDesign, Weighted
from judge_runner.runs.read import RunFile

MIN_DEPTH = 3
"""The shallowest pool a ranking's unit goes to: each system's top 3."""
TARGET_QUERIES = 2 * MIN_LABELLED
"""Whole queries a budget should buy before its pool goes shallower than 10: twice the minimum, so the t
quantile and the fitted weight are steady."""
CLOSE_FLOOR = 0.01
"""A judge gap below this counts as this close, so one tie does not take every weight."""

Values = dict[str | None, dict[str, float]]


def depth_pool(pool: Pool, systems: Sequence[str | None], qid: str, depth: int) -> list[str]:
    """The documents in any of ``systems``' top ``depth``, in the order first met."""
    return list(dict.fromkeys(d for s in systems for d, _ in pool.ranked[s][qid][:depth]))


def pooled_values(
    pool: Pool, systems: Sequence[str | None], grades: Mapping[tuple[str, str], int], depth: int, qids: Sequence[str]
) -> Values:
    """``{system: {qid: nDCG@10}}`` against qrels pooled to ``depth`` from ``grades``, over the ``qids`` whose
    pooled documents are all graded; ungraded expected sources count 3."""
    qrels: dict[str, dict[str, int]] = {}
    for q in qids:
        docs = depth_pool(pool, systems, q, depth)
        if all((q, d) in grades for d in docs):
            qrels[q] = {**dict.fromkeys(pool.expected.get(q, []), 3), **{d: int(grades[(q, d)]) for d in docs}}
    out: Values = {}
    for s in systems:
        metrics = pooled_metrics(qrels, {q: [d for d, _ in pool.ranked[s][q]] for q in qrels})
        out[s] = {q: float(metrics.get(q, {}).get(NDCG10_NAME, 0.0)) for q in qrels}
    return out


def _open_costs(pool: Pool, systems: Sequence[str | None], depth: int) -> dict[str, int]:
    return {q: sum(1 for d in depth_pool(pool, systems, q, depth) if (q, d) not in pool.human) for q in pool.qids}


def choose_depth(pool: Pool, systems: Sequence[str | None], budget: float) -> int:
    """The deepest pool depth, 10 down to :data:`MIN_DEPTH`, at which ``budget`` buys :data:`TARGET_QUERIES`
    open queries (at their mean cost) or every one."""
    for depth in range(10, MIN_DEPTH - 1, -1):
        costs = [c for c in _open_costs(pool, systems, depth).values() if c > 0]
        if not costs or budget >= sum(costs) or budget / (sum(costs) / len(costs)) >= TARGET_QUERIES:
            return depth
    return MIN_DEPTH


def closest_pair(values: Values) -> tuple[str | None, str | None]:
    """The two systems whose means are closest, the judge's better one first."""
    means = {s: statistics.fmean(v.values()) if v else 0.0 for s, v in values.items()}
    a, b = min(combinations(means, 2), key=lambda p: abs(means[p[0]] - means[p[1]]))
    return (a, b) if means[a] >= means[b] else (b, a)


def ranking_units(pool: Pool, systems: Sequence[str | None], depth: int, judge: Values, *, before: bool = False) -> list[Unit]:
    """One unit per query: cost its pooled documents not graded before (all with ``before``), spread the root
    mean square of the pairs' difference spreads, each pair weighted ``1 / max(judge gap, CLOSE_FLOOR)^2``."""
    noise = LabelNoise.fit(pool.past) if pool.past else LabelNoise.default()
    means = {s: statistics.fmean(judge[s].values()) if judge[s] else 0.0 for s in systems}
    squares = dict.fromkeys(pool.qids, 0.0)
    total = 0.0
    for a, b in combinations(systems, 2):
        weight = 1 / max(abs(means[a] - means[b]), CLOSE_FLOOR) ** 2
        total += weight
        mine = {q: pool.ranked[b][q][:10] for q in pool.qids}
        theirs = {q: pool.ranked[a][q][:10] for q in pool.qids}
        for unit in query_units(mine, noise, other=theirs):
            squares[unit.id] += weight * unit.spread**2
    costs = {q: len(depth_pool(pool, systems, q, depth)) for q in pool.qids} if before else _open_costs(pool, systems, depth)
    return [Unit(q, float(costs[q]), math.sqrt(squares[q] / total) if total else 0.0) for q in pool.qids]


def _past(pool: Pool, systems: Sequence[str | None], depth: int, judge: Values) -> list[tuple[str, float, float]]:
    """The residuals of the closest pair's difference on the queries graded wholly before, taken as a uniform
    sample."""
    people = pooled_values(pool, systems, pool.human, depth, pool.qids)
    a, b = closest_pair(judge)
    done = list(people[a]) if people else []
    if not done:
        return []
    share = len(done) / len(pool.qids)
    difference = {q: judge[b][q] - judge[a][q] for q in pool.qids}
    return residuals(difference, {q: people[b][q] - people[a][q] for q in done}, dict.fromkeys(done, share))


def _items(run: RunFile, pool: Pool, question: Question, drawn: Sequence[str], rng: random.Random) -> list[Item]:
    """The pooled documents of the drawn queries not graded before, shuffled per query."""
    pairs: list[tuple[str, str]] = []
    for q in drawn:
        sources = [d for d in depth_pool(pool, question.systems, q, question.depth) if (q, d) not in pool.human]
        rng.shuffle(sources)
        pairs += [(q, d) for d in sources]
    return items_of(documents([run]), pairs)


def plan_ranking(
    run: RunFile,
    question: Question,
    budget: float,
    seed: int,
    seconds_per_label: float,
    *,
    known: Mapping[tuple[str, str], int] | None = None,
    depth: int | None = None,
) -> Draw:
    """Spend ``budget`` labels on the ranking of ``question.systems``, seeded; ``depth`` forces the pool depth.
    Raises ValueError for a budget not positive or nothing left to grade,
    :class:`~judge_runner.human.budget.TooSmall` when it buys no query."""
    if budget <= 0:
        raise ValueError("a budget of 0 labels buys nothing: give --budget N (labels) or --budget-minutes M, at least 1")
    pool = pool_of(run, question, known)
    systems = question.systems
    question = replace(question, depth=depth or choose_depth(pool, systems, budget))
    judge = pooled_values(pool, systems, judge_grades(pool), question.depth, pool.qids)
    units = ranking_units(pool, systems, question.depth, judge)
    open_units = [u for u in units if u.cost > 0]
    open_cost = sum(u.cost for u in open_units)
    if open_cost <= 0:
        raise ValueError(f"nothing to label for {question.text()}: people graded every pooled document already")
    budget = min(float(budget), open_cost)
    plan = ranking_plan(pool, systems, question.depth, judge, units, budget)
    rng = random.Random(seed)
    drawn = [u for u in plan.draw(seed) if u in {o.id for o in open_units}]
    rng.shuffle(drawn)
    items = _items(run, pool, question, drawn, rng)
    if not items:
        cheapest = min(u.cost for u in open_units)
        raise TooSmall(f"a budget of {budget:g} labels buys no whole query here: the cheapest query still open needs {cheapest:g} labels")
    expected = sum(plan.probabilities[u.id] * u.cost for u in open_units)
    units_drawn = sum(plan.probabilities[u.id] for u in open_units)
    a, b = closest_pair(judge)
    spread = statistics.stdev([judge[b][q] - judge[a][q] for q in pool.qids]) if len(pool.qids) > 1 else 0.0
    half = predicted_half_width(units, plan.probabilities, spread, len(pool.qids))
    what = (
        f"the closest pair by the judge ({b} - {a}), ranking {len(systems)} systems with {round(units_drawn)} whole queries "
        f"pooled to depth {question.depth} (each system's top {question.depth})"
    )
    labels = len(items) if plan.design == "uniform" else int(round(expected))
    shown = half if draws_enough(units_drawn) and math.isfinite(half) and half < 1 else None
    text = budget_text(labels, shown, what, seconds_per_label, why_none="too few queries for an interval")
    if budget >= open_cost:
        text += f" (the budget covers every one of the {int(open_cost)} labels still open)"
    text += reused_text(pool)
    finite = half if math.isfinite(half) else float("nan")
    return Draw(question, plan, drawn, items, expected, finite, len(pool.qids), text, pool.reused, units_drawn, budget >= open_cost)


def ranking_plan(pool: Pool, systems: Sequence[str | None], depth: int, judge: Values, units: Sequence[Unit], budget: float) -> Plan:
    """The robust mix chosen on the queries graded before, when there are some."""
    past = _past(pool, systems, depth, judge)
    if not past:
        return plan_budget(units, budget)
    return plan_budget(units, budget, past, ranking_units(pool, systems, depth, judge, before=True))


def few_drawn(drawn: int, unit: str, whole: bool) -> str:
    """Why a draw of fewer than :data:`~judge_runner.measures.ppi.MIN_LABELLED` units gives no corrected estimate;
    ``whole``: every unit drawn with probability 1, so labelling them all gives the people's exact figure."""
    head = f"this draw holds only {drawn} {unit}, fewer than the {MIN_LABELLED} a corrected estimate needs"
    return head + ("; labelling them all gives the people's exact figure on this set" if whole else ", so going on gives none")


def smallest_ranking_budget(run: RunFile, question: Question, known: Mapping[tuple[str, str], int] | None = None) -> int | None:
    """The fewest labels whose ranking draw passes :func:`~judge_runner.human.budget.draws_enough` (bisection);
    None when even every open query does not."""
    pool = pool_of(run, question, known)
    systems = question.systems
    judges: dict[int, Values] = {}

    def enough(budget: int) -> bool:
        depth = choose_depth(pool, systems, budget)
        judge = judges.setdefault(depth, pooled_values(pool, systems, judge_grades(pool), depth, pool.qids))
        units = ranking_units(pool, systems, depth, judge)
        open_units = [u for u in units if u.cost > 0]
        total = sum(u.cost for u in open_units)
        plan = ranking_plan(pool, systems, depth, judge, units, min(float(budget), total))
        return draws_enough(sum(plan.probabilities[u.id] for u in open_units))

    low, high = 0, max(sum(_open_costs(pool, systems, MIN_DEPTH).values()), 1)
    if not enough(high):
        return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


@dataclass(frozen=True)
class RankingEstimate:
    """``ranking`` is None with fewer than :data:`~judge_runner.measures.ppi.MIN_LABELLED` drawn queries graded;
    ``judge`` the judge's own means; ``complete`` of ``drawn`` graded, ``free`` known without a draw."""

    question: Question
    ranking: Ranking | None
    judge: dict[str, float]
    design: str
    drawn: int
    complete: int
    free: int
    census: bool
    notes: tuple[str, ...] = ()
    whole: bool = False
    """Every query was drawn with probability 1 (a census design)."""

    def lines(self) -> list[str]:
        """The closing lines: each system's corrected mean, interval, rank set and judge mean; the pairs Holm
        decided and those not; or why there is none yet."""
        rests = f"{self.complete} of the {self.drawn} drawn queries labelled" + (f", {self.free} known without a draw" if self.free else "")
        what = self.question.text()
        if self.ranking is None and self.drawn < MIN_LABELLED:
            return [f"no corrected {what}: {rests}; {few_drawn(self.drawn, 'queries', self.whole)}", *self.notes]
        if self.ranking is None:
            return [
                f"no corrected {what} yet: {rests}; an estimate needs at least {MIN_LABELLED} drawn queries labelled "
                "(run the same command to go on: the recorded probabilities keep it unbiased)",
                *self.notes,
            ]
        how = (
            "a census: every query labelled, each figure the people's exact one on this query set, intervals over queries like these"
            if self.census
            else f"{self.design} design, each label weighted by the probability it was drawn with"
        )
        out = [f"corrected {what} (95% intervals; {rests}; {how}):"]
        for place, s in enumerate(self.ranking.systems, start=1):
            low, high = s.rank_set
            rank = f"rank {low}" if low == high else f"rank {low}-{high}"
            figure = f"{s.found.estimate:.3f} [{s.found.ci95[0]:.3f}, {s.found.ci95[1]:.3f}]" if s.found else "no figure"
            out.append(f"  {place}. {s.name} {figure} ({rank}; judge alone {self.judge.get(s.name, math.nan):.3f})")
        decided = [p for p in self.ranking.pairs if p.outcome in ("better", "worse")]
        undecided = [p for p in self.ranking.pairs if p not in decided]
        out.append(f"  pairs decided by Holm's procedure (95% together): {len(decided)} of {len(self.ranking.pairs)}")
        for p in decided:
            sign = 1.0 if p.outcome == "better" else -1.0
            winner, loser = (p.system, p.against) if sign > 0 else (p.against, p.system)
            ci = sorted((sign * p.found.ci95[0], sign * p.found.ci95[1]))
            out.append(f"    {winner} better than {loser}: {winner} - {loser} {sign * p.found.estimate:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]")
        if undecided:
            closest = min(undecided, key=lambda p: abs(p.found.estimate))
            out.append(
                f"    cannot tell yet: {len(undecided)} pairs; the closest {closest.system} - {closest.against} {closest.found.estimate:+.3f} "
                f"[{closest.found.ci95[0]:+.3f}, {closest.found.ci95[1]:+.3f}]"
            )
        return out + [f"  note: {n}" for n in self.notes]


def estimate_ranking(run: RunFile, record: Mapping[str, Any], given: Mapping[tuple[str, str], int]) -> RankingEstimate:
    """The estimate of a ranking session from its plan line's ``budget`` record and its grades. Raises KeyError
    or ValueError for a record that is not one."""
    question = Question("ranking", tuple(record["systems"]), "queries", int(record.get("depth") or 10))
    known = {(str(q), str(d)): int(g) for q, d, g in record.get("known") or []}
    pool = pool_of(run, question, known)
    systems = question.systems
    probabilities = {str(k): float(v) for k, v in record["probabilities"].items()}
    drawn = {str(u) for u in record["drawn"]}
    judge = pooled_values(pool, systems, judge_grades(pool), question.depth, pool.qids)
    people = pooled_values(pool, systems, {**pool.human, **given}, question.depth, pool.qids)
    design = LabelDesign("", str(record["design"]), "queries", probabilities, frozenset(drawn))
    weighted = Weighted(design)
    names = [str(s) for s in systems]
    ranking = corrected_ranking(
        {str(s): judge[s] for s in systems}, {str(s): people[s] for s in systems}, names, method=Method(estimate=weighted), holm=True
    )
    complete = sum(1 for q in drawn if q in people[systems[0]])
    free = sum(1 for q in people[systems[0]] if q not in drawn and probabilities.get(q, 0) >= 1)
    means = {str(s): statistics.fmean(judge[s].values()) if judge[s] else math.nan for s in systems}
    census = ranking is not None and weighted.census
    whole = all(p >= 1 for p in probabilities.values())
    return RankingEstimate(
        question, ranking, means, str(record["design"]), len(drawn), complete, free, census, tuple(weighted.notes), whole
    )
