"""The heuristic query writer (``--provider offline``, phase one): queries mined from the corpus itself.

Markdown headings, Python function and class names, top-level config keys, distinctive key phrases
(tf-idf), a heading of a non-English document, and off-topic questions the corpus cannot answer; each
query's expected source is the file it came from. Deterministic, no network. Its query set passes the
same schema check and source filter as an LLM's (:func:`judge_runner.querygen.agent.check_query_set`,
:func:`~judge_runner.querygen.agent.filter_queries`).

It lives outside ``llm/`` because it reads the corpus (:mod:`judge_runner.corpus`); the LLM layer never does.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import yaml

from judge_runner.core.textproc import STOPWORDS
from judge_runner.corpus.chunk import chunk_text
from judge_runner.corpus.read import BinaryContent, decode
from judge_runner.corpus.walk import DEFAULT_EXTENSIONS, walk_corpus
from judge_runner.llm.errors import InvalidOutputError
from judge_runner.llm.registry import HEURISTIC_MODEL
from judge_runner.querygen.agent import check_query_set, filter_queries
from judge_runner.querygen.protocol import GenerationResult

OFF_TOPIC = (
    "how long should sourdough bread proof overnight",
    "best hiking trails in patagonia in march",
    "who won the 1998 world cup final",
    "recipe for a vegetarian lasagna with spinach",
)
_NON_ENGLISH_HINTS = re.compile(
    r"\b(der|die|und|nicht|mit|für|les|des|une|pour|avec|est)\b|[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]", re.I
)
# Section headings that name no topic: a query made of them tests nothing.
_GENERIC_HEADINGS = frozenset(
    """context decision decisions summary symptoms components overview background notes status consequences
    alternatives options introduction references links todo faq appendix details steps prerequisites
    requirements usage examples example setup the short version why how what next steps open questions
    action items timeline impact root cause resolution defaults data""".split()
)
_GENERIC_KEYS = frozenset(
    {
        "version",
        "name",
        "kind",
        "apiVersion",
        "metadata",
        "spec",
        "data",
        "defaults",
        "type",
        "description",
        "title",
        "id",
        "items",
        "properties",
        "required",
        "services",
        "volumes",
    }
)


def _clean_heading(heading: str) -> str:
    """Strip list numbering and markdown emphasis from a heading ("1. Clone the repos" -> "Clone the repos")."""
    heading = re.sub(r"^(?:\d+[.)]|step \d+:?|day [\d–-]+:)\s*", "", heading.strip(), flags=re.I)
    return heading.replace("`", "").replace("*", "").strip()


def _is_topical(heading: str) -> bool:
    words = heading.lower().split()
    return len(heading) >= 6 and not all(w.strip(":?") in _GENERIC_HEADINGS for w in words)


def _candidates(root: Path, extensions: tuple[str, ...]) -> dict[str, list[tuple[str, str, str]]]:
    """``{queryType: [(query, intent, source), ...]}`` mined from the corpus, in corpus order."""
    out: dict[str, list[tuple[str, str, str]]] = {
        t: [] for t in ("keyword", "identifier", "natural-language", "conceptual", "multilingual")
    }
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
        chosen.append(
            {
                "query": text,
                "queryIntent": "Nothing in the knowledge base answers this; the search should abstain.",
                "queryType": "off-topic",
                "expectedSources": [],
            }
        )
    for number, item in enumerate(chosen, start=1):
        item["id"] = f"q{number:02d}"
    return {"queries": [{"id": c["id"], **{k: v for k, v in c.items() if k != "id"}} for c in chosen]}


class HeuristicQueryWriter:
    """The offline :class:`~judge_runner.app.roles.QueryWriter`: no network, no key, no cost."""

    name = "offline"
    model = HEURISTIC_MODEL
    heuristic = True

    def write_queries(
        self, root: Path, count: int, extensions: tuple[str, ...] = DEFAULT_EXTENSIONS, log: Callable[[str], None] = lambda message: None
    ) -> GenerationResult:
        """``count`` queries from :func:`propose_queries`, schema-checked and filtered like an LLM's.
        Raises InvalidOutputError when the set fails its schema (a bug of the heuristic)."""
        data = propose_queries(Path(root), count, extensions)
        problems = check_query_set(data)
        if problems:
            raise InvalidOutputError("the offline generator produced an invalid query set: " + "; ".join(problems))
        kept, dropped = filter_queries(data, Path(root), extensions)
        for d in dropped:
            log(f"dropped query {d['id']}: {d['reason']}")
        return GenerationResult(kept, len(data["queries"]), dropped, self.model, 0.0, 0)
