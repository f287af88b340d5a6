"""The passage audit: by query type, how often the text the judge is shown of a query's expected source
holds that source's best-matching chunk (docs/judge-protocol.md, "What the judge sees of a document").

Two query sets, both deterministic:

- the hand-written set ``tests/data/passage_audit.jsonl`` (conceptual queries worded away from the
  document, and cross-language ones, which the offline writer cannot write): each names its source and an
  ``answer``, a phrase of the chunk that answers it (whitespace-normalised; it occurs in one chunk only);
- the offline writer's set for a corpus (:func:`judge_runner.querygen.heuristic.propose_queries`), whose
  best chunk follows from how each query was mined: the chunk under the heading it quotes, the chunk
  defining the identifier, for a key-phrase query the chunk holding its two terms most often.

Used by ``tests/search/test_passage_audit.py`` and ``benchmarks/passage_audit.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from judge_runner.corpus.chunk import Chunk
from judge_runner.querygen.heuristic import propose_queries
from judge_runner.querygen.profile import clean_heading
from judge_runner.search.documents import FolderDocuments
from judge_runner.search.passages import SHOWN_TEXT_CAP, Passages, join_chunks

ROOT = Path(__file__).resolve().parents[2]
HAND_WRITTEN = ROOT / "tests" / "data" / "passage_audit.jsonl"
CORPORA = {"fixtures": ROOT / "fixtures", "fixtures-kb": ROOT.parent / "shared" / "data" / "fixtures-kb"}

Rule = Callable[[str, str, Sequence[Chunk]], Passages | None]
"""What the judge is shown of a document: ``rule(query, intent, chunks)``."""


@dataclass(frozen=True)
class AuditCase:
    """One query and its expected source; ``answer``: a phrase of the best-matching chunk (hand-written),
    or None (the chunk is derived from how the offline writer mined the query)."""

    id: str
    corpus: str
    query: str
    intent: str
    type: str
    source: str
    answer: str | None = None


def _flat(text: str) -> str:
    return " ".join(text.split())


def hand_written(path: Path = HAND_WRITTEN) -> list[AuditCase]:
    """The hand-written cases."""
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            cases.append(AuditCase(d["id"], d["corpus"], d["query"], d["queryIntent"], d["queryType"], d["source"], d["answer"]))
    return cases


def generated(corpus: str, count: int) -> list[AuditCase]:
    """The offline writer's ``count`` queries on ``corpus`` (off-topic ones left out: they have no source)."""
    data = propose_queries(CORPORA[corpus], count)
    return [
        AuditCase(q["id"], corpus, q["query"], q["queryIntent"], q["queryType"], q["expectedSources"][0])
        for q in data["queries"]
        if q["expectedSources"]
    ]


def best_chunk(case: AuditCase, chunks: Sequence[Chunk]) -> int | None:
    """The position of ``case``'s best-matching chunk among its source's ``chunks`` (module docstring);
    None when it cannot be told."""
    if case.answer is not None:
        found = [i for i, c in enumerate(chunks) if _flat(case.answer) in _flat(c.text)]
        return found[0] if found else None
    headed = [i for i, c in enumerate(chunks) if c.anchor and clean_heading(c.anchor.split(" > ")[-1]) == case.query]
    if headed:
        return headed[0]
    if case.type == "identifier":
        name = re.escape(case.query)
        pattern = re.compile(rf"\b(?:def|class)\s+{name}\b|^\s*[\"']?{name}[\"']?\s*:", re.MULTILINE)
        defined = [i for i, c in enumerate(chunks) if pattern.search(c.text)]
        return defined[0] if defined else None
    if case.type == "keyword":
        terms = case.query.lower().split()
        counts = [sum(c.text.lower().count(t) for t in terms) for c in chunks]
        return counts.index(max(counts)) if counts and max(counts) > 0 else None
    if case.type == "multilingual" and chunks and _flat(case.query) in _flat(chunks[0].text):
        return 0  # the offline writer took the first line of a document without headings
    return None


@dataclass
class Tally:
    """Per query type: cases audited, cases whose shown text holds the best chunk, the same two over the
    cases whose source is longer than the shown-text cap (where the rule must choose), and the long cases
    where the rule ranked the best chunk first (its anchor is the one shown)."""

    cases: int = 0
    held: int = 0
    long_cases: int = 0
    long_held: int = 0
    long_first: int = 0


def audit(cases: Iterable[AuditCase], rule: Rule, stores: dict[str, FolderDocuments] | None = None) -> dict[str, Tally]:
    """``{query type: Tally}`` of ``cases`` under ``rule`` (plus ``"all"``); a case whose best chunk cannot
    be told is left out."""
    stores = stores if stores is not None else {}
    out: dict[str, Tally] = {}
    for case in cases:
        store = stores.get(case.corpus) or stores.setdefault(case.corpus, FolderDocuments(CORPORA[case.corpus]))
        chunks = store.chunks(case.source)
        best = best_chunk(case, chunks)
        if best is None:
            continue
        shown = rule(case.query, case.intent, chunks)
        held = shown is not None and best in shown.chunks
        long = len(join_chunks([c.text for c in chunks], range(len(chunks)))) > SHOWN_TEXT_CAP
        for key in (case.type, "all"):
            t = out.setdefault(key, Tally())
            t.cases += 1
            t.held += held
            t.long_cases += long
            t.long_held += held and long
            t.long_first += long and shown is not None and shown.best == best
    return out


def table(results: dict[str, Tally]) -> str:
    """``results`` as text: one line per query type, ``held/cases`` overall and on long documents, and the
    long documents whose best chunk the rule ranked first."""
    lines = [f"{'type':<17} {'held':>9} {'long: held':>11} {'first':>6}"]
    for name in sorted(results, key=lambda k: (k == "all", k)):
        t = results[name]
        lines.append(f"{name:<17} {t.held:>4}/{t.cases:<4} {t.long_held:>5}/{t.long_cases:<5} {t.long_first:>5}")
    return "\n".join(lines)
