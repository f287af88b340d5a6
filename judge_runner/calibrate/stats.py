"""Calibration statistics, each with a 95% interval over queries, from well-kept libraries: Cohen's kappa (Cohen
1960, 1968; scikit-learn), Krippendorff's alpha, per-system nDCG@10, RR(rel=2) and R(rel=2)@100 (ir-measures)
and Kendall's tau_b between the rankings by people and by judge, Spearman's rho per query (SciPy). Intervals are
the expanded percentile bootstrap over queries (Hesterberg 2015, The American Statistician 69(4), 3.3), or the
rule of three's where every query gave the same value (Hanley & Lippman-Hand 1983, JAMA 249:1743);
docs/calibration.md, "Reading the verdicts". An undefined figure is None. SciPy and scikit-learn are imported
where used: every command's startup reads ``calibrate``."""

from __future__ import annotations

import contextlib
import math
import random
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

import ir_measures
import numpy as np

from judge_runner.calibrate.pool import PoolEntry, Runs
from judge_runner.judging.scores import median_label
from judge_runner.measures.agreement import trials_alpha

GRADES = [0, 1, 2, 3]
MEASURES = {
    "nDCG@10": ir_measures.parse_measure("nDCG@10"),
    "RR(rel=2)": ir_measures.parse_measure("RR(rel=2)"),
    "R(rel=2)@100": ir_measures.parse_measure("R(rel=2)@100"),
}
HEADLINE_MEASURE = "nDCG@10"

Pair = tuple[str, int, int]
"""``(qid, human grade, judge label)``."""
KAPPA_RANGE = (-1.0, 1.0)
LABELLED_DEPTH = 10


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return round(value, 6) if math.isfinite(value) else None


_observers: list[Callable[[int], None]] = []


@contextlib.contextmanager
def observed(callback: Callable[[int], None]) -> Iterator[None]:
    """Inside, ``callback(resamples)`` is told after every bootstrap interval (progress)."""
    _observers.append(callback)
    try:
        yield
    finally:
        _observers.remove(callback)


CONFIDENCE = 0.95


def expanded_level(queries: int) -> float:
    """The level at which the percentiles of a 95% interval over ``queries`` (>= 2) are read: ``1 - 2
    Phi(-sqrt(n/(n-1)) t_{0.975, n-1})`` (Hesterberg 2015, 3.3); 1.0 at 2, about 0.954 at 100."""
    from scipy.stats import norm, t

    n = queries
    return float(1 - 2 * norm.sf(math.sqrt(n / (n - 1)) * t.ppf(1 - (1 - CONFIDENCE) / 2, n - 1)))


def zero_event_share(queries: int) -> float:
    """``1 - 0.025^(1/n)``: the largest share of queries that could show an event when none did, at 95%
    two-sided (Clopper-Pearson at zero events, about 3.7/n)."""
    return float(1 - ((1 - CONFIDENCE) / 2) ** (1 / queries))


Worst = Callable[[float], float | None]
"""``worst(r)``: the figure had a share ``r`` of the queries gone the farthest way."""


def _point_interval(value: float, queries: int, bounds: tuple[float, float] | None, worst: Worst | None) -> list[float] | None:
    """The rule-of-three interval of a figure whose bootstrap collapsed to ``value``: ``[c - (c - a) r, c + (b -
    c) r]`` within ``bounds``, or from ``worst(r)`` at the top of the range; None without ``bounds`` (the point
    stands: Kendall's tau)."""
    if bounds is None:
        return None
    r = zero_event_share(queries)
    low, high = bounds
    if worst is not None and value >= high:
        floor = _finite(worst(r))
        return [low if floor is None else floor, value]
    return [round(value - (value - low) * r, 6), round(value + (high - value) * r, 6)]


def bootstrap_interval(
    qids: Sequence[str],
    statistic: Callable[[list[str]], float | None],
    resamples: int,
    seed: int,
    bounds: tuple[float, float] | None = None,
    worst: Worst | None = None,
) -> list[float] | None:
    """``[low, high]`` of ``statistic`` over queries resampled with replacement (seeded), or the rule of three's
    when every resample agrees and ``bounds`` is known. None with fewer than 2 queries, ``resamples`` < 1, or a
    statistic undefined on the data."""
    interval, _ = _interval(qids, statistic, resamples, seed, bounds, worst)
    return interval


def _interval(
    qids: Sequence[str],
    statistic: Callable[[list[str]], float | None],
    resamples: int,
    seed: int,
    bounds: tuple[float, float] | None,
    worst: Worst | None,
) -> tuple[list[float] | None, bool]:
    if len(qids) < 2 or resamples < 1:
        return None, False
    from scipy.stats import bootstrap  # imported here: scipy.stats alone adds about a second to CLI start-up

    def stat(index: np.ndarray) -> float:
        value = statistic([qids[int(i)] for i in index])
        return math.nan if value is None else float(value)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = bootstrap(
                (np.arange(len(qids)),),
                stat,
                n_resamples=resamples,
                vectorized=False,
                method="percentile",
                confidence_level=expanded_level(len(qids)),
                random_state=np.random.default_rng(seed),
            )
        except ValueError:
            return None, False
        finally:
            for callback in list(_observers):
                callback(resamples)
    low, high = _finite(result.confidence_interval.low), _finite(result.confidence_interval.high)
    if low is None or high is None:
        return None, False
    if low == high:  # every resample the same: nothing varied, which the bootstrap cannot tell from certainty
        point = _point_interval(low, len(qids), bounds, worst)
        if point is not None:
            return point, True
    return [low, high], False


def with_interval(
    qids: Sequence[str],
    statistic: Callable[[list[str]], float | None],
    resamples: int,
    seed: int,
    bounds: tuple[float, float] | None = None,
    worst: Worst | None = None,
) -> dict:
    """``{"value", "ci95"}``, plus ``"ruleOfThree": true`` for a rule-of-three interval."""
    interval, zero_events = _interval(qids, statistic, resamples, seed, bounds, worst)
    figure: dict = {"value": _finite(statistic(list(qids))), "ci95": interval}
    if zero_events:
        figure["ruleOfThree"] = True
    return figure


def _farthest(grade: int) -> int:
    return 3 if grade < 2 else 0


def _kappa(pairs: list[Pair], threshold: int | None = None, weights: str | None = None, flip: float = 0.0) -> float | None:
    """Cohen's kappa (binary at ``threshold``, else on the four grades with ``weights``); ``flip`` > 0: as if
    that share of each human class got the farthest label (the rule-of-three floor)."""
    if not pairs:
        return None
    from sklearn.metrics import cohen_kappa_score  # lazily, like scipy: only calibrate needs it

    human = np.array([h for _, h, _ in pairs])
    judge = np.array([j for _, _, j in pairs])
    weight = np.ones(len(pairs))
    if flip > 0:  # each pair twice: as labelled (weight 1 - flip) and with the farthest label (weight flip)
        far = [(0 if h >= threshold else 3) if threshold is not None else _farthest(int(h)) for h in human]
        human, judge = np.concatenate([human, human]), np.concatenate([judge, far])
        weight = np.concatenate([weight * (1 - flip), weight * flip])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if threshold is not None:
            value = cohen_kappa_score(human >= threshold, judge >= threshold, labels=[False, True], sample_weight=weight)
        else:
            value = cohen_kappa_score(human, judge, labels=GRADES, weights=weights, sample_weight=weight)
    return _finite(value)


def over_labelling(pairs: list[Pair]) -> float | None:
    """P(label >= 2 | human grade 0); None without a grade-0 pair."""
    negatives = [j for _, h, j in pairs if h == 0]
    return round(sum(j >= 2 for j in negatives) / len(negatives), 6) if negatives else None


def agreement(pairs: Sequence[Pair], graded: bool, resamples: int, seed: int) -> dict:
    """Kappa at >= 2 and >= 1, and where ``graded`` the unweighted, linear and quadratic kappa on the four
    grades, each ``{"value", "ci95"}``; over-labelling, counts and the confusion matrix (rows human 0-3, columns
    judge 0-3)."""
    by_query: dict[str, list[Pair]] = {}
    for p in pairs:
        by_query.setdefault(p[0], []).append(p)
    qids = sorted(by_query)

    def over(fn: Callable[[list[Pair]], float | None]) -> Callable[[list[str]], float | None]:
        return lambda sample: fn([p for q in sample for p in by_query[q]])

    every = list(pairs)

    def kappa(**how: Any) -> dict:
        worst = partial(lambda r, **k: _kappa(every, flip=r, **k), **how)
        return with_interval(qids, over(partial(_kappa, **how)), resamples, seed, KAPPA_RANGE, worst)

    figures = {
        "kappaAt2": kappa(threshold=2),
        "kappaAt1": kappa(threshold=1),
        "overLabelling": with_interval(qids, over(over_labelling), resamples, seed, (0.0, 1.0)),
    }
    for name, weights in (("kappaUnweighted", None), ("kappaLinear", "linear"), ("kappaQuadratic", "quadratic")):
        figures[name] = kappa(weights=weights) if graded else {"value": None, "ci95": None}
    from sklearn.metrics import confusion_matrix

    humans = [h for _, h, _ in pairs]
    judges = [j for _, _, j in pairs]
    matrix = confusion_matrix(humans, judges, labels=GRADES).tolist() if pairs else [[0] * 4 for _ in GRADES]
    return {
        "pairs": len(pairs),
        "queries": len(qids),
        "humanRelevant": sum(h >= 2 for h in humans),
        "judgeRelevant": sum(j >= 2 for j in judges),
        **figures,
        "confusion": matrix,
    }


def pairs_for(pool: Mapping[str, list[PoolEntry]], labels: Mapping[tuple[str, str], list[int]], subset: str, seed: int) -> list[Pair]:
    """``(qid, human, judge median)`` pairs of ``all`` the pool, the ``retrieved`` documents, or ``balanced``
    (per query every human-relevant document and as many human-0 ones, seeded)."""
    out: list[Pair] = []
    rng = random.Random(seed)
    for qid in sorted(pool):
        entries = [e for e in pool[qid] if (e.qid, e.docid) in labels]
        if subset == "retrieved":
            entries = [e for e in entries if e.retrieved]
        elif subset == "balanced":
            relevant = [e for e in entries if e.human >= 2]
            negatives = [e for e in entries if e.human == 0]
            entries = relevant + rng.sample(negatives, min(len(relevant), len(negatives)))
        out.extend((qid, e.human, median_label(labels[(e.qid, e.docid)])) for e in entries)
    return out


def alpha(labels: Mapping[tuple[str, str], list[int]]) -> float | None:
    """Krippendorff's alpha (ordinal) across trials; None when undefined."""
    return trials_alpha(list(labels.values()))


def _alpha_flipped(units: Sequence[tuple[tuple[str, str], list[int]]], share: float) -> float | None:
    """Alpha with a share of the units given the farthest label in the last trial: the rule-of-three floor of an
    alpha of 1."""
    count = max(1, math.ceil(share * len(units) - 1e-9))
    changed = [trials[:-1] + [_farthest(trials[0])] if k < count else trials for k, (_, trials) in enumerate(units)]
    return trials_alpha(changed)


def trial_stability(labels: Mapping[tuple[str, str], Sequence[int]], resamples: int, seed: int) -> dict:
    """Alpha over the units graded in two or more trials, with its interval; ``trials`` is the most a unit has."""
    repeated = sorted((key, list(t)) for key, t in labels.items() if len(t) >= 2)
    trials = max((len(t) for t in labels.values()), default=0)
    by_query: dict[str, list[list[int]]] = {}
    for (qid, _), t in repeated:
        by_query.setdefault(qid, []).append(t)
    qids = sorted(by_query)

    def stat(sample: list[str]) -> float | None:
        return trials_alpha([t for q in sample for t in by_query[q]])

    figure = (
        with_interval(qids, stat, resamples, seed, KAPPA_RANGE, partial(_alpha_flipped, repeated))
        if qids
        else {"value": None, "ci95": None}
    )
    return {**figure, "queries": len(qids), "units": len(repeated), "trials": trials}


def judge_qrels(labels: Mapping[tuple[str, str], list[int]]) -> dict[str, dict[str, int]]:
    """The median label (low median) of each pooled pair."""
    out: dict[str, dict[str, int]] = {}
    for (qid, docid), trials in labels.items():
        out.setdefault(qid, {})[docid] = median_label(trials)
    return out


def per_query_metrics(runs: Runs, qrels: Mapping[str, Mapping[str, int]], qids: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    """``{system: {qid: {measure: value}}}``; a query answered with nothing scores 0."""
    qrels_list = [ir_measures.Qrel(q, d, int(g)) for q, docs in qrels.items() for d, g in docs.items()]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for system, ranked in runs.items():
        run = [ir_measures.ScoredDoc(q, d, float(len(docs) - i)) for q, docs in ranked.items() if q in qrels for i, d in enumerate(docs)]
        table = {q: {m: 0.0 for m in MEASURES} for q in qids}
        names = {str(v): k for k, v in MEASURES.items()}
        for metric in ir_measures.iter_calc(list(MEASURES.values()), qrels_list, run):
            if metric.query_id in table:
                table[metric.query_id][names[str(metric.measure)]] = float(metric.value)
        out[system] = table
    return out


def condensed(runs: Runs, qrels: Mapping[str, Mapping[str, int]]) -> Runs:
    """Each system's lists without the documents nobody graded, order kept: Sakai's condensed lists (2007,
    SIGIR), on which nDCG stays comparable with incomplete qrels."""
    return {s: {q: [d for d in docs if d in qrels.get(q, {})] for q, docs in ranked.items()} for s, ranked in runs.items()}


def labelled_share(
    runs: Runs, qrels: Mapping[str, Mapping[str, int]], qids: Sequence[str], depth: int = LABELLED_DEPTH
) -> dict[str, float | None]:
    """``{system: share}`` of its top ``depth`` people graded, averaged over ``qids`` (None when it answered
    none)."""
    out: dict[str, float | None] = {}
    for system, ranked in runs.items():
        shares = [sum(d in qrels.get(q, {}) for d in ranked[q][:depth]) / len(ranked[q][:depth]) for q in qids if ranked.get(q)]
        out[system] = round(float(np.mean(shares)), 6) if shares else None
    return out


def _means(table: Mapping[str, Mapping[str, Mapping[str, float]]], measure: str, qids: Sequence[str]) -> dict[str, float]:
    return {s: float(np.mean([per[q][measure] for q in qids])) if qids else 0.0 for s, per in table.items()}


def _tau(human: Mapping[str, float], judge: Mapping[str, float]) -> float | None:
    systems = sorted(human)
    if len(systems) < 2:
        return None
    from scipy.stats import kendalltau

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _finite(kendalltau([human[s] for s in systems], [judge[s] for s in systems]).statistic)


def _sample_tau(human_table: Mapping, judge_table: Mapping, measure: str, sample: list[str]) -> float | None:
    return _tau(_means(human_table, measure, sample), _means(judge_table, measure, sample))


def _reversed_tau(human_table: Mapping, judge_table: Mapping, measure: str, qids: Sequence[str], share: float) -> float | None:
    """Kendall's tau_b with the judge's values of a share of the queries reversed (``1 - value``): the
    rule-of-three floor of a tau of 1."""
    flipped = set(sorted(qids)[: max(1, math.ceil(share * len(qids) - 1e-9))])
    judge = {
        s: {q: ({m: 1 - v for m, v in row.items()} if q in flipped else row) for q, row in per.items()} for s, per in judge_table.items()
    }
    return _sample_tau(human_table, judge, measure, list(qids))


def system_ranking(
    human_table: Mapping,
    judge_table: Mapping,
    qids: Sequence[str],
    resamples: int,
    seed: int,
    labelled: Mapping[str, float | None] | None = None,
) -> dict:
    """Per measure each system's mean by people and by judge (and ``labelledAt10``), and Kendall's tau_b between
    the two rankings with its interval."""
    out: dict = {}
    for measure in MEASURES:
        human, judge = _means(human_table, measure, qids), _means(judge_table, measure, qids)
        rows: dict[str, dict[str, float | None]] = {s: {"human": round(human[s], 6), "judge": round(judge[s], 6)} for s in sorted(human)}
        for s, row in rows.items():
            if labelled is not None:
                row["labelledAt10"] = labelled.get(s)
        out[measure] = {
            "systems": rows,
            "kendallTauB": with_interval(
                qids,
                partial(_sample_tau, human_table, judge_table, measure),
                resamples,
                seed,
                KAPPA_RANGE,
                partial(_reversed_tau, human_table, judge_table, measure, qids),
            ),
        }
    return out


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """None when undefined (fewer than 3 points or a constant side)."""
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    from scipy.stats import spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _finite(spearmanr(xs, ys).statistic)


def per_query_spearman(
    human_ndcg: Mapping[str, float], dimensions: Mapping[str, Mapping[str, float | None]], resamples: int, seed: int
) -> dict:
    """``{dimension: {"value", "ci95", "queries"}}``: Spearman's rho over queries between the human nDCG@10 and
    each dimension."""
    names = sorted({n for d in dimensions.values() for n in d})
    out = {}
    for name in names:
        qids = [q for q in sorted(dimensions) if dimensions[q].get(name) is not None and q in human_ndcg]

        def stat(sample: list[str], n: str = name) -> float | None:
            return spearman([human_ndcg[q] for q in sample], [float(dimensions[q][n]) for q in sample])  # type: ignore[arg-type]

        out[name] = (
            {**with_interval(qids, stat, resamples, seed, KAPPA_RANGE), "queries": len(qids)}
            if qids
            else {"value": None, "ci95": None, "queries": 0}
        )
    return out
