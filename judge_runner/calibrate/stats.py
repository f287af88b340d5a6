"""Calibration statistics, each with a query-bootstrap 95% interval, from well-kept libraries only.

- Agreement per (query, document) pair (:func:`agreement`): Cohen's kappa (Cohen 1960) on binary relevance at
  label >= 2 and at >= 1 (``sklearn.metrics.cohen_kappa_score``); where the human qrels are graded, the
  unweighted kappa on the four grades (the figure the TREC DL 2023 LLMJudge and UMBRELA papers report) and
  linear and quadratic weighted kappa (Cohen 1968); the confusion matrix (``sklearn.metrics.confusion_matrix``, rows
  human 0-3, columns judge 0-3) and the over-labelling rate P(label >= 2 | qrels 0).
- Stability across trials: Krippendorff's alpha, ordinal (:func:`judge_runner.measures.agreement.trials_alpha`).
- Systems: nDCG@10, RR(rel=2) and R(rel=2)@100 per system and query (``ir_measures``) from the human qrels
  and from the judge's labels on the same pool; Kendall's tau_b between the two system rankings
  (``scipy.stats.kendalltau``), for each measure.
- Per query: Spearman's rho (``scipy.stats.spearmanr``) between human nDCG@10 of the reference system's list
  and each of the four dimensions computed from the judge on that list.

Intervals: the percentile bootstrap over queries (``scipy.stats.bootstrap``; Efron & Tibshirani 1993; queries
are the sampling unit, as in Sakai 2006 / Voorhees & Buckley 2002), seeded. A figure that is undefined on the
data (e.g. kappa when one side has a single class) is None; an interval is None when the resampled figure is
undefined too often to be read.

SciPy and scikit-learn are imported inside the functions that use them: together they take about 0.8 s
to import, and every command's startup (``judge-runner --help`` included) reads the ``calibrate`` command.
"""

from __future__ import annotations

import contextlib
import math
import random
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial

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


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return round(value, 6) if math.isfinite(value) else None


_observers: list[Callable[[int], None]] = []


@contextlib.contextmanager
def observed(callback: Callable[[int], None]) -> Iterator[None]:
    """Inside, ``callback(resamples)`` is told after every bootstrap interval computed (progress)."""
    _observers.append(callback)
    try:
        yield
    finally:
        _observers.remove(callback)


def bootstrap_interval(
    qids: Sequence[str], statistic: Callable[[list[str]], float | None], resamples: int, seed: int
) -> list[float] | None:
    """The 95% percentile-bootstrap interval ``[low, high]`` of ``statistic`` over queries resampled with
    replacement (``scipy.stats.bootstrap``, seeded); None with fewer than 2 queries, ``resamples`` < 1, or a
    statistic undefined on the data."""
    if len(qids) < 2 or resamples < 1:
        return None
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
                confidence_level=0.95,
                random_state=np.random.default_rng(seed),
            )
        except ValueError:
            return None
        finally:
            for callback in list(_observers):
                callback(resamples)
    low, high = _finite(result.confidence_interval.low), _finite(result.confidence_interval.high)
    return None if low is None or high is None else [low, high]


def with_interval(qids: Sequence[str], statistic: Callable[[list[str]], float | None], resamples: int, seed: int) -> dict:
    """``{"value", "ci95"}``: the statistic on every query and its bootstrap interval."""
    return {"value": _finite(statistic(list(qids))), "ci95": bootstrap_interval(qids, statistic, resamples, seed)}


def _kappa(pairs: list[Pair], threshold: int | None = None, weights: str | None = None) -> float | None:
    if not pairs:
        return None
    from sklearn.metrics import cohen_kappa_score  # lazily, like scipy: only calibrate needs it

    human = np.array([h for _, h, _ in pairs])
    judge = np.array([j for _, _, j in pairs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if threshold is not None:
            value = cohen_kappa_score(human >= threshold, judge >= threshold, labels=[False, True])
        else:
            value = cohen_kappa_score(human, judge, labels=GRADES, weights=weights)
    return _finite(value)


def over_labelling(pairs: list[Pair]) -> float | None:
    """P(label >= 2 | human grade 0); None without a grade-0 pair."""
    negatives = [j for _, h, j in pairs if h == 0]
    return round(sum(j >= 2 for j in negatives) / len(negatives), 6) if negatives else None


def agreement(pairs: Sequence[Pair], graded: bool, resamples: int, seed: int) -> dict:
    """Agreement figures of ``pairs`` (see the module docstring), each ``{"value", "ci95"}``, plus counts and
    the confusion matrix. The 4-grade kappas (unweighted and weighted) are None when ``graded`` is False
    (binary qrels have no grades between "not relevant" and "relevant")."""
    by_query: dict[str, list[Pair]] = {}
    for p in pairs:
        by_query.setdefault(p[0], []).append(p)
    qids = sorted(by_query)

    def over(fn: Callable[[list[Pair]], float | None]) -> Callable[[list[str]], float | None]:
        return lambda sample: fn([p for q in sample for p in by_query[q]])

    figures = {
        "kappaAt2": with_interval(qids, over(lambda ps: _kappa(ps, threshold=2)), resamples, seed),
        "kappaAt1": with_interval(qids, over(lambda ps: _kappa(ps, threshold=1)), resamples, seed),
        "overLabelling": with_interval(qids, over(over_labelling), resamples, seed),
    }
    for name, weights in (("kappaUnweighted", None), ("kappaLinear", "linear"), ("kappaQuadratic", "quadratic")):
        figures[name] = (
            with_interval(qids, over(partial(_kappa, weights=weights)), resamples, seed) if graded else {"value": None, "ci95": None}
        )
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
    """``(qid, human, judge median)`` pairs of a subset of the pool: ``all``; ``retrieved`` (documents some
    system put in its top k: realistic prevalence); ``balanced`` (per query every human-relevant document and
    as many human-0 documents drawn from its pool with ``random.Random(seed)``)."""
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
    """Krippendorff's alpha (ordinal) across trials; None when undefined (one trial, or one value)."""
    return trials_alpha(list(labels.values()))


def judge_qrels(labels: Mapping[tuple[str, str], list[int]]) -> dict[str, dict[str, int]]:
    """The judge's qrels: the median label (low median) of each pooled pair."""
    out: dict[str, dict[str, int]] = {}
    for (qid, docid), trials in labels.items():
        out.setdefault(qid, {})[docid] = median_label(trials)
    return out


def per_query_metrics(runs: Runs, qrels: Mapping[str, Mapping[str, int]], qids: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    """``{system: {qid: {measure: value}}}`` over :data:`MEASURES` with ``ir_measures``; a query a system
    answered with nothing, or that ir_measures skips, scores 0."""
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


def system_ranking(human_table: Mapping, judge_table: Mapping, qids: Sequence[str], resamples: int, seed: int) -> dict:
    """Per measure: each system's mean from human qrels and from the judge's labels, and Kendall's tau_b
    between the two rankings with its query-bootstrap interval."""
    out: dict = {}
    for measure in MEASURES:
        human, judge = _means(human_table, measure, qids), _means(judge_table, measure, qids)
        out[measure] = {
            "systems": {s: {"human": round(human[s], 6), "judge": round(judge[s], 6)} for s in sorted(human)},
            "kendallTauB": with_interval(qids, partial(_sample_tau, human_table, judge_table, measure), resamples, seed),
        }
    return out


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho; None when undefined (fewer than 3 points or a constant side)."""
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    from scipy.stats import spearmanr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _finite(spearmanr(xs, ys).statistic)


def per_query_spearman(
    human_ndcg: Mapping[str, float], dimensions: Mapping[str, Mapping[str, float | None]], resamples: int, seed: int
) -> dict:
    """``{dimension: {"value", "ci95", "queries"}}``: Spearman's rho over queries between the human nDCG@10
    and each dimension (``dimensions[qid][name]``, None when unavailable)."""
    names = sorted({n for d in dimensions.values() for n in d})
    out = {}
    for name in names:
        qids = [q for q in sorted(dimensions) if dimensions[q].get(name) is not None and q in human_ndcg]

        def stat(sample: list[str], n: str = name) -> float | None:
            return spearman([human_ndcg[q] for q in sample], [float(dimensions[q][n]) for q in sample])  # type: ignore[arg-type]

        out[name] = (
            {**with_interval(qids, stat, resamples, seed), "queries": len(qids)} if qids else {"value": None, "ci95": None, "queries": 0}
        )
    return out
