"""Every search backend (:class:`~judge_runner.search.base.SearchBackend`), built in one place over the sample
knowledge base for the search contract (tests/search/test_backend_contract.py). A new backend class in
judge_runner/search/ must get a case in :data:`BACKENDS`: the contract's completeness test fails until it has one.

The built-in backends index ``fixtures/`` with the hashing embedder (seconds, no MiniLM); the external ones run
the real bm25s engine of tests/support/engines/ over the same folder, as a command, as an HTTP service and as a
Python function; the TREC run is that engine's ranking of :data:`RUN_QUERIES`, written as a run file, and the
replay (``rejudge``'s search) answers with that function's answers to them, recorded.
"""

from __future__ import annotations

import shlex
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_runner.embed.hashing import HashEmbedder
from judge_runner.search.documents import FolderDocuments
from judge_runner.search.external import CommandSearch
from judge_runner.search.http_search import HttpSearch
from judge_runner.search.indexer import index_tree
from judge_runner.search.mapping import FieldMapping, ReplyRules
from judge_runner.search.postgres import PostgresIndex
from judge_runner.search.python_search import CallableSearch
from judge_runner.search.replay import ReplaySearch
from judge_runner.search.sqlite import SQLiteIndex
from judge_runner.search.trec import run_lines
from judge_runner.search.trec_run import TrecRunSearch
from tests.support.engines.bm25s_search import Engine
from tests.support.engines.bm25s_service import Bm25sService
from tests.support.pgcluster import drop_schema

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
BM25S = ROOT / "tests" / "support" / "engines" / "bm25s_search.py"
# the queries a TREC run holds lines for (its ids q1..); the contract asks these of every backend
RUN_QUERIES = ("drain a kubernetes node", "rotate the postgres credentials", "redis cache failover promote replica")


@dataclass(frozen=True)
class BackendCase:
    """One backend under the contract. ``cls``: the class it is (every backend class of judge_runner/search/
    must be the ``cls`` of a case); ``builtin``: it ranks by the mode asked (``fts``, ``vector``, ``hybrid``),
    where an external system is handed the mode and the answer only echoes it; ``holds_every_query``: it answers
    any query text (a TREC run answers only the queries it holds lines for); ``open(request, folder)``: a
    context manager giving the backend, ``request`` the pytest request (for fixtures such as ``postgres_dsn``)."""

    id: str
    cls: type
    builtin: bool
    holds_every_query: bool
    open: Callable[[Any, Path], Any]


@contextmanager
def _sqlite(request, folder: Path) -> Iterator[SQLiteIndex]:
    index = SQLiteIndex(folder / "index.sqlite", embedder=HashEmbedder())
    try:
        index_tree(index, FIXTURES)
        yield index
    finally:
        index.close()


@contextmanager
def _postgres(request, folder: Path) -> Iterator[PostgresIndex]:
    dsn = request.getfixturevalue("postgres_dsn")  # skips, saying why, without a server
    schema = f"jr_contract_{uuid.uuid4().hex[:8]}"
    index = PostgresIndex(dsn, embedder=HashEmbedder(), schema=schema)
    try:
        index_tree(index, FIXTURES)
        yield index
    finally:
        index.close()
        drop_schema(dsn, schema)


@contextmanager
def _command(request, folder: Path) -> Iterator[CommandSearch]:
    argv = [sys.executable, str(BM25S), "--corpus", str(FIXTURES), "--index-dir", str(folder / "bm25s"), "--limit", "{limit}", "{query}"]
    yield CommandSearch(shlex.join(argv), documents=FolderDocuments(FIXTURES, HashEmbedder()))


@contextmanager
def _http(request, folder: Path) -> Iterator[HttpSearch]:
    with Bm25sService(FIXTURES) as service:
        yield HttpSearch(
            service.url,
            reply=ReplyRules(
                FieldMapping.parse("results=hits,id=doc_id,text=body,score=_score"), FolderDocuments(FIXTURES, HashEmbedder())
            ),
        )


@contextmanager
def _trec_run(request, folder: Path) -> Iterator[TrecRunSearch]:
    engine = Engine(FIXTURES)
    path = folder / "bm25s.run"
    lines = []
    for n, query in enumerate(RUN_QUERIES, start=1):
        lines += run_lines(f"q{n}", [(docid, score) for docid, score, _ in engine.search(query, 50)], "bm25s")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    yield TrecRunSearch(path, FolderDocuments(FIXTURES, HashEmbedder()), {q: f"q{n}" for n, q in enumerate(RUN_QUERIES, start=1)})


def _engine_function() -> Callable[[str, int], list[dict]]:
    engine = Engine(FIXTURES)

    def bm25s_search(query: str, k: int) -> list[dict]:
        return [{"id": docid, "score": score} for docid, score, _ in engine.search(query, k)]

    return bm25s_search


@contextmanager
def _function(request, folder: Path) -> Iterator[CallableSearch]:
    yield CallableSearch(_engine_function(), documents=FolderDocuments(FIXTURES, HashEmbedder()))


@contextmanager
def _replay(request, folder: Path) -> Iterator[ReplaySearch]:
    recorder = CallableSearch(_engine_function(), documents=FolderDocuments(FIXTURES, HashEmbedder()))
    yield ReplaySearch({q: recorder.search(q, limit=50) for q in RUN_QUERIES}, "bm25s", recorder.describe())


BACKENDS: tuple[BackendCase, ...] = (
    BackendCase("sqlite", SQLiteIndex, builtin=True, holds_every_query=True, open=_sqlite),
    BackendCase("postgres", PostgresIndex, builtin=True, holds_every_query=True, open=_postgres),
    BackendCase("command", CommandSearch, builtin=False, holds_every_query=True, open=_command),
    BackendCase("http", HttpSearch, builtin=False, holds_every_query=True, open=_http),
    BackendCase("trec-run", TrecRunSearch, builtin=False, holds_every_query=False, open=_trec_run),
    BackendCase("python", CallableSearch, builtin=False, holds_every_query=True, open=_function),
    BackendCase("replay", ReplaySearch, builtin=False, holds_every_query=False, open=_replay),
)
