"""What a run should work on first: the judges' suggestions tied to the dimensions they address, and the
recommended focus, the dimension with the most recoverable headroom. Relevance lost to the order counts as
``ranking`` (reordering recovers it), so a search that buries its answers is told to rank, not to retrieve.
See docs/run-file.md, ``recommendedFocus``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_runner.core.models import DIMENSIONS
from judge_runner.judging.scores import needed_sources, ranking_score, relevance_score

IMPROVE_RECALL = "Improve recall for this kind of query"
RANK_BEST_FIRST = "Rank the best-matching document first"
COLLAPSE_DUPLICATES = "Collapse duplicate results from the same document section"
CENTRE_SNIPPETS = "Centre snippets on the matching lines"

SUGGESTION_DIMENSIONS: dict[str, tuple[str, ...]] = {
    IMPROVE_RECALL: ("relevance", "coverage"),
    RANK_BEST_FIRST: ("ranking",),
    COLLAPSE_DUPLICATES: ("coverage",),
    CENTRE_SNIPPETS: ("snippetQuality",),
    "Return results for on-topic queries": ("relevance", "coverage"),
    # the forms the list-level prompt offers the LLM judge (prompts/judge_list_system.md)
    "Boost matches in titles and headings": ("ranking", "relevance"),
    "Add exact-match boosting for identifiers (function names, config keys, ticket ids)": ("relevance", "ranking"),
    "Index YAML/JSON keys as anchors": ("relevance", "snippetQuality"),
    "Chunk documents at heading boundaries": ("snippetQuality", "relevance"),
    "Add semantic retrieval for queries worded differently from the documents": ("relevance", "coverage"),
    "Use multilingual embeddings for cross-lingual retrieval": ("relevance", "coverage"),
    "Return no results or confident: false when no result clears a relevance threshold": (),  # abstention
}
"""The dimensions each known suggestion addresses; another wording is placed by :data:`KEYWORDS`."""

KEYWORDS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), dimension)
    for pattern, dimension in (
        (r"snippet|highlight|excerpt|preview", "snippetQuality"),
        (r"rank|\border|\bfirst\b|\bboost|\btop\b|position", "ranking"),
        (r"duplicate|collapse|diversi|companion|\bcover", "coverage"),
        (r"recall|retriev|semantic|embedding|synonym|\bindex|\bmatch|expan|\bfind\b|\bmissing", "relevance"),
    )
)

WEAK_GAIN = 0.05
"""A query is weak on a dimension when recovering it would raise its overall by at least this much."""

SHOWN_QUERIES = 5
WHAT = {
    "relevance": "answers known for the query are missing from the list",
    "ranking": "the best results were returned but not first",
    "coverage": "the judge found parts of the intent uncovered",
    "snippetQuality": "the judge found the snippets do not show the answer",
}


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s-]", "", text.lower())).strip()


_KNOWN = {_normalise(k): v for k, v in SUGGESTION_DIMENSIONS.items()}


def suggestion_dimensions(text: str) -> tuple[str, ...]:
    """The dimensions a suggestion addresses, by known wording (case and punctuation ignored), else by stem."""
    key = _normalise(text)
    if key in _KNOWN:
        return _KNOWN[key]
    found = {dimension for pattern, dimension in KEYWORDS if pattern.search(key)}
    return tuple(d for d in DIMENSIONS if d in found)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def recoverable_gains(
    evaluation: Mapping[str, Any], weights: Mapping[str, float] | None = None, depth: int | None = None
) -> dict[str, float] | None:
    """``{dimension: gain}`` in overall units for one on-topic ``evaluation`` line: ``ranking`` by
    reordering, ``relevance`` what is left after that, the others ``1 - score``; they add up to ``1 -
    overall``. None when the line lacks one of the four scores."""
    scores = evaluation.get("scores") or {}
    values = {d: _number(scores.get(d)) for d in DIMENSIONS}
    if any(v is None for v in values.values()):
        return None
    raw = {d: float(weights.get(d, 0.0)) if weights else 1.0 for d in DIMENSIONS}  # as overall_score weighs them
    total = sum(raw.values()) or 1.0
    w = {d: raw[d] / total for d in DIMENSIONS}
    results = evaluation.get("results") or []
    labels = [int(r.get("relevance") or 0) for r in results]
    sources = [str(r.get("source") or f"#{i}") for i, r in enumerate(results)]
    expected = list(evaluation.get("expectedSources") or [])
    needed = set(needed_sources(zip(sources, labels), expected))
    order = sorted(range(len(labels)), key=lambda i: (-(labels[i] + (sources[i] in needed)), i))
    sorted_labels = [labels[i] for i in order]
    relevance_sorted = relevance_score(sorted_labels, [sources[i] for i in order], expected, depth=depth) if labels else 0.0
    ranking_sorted = ranking_score(sorted_labels)
    relevance, ranking = values["relevance"] or 0.0, values["ranking"] or 0.0
    return {
        "relevance": w["relevance"] * max(0.0, 1 - max(relevance, relevance_sorted)) + w["ranking"] * (1 - ranking_sorted),
        "ranking": w["ranking"] * max(0.0, ranking_sorted - ranking) + w["relevance"] * max(0.0, relevance_sorted - relevance),
        "coverage": w["coverage"] * (1 - (values["coverage"] or 0.0)),
        "snippetQuality": w["snippetQuality"] * (1 - (values["snippetQuality"] or 0.0)),
    }


@dataclass(frozen=True)
class Focus:
    """The recommended focus of a run or one system. ``dimension`` None: nothing is weak; ``headroom``: the
    mean :func:`recoverable_gains` per dimension; ``query_ids``: the weak queries, largest gain first."""

    dimension: str | None
    headroom: dict[str, float]
    query_ids: list[str]
    on_topic: int
    mean_overall: float
    suggestion: str | None = None
    suggestion_query_ids: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The summary's ``recommendedFocus``."""
        if self.dimension is None:
            return (
                f"nothing is weak: no on-topic query would gain {WEAK_GAIN:.2f} or more overall from any one dimension "
                f"(mean overall {self.mean_overall:.2f} over {self.on_topic} queries)"
            )
        ids = ", ".join(self.query_ids[:SHOWN_QUERIES]) + (
            f" and {len(self.query_ids) - SHOWN_QUERIES} more" if len(self.query_ids) > SHOWN_QUERIES else ""
        )
        text = (
            f"{self.dimension}: on {len(self.query_ids)} of {self.on_topic} on-topic queries {WHAT[self.dimension]} "
            f"({ids}); recovering it would raise the mean overall by {self.headroom[self.dimension]:.2f}"
        )
        if self.suggestion:
            return text + f"; suggestion made on {len(self.suggestion_query_ids)} of them: {self.suggestion}"
        return text + f"; no judge suggestion on them addresses {self.dimension}"

    def block(self) -> dict[str, Any]:
        """The summary's ``focusEvidence``."""
        return {
            "dimension": self.dimension,
            "headroom": {d: round(v, 6) for d, v in self.headroom.items()},
            "weakGain": WEAK_GAIN,
            "onTopicQueries": self.on_topic,
            "queryIds": list(self.query_ids),
            "suggestion": self.suggestion,
            "suggestionQueryIds": list(self.suggestion_query_ids),
        }


def recommended_focus(
    evaluations: Sequence[Mapping[str, Any]], weights: Mapping[str, float] | None = None, depth: int | None = None
) -> Focus | None:
    """The dimension with the largest mean recoverable gain among those with a weak query, and the judges'
    most frequent suggestion for it on those queries. None when no on-topic query has its four scores."""
    gains: dict[str, dict[str, float]] = {}
    lines: dict[str, Mapping[str, Any]] = {}
    overall: list[float] = []
    for ev in evaluations:
        if ev.get("queryType") == "off-topic":
            continue
        found = recoverable_gains(ev, weights, depth)
        if found is None:
            continue
        qid = str(ev.get("queryId"))
        key = qid if qid not in gains else f"{qid}#{len(gains)}"
        gains[key], lines[key] = found, ev
        overall.append(_number((ev.get("scores") or {}).get("overall")) or 0.0)
    if not gains:
        return None
    n = len(gains)
    headroom = {d: sum(g[d] for g in gains.values()) / n for d in DIMENSIONS}
    weak = {d: sorted((q for q in gains if gains[q][d] >= WEAK_GAIN - 1e-9), key=lambda q: (-gains[q][d], q)) for d in DIMENSIONS}
    candidates = [d for d in DIMENSIONS if weak[d]]
    mean_overall = sum(overall) / len(overall)
    if not candidates:
        return Focus(None, headroom, [], n, mean_overall)
    dimension = max(candidates, key=lambda d: (headroom[d], -DIMENSIONS.index(d)))
    counts: Counter[str] = Counter()
    wording: dict[str, Counter[str]] = {}
    on: dict[str, list[str]] = {}
    for q in weak[dimension]:
        for suggestion in dict.fromkeys(str(s).strip() for s in lines[q].get("suggestions") or []):
            if not suggestion or dimension not in suggestion_dimensions(suggestion):
                continue
            key = _normalise(suggestion)
            counts[key] += 1
            wording.setdefault(key, Counter())[suggestion] += 1
            on.setdefault(key, []).append(str(lines[q].get("queryId")))
    ids = [str(lines[q].get("queryId")) for q in weak[dimension]]
    if not counts:
        return Focus(dimension, headroom, ids, n, mean_overall)
    best = min(counts, key=lambda k: (-counts[k], k))
    return Focus(dimension, headroom, ids, n, mean_overall, wording[best].most_common(1)[0][0], on[best])
