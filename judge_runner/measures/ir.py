"""IR metrics against qrels, computed with ir-measures (MacAvaney et al., ECIR 2022) on pytrec_eval, so
trec_eval's semantics: nDCG with linear gain and log2 discount, the ideal DCG from every graded document; R@10
over grades >= 1; an ungraded document is not relevant. A query's qrels are every grade known for it
(docs/design.md, "The run file"). Keys are ir-measures' names (``nDCG@10``, ``R@10``, ``RR(rel=2)``); older run
files' ``Recall@10`` and ``RR`` are mapped on reading."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import ir_measures
from ir_measures import RR, R, nDCG

NDCG10 = nDCG @ 10
RECALL10 = R @ 10
RR2 = RR(rel=2)
MEASURES: dict[str, Any] = {str(m): m for m in (NDCG10, RECALL10, RR2)}
"""The one table of IR measures, ``{ir-measures name: measure}``, in run-file order."""
NDCG10_NAME, RECALL10_NAME, RR_NAME = MEASURES  # "nDCG@10", "R@10", "RR(rel=2)"
METRIC_NAMES: tuple[str, ...] = tuple(MEASURES)
LEGACY_METRIC_NAMES: dict[str, str] = {"Recall@10": RECALL10_NAME, "RR": RR_NAME}  # run files before formatVersion
_QID = "q"


def canonical_metric_name(name: str) -> str:
    """The ir-measures name of a metric key, older run files' keys mapped."""
    return LEGACY_METRIC_NAMES.get(name, name)


def ranked_scores(sources: Sequence[str]) -> dict[str, float]:
    """A ranked list as an ir-measures run: scores strictly decreasing with rank, so trec_eval's tie-breaking
    cannot reorder it; a repeated source counts once, at its best rank."""
    run: dict[str, float] = {}
    for i, source in enumerate(sources):
        run.setdefault(source, float(len(sources) - i))
    return run


def qrels_metrics(qrels: Mapping[str, Mapping[str, int]], ranked: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """``{qid: {name: value}}`` over :data:`MEASURES` for ``ranked`` (``{qid: [source, ...]}``, best first)
    against ``qrels`` (``{qid: {docid: grade 0-3}}``), rounded to 6 digits. An empty list or a query without
    qrels scores 0.0."""
    out = {qid: dict.fromkeys(MEASURES, 0.0) for qid in ranked}
    run = {qid: ranked_scores(sources) for qid, sources in ranked.items() if sources and qrels.get(qid)}
    if run:
        wanted = {qid: {d: int(g) for d, g in qrels[qid].items()} for qid in run}
        for metric in ir_measures.iter_calc(list(MEASURES.values()), wanted, run):
            out[metric.query_id][str(metric.measure)] = round(float(metric.value), 6)
    return out


def query_metrics(
    ranked_sources: list[str], labels: list[int], expected_sources: list[str], known: Mapping[str, int] | None = None
) -> dict[str, float | None]:
    """:func:`qrels_metrics` of one query whose qrels are ``labels`` (one grade per returned result; a repeated
    source keeps its best), then ``known`` for documents not returned, then each ungraded expected source at 3.
    Raises ValueError when the lists do not line up."""
    if len(ranked_sources) != len(labels):
        raise ValueError("one label per returned result is required")
    qrels: dict[str, int] = {}
    for source, grade in zip(ranked_sources, labels):
        qrels[source] = max(qrels.get(source, 0), int(grade))
    for source, grade in (known or {}).items():
        qrels.setdefault(source, int(grade))
    for source in expected_sources:
        qrels.setdefault(source, 3)
    return dict(qrels_metrics({_QID: qrels}, {_QID: ranked_sources})[_QID])
