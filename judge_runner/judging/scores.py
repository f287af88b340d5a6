"""The dimensions that are computed from per-result labels, and how trials become one label (issue 14,
items 2, 7 and 8).

Labels are the judge's grades on the TREC/UMBRELA scale: 0 irrelevant, 1 related, 2 highly relevant,
3 perfectly relevant. ``relevance`` and ``ranking`` are computed here from the labels of the returned
list, in the order the search returned it; ``coverage`` and ``snippetQuality`` come from the list-level
judge call; ``overall`` stays the weighted mean of the four (``judge_runner.judging.scores.overall_score``).

Off-topic queries are scored on abstention, not on these dimensions: callers must not pass them here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

from judge_runner.core.models import DIMENSIONS

MAX_GRADE = 3


def _check(labels: Sequence[int]) -> list[int]:
    out = []
    for label in labels:
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label <= MAX_GRADE:
            raise ValueError(f"labels must be integers 0-{MAX_GRADE}, got {label!r}")
        out.append(label)
    return out


def relevance_score(labels: Sequence[int]) -> float:
    """Graded precision of the returned list: the mean of ``label / 3`` over every returned result,
    in [0, 1].

    This is generalised precision, gP = sum of r(d) over the returned documents / their number, with
    r(d) in [0, 1] the document's graded relevance (Kekäläinen & Järvelin 2002, "Using graded relevance
    assessments in IR evaluation", JASIST 53(13); Sakai's graded precision is the same quantity at a
    cutoff). It ignores order, so that ``relevance`` says how useful the returned set is and
    ``ranking`` says how well it is ordered. An empty list scores 0.0: for an answerable query,
    returning nothing served no need (off-topic queries never reach this function).

    Example: labels [3, 0, 2, 1] -> (1 + 0 + 2/3 + 1/3) / 4 = 0.5. Raises ValueError on a label outside 0-3.
    """
    labels = _check(labels)
    if not labels:
        return 0.0
    return round(sum(labels) / (MAX_GRADE * len(labels)), 6)


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulated gain, linear gain and log2 discount: sum of ``gain_i / log2(i + 1)`` for
    ranks i = 1..n (Järvelin & Kekäläinen 2002, "Cumulated gain-based evaluation of IR techniques",
    ACM TOIS 20(4), with the log2(i + 1) discount of trec_eval and ir-measures)."""
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ranking_score(labels: Sequence[int]) -> float:
    """How well the returned list is ordered: nDCG of the shown order against the ideal order of the
    SAME labels, ``dcg(labels) / dcg(sorted(labels, reverse=True))``, in [0, 1] (Järvelin &
    Kekäläinen 2002; linear gain, log2 discount, as in :func:`dcg`).

    Unlike nDCG@10 in the metrics, the ideal is built only from what was returned, so this measures
    order alone: a list whose labels never increase going down scores 1.0 however weak it is.

    A list with no label above 0 (and an empty list) scores **0.0**, not 1.0. Its nDCG is 0/0. A 1.0
    would be a free pass: a search returning ten irrelevant results would get a perfect ranking.
    Leaving the query out (None) would also reward it, since the run's mean ranking would then be taken
    over the queries the search did better on. 0.0 matches the anchor of the list-level rubric this
    replaces ("0: nothing is labelled 1 or above, there is nothing worth ordering"), so runs stay
    comparable.

    Example: [0, 3] -> (3 / log2 3) / 3 = 0.6309. Raises ValueError on a label outside 0-3.
    """
    labels = _check(labels)
    ideal = dcg(sorted(labels, reverse=True))
    if ideal == 0:
        return 0.0
    return round(dcg(labels) / ideal, 6)


def label_dimensions(labels: Sequence[int]) -> dict[str, float]:
    """``{"relevance": relevance_score(labels), "ranking": ranking_score(labels)}`` for the labels of
    the returned list in the search's order."""
    return {"relevance": relevance_score(labels), "ranking": ranking_score(labels)}


def median_label(trials: Sequence[int]) -> int:
    """The label used when a result was labelled in several trials: the median, and with an even
    number of trials the LOWER middle label (:func:`statistics.median_low`), so a split vote never
    raises a label. Raises ValueError on an empty sequence or a label outside 0-3."""
    trials = _check(trials)
    if not trials:
        raise ValueError("at least one trial label is needed")
    return int(statistics.median_low(trials))


def label_spread(trials: Sequence[int]) -> int:
    """A result's label spread over its trials: highest minus lowest label (0 when they all agree, or
    with one trial). Raises ValueError on an empty sequence or a label outside 0-3."""
    trials = _check(trials)
    if not trials:
        raise ValueError("at least one trial label is needed")
    return max(trials) - min(trials)


def expected_source_disagreements(labelled: Iterable[tuple[str, int]], expected_sources: Iterable[str]) -> list[str]:
    """The expected sources that the judge labelled 0 or 1 (issue 14, item 8): either the query's
    expected source is wrong or the judge is. ``labelled`` holds ``(source, label)`` per returned
    result; a source returned several times counts with its best label; an expected source that was not
    returned is not a disagreement (it was never judged). Sorted, each once."""
    best: dict[str, int] = {}
    for source, label in labelled:
        best[source] = max(best.get(source, 0), label)
    return sorted({s for s in expected_sources if s in best and best[s] <= 1})


def labels_from_trials(per_result: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """``(labels, spreads)`` for a query's results: each result's :func:`median_label` and
    :func:`label_spread` over its trials. ``per_result[k]`` holds the k-th result's label in every
    trial that produced one. Raises ValueError when a result has no label."""
    return [median_label(t) for t in per_result], [label_spread(t) for t in per_result]


def query_scores(
    labels: Sequence[int],
    list_scores: Mapping[str, float],
    holistic: Mapping[str, float] | None = None,
    weights: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The ``scores`` block of an on-topic query's evaluation line under the label-first protocol:
    ``relevance`` and ``ranking`` from :func:`label_dimensions`, ``coverage`` and ``snippetQuality``
    from the list-level verdict (``list_scores``), ``overall`` = their weighted mean
    (``judge_runner.judging.scores.overall_score``; equal weights by default), and, when the list-level verdict gave them,
    its holistic figures as ``judgeRelevance``, ``judgeRanking`` and ``judgeOverall``. Raises ValueError
    on bad labels or weights, KeyError when ``list_scores`` lacks coverage or snippetQuality."""
    scores = {
        **label_dimensions(labels),
        "coverage": float(list_scores["coverage"]),
        "snippetQuality": float(list_scores["snippetQuality"]),
    }
    scores["overall"] = overall_score(scores, dict(weights) if weights else None)
    if holistic:
        for name in ("relevance", "ranking", "overall"):
            if name in holistic:
                scores["judge" + name[0].upper() + name[1:]] = float(holistic[name])
    return scores


DEFAULT_WEIGHTS = {d: 1.0 for d in DIMENSIONS}


def overall_score(scores: dict[str, float], weights: dict[str, float] | None = None) -> float:
    """Weighted mean of the four dimensions (equal weights by default). Raises ValueError when the
    weights are negative or sum to zero."""
    weights = weights or DEFAULT_WEIGHTS
    if any(weights.get(d, 0.0) < 0 for d in DIMENSIONS):
        raise ValueError("dimension weights must be >= 0")
    total = sum(weights.get(d, 0.0) for d in DIMENSIONS)
    if total <= 0:
        raise ValueError("dimension weights must not all be zero")
    return round(sum(scores[d] * weights.get(d, 0.0) for d in DIMENSIONS) / total, 6)
