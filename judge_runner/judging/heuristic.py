"""The offline judge (``--provider offline``): the same three calls as the LLM judge, answered from embedding
similarity and term overlap, with text addressed to the judge dropped first. Its runs say
``heuristicJudge: true``. See docs/providers.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from judge_runner.core.textproc import query_tokens
from judge_runner.embed.base import TextEmbedder, encode_each
from judge_runner.judging.advice import CENTRE_SNIPPETS, COLLAPSE_DUPLICATES, IMPROVE_RECALL, RANK_BEST_FIRST
from judge_runner.judging.fence import RenderedDocument, without_suspected_lines
from judge_runner.judging.protocol import LabelReply, ListVerdict
from judge_runner.judging.requests import ListItem
from judge_runner.llm.registry import HEURISTIC_MODEL

# Grade thresholds on 0.6 * cosine + 0.4 * term overlap. Chosen by hand on the sample fixtures so that a
# document dedicated to the query scores 3 and a passing mention 1; a heuristic, not a calibrated judge.
GRADE_THRESHOLDS = ((0.62, 3), (0.48, 2), (0.34, 1))


def _overlap(tokens: list[str], text: str) -> float:
    if not tokens:
        return 0.0
    have = set(query_tokens(text))
    return sum(1 for t in tokens if t in have) / len(tokens)


def _dcg(gains: list[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def _grade(combined: float) -> int:
    return next((g for threshold, g in GRADE_THRESHOLDS if combined >= threshold), 0)


def heuristic_labels(query: str, documents: Sequence[RenderedDocument], embedder: TextEmbedder) -> list[LabelReply]:
    """One label per document, each embedded alone: ``0.6 * cosine(query, anchor + text) + 0.4 * share of
    query terms`` against :data:`GRADE_THRESHOLDS`."""
    if not documents:
        return []
    tokens = query_tokens(query)
    clean = [without_suspected_lines(d) for d in documents]
    texts = [f"{d.anchor}\n{d.body}" for d in clean]
    vectors = encode_each(embedder, [query, *texts])  # each alone: a label never depends on its neighbours
    q = vectors[0]
    out = []
    for doc, text, vector in zip(clean, texts, vectors[1:]):
        cos = float(np.dot(q, vector))
        overlap = _overlap(tokens, text + " " + doc.source)
        out.append(
            LabelReply(
                label=_grade(0.6 * cos + 0.4 * overlap), reason=f"heuristic: cosine {cos:.2f}, term overlap {_overlap(tokens, text):.2f}"
            )
        )
    return out


LIST_VERSION = "heuristic-list-2"
"""Version of :func:`heuristic_list_verdict`, in its verdicts' cache key: bump on any change."""

SNIPPETS_SEEN = 5  # the results whose snippets a user reads before deciding: the first five
MISSING_EXPECTED_PENALTY = 0.25
"""Coverage lost when every expected source is missing, in proportion to the share missing: a hint, so a
quarter, not half."""


def heuristic_list_verdict(
    query: str, items: Sequence[ListItem], embedder: TextEmbedder, expected_sources: Sequence[str] = ()
) -> ListVerdict:
    """The list-level verdict on labelled results in search order, by the list-level rubric:

    - coverage = (term share of the top 5 snippets + best label / 3) / 2, times ``1 - 0.25 * share of
      expected sources missing``;
    - snippetQuality = the label-weighted mean over the top 5 of (term overlap + ``min(1, cosine / 0.6)``)
      / 2, unweighted when no label is above 0."""
    tokens = query_tokens(query)
    n = len(items)
    if n == 0:
        return ListVerdict(
            coverage=0.0,
            snippet_quality=0.0,
            holistic={"relevance": 0.0, "ranking": 0.0, "overall": 0.0},
            analysis={"coverage": "No results (heuristic).", "snippetQuality": "No snippets (heuristic)."},
            suggestions=["Return results for on-topic queries"],
        )
    snippets = [without_suspected_lines(i.snippet) for i in items]
    texts = [f"{s.anchor}\n{s.body}" for s in snippets]
    seen = snippets[:SNIPPETS_SEEN]
    vectors = encode_each(embedder, [query, *[s.body for s in seen]])
    grades = [i.label for i in items]
    top_text = " ".join(texts[:5])
    sources = [s.source for s in snippets]
    expected = list(dict.fromkeys(expected_sources))
    missing = [e for e in expected if e not in sources]
    coverage = (0.5 * _overlap(tokens, top_text) + 0.5 * (max(grades) / 3)) * (
        1 - MISSING_EXPECTED_PENALTY * (len(missing) / len(expected) if expected else 0.0)
    )
    quality = [
        0.5 * _overlap(tokens, s.body) + 0.5 * min(1.0, max(0.0, float(np.dot(vectors[0], v))) / 0.6) for s, v in zip(seen, vectors[1:])
    ]
    weights = [g / 3 for g in grades[: len(seen)]]
    if not any(weights):
        weights = [1.0] * len(seen)
    snippet_quality = sum(q * w for q, w in zip(quality, weights)) / sum(weights)
    gains = [g / 3 for g in grades]
    relevance = _dcg(gains) / _dcg([1.0] * n)
    ideal = _dcg(sorted(gains, reverse=True))
    ranking = _dcg(gains) / ideal if ideal > 0 else 0.0
    clip = lambda v: round(min(1.0, max(0.0, v)), 4)  # noqa: E731
    coverage, snippet_quality, relevance, ranking = clip(coverage), clip(snippet_quality), clip(relevance), clip(ranking)
    suggestions = []
    if max(grades) < 2 or missing:
        suggestions.append(IMPROVE_RECALL)
    if max(grades) >= 2 and grades[0] < max(grades):
        suggestions.append(RANK_BEST_FIRST)
    if len(set(sources)) < len(sources):
        suggestions.append(COLLAPSE_DUPLICATES)
    if snippet_quality < 0.4:
        suggestions.append(CENTRE_SNIPPETS)
    absent = f" Expected source(s) not in the list: {', '.join(missing)}." if missing else ""
    analysis = {
        "coverage": f"Heuristic: the top results contain {round(_overlap(tokens, top_text) * 100)}% of the query terms; best label {max(grades)}.{absent}",
        "snippetQuality": f"Heuristic: snippet quality {snippet_quality:.2f} from term overlap and similarity of the top {len(seen)}, weighted by label.",
    }
    holistic = {"relevance": relevance, "ranking": ranking, "overall": clip((relevance + ranking + coverage + snippet_quality) / 4)}
    return ListVerdict(coverage=coverage, snippet_quality=snippet_quality, holistic=holistic, analysis=analysis, suggestions=suggestions)


class HeuristicJudge:
    """The offline :class:`~judge_runner.judging.protocol.Judge`: no network, no cost, deterministic. The
    embedder's name is part of ``cache_model``, so two embedders' labels never share a cache entry."""

    name = "offline"
    model = HEURISTIC_MODEL
    heuristic = True
    list_version = LIST_VERSION

    def __init__(self, embedder: TextEmbedder):
        self.embedder = embedder
        self.cache_model = f"{HEURISTIC_MODEL}+{getattr(embedder, 'name', type(embedder).__name__)}"

    def label_one(
        self,
        query: str,
        intent: str,
        document: RenderedDocument,
        sampling: Mapping[str, Any],
        log: Callable[[str], None] = lambda message: None,
    ) -> LabelReply:
        return heuristic_labels(query, [document], self.embedder)[0]

    def label_batch(
        self,
        query: str,
        intent: str,
        documents: Sequence[RenderedDocument],
        order: Sequence[int],
        sampling: Mapping[str, Any],
        log: Callable[[str], None] = lambda message: None,
    ) -> list[LabelReply]:
        labels = heuristic_labels(query, documents, self.embedder)
        position = {original: shown for shown, original in enumerate(order)}
        return [LabelReply(label=r.label, reason=r.reason, shown_as=f"D{position[k] + 1}") for k, r in enumerate(labels)]

    def list_verdict(
        self,
        query: str,
        intent: str,
        expected_sources: Sequence[str],
        items: Sequence[ListItem],
        sampling: Mapping[str, Any],
        log: Callable[[str], None] = lambda message: None,
    ) -> ListVerdict:
        return heuristic_list_verdict(query, items, self.embedder, expected_sources)
