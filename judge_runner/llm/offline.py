"""The ``offline`` provider: deterministic, no network, a heuristic stand-in for an LLM.

It is the embedded default so judge-runner runs with no API key, and it is labelled as a heuristic
judge wherever its output appears (``heuristicJudge: true`` in the run file, "heuristic" on the
console). It is not a pretend LLM:

- queries come from the corpus itself: markdown headings, Python function and class names, top-level
  config keys, distinctive key phrases, a heading of a non-English document, and off-topic questions
  the corpus cannot answer; each query's expected source is the file it came from;
- verdicts come from the cosine similarity of all-MiniLM-L6-v2 embeddings of query and result, and the
  share of query terms the result contains. Its outputs pass through the same validation as an LLM's.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import yaml

from judge_runner.corpus.chunk import chunk_text
from judge_runner.corpus.read import BinaryContent, decode
from judge_runner.corpus.walk import DEFAULT_EXTENSIONS, walk_corpus
from judge_runner.search.embeddings import Embedder, shared_embedder
from judge_runner.search.text import STOPWORDS, query_tokens

MODEL_NAME = "offline-heuristic-v1"

OFF_TOPIC = (
    "how long should sourdough bread proof overnight",
    "best hiking trails in patagonia in march",
    "who won the 1998 world cup final",
    "recipe for a vegetarian lasagna with spinach",
)
# Grade thresholds on 0.6 * cosine + 0.4 * term overlap. Chosen by hand on the sample fixtures so that a
# document dedicated to the query scores 3 and a passing mention 1; a heuristic, not a calibrated judge.
GRADE_THRESHOLDS = ((0.62, 3), (0.48, 2), (0.34, 1))
_NON_ENGLISH_HINTS = re.compile(r"\b(der|die|und|nicht|mit|für|les|des|une|pour|avec|est)\b|[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]", re.I)
# Section headings that name no topic: a query made of them tests nothing.
_GENERIC_HEADINGS = frozenset(
    """context decision decisions summary symptoms components overview background notes status consequences
    alternatives options introduction references links todo faq appendix details steps prerequisites
    requirements usage examples example setup the short version why how what next steps open questions
    action items timeline impact root cause resolution defaults data""".split()
)
_GENERIC_KEYS = frozenset({"version", "name", "kind", "apiVersion", "metadata", "spec", "data", "defaults", "type",
                           "description", "title", "id", "items", "properties", "required", "services", "volumes"})


def _clean_heading(heading: str) -> str:
    """Strip list numbering and markdown emphasis from a heading ("1. Clone the repos" -> "Clone the repos")."""
    heading = re.sub(r"^(?:\d+[.)]|step \d+:?|day [\d–-]+:)\s*", "", heading.strip(), flags=re.I)
    return heading.replace("`", "").replace("*", "").strip()


def _is_topical(heading: str) -> bool:
    words = heading.lower().split()
    return len(heading) >= 6 and not all(w.strip(":?") in _GENERIC_HEADINGS for w in words)


def _candidates(root: Path, extensions: tuple[str, ...]) -> dict[str, list[tuple[str, str, str]]]:
    """``{queryType: [(query, intent, source), ...]}`` mined from the corpus, in corpus order."""
    out: dict[str, list[tuple[str, str, str]]] = {t: [] for t in ("keyword", "identifier", "natural-language", "conceptual", "multilingual")}
    docs: dict[str, str] = {}
    for file in walk_corpus(root, extensions=extensions).files:
        try:
            text = decode(file.path.read_bytes()).text
        except (OSError, BinaryContent):
            continue
        if not text.strip():
            continue
        docs[file.source] = text
        ext = file.source.rsplit(".", 1)[-1]
        non_english = len(_NON_ENGLISH_HINTS.findall(text[:3000])) >= 8
        if ext in ("md", "markdown", "txt"):
            # headings as the chunker sees them (fenced code is not a heading), last part of each path
            anchors = dict.fromkeys(c.anchor for c in chunk_text(text, "md") if c.anchor) if ext != "txt" else {}
            headings = [_clean_heading(a.split(" > ")[-1]) for a in anchors]
            headings = [h for h in headings if _is_topical(h)]
            if non_english:
                first = headings[0] if headings else text.strip().splitlines()[0][:80]
                out["multilingual"].append((first, f"Find the document about “{first}” (not in English).", file.source))
                continue
            for heading in headings[1:3] or headings[:1]:
                kind = "natural-language" if len(heading.split()) >= 4 else "conceptual"
                query = heading
                out[kind].append((query, f"Find the section “{heading}” of {file.source}.", file.source))
        elif ext == "py":
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                    out["identifier"].append((node.name, f"Find where `{node.name}` is defined.", file.source))
        elif ext in ("yaml", "yml", "json"):
            try:
                data = json.loads(text) if ext == "json" else next(iter(yaml.safe_load_all(text)), None)
            except Exception:
                continue
            if isinstance(data, dict):
                keys = [k for k in data if isinstance(k, str) and len(k) > 3 and k not in _GENERIC_KEYS and k[0].isalpha()]
                keys.sort(key=lambda k: ("_" not in k and "-" not in k and k.islower(), -len(k)))
                for key in keys[:2]:
                    out["identifier"].append((key, f"Find the configuration that sets `{key}`.", file.source))
    # key phrases: each document's two most distinctive terms (tf-idf over the corpus)
    words = {source: [w for w in re.findall(r"[^\W\d_]{4,}", text.lower()) if w not in STOPWORDS] for source, text in docs.items()}
    df = Counter(w for ws in words.values() for w in set(ws))
    for source in docs:
        tf = Counter(words[source])
        # distinctive = repeated in this document, rare in the corpus
        terms = [t for t in tf if tf[t] >= 2 and df[t] <= max(2, len(docs) // 10)]
        scored = sorted(terms, key=lambda t: (-tf[t] * math.log(len(docs) / df[t]), t))[:2]
        if len(scored) == 2:
            out["keyword"].append((" ".join(scored), f"Find the document about {scored[0]} and {scored[1]}.", source))
    return out


def propose_queries(root: Path, count: int, extensions: tuple[str, ...] = DEFAULT_EXTENSIONS) -> dict:
    """A query set of exactly ``count`` queries (``schemas/query_set.schema.json`` shape), types taken
    round-robin and sources spread over the corpus; one off-topic query when ``count >= 2`` (two when
    ``count >= 12``). Deterministic for a given corpus."""
    pools = _candidates(root, extensions)
    off_topic = 0 if count < 2 else (2 if count >= 12 else 1)
    order = ["identifier", "natural-language", "keyword", "conceptual", "multilingual"]
    used_sources: Counter[str] = Counter()
    used_queries: set[str] = set()
    chosen: list[dict] = []
    while len(chosen) < count - off_topic and any(pools[k] for k in order):
        for kind in order:
            if len(chosen) >= count - off_topic:
                break
            pool = pools[kind]
            # prefer the candidate whose source has been used least, then corpus order
            pool.sort(key=lambda c: used_sources[c[2]])
            while pool:
                query, intent, source = pool.pop(0)
                if query.lower() not in used_queries:
                    used_queries.add(query.lower())
                    used_sources[source] += 1
                    chosen.append({"query": query, "queryIntent": intent, "queryType": kind, "expectedSources": [source]})
                    break
    while len(chosen) < count:
        text = OFF_TOPIC[(len(chosen)) % len(OFF_TOPIC)]
        if text in used_queries:
            text = f"{text} ({len(chosen)})"
        used_queries.add(text)
        chosen.append({"query": text, "queryIntent": "Nothing in the knowledge base answers this; the search should abstain.",
                       "queryType": "off-topic", "expectedSources": []})
    for number, item in enumerate(chosen, start=1):
        item["id"] = f"q{number:02d}"
    return {"queries": [{"id": c["id"], **{k: v for k, v in c.items() if k != "id"}} for c in chosen]}


def _overlap(tokens: list[str], text: str) -> float:
    if not tokens:
        return 0.0
    have = set(query_tokens(text))
    return sum(1 for t in tokens if t in have) / len(tokens)


def _dcg(gains: list[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def judge_verdict(query: str, query_type: str, confident: bool, results: list[dict], embedder: Embedder | None = None) -> dict:
    """A heuristic verdict (``schemas/judge_verdict.schema.json`` shape) for ``results``, each a dict
    with ``rank``, ``source``, ``anchor`` and ``snippet``.

    label = grade of ``0.6 * cosine(query, anchor + snippet) + 0.4 * share of query terms present``;
    relevance = DCG-weighted mean grade / 3; ranking = nDCG of the shown order against the ideal order
    of the same labels; coverage = share of query terms found in the top 5 (blended with the best
    grade); snippetQuality = mean over the top 3 of the snippet's own term overlap and cosine.
    """
    embedder = embedder or shared_embedder()
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


class OfflineProvider:
    """The heuristic provider (``--provider offline``): no network, no key, no cost."""

    name = "offline"
    heuristic = True
    model = MODEL_NAME

    def __init__(self, embedder: Embedder | None = None):
        self.embedder = embedder

    def propose_queries(self, root: Path, count: int, extensions: tuple[str, ...] = DEFAULT_EXTENSIONS) -> dict:
        """See :func:`propose_queries`."""
        return propose_queries(root, count, extensions)

    def judge_verdict(self, query: str, query_type: str, confident: bool, results: list[dict]) -> dict:
        """See :func:`judge_verdict`."""
        return judge_verdict(query, query_type, confident, results, self.embedder)
