"""The search contract (docs/design.md, "The search contract"), run over every backend of
tests/support/search_backends.py: SQLite, PostgreSQL (skipped, saying why, without a server), a command, an
HTTP endpoint and a TREC run, all over the sample knowledge base.

Each answers ``search(query, mode, limit)`` with a :class:`SearchAnswer` for the query and mode asked: at most
``limit`` documents, best first, ranked 1.., each once, each a document of the corpus (never a hidden one)
with the documented fields; the same ranking for the same query, a smaller limit a prefix of a larger one; what
the judge is shown of a document is its passages by the one rule (search/passages.py) whoever returned it; a
query that matches nothing, or is empty, is answered without error and not confidently (a TREC run refuses a
query it holds no line for, as documented); the built-in backends rank by the mode asked, an external system
gets the mode and the answer echoes it.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from judge_runner.core.models import SEARCH_MODES
from judge_runner.embed.hashing import HashEmbedder
from judge_runner.search.base import HitScores, SearchAnswer, SearchHit
from judge_runner.search.documents import FolderDocuments
from judge_runner.search.mapping import ExternalSearchError
from tests.support.search_backends import BACKENDS, FIXTURES, RUN_QUERIES, BackendCase

pytestmark = pytest.mark.hash_embedder

SEARCH_PACKAGE = Path(__file__).resolve().parents[2] / "judge_runner" / "search"
NONSENSE = "qzxvw plokijuh"
STORE = FolderDocuments(FIXTURES, HashEmbedder())  # under the embedder every backend of the run shares


@pytest.fixture(scope="module", params=BACKENDS, ids=[case.id for case in BACKENDS])
def opened(request, tmp_path_factory):
    """``(case, backend)``, each backend opened once for the module."""
    case: BackendCase = request.param
    with case.open(request, tmp_path_factory.mktemp(case.id)) as backend:
        yield case, backend


def check_answer(answer, query: str, mode: str, limit: int) -> None:
    assert isinstance(answer, SearchAnswer)
    assert answer.query == query and answer.mode == mode
    assert isinstance(answer.confident, bool) and answer.latencyMs >= 0
    assert len(answer.results) <= limit
    assert [h.rank for h in answer.results] == list(range(1, len(answer.results) + 1))
    sources = [h.source for h in answer.results]
    assert len(sources) == len(set(sources)), f"a document listed twice: {sources}"
    for hit in answer.results:
        assert isinstance(hit, SearchHit) and isinstance(hit.scores, HitScores)
        assert (FIXTURES / hit.source).is_file(), hit.source  # a document of the corpus, by its relative path
        assert not any(part.startswith(".") for part in Path(hit.source).parts), hit.source  # never a hidden file
        assert 1 <= hit.lineStart <= hit.lineEnd
        assert isinstance(hit.snippet, str) and math.isfinite(hit.score)
        assert set(hit.matchedBy) <= {"fts", "vector"}
    scores = [h.score for h in answer.results]
    assert scores == sorted(scores, reverse=True), f"not best first: {scores}"


def ranking(answer) -> list[str]:
    return [h.source for h in answer.results]


# -- the registry ---------------------------------------------------------------------------------------------
def backend_classes() -> set[str]:
    """``module:Class`` of every concrete search backend in judge_runner/search/: a class with a ``search``
    method of its own or inherited from a class of the package, which no other class there extends (a shared
    base such as ``ChunkSearch`` is not a backend itself), Protocols left out."""
    classes: dict[str, tuple[str, list[str], bool]] = {}
    for path in SEARCH_PACKAGE.glob("*.py"):
        module = f"judge_runner.search.{path.stem}"
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                bases = [getattr(b, "id", "") for b in node.bases]
                searches = any(isinstance(n, ast.FunctionDef) and n.name == "search" for n in node.body)
                classes[node.name] = (module, bases, searches)

    def has_search(name: str) -> bool:
        module_, bases, own = classes[name]
        return own or any(b in classes and has_search(b) for b in bases)

    extended = {b for _, bases, _ in classes.values() for b in bases}
    return {
        f"{module}:{name}"
        for name, (module, bases, _) in classes.items()
        if "Protocol" not in bases and name not in extended and has_search(name)
    }


def test_every_backend_of_the_package_is_under_the_contract():
    registered = {f"{case.cls.__module__}:{case.cls.__name__}" for case in BACKENDS}
    found = backend_classes()
    assert {"judge_runner.search.sqlite:SQLiteIndex", "judge_runner.search.trec_run:TrecRunSearch"} <= found
    assert found <= registered, f"backends without a case in tests/support/search_backends.py: {sorted(found - registered)}"


# -- the contract ---------------------------------------------------------------------------------------------
def test_an_answer_holds_documents_of_the_corpus_best_first_with_the_documented_fields(opened):
    case, backend = opened
    assert isinstance(backend, case.cls)
    for query in RUN_QUERIES:
        answer = backend.search(query, mode="hybrid", limit=10)
        check_answer(answer, query, "hybrid", 10)
        assert answer.results and answer.confident, query  # every one of these has answers in the corpus


@pytest.mark.parametrize("limit", [1, 3, 7])
def test_limit_is_honoured_and_a_smaller_limit_is_a_prefix_of_a_larger_one(opened, limit):
    case, backend = opened
    query = RUN_QUERIES[0]
    wide = ranking(backend.search(query, mode="hybrid", limit=20))
    answer = backend.search(query, mode="hybrid", limit=limit)
    check_answer(answer, query, "hybrid", limit)
    assert len(answer.results) == min(limit, len(wide))
    assert ranking(answer) == wide[:limit]


def test_the_same_query_gets_the_same_ranking(opened):
    case, backend = opened
    for query in RUN_QUERIES:
        first, again = backend.search(query, limit=10), backend.search(query, limit=10)
        assert [(h.source, h.anchor, h.lineStart, h.score) for h in first.results] == [
            (h.source, h.anchor, h.lineStart, h.score) for h in again.results
        ]


@pytest.mark.parametrize("intent", ["", "Wants the steps and the rollback of the procedure."], ids=["no-intent", "intent"])
def test_the_judge_is_shown_the_documents_passages_whoever_returned_it(opened, intent):
    case, backend = opened
    for query in RUN_QUERIES:
        answer = backend.search(query, limit=5, intent=intent)
        assert ranking(answer) == ranking(backend.search(query, limit=5)), "the intent never ranks"
        recorded = "" if case.id == "replay" else intent  # a replay shows the text recorded then (with no intent)
        for hit in answer.results:
            passages = STORE.passages(hit.source, query, recorded)
            assert passages is not None
            assert hit.textFrom == "document"
            assert hit.shown() == (passages.anchor, passages.text), (query, hit.source)


@pytest.mark.parametrize("query", [NONSENSE, ""], ids=["nonsense", "empty"])
def test_a_query_that_matches_nothing_is_answered_without_error_and_not_confidently(opened, query):
    case, backend = opened
    if not case.holds_every_query:
        with pytest.raises(ExternalSearchError) as refused:
            backend.search(query, limit=10)
        assert refused.value.kind == "search_no_ranking"  # not scored, never a zero (docs/external-search.md)
        return
    for mode in SEARCH_MODES:
        answer = backend.search(query, mode=mode, limit=10)
        check_answer(answer, answer.query, mode, 10)
        assert not answer.confident, (mode, ranking(answer))


@pytest.mark.parametrize("mode", SEARCH_MODES)
def test_each_mode_is_answered_as_documented(opened, mode):
    case, backend = opened
    query = RUN_QUERIES[0]
    answer = backend.search(query, mode=mode, limit=10)
    check_answer(answer, query, mode, 10)
    assert answer.results
    if not case.builtin:
        return  # the system gets the mode ({mode}, or "mode" in the request) and ranks as it will
    signals = {s for h in answer.results for s in h.matchedBy}
    if mode == "fts":
        assert signals == {"fts"} and all(h.scores.cosine is None and h.scores.bm25 is not None for h in answer.results)
    elif mode == "vector":
        assert signals == {"vector"} and all(h.scores.bm25 is None and h.scores.cosine is not None for h in answer.results)
    else:
        assert all(h.scores.rrf is not None for h in answer.results) and "fts" in signals
