"""IR metrics for one judged query, computed with ir-measures (MacAvaney et al., ECIR 2022), which
delegates to pytrec_eval (trec_eval semantics: nDCG with linear gain and log2 discount, ideal DCG from
all judged documents).

As docs/design.md ("The run file") states:
- qrels: the judge's 0-3 labels on the returned results, plus every expected source at grade 3 unless
  the judge labelled it;
- nDCG@10 over those graded qrels;
- Recall@10: the share of expected sources found in the top 10;
- RR: reciprocal rank of the first result of grade >= 2 (MRR when averaged over queries).

Metric keys in run files are ir-measures' own names (``str(measure)``): ``nDCG@10``, ``R@10`` and
``RR(rel=2)``, defined once here as :data:`METRIC_NAMES`. Files written before that used ``Recall@10``
and ``RR``; :data:`LEGACY_METRIC_NAMES` maps them, and the run-file reader applies it.
"""

from __future__ import annotations

import ir_measures
from ir_measures import RR, R, nDCG

NDCG10 = nDCG @ 10
RECALL10 = R @ 10
RR2 = RR(rel=2)
MEASURES = (NDCG10, RECALL10, RR2)
NDCG10_NAME, RECALL10_NAME, RR_NAME = (str(m) for m in MEASURES)  # "nDCG@10", "R@10", "RR(rel=2)"
METRIC_NAMES: tuple[str, ...] = (NDCG10_NAME, RECALL10_NAME, RR_NAME)
LEGACY_METRIC_NAMES: dict[str, str] = {"Recall@10": RECALL10_NAME, "RR": RR_NAME}  # run files before formatVersion
_QID = "q"


def canonical_metric_name(name: str) -> str:
    """The ir-measures name of a metric key, mapping the keys of older run files (``Recall@10`` ->
    ``R@10``, ``RR`` -> ``RR(rel=2)``); any other name is returned unchanged."""
    return LEGACY_METRIC_NAMES.get(name, name)


def query_metrics(ranked_sources: list[str], labels: list[int], expected_sources: list[str]) -> dict[str, float | None]:
    """``{"nDCG@10", "R@10", "RR(rel=2)"}`` (:data:`METRIC_NAMES`) for one query.

    ``ranked_sources``: the returned documents, best first; ``labels``: the judge's grade (0-3) of each;
    ``expected_sources``: files that should answer. R@10 is None when there are no expected
    sources. Raises ValueError when the lists do not line up.
    """
    if len(ranked_sources) != len(labels):
        raise ValueError("one label per returned result is required")
    qrels: dict[str, int] = {}
    for source, grade in zip(ranked_sources, labels):
        qrels[source] = max(qrels.get(source, 0), int(grade))
    for source in expected_sources:
        qrels.setdefault(source, 3)
    # scores strictly decreasing with rank, so trec_eval's tie-breaking cannot reorder the run
    # (a source returned twice counts once, at its best rank)
    run: dict[str, float] = {}
    for i, source in enumerate(ranked_sources):
        run.setdefault(source, float(len(ranked_sources) - i))
    graded = {_QID: qrels}
    results: dict[str, float | None] = {NDCG10_NAME: 0.0, RECALL10_NAME: None, RR_NAME: 0.0}
    if run and any(qrels.values()):
        values = ir_measures.calc_aggregate([NDCG10, RR2], graded, {_QID: run})
        results[NDCG10_NAME] = round(float(values[NDCG10]), 6)
        results[RR_NAME] = round(float(values[RR2]), 6)
    if expected_sources:
        if run:
            recall = ir_measures.calc_aggregate([RECALL10], {_QID: {s: 1 for s in expected_sources}}, {_QID: run})
            results[RECALL10_NAME] = round(float(recall[RECALL10]), 6)
        else:
            results[RECALL10_NAME] = 0.0
    return results
