"""The dimensions that are computed from per-result labels, and how trials become one label (issue 14,
items 2, 7 and 8; issue 21, item 1).

Labels are the judge's grades on the TREC/UMBRELA scale: 0 irrelevant, 1 related, 2 highly relevant,
3 perfectly relevant. ``relevance`` and ``ranking`` are computed here from the labels of the returned
list, in the order the search returned it; ``coverage`` and ``snippetQuality`` come from the list-level
judge call; ``overall`` stays the weighted mean of the four (``judge_runner.judging.scores.overall_score``).

``relevance`` (scoring version 2, :data:`SCORING_VERSION`) is the list's graded gain normalised by the
gain attainable for the query (:func:`relevance_score`), so a list that puts the one answer first scores
1 and one that buries it scores less; graded precision, the relevance of scoring version 1, is kept as
its own figure, ``gradedPrecision`` (:func:`graded_precision`).

Off-topic queries are scored on abstention, not on these dimensions: callers must not pass them here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

from judge_runner.core.models import DIMENSIONS

MAX_GRADE = 3
NEEDED_GAIN = MAX_GRADE + 1
"""The gain of a needed expected source (:func:`needed_sources`): one grade above the judge's top grade, as
the TREC Web Track's graded scale puts the page a query targets ("Nav", 4) above a key page ("Key", 3)
(Collins-Thompson et al., "TREC 2013 Web Track Overview", TREC 2013). A list that misses it can therefore
not match an attainable list that holds it, however many other results the judge labelled 3."""

SCORING_VERSION = 3
"""How labels become scores. 1: ``relevance`` was graded precision over every returned slot (a query with
one answer could not score above 1/limit). 2: ``relevance`` is :func:`relevance_score`, graded precision is
``gradedPrecision``. 3: the metrics, ``relevance`` and ``overall`` are computed against the pooled qrels (every
grade known for the query: every system's labels, the judgment cache's of the same judge, people's grades;
:mod:`judge_runner.judging.pooled`), and every reader re-scores a file of version 2 or later so. Recorded in
``run_start`` (``provenance.scoringVersion``; a file without it was scored under 1); ``trend`` never compares
scores of version 1 with later ones, only the IR metrics."""


def _check(labels: Sequence[int]) -> list[int]:
    out = []
    for label in labels:
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label <= MAX_GRADE:
            raise ValueError(f"labels must be integers 0-{MAX_GRADE}, got {label!r}")
        out.append(label)
    return out


def graded_precision(labels: Sequence[int]) -> float:
    """Graded precision of the returned list: the mean of ``label / 3`` over every returned result,
    in [0, 1] (the ``relevance`` of scoring version 1; the ``gradedPrecision`` score since version 2).

    This is generalised precision, gP = sum of r(d) over the returned documents / their number, with
    r(d) in [0, 1] the document's graded relevance (Kekäläinen & Järvelin 2002, "Using graded relevance
    assessments in IR evaluation", JASIST 53(13); Sakai's graded precision is the same quantity at a
    cutoff). It ignores order and counts every slot, so a query with one relevant document cannot
    score above 1 / the number of results: it says how full of useful results the list is, not how
    well the search served the query. An empty list scores 0.0.

    Example: labels [3, 0, 2, 1] -> (1 + 0 + 2/3 + 1/3) / 4 = 0.5. Raises ValueError on a label outside 0-3.
    """
    labels = _check(labels)
    if not labels:
        return 0.0
    return round(sum(labels) / (MAX_GRADE * len(labels)), 6)


def _best(labelled: Iterable[tuple[str, int]]) -> dict[str, int]:
    best: dict[str, int] = {}
    for source, label in labelled:
        best[source] = max(best.get(source, 0), label)
    return best


def needed_sources(labelled: Iterable[tuple[str, int]], expected_sources: Iterable[str]) -> list[str]:
    """The expected sources the query needs: every expected source, in order and once, except those the
    judge labelled 0 or 1 (:func:`expected_source_disagreements`: the judge says it does not answer,
    so it is not needed). An expected source that was not returned is needed: the query was written
    for it and nothing says otherwise. ``labelled``: ``(source, label)`` per returned result."""
    best = _best(labelled)
    return [s for s in dict.fromkeys(expected_sources) if best.get(s, MAX_GRADE) > 1]


def result_gains(labelled: Sequence[tuple[str, int]], expected_sources: Iterable[str] = ()) -> list[int]:
    """The gain of each returned result, in the list's order: its label, and :data:`NEEDED_GAIN` minus
    (3 - label) for the first result of a needed expected source (label 3 -> 4, 2 -> 3); a source
    returned again (another chunk) keeps its label. ``labelled``: ``(source, label)`` per result.
    Raises ValueError on a label outside 0-3."""
    _check([label for _, label in labelled])
    needed = set(needed_sources(labelled, expected_sources))
    gains, seen = [], set()
    for source, label in labelled:
        bonus = source in needed and source not in seen
        seen.add(source)
        gains.append(label + 1 if bonus else label)
    return gains


def attainable_gains(
    labelled: Sequence[tuple[str, int]],
    expected_sources: Iterable[str] = (),
    known: Mapping[str, int] | None = None,
    depth: int | None = None,
) -> list[int]:
    """The gains of the best list attainable for the query, best first, ``depth`` long at most (default:
    the list's length): the returned results' own gains (:func:`result_gains`), each needed expected
    source that was not returned at :data:`NEEDED_GAIN`, and each other document in ``known`` (``{source:
    label}`` known for the query from elsewhere: other systems, the calibration pool) that was not
    returned, at its label. An on-topic query is answerable, so when nothing reaches grade 3 one unseen
    grade-3 document is added: without it a list of merely related results would be its own ideal."""
    expected = list(dict.fromkeys(expected_sources))
    returned = {source for source, _ in labelled}
    pool = result_gains(labelled, expected)
    pool += [NEEDED_GAIN for s in needed_sources(labelled, expected) if s not in returned]
    pool += [int(g) for s, g in (known or {}).items() if s not in returned and s not in expected and int(g) > 0]
    if not any(g >= MAX_GRADE for g in pool):
        pool.append(MAX_GRADE)
    return sorted(pool, reverse=True)[: len(labelled) if depth is None else depth]


def relevance_score(
    labels: Sequence[int],
    sources: Sequence[str] | None = None,
    expected_sources: Iterable[str] = (),
    known: Mapping[str, int] | None = None,
    depth: int | None = None,
) -> float:
    """How well the returned list serves the query (scoring version 2): its discounted cumulated gain
    over the DCG of the best list attainable for the query, both at cut-off ``depth`` (the search limit;
    default the list's length), in [0, 1]. This is nDCG (Järvelin & Kekäläinen 2002, "Cumulated
    gain-based evaluation of IR techniques", ACM TOIS 20(4); linear gain, log2 discount, :func:`dcg`) with
    the ideal built from every gain known for the query (:func:`attainable_gains`), not only from the
    returned labels: the returned results, the needed expected sources at :data:`NEEDED_GAIN`, the
    labels in ``known``, and an unseen grade-3 document when nothing known reaches 3.

    So: the one answer at rank 1 of ten scores 1.0 (graded precision gave 0.1); at rank 10 it scores
    1 / log2(11) = 0.29; a list that misses a needed expected source scores below 1 even when every
    result it returned is labelled 3, since the attainable list holds that source at gain 4. Order
    matters here and in ``ranking``, which compares the order only with the list's own labels.

    ``labels``: the judge's 0-3 label per returned result in the search's order; ``sources``: each
    result's source (default: all distinct, none expected). An empty list scores 0.0. Raises ValueError
    on a label outside 0-3 or when ``sources`` and ``labels`` differ in length.
    Example: labels [0, 3], no expected sources -> (3 / log2 3) / 3 = 0.6309."""
    labels = _check(labels)
    if not labels:
        return 0.0
    if sources is None:
        sources = [f"\x00{i}" for i in range(len(labels))]
    if len(sources) != len(labels):
        raise ValueError("one source per label is required")
    labelled = list(zip(sources, labels))
    k = len(labels) if depth is None else max(1, depth)
    ideal = dcg(attainable_gains(labelled, expected_sources, known, k))
    return round(min(1.0, dcg(result_gains(labelled, expected_sources)[:k]) / ideal), 6)


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


def label_dimensions(
    labels: Sequence[int],
    sources: Sequence[str] | None = None,
    expected_sources: Iterable[str] = (),
    known: Mapping[str, int] | None = None,
    depth: int | None = None,
) -> dict[str, float]:
    """``{"relevance": relevance_score(...), "ranking": ranking_score(labels), "gradedPrecision":
    graded_precision(labels)}`` for the labels of the returned list in the search's order (arguments as
    :func:`relevance_score`)."""
    return {
        "relevance": relevance_score(labels, sources, expected_sources, known, depth),
        "ranking": ranking_score(labels),
        "gradedPrecision": graded_precision(labels),
    }


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
    best = _best(labelled)
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
    *,
    sources: Sequence[str] | None = None,
    expected_sources: Iterable[str] = (),
    known: Mapping[str, int] | None = None,
    depth: int | None = None,
) -> dict[str, float]:
    """The ``scores`` block of an on-topic query's evaluation line under the label-first protocol:
    ``relevance``, ``ranking`` and ``gradedPrecision`` from :func:`label_dimensions` (``sources``,
    ``expected_sources``, ``known`` and ``depth`` as :func:`relevance_score` takes them), ``coverage``
    and ``snippetQuality`` from the list-level verdict (``list_scores``), ``overall`` = the weighted mean
    of the four dimensions (``judge_runner.judging.scores.overall_score``; equal weights by default), and,
    when the list-level verdict gave them, its holistic figures as ``judgeRelevance``, ``judgeRanking``
    and ``judgeOverall``. Raises ValueError on bad labels or weights, KeyError when ``list_scores`` lacks
    coverage or snippetQuality."""
    scores = {
        **label_dimensions(labels, sources, expected_sources, known, depth),
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
