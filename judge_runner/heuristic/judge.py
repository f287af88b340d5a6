"""The heuristic judge (``--provider offline``, phase two): a verdict from embeddings and term overlap.

Verdicts come from the cosine similarity of the injected embedder's vectors (all-MiniLM-L6-v2 in a real
run) of query and result, and the share of query terms the result contains. It is labelled as a
heuristic judge wherever its output appears (``heuristicJudge: true`` in the run file, "heuristic" on the
console), and its verdict passes the same validation as an LLM's (:func:`judge_runner.judge.verdict_problems`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from judge_runner.embedding import TextEmbedder
from judge_runner.heuristic import MODEL_NAME
from judge_runner.judge import SNIPPET_CHARS_SHOWN, JudgeOutcome, verdict_problems
from judge_runner.llm.errors import InvalidOutputError
from judge_runner.llm.pricing import Usage
from judge_runner.models import Query, Verdict
from judge_runner.search.base import SearchAnswer
from judge_runner.textproc import query_tokens

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


def judge_verdict(query: str, query_type: str, confident: bool, results: list[dict], embedder: TextEmbedder) -> dict:
    """A heuristic verdict (``schemas/judge_verdict.schema.json`` shape) for ``results``, each a dict
    with ``rank``, ``source``, ``anchor`` and ``snippet``.

    label = grade of ``0.6 * cosine(query, anchor + snippet) + 0.4 * share of query terms present``;
    relevance = DCG-weighted mean grade / 3; ranking = nDCG of the shown order against the ideal order
    of the same labels; coverage = share of query terms found in the top 5 (blended with the best
    grade); snippetQuality = mean over the top 3 of the snippet's own term overlap and cosine.
    """
    tokens = query_tokens(query)
    n = len(results)
    if n == 0:
        on_topic = query_type != "off-topic"
        value = 0.0 if on_topic else 1.0
        return {
            "labels": [],
            "analysis": {d: ("No results for an on-topic query." if on_topic else "No results: correct for an off-topic query.") + " (heuristic)" for d in ("relevance", "ranking", "coverage", "snippetQuality")},
            "scores": {"relevance": value, "ranking": value, "coverage": value, "snippetQuality": value, "overall": value},
            "suggestions": ["Return results for on-topic queries"] if on_topic else [],
        }
    texts = [f"{r.get('anchor') or ''}\n{r['snippet']}" for r in results]
    vectors = embedder.encode([query] + texts + [r["snippet"] for r in results])
    q, docs, snippets = vectors[0], vectors[1 : n + 1], vectors[n + 1 :]
    cosines = [float(np.dot(q, d)) for d in docs]
    labels, grades = [], []
    for r, text, cos in zip(results, texts, cosines):
        combined = 0.6 * cos + 0.4 * _overlap(tokens, text + " " + r["source"])
        grade = next((g for threshold, g in GRADE_THRESHOLDS if combined >= threshold), 0)
        grades.append(grade)
        labels.append({"rank": r["rank"], "relevance": grade, "reason": f"heuristic: cosine {cos:.2f}, term overlap {_overlap(tokens, text):.2f}"})
    gains = [g / 3 for g in grades]
    relevance = _dcg(gains) / _dcg([1.0] * n)
    ideal = _dcg(sorted(gains, reverse=True))
    ranking = _dcg(gains) / ideal if ideal > 0 else 0.0
    top_text = " ".join(texts[:5])
    coverage = 0.5 * _overlap(tokens, top_text) + 0.5 * (max(grades) / 3)
    snippet_quality = sum(0.5 * _overlap(tokens, r["snippet"]) + 0.5 * min(1.0, max(0.0, float(np.dot(q, s))) / 0.6)
                          for r, s in zip(results[:3], snippets[:3])) / min(3, n)
    suggestions = []
    if query_type == "off-topic":
        value = 0.5 if not confident else 0.0
        relevance = ranking = coverage = snippet_quality = value
        labels = [{**label, "relevance": 0, "reason": "off-topic query: " + label["reason"]} for label in labels]
        if confident:
            suggestions.append("Return no results or confident: false when no result clears a relevance threshold")
    else:
        if max(grades) < 2:
            suggestions.append(f"Improve recall for {query_type} queries")
        elif grades[0] < max(grades):
            suggestions.append("Rank the best-matching document first")
        if snippet_quality < 0.4:
            suggestions.append("Centre snippets on the matching lines")
    scores = {"relevance": relevance, "ranking": ranking, "coverage": coverage, "snippetQuality": snippet_quality}
    scores = {k: round(min(1.0, max(0.0, v)), 4) for k, v in scores.items()}
    scores["overall"] = round(sum(scores.values()) / 4, 4)
    best = max(range(n), key=lambda i: grades[i])
    analysis = {
        "relevance": f"Heuristic: {sum(1 for g in grades if g >= 2)} of {n} results look relevant (grade >= 2).",
        "ranking": f"Heuristic: the best-looking result ({results[best]['source']}) is at rank {best + 1}.",
        "coverage": f"Heuristic: the top results contain {round(_overlap(tokens, top_text) * 100)}% of the query terms.",
        "snippetQuality": f"Heuristic: snippet quality {scores['snippetQuality']:.2f} from term overlap and similarity of the top 3.",
    }
    return {"labels": labels, "analysis": analysis, "scores": scores, "suggestions": suggestions}


class HeuristicJudge:
    """The offline :class:`~judge_runner.roles.Judge`: no network, no key, no cost. ``embedder`` is
    injected (``build_roles`` passes :func:`judge_runner.embedding.get_embedder`'s)."""

    name = "offline"
    model = MODEL_NAME
    heuristic = True

    def __init__(self, embedder: TextEmbedder):
        self.embedder = embedder

    def judge(self, query: Query, answer: SearchAnswer, log: Callable[[str], None] = lambda message: None) -> JudgeOutcome:
        """A validated verdict of :func:`judge_verdict` on the results as the judge is shown them
        (snippets cut at SNIPPET_CHARS_SHOWN). Free: zero usage and cost. Raises InvalidOutputError when
        the verdict fails validation (a bug of the heuristic)."""
        results = [{"rank": h.rank, "source": h.source, "anchor": h.anchor, "snippet": h.snippet[:SNIPPET_CHARS_SHOWN]} for h in answer.results]
        data = judge_verdict(query.query, query.queryType, answer.confident, results, self.embedder)
        problems = verdict_problems(data, len(results))
        if problems:
            raise InvalidOutputError("the offline judge produced an invalid verdict: " + "; ".join(problems))
        return JudgeOutcome(Verdict.model_validate(data), Usage(), 0.0, 0, [])
