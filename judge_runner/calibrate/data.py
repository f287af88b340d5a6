"""A test collection for calibration: queries, human qrels and a corpus (BEIR layout or three files).

BEIR layout (Thakur et al. 2021): ``DIR/queries.jsonl`` (``{_id, text}``), ``DIR/corpus.jsonl``
(``{_id, title, text}``), ``DIR/qrels/<split>.tsv`` (a header line, then ``query-id corpus-id score``).
A ``--qrels`` file may also be TREC qrels (``qid 0 docid grade``, whitespace-separated).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from judge_runner.core.failures import UsageError

BINARY_RESCALE = {1: 3}
"""How binary human qrels (every grade 0 or 1) are put on the judge's 0-3 scale: 1 becomes 3, as
``judge-runner qrels import`` does by default (:func:`judge_runner.judging.qrels.import_human_qrels`), so that
RR(rel=2) and the ``>= 2`` agreement threshold mean "relevant" on both sides."""


@dataclass(frozen=True)
class CalibrationQuery:
    """One query of the collection: its id and text (the intent is unknown in a test collection)."""

    id: str
    text: str


@dataclass
class Collection:
    """Queries (``{qid: text}``), human qrels (``{qid: {docid: grade}}``, grades on 0-3 after rescaling
    binary qrels with :data:`BINARY_RESCALE`), the corpus file, and whether the original qrels were graded
    (some grade above 1)."""

    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    corpus_path: Path
    graded: bool
    name: str = "collection"
    _docs: dict[str, tuple[str, str]] | None = field(default=None, repr=False)

    def documents(self) -> dict[str, tuple[str, str]]:
        """``{docid: (title, text)}`` of the whole corpus, read once. Raises UsageError for a corpus with
        no readable record."""
        if self._docs is None:
            self._docs = read_corpus(self.corpus_path)
        return self._docs

    def grade(self, qid: str, docid: str) -> int:
        """The human grade of a pair; an unjudged document counts as 0 (as in TREC pooling)."""
        return self.qrels.get(qid, {}).get(docid, 0)


def read_corpus(path: Path) -> dict[str, tuple[str, str]]:
    """``{docid: (title, text)}`` from a BEIR ``corpus.jsonl``; bad lines are skipped. Raises UsageError
    when no record can be read."""
    docs: dict[str, tuple[str, str]] = {}
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
                docs[str(record["_id"])] = (str(record.get("title") or "").strip(), str(record.get("text") or "").strip())
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    if not docs:
        raise UsageError(f'{path} holds no BEIR corpus records ({{"_id", "title", "text"}} per line)')
    return docs


def read_queries(path: Path) -> dict[str, str]:
    """``{qid: text}`` from a JSON-lines ``{_id, text}`` file, or a TSV ``qid<TAB>text``. Raises UsageError
    naming the first bad line."""
    queries: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            if line.lstrip().startswith("{"):
                record = json.loads(line)
                queries[str(record["_id"])] = str(record["text"])
            else:
                qid, text = line.split("\t", 1)
                queries[qid.strip()] = text.strip()
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise UsageError(f'{path} line {number} is neither a {{"_id", "text"}} record nor qid<TAB>text') from None
    if not queries:
        raise UsageError(f"{path} holds no queries")
    return queries


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``{qid: {docid: grade}}`` from BEIR qrels TSV (``query-id corpus-id score`` with a header) or TREC
    qrels (``qid iter docid grade``). Raises UsageError naming the first bad line or a negative grade."""
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        parts = line.split()
        if not parts:
            continue
        if number == 1 and parts[-1].lower() in ("score", "relevance", "grade", "label"):
            continue  # BEIR header (query-id corpus-id score)
        try:
            if len(parts) == 3:
                qid, docid, grade = parts[0], parts[1], int(parts[2])
            elif len(parts) == 4:
                qid, docid, grade = parts[0], parts[2], int(parts[3])
            else:
                raise ValueError
        except ValueError:
            raise UsageError(f"{path} line {number} is not a qrels line (qid docid grade, or qid 0 docid grade)") from None
        if grade < 0:
            raise UsageError(f"{path} line {number}: negative grade {grade}")
        qrels.setdefault(qid, {})[docid] = grade
    if not qrels:
        raise UsageError(f"{path} holds no qrels")
    return qrels


def on_judge_scale(qrels: dict[str, dict[str, int]]) -> tuple[dict[str, dict[str, int]], bool]:
    """``(qrels on 0-3, graded)``: binary qrels rescaled with :data:`BINARY_RESCALE`; graded qrels kept, with
    grades above 3 capped at 3. ``graded`` is True when some original grade is above 1. Raises UsageError
    when no grade is positive (nothing to agree on)."""
    grades = {g for docs in qrels.values() for g in docs.values()}
    if not any(g > 0 for g in grades):
        raise UsageError("the qrels hold no positive grade: there is nothing to calibrate against")
    graded = max(grades) > 1
    if graded:
        return {q: {d: min(g, 3) for d, g in docs.items()} for q, docs in qrels.items()}, True
    return {q: {d: BINARY_RESCALE.get(g, g) for d, g in docs.items()} for q, docs in qrels.items()}, False


def load_beir(folder: Path, split: str = "test") -> Collection:
    """The BEIR collection in ``folder`` (split ``split``). Raises UsageError for missing files."""
    qrels_path = folder / "qrels" / f"{split}.tsv"
    for path in (folder / "queries.jsonl", folder / "corpus.jsonl", qrels_path):
        if not path.is_file():
            raise UsageError(f"{path} not found: --beir needs DIR/queries.jsonl, DIR/corpus.jsonl and DIR/qrels/{split}.tsv")
    return load_files(qrels_path, folder / "queries.jsonl", folder / "corpus.jsonl", name=f"{folder.name}/{split}")


def load_files(qrels_path: Path, queries_path: Path, corpus_path: Path, name: str | None = None) -> Collection:
    """A collection from three files. Queries without qrels are dropped; qrels of unknown queries are
    dropped. Raises UsageError when no query has qrels."""
    raw = read_qrels(qrels_path)
    queries = read_queries(queries_path)
    kept = {q: docs for q, docs in raw.items() if q in queries and any(g > 0 for g in docs.values())}
    if not kept:
        raise UsageError(f"no query of {queries_path} has a positive qrels line in {qrels_path}")
    qrels, graded = on_judge_scale(kept)
    return Collection({q: queries[q] for q in qrels}, qrels, corpus_path, graded, name or qrels_path.stem)


def sample_queries(collection: Collection, n: int | None, seed: int) -> list[CalibrationQuery]:
    """``n`` queries with qrels drawn without replacement with ``random.Random(seed)`` (all when ``n`` is
    None or at least the number available), in the collection's order."""
    ids = list(collection.qrels)
    if n is not None and n < len(ids):
        chosen = set(random.Random(seed).sample(ids, n))
        ids = [q for q in ids if q in chosen]
    return [CalibrationQuery(q, collection.queries[q]) for q in ids]


def restrict(collection: Collection, qids: Iterable[str]) -> Collection:
    """The collection with only these queries (same corpus)."""
    keep = set(qids)
    return Collection(
        {q: t for q, t in collection.queries.items() if q in keep},
        {q: d for q, d in collection.qrels.items() if q in keep},
        collection.corpus_path,
        collection.graded,
        collection.name,
        collection._docs,
    )
