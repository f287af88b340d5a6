"""A test collection for calibration: queries, human qrels and a corpus, in BEIR's layout (Thakur et al. 2021:
``queries.jsonl``, ``corpus.jsonl``, ``qrels/<split>.tsv``) or three files. qrels (BEIR TSV or TREC) are read
and put on the judge's 0-3 scale as ``qrels import`` does (:func:`~judge_runner.judging.qrels.on_judge_scale`)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge_runner.core.failures import UsageError
from judge_runner.judging.qrels import QrelsError, on_judge_scale, read_trec_qrels


@dataclass(frozen=True)
class CalibrationQuery:
    """A query's id and text (a test collection has no intent)."""

    id: str
    text: str


@dataclass
class Collection:
    """Queries, human qrels on 0-3, the corpus file, ``graded`` (more than one positive grade in use), ``notes``
    on what loading dropped, and ``embedder``, under which the judge's passages are chosen (None: by words
    only)."""

    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    corpus_path: Path
    graded: bool
    name: str = "collection"
    notes: list[str] = field(default_factory=list)
    _docs: dict[str, tuple[str, str]] | None = field(default=None, repr=False)
    embedder: Any = field(default=None, repr=False, compare=False)

    def documents(self) -> dict[str, tuple[str, str]]:
        """``{docid: (title, text)}``, read once. Raises UsageError for a corpus with no readable record."""
        if self._docs is None:
            self._docs = read_corpus(self.corpus_path)
        return self._docs

    def grade(self, qid: str, docid: str) -> int:
        """An unjudged document counts 0, as in TREC pooling."""
        return self.qrels.get(qid, {}).get(docid, 0)


def read_corpus(path: Path) -> dict[str, tuple[str, str]]:
    """``{docid: (title, text)}`` from a BEIR ``corpus.jsonl``, bad lines skipped. Raises UsageError when no
    record can be read."""
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
    """``{qid: text}`` from ``{_id, text}`` JSON lines or ``qid<TAB>text``. Raises UsageError naming the first
    bad line."""
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


def read_qrels(path: Path, rescale: dict[int, int] | None = None) -> dict[str, dict[str, int]]:
    """``{qid: {docid: grade 0-3}}`` from BEIR or TREC qrels. Raises UsageError for a bad line, a pair graded
    twice, or a grade outside 0-3 (naming the ``--rescale`` that would place it)."""
    try:
        rows = on_judge_scale(read_trec_qrels(path), rescale, str(path))
    except QrelsError as exc:
        raise UsageError(str(exc)) from None
    qrels: dict[str, dict[str, int]] = {}
    for qid, docid, grade in rows:
        qrels.setdefault(qid, {})[docid] = grade
    return qrels


def is_graded(qrels: dict[str, dict[str, int]]) -> bool:
    """More than one positive grade in use (rescaled binary qrels use only 3)."""
    return len({g for docs in qrels.values() for g in docs.values() if g > 0}) > 1


def load_beir(folder: Path, split: str = "test", rescale: dict[int, int] | None = None) -> Collection:
    """Raises UsageError for missing files."""
    qrels_path = folder / "qrels" / f"{split}.tsv"
    for path in (folder / "queries.jsonl", folder / "corpus.jsonl", qrels_path):
        if not path.is_file():
            raise UsageError(f"{path} not found: --beir needs DIR/queries.jsonl, DIR/corpus.jsonl and DIR/qrels/{split}.tsv")
    return load_files(qrels_path, folder / "queries.jsonl", folder / "corpus.jsonl", name=f"{folder.name}/{split}", rescale=rescale)


def load_files(
    qrels_path: Path, queries_path: Path, corpus_path: Path, name: str | None = None, rescale: dict[int, int] | None = None
) -> Collection:
    """A collection from three files. Queries without a positive qrels line are dropped and qrels of unknown
    queries ignored, both said in ``notes``. Raises UsageError when no query has qrels, naming ids from both
    files."""
    qrels = read_qrels(qrels_path, rescale)
    queries = read_queries(queries_path)
    kept = {q: docs for q, docs in qrels.items() if q in queries and any(g > 0 for g in docs.values())}
    if not kept:
        raise UsageError(
            f"no query of {queries_path} has a positive qrels line in {qrels_path}: the qrels' query ids "
            f"({_some(qrels)}) and the queries' ({_some(queries)}) do not match"
        )
    notes = []
    unknown = [q for q in qrels if q not in queries]
    if unknown:
        notes.append(
            f"{len(unknown)} query id(s) of {qrels_path.name} are not in {queries_path.name} ({_some(unknown)}); their qrels are ignored"
        )
    without = [q for q in queries if q not in kept]
    if without:
        notes.append(
            f"{len(without)} of the {len(queries)} queries of {queries_path.name} have no positive qrels line ({_some(without)}); they are left out"
        )
    return Collection({q: queries[q] for q in kept}, kept, corpus_path, is_graded(kept), name or qrels_path.stem, notes)


def _some(ids: Iterable[str]) -> str:
    ids = list(ids)
    return ", ".join(ids[:3]) + (" ..." if len(ids) > 3 else "")


def sample_queries(collection: Collection, n: int | None, seed: int) -> list[CalibrationQuery]:
    """``n`` queries drawn without replacement (seeded; all when ``n`` is None or larger), in the collection's
    order."""
    ids = list(collection.qrels)
    if n is not None and n < len(ids):
        chosen = set(random.Random(seed).sample(ids, n))
        ids = [q for q in ids if q in chosen]
    return [CalibrationQuery(q, collection.queries[q]) for q in ids]


def restrict(collection: Collection, qids: Iterable[str]) -> Collection:
    keep = set(qids)
    return Collection(
        {q: t for q, t in collection.queries.items() if q in keep},
        {q: d for q, d in collection.qrels.items() if q in keep},
        collection.corpus_path,
        collection.graded,
        collection.name,
        collection.notes,
        collection._docs,
        collection.embedder,
    )
