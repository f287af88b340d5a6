"""Deciding between searches with few people's labels, measured on SciFact with the offline judge.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/decide_scifact.py [--data ../shared/data/scifact]
        [--workdir /tmp/jr-decide] [--draws 200] [--sizes 30,60,100] [--seeds 5] [--ranking-budget 400] [--pairs]

The systems are the built-in configurations and degraded controls of benchmarks/scifact_systems.py (their top
10 on the 300 SciFact test queries, and the offline judge's label of every pooled pair, cached on disk there);
the SciFact qrels play the people (relevant -> 3, unjudged 0). As a team's case, each query has ONE expected
source (a relevant abstract drawn per seed, as a generated query set gives one). Per system and query, nDCG@10
is computed by the run's own code (judge_runner.measures.ir.query_metrics) from the judge's labels and from
the people's.

Every figure is repeated on ``--seeds`` seeds (each its own expected sources, earlier labels and draws), and
printed as the mean over the seeds, the worst seed's and every seed's; ``--draws`` draws each:

1. uniform draws of ``--sizes`` labelled queries: coverage of the corrected 95% intervals (PPI++,
   judge_runner.measures.ppi) per system's mean and per pair's paired difference, their width against the
   labelled queries' own, and Kendall's tau of the corrected ranking; beside plain PPI (normal quantile);
2. budget: labels the budgeted sampler (plan_budget and planned_mean) needs to reach the width uniform sampling
   of whole queries reaches, for one run's mean and for differences, with no earlier labels (a team's first
   session) and with 100 queries labelled before (they fit the label noise and choose the robust mix); with
   ``--pairs`` also single (query, document) pairs on scaled DCG@10 (slow);
3. ``--for ranking`` (benchmarks/scifact_ranking.py): one budget of ``--ranking-budget`` labels ranking every
   system, against the full-qrels (trec_eval) ranking: tau, pairs decided right and wrong, coverage, the saving
   against uniform whole queries pooled to depth 10; first session and with 100 earlier queries.

Building the cached data took 7 minutes on two loaded cores (MiniLM through ONNX); the figures without
``--pairs`` 15-35 minutes for 5 seeds, ``--pairs`` about 2 minutes a seed more.
"""

from __future__ import annotations

import argparse
import math
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.scifact_ranking import expected_sources, figure_ranking, full_truth, saving  # noqa: E402
from benchmarks.scifact_systems import load  # noqa: E402
from judge_runner.human.budget import (  # noqa: E402
    Pool,
    Question,
    judge_grades,
    pair_coefficients,
    pair_id,
    past_residuals,
    units_of,
)
from judge_runner.measures.ipw import PairTerm, ipw_pair_mean, planned_mean  # noqa: E402
from judge_runner.measures.ir import NDCG10_NAME, query_metrics  # noqa: E402
from judge_runner.measures.ppi import tuned_mean  # noqa: E402
from judge_runner.measures.ppi_compare import DIFFERENCE_BOUNDS  # noqa: E402
from judge_runner.measures.sampling import LabelNoise, pair_units, plan_budget, query_units, residuals  # noqa: E402

Z = float(stats.norm.ppf(0.975))


def values(document: dict, expected: dict[str, list[str]]) -> tuple[list[str], list[str], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(systems, query ids, judge nDCG@10 {system: array}, people's nDCG@10 {system: array})``, each query with
    its ``expected`` sources (one relevant abstract, as a generated query set gives)."""
    qids = sorted(document["queries"])
    systems = list(document["runs"])
    judge, human = {}, {}
    for s in systems:
        f, y = [], []
        for q in qids:
            ranked = document["runs"][s].get(q, [])
            labels = document["judge"][q]
            f.append(query_metrics(ranked, [labels[d] for d in ranked], expected[q])[NDCG10_NAME])
            y.append(query_metrics(ranked, [3 if document["qrels"][q].get(d, 0) > 0 else 0 for d in ranked], expected[q])[NDCG10_NAME])
        judge[s], human[s] = np.array(f, dtype=float), np.array(y, dtype=float)
    return systems, qids, judge, human


def plain_ppi(f: np.ndarray, y_l: np.ndarray, f_l: np.ndarray) -> tuple[float, float, float]:
    """Today's estimator (main before issue 28/29): lambda 1, normal quantile, no clipping."""
    big_n, n = len(f), len(y_l)
    d = y_l - f_l
    estimate = float(f.mean() + d.mean())
    cov = float(np.cov(f_l, d, ddof=1)[0, 1])
    var = max(float(f.var(ddof=1)) + 2 * cov, 0) / big_n + float(d.var(ddof=1)) / n
    half = Z * math.sqrt(max(var, 0))
    return estimate, estimate - half, estimate + half


def judge_bootstrap(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Today's judge-only paired comparison: the 95% percentile bootstrap interval of mean(b - a)."""
    from judge_runner.measures.paired import compare_values

    c = compare_values({str(i): v for i, v in enumerate(a)}, {str(i): v for i, v in enumerate(b)}, NDCG10_NAME, paired=True)
    return float(c.low), float(c.high)


def figures_uniform(systems, judge, human, sizes, draws, seed) -> dict:
    """Coverage, width and ranking over uniform draws (figures 1, 2 and 4)."""
    rng = np.random.default_rng(seed)
    big_n = len(next(iter(judge.values())))
    truth = {s: float(human[s].mean()) for s in systems}
    pairs = list(combinations(systems, 2))
    out = {}
    for n in sizes:
        cover = {"mean": 0, "mean-plain": 0, "diff": 0, "diff-plain": 0}
        by_system = dict.fromkeys(systems, 0)
        by_pair = dict.fromkeys(pairs, 0)
        width = {s: [] for s in systems}
        plain_width = {s: [] for s in systems}
        human_width = {s: [] for s in systems}
        wider = plain_wider = 0
        taus = {"corrected": [], "plain": [], "labels alone": []}
        weights = []
        for _ in range(draws):
            lab = rng.choice(big_n, n, replace=False)
            corrected, plain, alone = {}, {}, {}
            for s in systems:
                m = tuned_mean(judge[s], judge[s][lab], human[s][lab])
                corrected[s], alone[s] = m.estimate, m.human_mean
                cover["mean"] += m.ci95[0] <= truth[s] <= m.ci95[1]
                by_system[s] += m.ci95[0] <= truth[s] <= m.ci95[1]
                width[s].append(m.ci95[1] - m.ci95[0])
                human_width[s].append(m.human_ci95[1] - m.human_ci95[0])
                wider += (m.ci95[1] - m.ci95[0]) > (m.human_ci95[1] - m.human_ci95[0]) + 1e-12
                weights.append(m.weight)
                est, low, high = plain_ppi(judge[s], human[s][lab], judge[s][lab])
                plain[s] = est
                cover["mean-plain"] += low <= truth[s] <= high
                plain_width[s].append(high - low)
                plain_wider += (high - low) > (m.human_ci95[1] - m.human_ci95[0]) + 1e-12
            for a, b in pairs:
                g, z = judge[b] - judge[a], human[b] - human[a]
                m = tuned_mean(g, g[lab], z[lab], bounds=DIFFERENCE_BOUNDS)
                t = truth[b] - truth[a]
                cover["diff"] += m.ci95[0] <= t <= m.ci95[1]
                by_pair[(a, b)] += m.ci95[0] <= t <= m.ci95[1]
                _, low, high = plain_ppi(g, z[lab], g[lab])
                cover["diff-plain"] += low <= t <= high
            order = [truth[s] for s in systems]
            for key, est in (("corrected", corrected), ("plain", plain), ("labels alone", alone)):
                taus[key].append(stats.kendalltau(order, [est[s] for s in systems]).statistic)
        k = len(systems)
        out[n] = {
            "coverage mean (PPI++)": cover["mean"] / (draws * k),
            "coverage mean (PPI++), worst system": min(by_system.values()) / draws,
            "coverage mean (plain PPI, today)": cover["mean-plain"] / (draws * k),
            "coverage difference (PPI++)": cover["diff"] / (draws * len(pairs)),
            "coverage difference (PPI++), worst pair": min(by_pair.values()) / draws,
            "coverage difference (plain PPI)": cover["diff-plain"] / (draws * len(pairs)),
            "width ratio PPI++/labels alone (worst system)": max(np.mean(width[s]) / np.mean(human_width[s]) for s in systems),
            "width ratio PPI++/labels alone (mean)": float(np.mean([np.mean(width[s]) / np.mean(human_width[s]) for s in systems])),
            "width ratio plain PPI/labels alone (worst system)": max(np.mean(plain_width[s]) / np.mean(human_width[s]) for s in systems),
            "draws PPI++ wider than labels alone": wider / (draws * k),
            "draws plain PPI wider than labels alone": plain_wider / (draws * k),
            "mean judge weight": float(np.mean(weights)),
            "Kendall tau corrected": float(np.mean(taus["corrected"])),
            "Kendall tau plain PPI": float(np.mean(taus["plain"])),
            "Kendall tau labels alone": float(np.mean(taus["labels alone"])),
        }
    judge_tau = stats.kendalltau([truth[s] for s in systems], [float(judge[s].mean()) for s in systems]).statistic
    today = sum(low <= truth[b] - truth[a] <= high for a, b in pairs for low, high in [judge_bootstrap(judge[a], judge[b])]) / len(pairs)
    return {"by size": out, "judge tau": judge_tau, "judge-only difference coverage": today, "truth": truth}


def _ranked(document: dict, system: str, qids: list[str]) -> dict[str, list[tuple[str, int]]]:
    return {q: [(d, int(document["judge"][q][d])) for d in document["runs"][system].get(q, [])] for q in qids}


def _people(document: dict, q: str, d: str) -> int:
    return 3 if document["qrels"][q].get(d, 0) > 0 else 0


HISTORY = 100
"""Queries whose labels play earlier labelling sessions: they fit the label noise and choose the robust mix, and
are never among the queries the budget is spent on."""


def labels_for(width: float, labels: list[float], widths: list[float]) -> float:
    """The labels the sampler needs for ``width``, interpolated over its curve (``labels`` spent and mean
    ``widths`` reached per budget); NaN when ``width`` lies outside the widths it reached."""
    spent, reached = np.array(labels), np.array(widths)
    ok = ~np.isnan(reached)
    if not ok.any() or not reached[ok].min() <= width <= reached[ok].max():
        return math.nan
    order = np.argsort(reached[ok])
    return float(np.interp(width, reached[ok][order], spent[ok][order]))


def figure_budget(document, qids, judge, human, target: tuple[str, str | None], sizes, draws, seed, history: int = HISTORY) -> list[dict]:
    """Figure 3 for ``target`` ``(system, other or None)``. :data:`HISTORY` queries drawn at random are the
    earlier labels: the label noise (:class:`LabelNoise`) is fitted on their pairs and the robust mix chosen on
    them (:func:`choose_rho`, at the same share of labels); the budget is spent on the other queries, uniformly
    (whole queries at random, PPI++) or by the budgeted sampler (robust probabilities, the weighted estimator).
    Per uniform size: uniform's labels and width, and the labels the sampler needs for that width
    (interpolated over its budgets); the sampler's coverage of the queries' full-qrels value."""
    rng = np.random.default_rng(seed)
    system, against = target
    history_ids = set(rng.choice(qids, history, replace=False).tolist()) if history else set()
    index = {q: i for i, q in enumerate(qids)}
    ranked = _ranked(document, system, qids)
    other = _ranked(document, against, qids) if against else None
    f_all = judge[system] - (judge[against] if against else 0)
    y_all = human[system] - (human[against] if against else 0)
    pairs = [(g, _people(document, q, d)) for q in history_ids for d, g in {*ranked[q], *(other[q] if other else [])}]
    noise = LabelNoise.fit(pairs) if pairs else LabelNoise.default()

    def part(ids):
        sub = {q: ranked[q] for q in ids}, ({q: other[q] for q in ids} if other else None)
        units = query_units(sub[0], noise, sub[1])
        return units, np.array([f_all[index[q]] for q in ids]), np.array([y_all[index[q]] for q in ids])

    old_ids, new_ids = [q for q in qids if q in history_ids], [q for q in qids if q not in history_ids]
    new_units, f, y = part(new_ids)
    if old_ids:
        old_units, old_f, old_y = part(old_ids)
        past = residuals(dict(zip(old_ids, old_f)), dict(zip(old_ids, old_y)), dict.fromkeys(old_ids, 1.0))
    else:  # a team's first session: nothing to choose the robust mix on, uniform on the open queries
        old_units, past = new_units, []
    cost = np.array([u.cost for u in new_units], dtype=float)
    bounds = DIFFERENCE_BOUNDS if against else (0.0, 1.0)
    uniform = {}
    for n in sizes:
        spent, widths = [], []
        for _ in range(draws):
            lab = rng.choice(len(new_ids), n, replace=False)
            m = tuned_mean(f, f[lab], y[lab], bounds=bounds)
            spent.append(cost[lab].sum())
            widths.append(m.ci95[1] - m.ci95[0])
        uniform[n] = (float(np.mean(spent)), float(np.mean(widths)))
    grid = sorted({round(v) for n in sizes for v in np.geomspace(uniform[n][0] * 0.4, uniform[n][0] * 1.05, 5)})
    curve, coverage, rhos = [], [], []
    truth = float(y.mean())
    for budget in grid:
        plan = plan_budget(new_units, budget, past, old_units)
        rho = plan.rho
        judge_values = dict(zip(new_ids, f.tolist()))
        spent, widths, covered = [], [], []
        for _ in range(draws):
            drawn = set(plan.draw(int(rng.integers(1 << 31))))
            spent.append(sum(u.cost for u in new_units if u.id in drawn and not u.known))
            people = {q: float(y[i]) for i, q in enumerate(new_ids) if q in drawn}
            found = planned_mean(plan.design, judge_values, people, plan.probabilities, bounds=bounds)
            if found is not None:
                widths.append(found.ci95[1] - found.ci95[0])
                covered.append(found.ci95[0] <= truth <= found.ci95[1])
        curve.append((float(np.mean(spent)), float(np.mean(widths)) if widths else math.nan))
        coverage.append(float(np.mean(covered)) if covered else math.nan)
        rhos.append(rho)
    out = []
    for n in sizes:
        spent, width = uniform[n]
        needed = labels_for(width, [c[0] for c in curve], [c[1] for c in curve])
        out.append(
            {
                "uniform queries": n,
                "uniform labels": spent,
                "uniform width": width,
                "budgeted labels": needed,
                "saving": 1 - needed / spent if needed == needed else math.nan,
            }
        )
    known = sum(1 for u in new_units if u.known)
    out.append(
        {"budgeted coverage (min over budgets)": float(np.nanmin(coverage)), "rho chosen": float(np.mean(rhos)), "known queries": known}
    )
    return out


def _pool(document: dict, systems: tuple[str, ...], qids: list[str], labelled: bool) -> Pool:
    """The product's :class:`Pool` of ``qids`` for ``systems`` (the judge's grades; with ``labelled``, every pair's
    people's grade given before, as earlier sessions would have)."""
    pool = Pool(ranked={s: _ranked(document, s, qids) for s in systems}, judge={s: {} for s in systems}, qids=list(qids))
    for q in qids:
        pool.expected[q] = sorted(d for d, g in document["qrels"][q].items() if g > 0)
    if labelled:
        for (q, d), g in judge_grades(pool).items():
            pool.human[(q, d)] = _people(document, q, d)
            pool.past.append((g, pool.human[(q, d)]))
    return pool


def _pair_terms(open_pairs: list[tuple[str, str, float, int]], people: dict, probabilities: dict, drawn: set) -> list[PairTerm]:
    """The terms of :func:`judge_runner.measures.ipw.ipw_pair_mean`: ``open_pairs`` ``(qid, document, coefficient,
    judge's grade)``, the people's grade of the ``drawn`` ones."""
    return [
        PairTerm(q, c, float(g), float(people[(q, d)]) if pair_id(q, d) in drawn else None, probabilities[pair_id(q, d)])
        for q, d, c, g in open_pairs
    ]


def figure_budget_pairs(document, qids, target: tuple[str, str | None], budgets: list[float], draws, seed) -> list[dict]:
    """Figure 3 with single (query, document) pairs as the unit, on scaled DCG@10 (the measure pairs estimate
    without bias): uniform sampling of the open pairs (those whose coefficient is not 0) against the budgeted
    sampler, both estimated by :func:`judge_runner.measures.ipw.ipw_pair_mean` as ``label --budget --sample pairs``
    does. :data:`HISTORY` queries' pairs are the earlier labels (label noise, robust mix), as for whole queries.
    Per budget in ``budgets`` (the labels uniform whole-query sampling spent): uniform pairs' width there, and
    the labels the sampler needs for that width (interpolated over its budgets); the sampler's coverage."""
    rng = np.random.default_rng(seed)
    system, against = target
    systems = (against, system) if against else (system,)
    question = Question("difference" if against else "mean", systems, "pairs")
    history = sorted(rng.choice(qids, HISTORY, replace=False).tolist())
    new_ids = [q for q in qids if q not in set(history)]
    old_pool, new_pool = _pool(document, systems, history, True), _pool(document, systems, new_ids, False)
    old_units = units_of(old_pool, question, before=True)  # as they were before the earlier labels; noise fitted on them
    new_units = pair_units(pair_coefficients(new_pool, question), judge_grades(new_pool), LabelNoise.fit(old_pool.past))
    past = past_residuals(old_pool, question, old_units)
    people = {(q, d): _people(document, q, d) for (q, d) in judge_grades(new_pool)}
    grades = judge_grades(new_pool)
    open_pairs = [(q, d, c, grades[(q, d)]) for (q, d), c in pair_coefficients(new_pool, question).items() if c]
    truth = sum(c * people[(q, d)] for q, d, c, _ in open_pairs) / len(new_ids)
    bounds = question.bounds

    def spend(plan) -> tuple[float, float, float]:
        spent, widths, covered = [], [], []
        for _ in range(draws):
            drawn = set(plan.draw(int(rng.integers(1 << 31))))
            spent.append(sum(1 for u in new_units if u.id in drawn and not u.known))
            found = ipw_pair_mean(_pair_terms(open_pairs, people, plan.probabilities, drawn), len(new_ids), bounds=bounds)
            if found is not None:
                widths.append(found.ci95[1] - found.ci95[0])
                covered.append(found.ci95[0] <= truth <= found.ci95[1])
        return float(np.mean(spent)), float(np.mean(widths)) if widths else math.nan, float(np.mean(covered)) if covered else math.nan

    uniform = {b: spend(plan_budget(new_units, b)) for b in budgets}
    grid = sorted({round(v) for b in budgets for v in np.geomspace(b * 0.3, b * 1.05, 6)})
    plans = {b: plan_budget(new_units, b, past, old_units) for b in grid}
    curve = {b: spend(plans[b]) for b in grid}
    out = []
    for b in budgets:
        spent, width, _ = uniform[b]
        needed = labels_for(width, [curve[g][0] for g in grid], [curve[g][1] for g in grid])
        out.append(
            {
                "uniform labels": spent,
                "uniform width": width,
                "budgeted labels": needed,
                "saving": 1 - needed / spent if needed == needed else math.nan,
            }
        )
    out.append(
        {
            "uniform coverage (min)": float(np.nanmin([uniform[b][2] for b in budgets])),
            "budgeted coverage (min over budgets)": float(np.nanmin([curve[b][2] for b in grid])),
            "rho chosen": float(np.mean([plans[b].rho for b in grid])),
            "pairs known (coefficient 0)": sum(1 for u in new_units if u.known),
            "open pairs": sum(1 for u in new_units if not u.known),
        }
    )
    return out


WORST_IS_HIGH = ("width", "wider", "wrong", "labels")
"""Figures whose worst seed is the highest (the others' is the lowest)."""


def collect(figures: dict[str, list[float]], name: str, value: float) -> None:
    figures.setdefault(name, []).append(float(value))


def show(title: str, figures: dict[str, list[float]]) -> None:
    """One line per figure: its mean over the seeds, the worst seed's and every seed's."""
    print(f"\n{title} (mean over seeds; worst seed; each seed):")
    for name, vals in figures.items():
        clean = [v for v in vals if v == v]
        if not clean:
            print(f"  {name:58s} -")
            continue
        high = any(w in name for w in WORST_IS_HIGH) and "saving" not in name and "tau" not in name
        worst = max(clean) if high else min(clean)
        print(f"  {name:58s} {np.mean(clean):8.3f}  {worst:8.3f}  [{', '.join(f'{v:.3f}' for v in vals)}]")


def seed_figures(document, args, seed: int, out: dict[str, dict[str, list[float]]]) -> None:
    """Every figure of one seed (its expected sources and draws), added to ``out``."""
    qids = sorted(document["queries"])
    systems, qids, judge, human = values(document, expected_sources(document, qids, seed))
    sizes = [int(x) for x in args.sizes.split(",")]
    uniform = figures_uniform(systems, judge, human, sizes, args.draws, seed)
    head = out.setdefault("uniform draws of whole queries, PPI++ (own-list nDCG@10, one expected source)", {})
    collect(head, "judge-only Kendall tau", uniform["judge tau"])
    for n, figures in uniform["by size"].items():
        for key, value in figures.items():
            collect(head, f"{n} queries: {key}", value)
    for spec in args.targets.split(",") if args.targets else []:
        system, _, against = spec.partition(":")
        what = f"difference {system} - {against}" if against else f"mean of {system}"
        for history in (0, HISTORY):
            rows = figure_budget(document, qids, judge, human, (system, against or None), sizes, args.draws, seed + 1, history)
            block = out.setdefault(f"budget, {what}, {history} earlier labelled queries", {})
            for row in rows:
                if "uniform queries" in row:
                    n = row["uniform queries"]
                    collect(block, f"{n} uniform queries: labels", row["uniform labels"])
                    collect(block, f"{n} uniform queries: budgeted labels for that width", row["budgeted labels"])
                    collect(block, f"{n} uniform queries: saving", row["saving"])
                else:
                    collect(block, "budgeted coverage (worst budget)", row["budgeted coverage (min over budgets)"])
                    collect(block, "rho chosen", row["rho chosen"])
            if args.pairs and history:
                budgets = [row["uniform labels"] for row in rows if "uniform labels" in row]
                pairs = figure_budget_pairs(document, qids, (system, against or None), budgets, args.draws, seed + 2)
                block = out.setdefault(f"budget, {what}, single pairs on scaled DCG@10", {})
                for i, row in enumerate(pairs):
                    for key, value in row.items():
                        collect(block, f"{i}: {key}" if "uniform labels" in row else key, value)
    for history in (0, HISTORY):
        found = figure_ranking(document, systems, args.ranking_budget, args.draws, seed + 3, history)
        block = out.setdefault(f"--for ranking, budget {args.ranking_budget}, {history} earlier labelled queries", {})
        collect(block, "judge-only Kendall tau (pooled judge qrels)", found["judge tau"])
        for key, value in found["budget"].items():
            if isinstance(value, (int, float)) and key not in ("draws",):
                collect(block, f"budget: {key}", value)
        for b, row in found["uniform depth 10"].items():
            for key in ("labels", "tau", "coverage", "right", "wrong", "cannot tell"):
                collect(block, f"uniform depth 10 at {b}: {key}", row[key])
        collect(block, "saving against uniform depth 10 (labels for the same tau)", saving(found["budget"], found["uniform depth 10"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/jr-decide"))
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--sizes", default="30,60,100")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--seeds", type=int, default=5, help="seeds (each its own expected sources, history and draws)")
    parser.add_argument(
        "--targets", default="hybrid,hybrid:fts,hybrid:vector,hybrid:hybrid-rrf10", help="means (system) and differences (a:b); '' for none"
    )
    parser.add_argument("--ranking-budget", type=int, default=400)
    parser.add_argument("--pairs", action="store_true", help="also figure 3 with single pairs as the unit (slow)")
    args = parser.parse_args()
    document = load(args.data.resolve(), args.workdir.resolve())
    qids = sorted(document["queries"])
    truth = full_truth(document, list(document["runs"]), qids)
    print(f"{len(qids)} queries, {len(document['runs'])} systems; full-qrels nDCG@10 (trec_eval):")
    for s, value in sorted(truth.items(), key=lambda kv: -kv[1]):
        print(f"  {s:20s} {value:.4f}")
    out: dict[str, dict[str, list[float]]] = {}
    for i in range(args.seeds):
        seed_figures(document, args, args.seed + 10 * i, out)
        print(f"seed {args.seed + 10 * i} done", flush=True)
    for title, figures in out.items():
        show(title, figures)


if __name__ == "__main__":
    main()
