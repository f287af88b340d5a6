"""The ranking figure of benchmarks/decide_scifact.py: one ``label --budget N --for ranking`` budget spent on the
ranking of every SciFact system, by the product's own functions (judge_runner.human.ranking), against the
full-qrels ranking (trec_eval's nDCG@10 on every SciFact relevance judgment).

As a team's case: each query has ONE expected source (a relevant abstract drawn at random per seed, as a generated
query set gives one), the judge's qrels are its grades pooled over the systems plus that source, and the people's
are the SciFact qrels on the pooled documents (relevant 3, else 0) plus that source. Per seed and draw, the budget's
corrected ranking (each system's mean under the draw's design, Holm's verdicts) is compared with the full-qrels
ranking: Kendall's tau, the pairs decided right and wrong, the per-system intervals' coverage of the full-qrels
value (and of the value the ranking estimates: the people's nDCG@10 on qrels pooled to the budget's depth over
all queries). ``history``: queries whose pooled documents people graded before (known, free), 0 for a team's
first session. Beside it, uniform sampling of whole queries pooled to depth 10 at several budgets, for the labels
it needs to reach the same tau (the saving).
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
from scipy import stats

from judge_runner.human.budget import Pool, judge_grades
from judge_runner.human.ranking import choose_depth, pooled_values, ranking_plan, ranking_units
from judge_runner.judging.qrels import pooled_metrics
from judge_runner.measures.ir import NDCG10_NAME
from judge_runner.measures.ppi_compare import Method, corrected_ranking
from judge_runner.measures.sampling import plan_budget
from judge_runner.runs.designed import LabelDesign, Weighted

DEPTH = 10


def expected_sources(document: dict, qids: list[str], seed: int) -> dict[str, list[str]]:
    """One relevant abstract per query, drawn with ``seed``: the expected source a generated query set gives."""
    rng = np.random.default_rng(seed)
    out = {}
    for q in qids:
        relevant = sorted(d for d, g in document["qrels"][q].items() if g > 0)
        out[q] = [relevant[int(rng.integers(len(relevant)))]]
    return out


def people_grade(document: dict, q: str, d: str) -> int:
    return 3 if document["qrels"][q].get(d, 0) > 0 else 0


def pool_of(document: dict, systems: list[str], qids: list[str], expected: dict[str, list[str]], history: set[str]) -> Pool:
    """The product's :class:`Pool`: each system's top 10 with the judge's grades; every pooled pair of the
    ``history`` queries graded by the people before."""
    pool = Pool(ranked={s: {} for s in systems}, judge={s: {} for s in systems}, qids=list(qids), expected=dict(expected))
    for s in systems:
        for q in qids:
            pool.ranked[s][q] = [(d, int(document["judge"][q][d])) for d in document["runs"][s].get(q, [])[:DEPTH]]
    for q in history:
        for d in {d for s in systems for d, _ in pool.ranked[s][q]}:
            pool.human[(q, d)] = people_grade(document, q, d)
            pool.past.append((int(document["judge"][q][d]), pool.human[(q, d)]))
    return pool


def full_truth(document: dict, systems: list[str], qids: list[str]) -> dict[str, float]:
    """Each system's trec_eval nDCG@10 (ir-measures) on the full SciFact qrels, averaged over ``qids``."""
    qrels = {q: {d: people_grade(document, q, d) for d in document["qrels"][q]} for q in qids}
    out = {}
    for s in systems:
        metrics = pooled_metrics(qrels, {q: list(document["runs"][s].get(q, [])[:DEPTH]) for q in qids})
        out[s] = float(np.mean([metrics.get(q, {}).get(NDCG10_NAME, 0.0) for q in qids]))
    return out


def _draws(document, pool, systems, depth, budget, truth, estimand, draws, rng, uniform=False) -> dict:
    """``draws`` draws of ``budget`` labels at ``depth``: the mean labels spent, tau, coverage and verdicts;
    ``uniform``: a uniform draw of the open queries whatever the earlier labels say (the baseline)."""
    judge = pooled_values(pool, systems, judge_grades(pool), depth, pool.qids)
    people = pooled_values(pool, systems, {pair: people_grade(document, *pair) for pair in judge_grades(pool)}, depth, pool.qids)
    units = ranking_units(pool, systems, depth, judge)
    open_ids = {u.id for u in units if u.cost > 0}
    cost = {u.id: u.cost for u in units}
    spend = min(budget, sum(cost[u] for u in open_ids))
    plan = plan_budget(units, spend) if uniform else ranking_plan(pool, systems, depth, judge, units, spend)
    order = [truth[s] for s in systems]
    out = {"labels": [], "tau": [], "cover": [], "cover estimand": [], "right": 0, "wrong": 0, "cannot tell": 0, "census": 0}
    for _ in range(draws):
        drawn = [u for u in plan.draw(int(rng.integers(1 << 31))) if u in open_ids]
        known = {q for q, p in plan.probabilities.items() if p >= 1 and q not in open_ids}
        labelled = set(drawn) | known
        human = {s: {q: people[s][q] for q in labelled} for s in systems}
        weighted = Weighted(LabelDesign("", plan.design, "queries", plan.probabilities, frozenset(drawn)))
        ranking = corrected_ranking({s: judge[s] for s in systems}, human, systems, method=Method(estimate=weighted), holm=True)
        if ranking is None:
            continue
        out["labels"].append(sum(cost[u] for u in drawn))
        found = {r.name: r.found for r in ranking.systems}
        out["tau"].append(stats.kendalltau(order, [found[s].estimate for s in systems]).statistic)
        for s in systems:
            out["cover"].append(found[s].ci95[0] <= truth[s] <= found[s].ci95[1])
            out["cover estimand"].append(found[s].ci95[0] <= estimand[depth][s] <= found[s].ci95[1])
        for pair in ranking.pairs:
            if pair.outcome not in ("better", "worse"):
                out["cannot tell"] += 1
                continue
            real = truth[pair.system] - truth[pair.against]
            out["right" if (real > 0) == (pair.outcome == "better") else "wrong"] += 1
        out["census"] += weighted.census
    n = max(len(out["tau"]), 1)
    return {
        "depth": depth,
        "design": plan.design,
        "labels": float(np.mean(out["labels"])) if out["labels"] else math.nan,
        "queries drawn": float(sum(plan.probabilities[u] for u in open_ids)),
        "tau": float(np.mean(out["tau"])) if out["tau"] else math.nan,
        "tau worst": float(np.min(out["tau"])) if out["tau"] else math.nan,
        "coverage": float(np.mean(out["cover"])) if out["cover"] else math.nan,
        "coverage of the estimand": float(np.mean(out["cover estimand"])) if out["cover estimand"] else math.nan,
        "right": out["right"] / n,
        "wrong": out["wrong"] / n,
        "wrong total": out["wrong"],
        "cannot tell": out["cannot tell"] / n,
        "draws": len(out["tau"]),
    }


def figure_ranking(document: dict, systems: list[str], budget: int, draws: int, seed: int, history: int) -> dict:
    """The ranking figure for one seed (module docstring): the budget's draws, and uniform whole queries at
    depth 10 at 1, 2 and 3 times the budget."""
    rng = np.random.default_rng(seed)
    qids = sorted(document["queries"])
    expected = expected_sources(document, qids, seed)
    past = set(rng.choice(qids, history, replace=False).tolist()) if history else set()
    pool = pool_of(document, systems, qids, expected, past)
    truth = full_truth(document, systems, qids)
    people = {pair: people_grade(document, *pair) for pair in judge_grades(pool)}
    estimand = {
        k: {s: float(np.mean(list(v.values()))) for s, v in pooled_values(pool, systems, people, k, qids).items()} for k in range(3, 11)
    }
    judge10 = pooled_values(pool, systems, judge_grades(pool), DEPTH, qids)
    order = [truth[s] for s in systems]
    judge_tau = stats.kendalltau(order, [np.mean(list(judge10[s].values())) for s in systems]).statistic
    depth = choose_depth(pool, systems, budget)
    found = _draws(document, pool, systems, depth, budget, truth, estimand, draws, rng)
    uniform = {b: _draws(document, pool, systems, DEPTH, b, truth, estimand, draws, rng, True) for b in (budget, 2 * budget, 3 * budget)}
    return {"judge tau": float(judge_tau), "budget": found, "uniform depth 10": uniform, "pairs": len(list(combinations(systems, 2)))}


def saving(found: dict, uniform: dict) -> float:
    """The share of labels saved: the labels uniform whole queries at depth 10 need for the budget's mean tau
    (interpolated over its budgets), against the budget's own; NaN outside their range."""
    spent = np.array([u["labels"] for u in uniform.values()])
    taus = np.array([u["tau"] for u in uniform.values()])
    if not taus.min() <= found["tau"] <= taus.max():
        return math.nan
    order = np.argsort(taus)
    need = float(np.interp(found["tau"], taus[order], spent[order]))
    return 1 - found["labels"] / need
