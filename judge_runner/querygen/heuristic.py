"""The heuristic query writer (``--provider offline``): queries mined from the corpus itself.

Headings, Python names, config keys, tf-idf key phrases, a non-English heading and off-topic questions;
each query's expected source is the file it came from. Deterministic, no network. Sources are sampled
across folders, formats and languages, not in path order (docs/query-sets.md). It lives outside ``llm/``
because it reads the corpus.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from judge_runner.core.models import Query
from judge_runner.core.textproc import STOPWORDS
from judge_runner.corpus.chunk import chunk_text
from judge_runner.corpus.walk import DEFAULT_EXTENSIONS
from judge_runner.judging.fence import detect_instructions
from judge_runner.llm.errors import InvalidOutputError
from judge_runner.llm.registry import HEURISTIC_MODEL
from judge_runner.querygen.checks import HEADING_FILES_LIMIT, CorpusBM25, non_specific
from judge_runner.querygen.profile import NO_LANGUAGE, CorpusProfile, ProfiledFile, clean_heading, profile_corpus
from judge_runner.querygen.protocol import GenerationResult
from judge_runner.querygen.spread import allocate
from judge_runner.querygen.submitted import check_query_set, filter_queries

OFF_TOPIC = (
    "how long should sourdough bread proof overnight",
    "best hiking trails in patagonia in march",
    "who won the 1998 world cup final",
    "recipe for a vegetarian lasagna with spinach",
)
# Section headings that name no topic: a query made of them tests nothing.
_GENERIC_HEADINGS = frozenset(
    """context decision decisions summary symptoms components overview background notes status consequences
    alternatives options introduction references links todo faq appendix details steps prerequisites
    requirements usage examples example setup the short version why how what next steps open questions
    action items timeline impact root cause resolution defaults data""".split()
)
# Values of config files, not words anyone searches for ("true false" from a tsconfig.json).
_LITERALS = frozenset({"true", "false", "null", "none", "yes"})
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


def _is_topical(heading: str) -> bool:
    words = heading.lower().split()
    return len(heading) >= 6 and not all(w.strip(":?") in _GENERIC_HEADINGS for w in words)


@dataclass(frozen=True)
class Candidate:
    """A query the corpus suggests: its ``kind`` (query type), text, intent and the ``file`` it came from."""

    kind: str
    query: str
    intent: str
    file: ProfiledFile

    @property
    def order(self) -> str:
        """A hash of source and text: stable across runs, unrelated to path order."""
        return hashlib.sha256(f"{self.file.source}\0{self.query}".encode()).hexdigest()


def _candidates(profile: CorpusProfile) -> list[Candidate]:
    """Every candidate query of the corpus, in corpus order."""
    out: list[Candidate] = []
    for file in profile.files.values():
        text, ext = file.text, file.format
        if ext in ("md", "markdown", "txt"):
            # headings as the chunker sees them (fenced code is not a heading), last part of each path
            anchors = dict.fromkeys(c.anchor for c in chunk_text(text, "md") if c.anchor) if ext != "txt" else {}
            headings = [clean_heading(a.split(" > ")[-1]) for a in anchors]
            # a heading more than a few files carry names no one file: the review would flag it non-specific
            # and a heading addressed to the judge ("ignore previous instructions ...") is an attack, not a query
            headings = [
                h
                for h in headings
                if _is_topical(h) and len(profile.heading_files(h)) <= HEADING_FILES_LIMIT and not detect_instructions(h)
            ]
            if file.language not in ("en", NO_LANGUAGE):
                first = headings[0] if headings else text.strip().splitlines()[0][:80]
                out.append(Candidate("multilingual", first, f"Find the document about “{first}” (not in English).", file))
                continue
            for heading in headings[1:3] or headings[:1]:
                kind = "natural-language" if len(heading.split()) >= 4 else "conceptual"
                out.append(Candidate(kind, heading, f"Find the section “{heading}” and what it says.", file))
        elif ext == "py":
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                    out.append(Candidate("identifier", node.name, f"Find where `{node.name}` is defined.", file))
        elif ext in ("yaml", "yml", "json"):
            try:
                data = json.loads(text) if ext == "json" else next(iter(yaml.safe_load_all(text)), None)
            except Exception:
                continue
            if isinstance(data, dict):
                keys = [k for k in data if isinstance(k, str) and len(k) > 3 and k not in _GENERIC_KEYS and k[0].isalpha()]
                keys.sort(key=lambda k: ("_" not in k and "-" not in k and k.islower(), -len(k)))
                for key in keys[:2]:
                    out.append(Candidate("identifier", key, f"Find the configuration that sets `{key}`.", file))
    # key phrases: each document's two most distinctive terms (tf-idf over the corpus)
    words = {s: [w for w in re.findall(r"[^\W\d_]{4,}", f.text.lower()) if w not in STOPWORDS] for s, f in profile.files.items()}
    df = Counter(w for ws in words.values() for w in set(ws))
    n = len(profile.files)
    for source, file in profile.files.items():
        tf = Counter(words[source])
        # distinctive = repeated in this document, rare in the corpus
        terms = [t for t in tf if tf[t] >= 2 and df[t] <= max(2, n // 10) and t not in _LITERALS]
        scored = sorted(terms, key=lambda t: (-tf[t] * math.log(n / df[t]), t))[:2]
        if len(scored) == 2:
            out.append(Candidate("keyword", " ".join(scored), f"Find the document about {scored[0]} and {scored[1]}.", file))
    return out


def _share(counts: Counter[str], total: int) -> dict[str, float]:
    return {k: v / total for k, v in counts.items()} if total else {}


def propose_queries(root: Path, count: int, extensions: tuple[str, ...] = DEFAULT_EXTENSIONS, profile: CorpusProfile | None = None) -> dict:
    """Exactly ``count`` queries (``schemas/query_set.schema.json``) when the corpus offers enough: one
    off-topic when ``count >= 2`` (two from 12), the rest spread over the corpus, types balanced."""
    profile = profile or profile_corpus(Path(root), extensions)
    off_topic = 0 if count < 2 else (2 if count >= 12 else 1)
    slots = count - off_topic
    remaining = sorted(_candidates(profile), key=lambda c: c.order)
    files = profile.counts("folder")
    with_candidates = {c.file.folder for c in remaining}
    targets = allocate({f: n for f, n in files.items() if f in with_candidates}, slots)
    total = len(profile.files)
    format_share = _share(profile.counts("format"), total)
    language_share = _share(profile.counts("language"), total)
    used: dict[str, Counter[str]] = {k: Counter() for k in ("folder", "kind", "source", "subfolder", "format", "language")}
    used_queries: set[str] = set()
    chosen: list[dict] = []
    bm25 = CorpusBM25(profile)

    def below_share(c: Candidate) -> float:
        n = len(chosen) + 1
        return (format_share.get(c.file.format, 0) * n - used["format"][c.file.format]) + (
            language_share.get(c.file.language, 0) * n - used["language"][c.file.language]
        )

    try:
        while len(chosen) < slots and remaining:
            folders = {c.file.folder for c in remaining}
            short = [f for f in folders if used["folder"][f] < targets.get(f, 0)] or list(folders)
            folder = max(short, key=lambda f: (targets.get(f, 0) - used["folder"][f], files.get(f, 0), f))
            pool = [c for c in remaining if c.file.folder == folder]
            pick = min(
                pool,
                key=lambda c: (
                    used["kind"][c.kind],
                    used["source"][c.file.source],
                    used["subfolder"][c.file.subfolder],
                    -below_share(c),
                    c.order,
                ),
            )
            remaining.remove(pick)
            item = {"query": pick.query, "queryIntent": pick.intent, "queryType": pick.kind, "expectedSources": [pick.file.source]}
            if pick.query.lower() in used_queries or non_specific(Query(id="candidate", **item), profile, bm25) is not None:
                continue
            used_queries.add(pick.query.lower())
            for key, value in (
                ("folder", pick.file.folder),
                ("kind", pick.kind),
                ("source", pick.file.source),
                ("subfolder", pick.file.subfolder),
                ("format", pick.file.format),
                ("language", pick.file.language),
            ):
                used[key][value] += 1
            chosen.append(item)
    finally:
        bm25.close()
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
    return {"queries": [{"id": f"q{number:02d}", **item} for number, item in enumerate(chosen, start=1)]}


class HeuristicQueryWriter:
    """The offline :class:`~judge_runner.querygen.protocol.QueryWriter`: no network, no key, no cost."""

    name = "offline"
    model = HEURISTIC_MODEL
    heuristic = True

    def write_queries(
        self,
        root: Path,
        count: int,
        extensions: tuple[str, ...] = DEFAULT_EXTENSIONS,
        log: Callable[[str], None] = lambda message: None,
        profile: CorpusProfile | None = None,
    ) -> GenerationResult:
        """Raises InvalidOutputError when the set fails its schema (a bug of the heuristic)."""
        data = propose_queries(Path(root), count, extensions, profile)
        problems = check_query_set(data)
        if problems:
            raise InvalidOutputError("the offline generator produced an invalid query set: " + "; ".join(problems))
        kept, dropped = filter_queries(data, Path(root), extensions)
        for d in dropped:
            log(f"dropped query {d['id']}: {d['reason']}")
        return GenerationResult(kept, len(data["queries"]), dropped, self.model, 0.0, 0)
