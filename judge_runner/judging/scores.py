"""The dimensions computed from the judge's 0-3 labels (TREC/UMBRELA scale), and how trials become one
label. ``coverage`` and ``snippetQuality`` come from the list-level call; off-topic queries are scored on
abstention and must not be passed here. See docs/judge-protocol.md, "From labels to scores".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

from judge_runner.core.models import DIMENSIONS

MAX_GRADE = 3
NEEDED_GAIN = MAX_GRADE + 1
"""The gain of a needed expected source: one above the top label, as the TREC Web Track puts "Nav" (4)
above "Key" (3) (Collins-Thompson et al., "TREC 2013 Web Track Overview")."""

SCORING_VERSION = 3
"""How labels become scores, recorded as ``run_start`` ``provenance.scoringVersion`` (absent: 1). 1:
``relevance`` was graded precision; 2: :func:`relevance_score`; 3: scored against the pooled qrels, and
readers re-score files of version 2 or later. Scores of version 1 are never compared with later ones."""


def _check(labels: Sequence[int]) -> list[int]:
    out = []
    for label in labels:
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label <= MAX_GRADE:
            raise ValueError(f"labels must be integers 0-{MAX_GRADE}, got {label!r}")
        out.append(label)
    return out


def graded_precision(labels: Sequence[int]) -> float:
    """The mean of ``label / 3`` over every returned result, in [0, 1]; 0.0 for an empty list. Generalised
    precision (Kekäläinen & Järvelin 2002, "Using graded relevance assessments in IR evaluation", JASIST
    53(13)). Raises ValueError on a label outside 0-3."""
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
    """The expected sources, in order and once, less those the judge labelled 0 or 1; one not returned is
    needed. ``labelled``: ``(source, label)`` per returned result."""
    best = _best(labelled)
    return [s for s in dict.fromkeys(expected_sources) if best.get(s, MAX_GRADE) > 1]


def result_gains(labelled: Sequence[tuple[str, int]], expected_sources: Iterable[str] = ()) -> list[int]:
    """Each result's gain in list order: its label, plus one for the first result of a needed expected
    source. Raises ValueError on a label outside 0-3."""
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
    """The gains of the best list attainable for the query, best first, at most ``depth`` (default: the
    list's length) long: the returned gains, needed expected sources not returned at :data:`NEEDED_GAIN`,
    and the other documents of ``known`` (``{source: label}``). When nothing reaches 3, one unseen grade-3
    document is added: an on-topic query has an answer."""
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
    """nDCG at ``depth`` (default: the list's length) with the ideal from :func:`attainable_gains`, in
    [0, 1]; 0.0 for an empty list. ``sources`` defaults to all distinct. Raises ValueError on a label
    outside 0-3 or when ``sources`` and ``labels`` differ in length.

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
    """Sum of ``gain_i / log2(i + 1)`` over ranks i = 1..n (Järvelin & Kekäläinen 2002, "Cumulated
    gain-based evaluation of IR techniques", ACM TOIS 20(4); the discount of trec_eval)."""
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ranking_score(labels: Sequence[int]) -> float:
    """nDCG of the shown order against the ideal order of the same labels, in [0, 1]: order alone.
    A list with no label above 0 scores 0.0, not a free 1.0. Raises ValueError on a label outside 0-3."""
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
    """``relevance``, ``ranking`` and ``gradedPrecision`` (arguments as :func:`relevance_score`)."""
    return {
        "relevance": relevance_score(labels, sources, expected_sources, known, depth),
        "ranking": ranking_score(labels),
        "gradedPrecision": graded_precision(labels),
    }


def median_label(trials: Sequence[int]) -> int:
    """The lower median of a result's trial labels, so a split vote never raises a label. Raises
    ValueError on an empty sequence or a label outside 0-3."""
    trials = _check(trials)
    if not trials:
        raise ValueError("at least one trial label is needed")
    return int(statistics.median_low(trials))


def label_spread(trials: Sequence[int]) -> int:
    """Highest minus lowest trial label. Raises ValueError on an empty sequence or a label outside 0-3."""
    trials = _check(trials)
    if not trials:
        raise ValueError("at least one trial label is needed")
    return max(trials) - min(trials)


def expected_source_disagreements(labelled: Iterable[tuple[str, int]], expected_sources: Iterable[str]) -> list[str]:
    """The returned expected sources whose best label is 0 or 1, sorted: the query or the judge is wrong."""
    best = _best(labelled)
    return sorted({s for s in expected_sources if s in best and best[s] <= 1})


def labels_from_trials(per_result: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """``(labels, spreads)``, one per result from its trial labels. Raises ValueError when a result has none."""
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
    """The ``scores`` block of an on-topic query's evaluation line, with the list-level verdict's holistic
    figures as ``judgeRelevance``, ``judgeRanking`` and ``judgeOverall``. Raises ValueError on bad labels
    or weights, KeyError when ``list_scores`` lacks coverage or snippetQuality."""
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
