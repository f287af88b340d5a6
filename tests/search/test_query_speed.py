"""Query-side speed: phase two embeds its whole query set before judging
(:meth:`ChunkSearch.prepare_queries`, :func:`judge_runner.search.prepare.prepare_search`) with the very same
results, and the command line loads torch only for what needs the model."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from judge_runner.core.models import Query
from judge_runner.corpus.read import clean_text
from judge_runner.embed.hashing import HashEmbedder
from judge_runner.evaluation.context import QUIET, RunContext, RunOutput
from judge_runner.evaluation.loop import run_evaluation
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.judging.protocol import LabelReply
from judge_runner.runs.write import RunWriter, read_run
from judge_runner.search.sqlite import SQLiteIndex
from tests.support.loop_stubs import StubJudge
from tests.support.search_checks import QUERIES, answers, imported_after

ROOT = Path(__file__).resolve().parents[2]


class CountingEmbedder:
    """Wraps an embedder and records every ``encode`` call (the texts, the batch size, the thread)."""

    def __init__(self, inner):
        self.inner, self.name, self.dimension = inner, inner.name, inner.dimension
        self.calls: list[tuple[list[str], int, str]] = []

    def encode(self, texts, batch_size=32):
        self.calls.append((list(texts), batch_size, threading.current_thread().name))
        return self.inner.encode(texts, batch_size=batch_size)

    def query_calls(self, queries) -> list[list[str]]:
        """The calls that embedded one of ``queries`` (the others chose passages: a chunk's text or an intent)."""
        return [texts for texts, _, _ in self.calls if texts and texts[0] in set(queries)]


@pytest.fixture
def hash_index(hash_fixtures_db):
    embedder = CountingEmbedder(HashEmbedder())
    with SQLiteIndex(hash_fixtures_db, embedder=embedder, readonly=True) as index:
        yield index, embedder


def same_answers(got: list[dict], expected: list[dict], tolerance: float) -> None:
    """Equal answers, each score within ``tolerance`` (0: exactly equal)."""
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert [(h["source"], h["anchor"], h["lineStart"], h["matchedBy"], h["snippet"]) for h in g["results"]] == [
            (h["source"], h["anchor"], h["lineStart"], h["matchedBy"], h["snippet"]) for h in e["results"]
        ], e["query"]
        assert (g["query"], g["mode"], g["confident"]) == (e["query"], e["mode"], e["confident"])
        for gh, eh in zip(g["results"], e["results"]):
            for name in ("bm25", "cosine", "rrf"):
                a, b = gh["scores"][name], eh["scores"][name]
                assert (a is None) == (b is None) and (a is None or abs(a - b) <= tolerance), (e["query"], gh["source"], name, a, b)
            assert abs(gh["score"] - eh["score"]) <= tolerance
        if tolerance == 0:
            assert g == e


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
def test_prepared_minilm_search_gives_the_unprepared_results(fixtures_index, mode):
    """The real model, bit for bit: on a CPU with AVX-512 the rows of a padded batch are about 3e-7 away
    from a lone query's vector, enough to swap near-tied documents ("what is the capital of Australia",
    RRF 0.012346 vs 0.012658), so every query vector is computed alone."""
    index, _ = fixtures_index
    before = answers(index, QUERIES, mode)
    try:
        assert index.prepare_queries(QUERIES, mode) == len({clean_text(q) for q in QUERIES if q.strip()})
        same_answers(answers(index, QUERIES, mode), before, tolerance=0)
        index.forget_queries()
        # prepared in another company (reversed, half the set): still the same answers
        assert index.prepare_queries(QUERIES[::-2], mode) > 0
        same_answers(answers(index, QUERIES, mode), before, tolerance=0)
    finally:
        index.forget_queries()


class BatchNoiseEmbedder:
    """An embedder whose rows depend on their batch, as MKL's kernels on an AVX-512 CPU make MiniLM's
    (a vector differs with the batch's shape): each row gets noise of size ``1e-3`` seeded by the whole
    batch. Large enough to reorder near ties on any CPU, so the rule "a query's vector depends on the
    query alone" is tested everywhere, not only where the real kernels differ."""

    name, dimension = HashEmbedder.name, HashEmbedder().dimension

    def __init__(self):
        self.inner = HashEmbedder()

    def encode(self, texts, batch_size=32):
        vectors = self.inner.encode(texts).astype(np.float64)
        if len(texts) > 1:
            seed = int.from_bytes("\x1f".join(texts).encode("utf-8", "surrogatepass")[:8].ljust(8, b"\0"), "little") ^ len(texts)
            vectors += np.random.default_rng(seed).normal(scale=1e-3, size=vectors.shape)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors.astype(np.float32)


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
def test_a_query_answers_alike_whatever_it_was_prepared_with(hash_fixtures_db, mode):
    """A query's results are a function of the query and the index: prepared alone, with the whole set,
    with another subset or in another order, or not prepared at all, the answer is the same bit for bit."""
    with SQLiteIndex(hash_fixtures_db, embedder=BatchNoiseEmbedder(), readonly=True) as index:
        lone = answers(index, QUERIES, mode)
        for company in (QUERIES, QUERIES[::-1], QUERIES[1::3], QUERIES[:2]):
            index.prepare_queries(company, mode)
            same_answers(answers(index, QUERIES, mode), lone, tolerance=0)
            index.forget_queries()


def test_heuristic_labels_do_not_depend_on_the_other_documents(hash_fixtures_db):
    """The offline judge's label of a document is a function of (query, document): labelled alone
    (pointwise), in a batch of ten, or beside other neighbours, every grade and reason is the same,
    even with an embedder whose rows depend on their batch."""
    from judge_runner.judging.fence import render_document
    from judge_runner.judging.heuristic import heuristic_labels

    embedder = BatchNoiseEmbedder()
    with SQLiteIndex(hash_fixtures_db, embedder=HashEmbedder(), readonly=True) as index:
        hits = index.search("rotate the postgres credentials", mode="hybrid", limit=10).results
    documents = [render_document(h.source, h.anchor, h.snippet) for h in hits]
    query = "rotate the postgres credentials"
    alone = [heuristic_labels(query, [d], embedder)[0] for d in documents]
    assert heuristic_labels(query, documents, embedder) == alone
    assert heuristic_labels(query, documents[::-1], embedder) == alone[::-1]
    assert heuristic_labels(query, documents[3:7], embedder) == alone[3:7]


@pytest.mark.parametrize("mode", ["hybrid", "vector", "fts"])
def test_prepared_search_does_no_model_work(hash_index, mode):
    index, embedder = hash_index
    before = answers(index, QUERIES, mode)
    embedder.calls.clear()
    embedded = index.prepare_queries(QUERIES, mode)
    if mode == "fts":
        assert embedded == 0 and embedder.calls == []
    else:
        assert len(embedder.calls) == embedded, "one encode call per query: each is embedded alone"
        assert all(len(texts) == 1 and texts[0].strip() for texts, _, _ in embedder.calls)
    embedder.calls.clear()
    same_answers(answers(index, QUERIES, mode), before, tolerance=0)  # the hashing embedder is exact in any batch
    assert embedder.calls == [], "a prepared query is never embedded again"
    assert index.prepare_queries(QUERIES, mode) == 0, "a second preparation embeds nothing new"
    index.forget_queries()
    index.search("kubernetes", mode=mode)
    assert len(embedder.calls) == (0 if mode == "fts" else 1)


def test_given_query_vector_is_used_and_checked(hash_index):
    index, embedder = hash_index
    query = "drain a kubernetes node"
    vector = HashEmbedder().encode([query])[0]
    embedder.calls.clear()  # the search's own embedding, not the passages' (passages=False)
    given = answers(index, [query], "hybrid", query_vector=vector, passages=False)
    assert given == answers(index, [query], "hybrid", passages=False)[:1]
    assert len(embedder.calls) == 1, "only the search without a vector embedded"
    other = answers(index, [query], "vector", query_vector=HashEmbedder().encode(["pgbouncer connection pooling"])[0])
    assert other[0]["results"][0]["source"] == "runbooks/pgbouncer-connection-pooling.md", "the given vector is what ranks"
    with pytest.raises(ValueError, match="shape"):
        index.search(query, query_vector=np.zeros(3, dtype=np.float32))


def test_unknown_mode_is_refused_before_any_model_work(hash_index):
    index, embedder = hash_index
    embedder.calls.clear()
    with pytest.raises(ValueError, match="unknown search mode"):
        index.prepare_queries(["x"], "semantic")  # type: ignore[arg-type]
    assert embedder.calls == []


class FixedJudge(StubJudge):
    """The run loop's stub judge, labelling every document 2 whatever its source; judged like a model
    (the run loop gives a heuristic judge one worker)."""

    heuristic = False

    def label_one(self, query, intent, document, sampling, log=lambda m: None):
        return LabelReply(label=2, reason="stub")


def run_queries(n: int) -> list[Query]:
    words = ["kubernetes node drain", "pgbouncer pooling", "DEC-0054", "backup snapshots", "real-time indexing"]
    return [
        Query(id=f"q{i}", query=f"{words[i % len(words)]} {i}", queryIntent="i", queryType="keyword", expectedSources=[]) for i in range(n)
    ]


@pytest.mark.parametrize("concurrency", [1, 3, 9])
@pytest.mark.hash_embedder
def test_run_loop_embeds_the_queries_ahead_in_two_batches(hash_index, tmp_path, concurrency):
    """The run loop's main thread embeds the first ``concurrency`` queries before the first search and
    the rest once those are being judged, each query alone; no search of the run embeds (so no model
    work or embedder lock sits between judge calls)."""
    index, embedder = hash_index
    index.forget_queries()
    order: list[int] = []
    search = index.search
    texts = [q.query for q in run_queries(7)]

    def traced_search(query, mode="hybrid", limit=10, intent=""):
        order.append(len(embedder.query_calls(texts)))
        return search(query, mode=mode, limit=limit, intent=intent)

    index.search = traced_search  # type: ignore[method-assign]
    try:
        embedder.calls.clear()
        writer = RunWriter(tmp_path)
        qs = run_queries(7)
        ctx = RunContext(FixedJudge(), EvaluateOptions(concurrency=concurrency, judge_mode="batched"), output=QUIET)
        outcome = run_evaluation(qs, index, writer, {"config": {}}, ctx)
    finally:
        del index.search
        index.forget_queries()
    assert outcome.summary["evaluated"] == 7
    assert embedder.query_calls(texts) == [[t] for t in texts], "each query embedded alone, once, in order"
    assert {call[2] for call in embedder.calls} == {threading.main_thread().name}
    first = min(concurrency, 7)
    assert order == [first] * first + [7] * (7 - first), "each search after its batch was prepared; no search embedded"


class BrokenPreparation:
    """A built-in-like search whose preparation fails (a model that cannot load) but whose searches
    work: the run goes on, each query searched as before."""

    def __init__(self, index):
        self.index, self.prepared = index, 0

    def prepare_queries(self, queries, mode="hybrid"):
        self.prepared += 1
        raise RuntimeError("cannot load the embedding model")

    def search(self, query, mode="hybrid", limit=10, intent=""):
        return self.index.search(query, mode=mode, limit=limit)


@pytest.mark.hash_embedder
def test_a_failed_preparation_is_logged_and_the_run_goes_on(hash_index, tmp_path):
    index, _ = hash_index
    search = BrokenPreparation(index)
    logged: list[str] = []
    writer = RunWriter(tmp_path)
    ctx = RunContext(FixedJudge(), EvaluateOptions(), output=RunOutput(echo=lambda m: None, log=logged.append))
    outcome = run_evaluation(run_queries(3), search, writer, {"config": {}}, ctx)
    assert search.prepared == 1
    assert outcome.summary["evaluated"] == 3 and outcome.exit_code == 0
    assert any("could not embed the queries up front" in m and "cannot load the embedding model" in m for m in logged)
    assert [line["type"] for line in read_run(writer.path)].count("evaluation") == 3


def test_fts_search_from_the_shell_never_imports_torch(fixtures_index, tmp_path):
    """The session's MiniLM index: an fts search needs no vector, so no model and no torch."""
    index, _ = fixtures_index
    db = tmp_path / "index.sqlite"
    import sqlite3

    copy = sqlite3.connect(db)
    index.conn.backup(copy)
    copy.close()
    seen = imported_after(["search", "drain a kubernetes node", "--mode", "fts", "--db", str(db), "--json"])
    assert seen["code"] in (0, None) and not seen["torch"] and not seen["sentence_transformers"], seen


@pytest.mark.parametrize(
    "args",
    [["--help"], ["search", "--help"], ["trend", "--help"], ["report", "--help"], ["evaluate", "--help"], ["calibrate", "--help"]],
)
def test_startup_and_help_import_no_model_nor_statistics_stack(args):
    seen = imported_after(args)
    assert seen["code"] in (0, None), seen
    assert not any(seen[m] for m in ("torch", "sentence_transformers", "transformers", "scipy", "sklearn")), seen


def test_trend_and_report_import_no_model(tmp_path):
    """With real (older-format) run files to read, chart and bootstrap: statistics may load, torch never."""
    import shutil

    results = tmp_path / "quality-results"
    shutil.copytree(ROOT / "tests" / "data" / "runs-before-format-version", results)
    for args in (["trend", str(results)], ["report", str(results), "--out", str(tmp_path / "reports")]):
        seen = imported_after(args)
        assert seen["code"] in (0, 1, None), (args, seen)
        assert not seen["torch"] and not seen["sentence_transformers"], (args, seen)


def test_small_inputs_run_on_one_torch_thread(embedder, monkeypatch):
    """Queries (small inputs, and any lone text) are encoded on one intra-op thread, a large batch of
    passages with torch's setting, which is restored after each call."""
    torch = pytest.importorskip("torch")
    from judge_runner.embed.base import SMALL_INPUT_CHARS

    embedder.encode(["load the model"])
    seen: list[int] = []
    real = embedder._model.encode

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(embedder._model, "encode", recording)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        embedder.encode(["drain a kubernetes node", "rotate the postgres credentials"])
        embedder.encode(["word " * (SMALL_INPUT_CHARS // 5 + 1)])
        embedder.encode(["word " * (SMALL_INPUT_CHARS // 5 + 1), "another passage"])
        assert seen == [1, 1, 2] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)


def test_postgres_prepared_search_gives_the_same_results_without_model_work(postgres_dsn):
    """The PostgreSQL backend shares the preparation (ChunkSearch): same answers, no encode per search."""
    import uuid

    from judge_runner.search.indexer import index_tree
    from judge_runner.search.postgres import PostgresIndex
    from tests.support.pgcluster import drop_schema

    schema = f"jr_test_{uuid.uuid4().hex[:10]}"
    embedder = CountingEmbedder(HashEmbedder())
    try:
        with PostgresIndex(postgres_dsn, embedder=embedder, schema=schema) as index:
            index_tree(index, ROOT / "fixtures")
            index.commit()
            for mode in ("hybrid", "vector"):
                before = answers(index, QUERIES, mode)
                embedder.calls.clear()
                prepared = index.prepare_queries(QUERIES, mode)
                assert prepared > 0 and len(embedder.calls) == prepared
                same_answers(answers(index, QUERIES, mode), before, tolerance=0)
                assert len(embedder.calls) == prepared, "no search embedded its query"
                index.forget_queries()
    finally:
        drop_schema(postgres_dsn, schema)


@pytest.mark.hash_embedder
def test_the_start_estimate_embeds_the_set_once_and_the_run_embeds_nothing_more(hash_index, tmp_path):
    """The start-of-run estimate searches every query before the run: it embeds the whole set first (each
    query once, alone), and the run's own preparation then finds nothing left to embed."""
    from judge_runner.estimate.start import start_estimate

    index, embedder = hash_index
    index.forget_queries()
    embedder.calls.clear()
    qs = run_queries(7)
    options = EvaluateOptions(concurrency=3, judge_mode="batched")
    try:
        search, block = start_estimate(qs, index, FixedJudge(), options, None, price=None, budget_cap_usd=None)
        assert block is not None and block["calls"] > 0
        assert embedder.query_calls([q.query for q in qs]) == [[q.query] for q in qs], "each query embedded once, up front"
        outcome = run_evaluation(qs, search, RunWriter(tmp_path), {"config": {}}, RunContext(FixedJudge(), options, output=QUIET))
    finally:
        index.forget_queries()
    assert outcome.summary["evaluated"] == 7
    assert len(embedder.query_calls([q.query for q in qs])) == len(qs), "the run embedded the queries again"
