"""Bias-corrected headline numbers of a run: mean nDCG@10 and mean relevance corrected by human labels with
prediction-powered inference (:mod:`judge_runner.measures.ppi`; Angelopoulos et al. 2023, Science 382:669).

A query counts as **labelled** when every result it returned carries a human label (``labelOrigin`` human,
e.g. from ``judge-runner label``) and its line records the judge's own values beside them (``judgeOnly``,
written since the judge's label is obtained for human-labelled results too). On such a query the line's
``metrics`` and ``scores`` are the people's; ``judgeOnly`` is what the judge alone would have given. On every
other query the line's own values are the judge's. A query with only some results labelled is neither: it is
counted (``partlyLabelledQueries``) and enters the judge's mean with its ``judgeOnly`` values.

The correction is valid when the labelled queries are a random sample of the run's scored queries (what
``label`` draws). A later run that returns documents nobody labelled loses those queries from the labelled set
(they become partly labelled), and the sample is then no longer random: label again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from judge_runner.measures.ir import NDCG10_NAME, canonical_metric_name
from judge_runner.measures.ppi import ppi_mean

METHOD = "prediction-powered inference, mean estimator (Angelopoulos et al. 2023, Science 382:669)"
CORRECTED = (NDCG10_NAME, "relevance")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _value(line: Mapping[str, Any], column: str) -> float | None:
    if column == "relevance":
        return _number((line.get("scores") or {}).get("relevance"))
    metrics = {canonical_metric_name(k): v for k, v in (line.get("metrics") or {}).items()}
    return _number(metrics.get(column))


def labelled(line: Mapping[str, Any]) -> bool | None:
    """True when every result of an ``evaluation`` line (a dict by alias) is human-labelled and the line
    records the judge's own values (``judgeOnly``); None when some, not all, are; False otherwise."""
    results = line.get("results") or []
    human = sum(1 for r in results if r.get("labelOrigin") == "human")
    if results and human == len(results) and line.get("judgeOnly"):
        return True
    return None if human else False


def bias_corrected(evaluations: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The summary's ``biasCorrected`` block from a run's ``evaluation`` lines (dicts by alias), or None when
    no query is labelled (see the module docstring), or when a line has human labels but not the judge's
    own values (a line copied from a file written before they were recorded): ``{"method",
    "labelledQueries", "partlyLabelledQueries", "scoredQueries", "nDCG@10", "relevance"}``, each measure a
    :class:`judge_runner.measures.ppi.MeanEstimate` as a dict, or None with fewer than two labelled queries
    scored on it."""
    judge: dict[str, dict[str, float]] = {c: {} for c in CORRECTED}
    human: dict[str, dict[str, float]] = {c: {} for c in CORRECTED}
    counts = {"labelled": 0, "partly": 0, "scored": 0}
    for line in evaluations:
        if line.get("queryType") == "off-topic" or line.get("metrics") is None:
            continue
        state = labelled(line)
        if int(line.get("humanLabels") or 0) and not line.get("judgeOnly"):
            return None
        qid = str(line.get("queryId"))
        counts["scored"] += 1
        counts["labelled"] += state is True
        counts["partly"] += state is None
        own = line.get("judgeOnly") or {}
        for column in CORRECTED:
            value = _value(line, column)
            if value is None:
                continue
            judge_value = _number(own.get(column)) if own else value
            if judge_value is None:
                continue
            judge[column][qid] = judge_value
            if state is True:
                human[column][qid] = value
    if not counts["labelled"]:
        return None
    out: dict[str, Any] = {
        "method": METHOD,
        "labelledQueries": counts["labelled"],
        "partlyLabelledQueries": counts["partly"],
        "scoredQueries": counts["scored"],
    }
    for column in CORRECTED:
        estimate = ppi_mean(judge[column], human[column])
        out[column] = estimate.as_dict() if estimate is not None else None
    return out
