"""One label per (query, document), whoever returned it: the judge is shown a document's
passages by one rule (judge_runner/search/passages.py), so the built-in search, a command, an HTTP search and
a TREC run that return the same document for the same query give the judge the same text, one
judgment-cache entry and one call. Before, the built-in path showed the chunk the engine matched and the
``--run`` path the chunk with most query terms: the same 8 queries gave different nDCG@10 on 4."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from judge_runner.corpus.chunk import Chunk
from judge_runner.embed.hashing import HashEmbedder
from judge_runner.judging.fence import render_document
from judge_runner.search.documents import FolderDocuments
from judge_runner.search.passages import GAP, SHOWN_TEXT_CAP, bm25_scores, select_passages
from tests.support.clitools import invoke, run_lines
from tests.support.fakes.fake_llm import FakeLLMServer, offered_tools
from tests.support.fakes.honest_judge import fenced_documents, query_of

pytestmark = pytest.mark.hash_embedder

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
HASH = {"JUDGE_RUNNER_EMBEDDER": "hash"}

# on-topic queries over fixtures/ whose answers are documents of several chunks (where the engine's
# matched chunk and the rule's passages differ), the config/settings.schema.json among them
QUERIES = [
    ("s1", "settings schema search limit"),
    ("s2", "drain a kubernetes node"),
    ("s3", "redis cache failover promote replica"),
    ("s4", "pgbouncer pool size"),
    ("s5", "reindex opensearch alias"),
    ("s6", "how do we rotate logs"),
    ("s7", "stale search results postmortem"),
    ("s8", "feature flags rollout"),
    ("s9", "local dev setup docker compose"),
    ("s10", "hybrid search decision"),
]


def intent_of(query: str) -> str:
    return f"Find what the notes say about {query}."


def shown_by_the_rule(source: str, query: str, intent: str) -> object:
    """What the judge is shown of ``source`` by the one rule, under the runs' (hashing) embedder."""
    return FolderDocuments(FIXTURES, HashEmbedder()).passages(source, query, intent)


def chunk(text: str, anchor: str | None = None, start: int = 1) -> Chunk:
    return Chunk(text, anchor, start, start + text.count("\n"))


# -- the rule -------------------------------------------------------------------------------------------------
def test_path_and_anchor_words_do_not_choose_the_passage():
    # regression: with path words counted, a query naming the file tied every chunk and the first (a bare
    # heading) won; the parents' headings in every anchor tie them the same way
    chunks = [
        chunk("## Compose sample application", "Compose sample application"),
        chunk("### Nginx with a Go backend\n\nThe proxy forwards to the backend." + " Filler." * 30, "Compose sample application > Nginx"),
        chunk("## Python/Flask application using a Redis database\n\nservices: redis and web.", "Compose sample application > Flask"),
    ]
    assert bm25_scores("flask redis", [c.text for c in chunks])[0] == 0.0
    shown = select_passages("flask redis", chunks, cap=300)
    assert shown.best == 2 and shown.anchor == "Compose sample application > Flask"
    assert shown.text.endswith("services: redis and web.") and "Flask" in shown.text


def test_the_best_chunks_fill_the_cap_and_are_shown_in_document_order_with_gaps_marked():
    filler = "Unrelated words about other things. " * 14  # ~500 characters
    chunks = [chunk(f"## Part {i}\n" + (f"The pool size of pgbouncer is set here. {filler}" if i in (1, 4) else filler)) for i in range(6)]
    shown = select_passages("pgbouncer pool size", chunks, cap=1200)
    assert shown.chunks == (1, 4) and shown.best == 1  # equal scores: the earlier chunk is the best
    parts = shown.text.split("\n\n")
    assert parts[0] == GAP and parts[2] == GAP and parts[4] == GAP  # before, between and after: chunks left out
    assert parts[1].startswith("## Part 1") and parts[3].startswith("## Part 4")
    assert len(shown.text) <= 1200
    # with more room the next chunks join, best first: without an embedder nothing ranks the rest, so in document order
    assert select_passages("pgbouncer pool size", chunks, cap=2000).chunks == (0, 1, 4)
    # without an embedder, a document holding none of the query's or the intent's words is shown from its start
    opening = select_passages("connection limits", chunks, cap=1200)
    assert opening.chunks == (0, 1) and opening.best == 0 and opening.text.endswith(GAP)


def test_a_document_that_fits_is_shown_whole_under_its_title_and_a_long_best_chunk_alone():
    small = [chunk("# Title\nintro", "Title"), chunk("## Steps\nrun the tool", "Title > Steps"), chunk("## Notes\nmore", "Title > Notes")]
    whole = select_passages("tool", small)
    assert whole.chunks == (0, 1, 2) and GAP not in whole.text and whole.anchor == "Title" and whole.best == 0
    assert whole.text == "# Title\nintro\n\n## Steps\nrun the tool\n\n## Notes\nmore"  # chunks without the query's words too
    long = [chunk("x " * 100), chunk("the tool " * 400), chunk("y " * 100)]
    alone = select_passages("tool", long, cap=SHOWN_TEXT_CAP)
    assert alone.chunks == (1,) and len(alone.text) > SHOWN_TEXT_CAP  # the fence cuts it, with its marker
    assert select_passages("tool", []) is None


class TopicEmbedder:
    """A stand-in for a sentence model: a text's vector counts the words of each topic it holds, so texts on
    one topic point one way whatever words they share."""

    kind, name, dimension = "test", "topic-test-embedder", 3
    TOPICS = (("drain", "evict", "workloads", "host", "maintenance"), ("cache", "redis", "memory"), ("backup", "snapshot", "restore"))

    def encode(self, texts, batch_size=32):
        rows = np.array([[sum(t.lower().count(w) for w in topic) for topic in self.TOPICS] for t in texts], dtype=np.float32) + 0.01
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


FILLER = "Nothing to see in this part of the document, only words about other things. " * 7  # ~540 characters


def test_the_intent_chooses_the_passage_when_the_query_shares_no_word_with_it():
    chunks = [chunk(f"## Part {i}\n{FILLER}") for i in range(5)]
    chunks[3] = chunk(f"## Pause\nPOST /admin/pause makes the indexer consumer finish its batch. {FILLER}")
    query = "stop the worker grabbing new work"
    assert bm25_scores(query, [c.text for c in chunks]) == [0.0] * 5
    assert select_passages(query, chunks, cap=1200).best == 0  # words alone: the document's start
    shown = select_passages(query, chunks, cap=1200, intent="Wants the way to pause the indexer consumer before maintenance.")
    assert shown.best == 3 and 3 in shown.chunks
    # the words every intent is written with are not evidence of anything
    stock = select_passages(query, chunks, cap=1200, intent="Wants to know which section a good answer shows.")
    assert stock.best == 0


def test_meaning_chooses_the_passage_when_no_word_is_shared_never_the_start_alone():
    chunks = [chunk(f"## Part {i}\n{FILLER}") for i in range(5)]
    chunks[4] = chunk(f"## Steps\nkubectl drain the node; the pods are evicted to other nodes. {FILLER}")
    shown = select_passages("move workloads off a host", chunks, cap=1200, intent="", embedder=TopicEmbedder())
    assert shown.best == 4 and shown.chunks[-1] == 4 and shown.anchor == chunks[4].anchor
    assert shown == select_passages("move workloads off a host", chunks, cap=1200, embedder=TopicEmbedder())  # deterministic


def test_the_rule_is_a_function_of_the_query_and_the_documents_chunks():
    store = FolderDocuments(FIXTURES)
    for source in ("config/settings.schema.json", "runbooks/redis-cache-failover.md", "guides/local-dev-setup.md"):
        first = store.passages(source, "settings schema search limit")
        assert first == FolderDocuments(FIXTURES).passages(source, "settings schema search limit")
        assert first == select_passages("settings schema search limit", store.chunks(source))


# -- the built-in search, judged directly and through its own TREC run ----------------------------------------
@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """fixtures/ indexed with the hash embedder, the query set, and the built-in search's TREC run of it."""
    work = tmp_path_factory.mktemp("onelabel")
    db = work / "index.sqlite"
    with pytest.MonkeyPatch.context() as mp:
        from judge_runner.embed.registry import SETTING_ENV as EMBEDDER_ENV

        mp.setenv(EMBEDDER_ENV, "hash")
        assert invoke(["index", str(FIXTURES), "--db", str(db)], HASH).exit_code == 0
        query_set = work / "qs.json"
        query_set.write_text(
            json.dumps({"queries": [{"id": i, "query": q, "queryIntent": intent_of(q), "queryType": "keyword"} for i, q in QUERIES]}),
            encoding="utf-8",
        )
        beir_queries = work / "queries.jsonl"
        beir_queries.write_text("".join(json.dumps({"_id": i, "text": q}) + "\n" for i, q in QUERIES), encoding="utf-8")
        run = work / "run.trec"
        result = invoke(["search", "--queries", str(beir_queries), "--trec-run", str(run), "--db", str(db), "--limit", "10"], HASH)
        assert result.exit_code == 0, result.output
    return db, query_set, run


def evaluate(args: list[str], out: Path, env: dict | None = None):
    result = invoke(["evaluate", *args, "--out-dir", str(out)], {**HASH, **(env or {})})
    assert result.exit_code == 0, result.output
    return run_lines(out)


def evaluations(lines, system=None):
    return {e["queryId"]: e for e in lines if e["type"] == "evaluation" and (system is None or e.get("system") == system)}


def test_the_builtin_search_and_its_trec_run_get_equal_labels_and_ndcg_on_every_query(built, tmp_path):
    db, query_set, run = built
    common = ["--queries", str(query_set), "--provider", "offline"]
    direct = evaluate([*common, "--db", str(db), "--search-mode", "hybrid", "--cache", str(tmp_path / "a.sqlite")], tmp_path / "direct")
    replay = evaluate(
        [
            *common,
            "--run",
            str(run),
            "--corpus",
            str(FIXTURES),
            "--db",
            str(tmp_path / "none.sqlite"),
            "--cache",
            str(tmp_path / "b.sqlite"),
        ],
        tmp_path / "replay",
    )
    a, b = evaluations(direct), evaluations(replay)
    assert set(a) == set(b) == {i for i, _ in QUERIES}
    for qid in a:
        assert [r["source"] for r in a[qid]["results"]] == [r["source"] for r in b[qid]["results"]]  # the same ranking
        assert [(r["relevance"], r["shownText"], r["shownFrom"]) for r in a[qid]["results"]] == [
            (r["relevance"], r["shownText"], r["shownFrom"]) for r in b[qid]["results"]
        ], qid
        assert a[qid]["metrics"]["nDCG@10"] == b[qid]["metrics"]["nDCG@10"], qid
    assert all(r["shownFrom"] == "document" for e in a.values() for r in e["results"])
    assert any(r["source"] == "config/settings.schema.json" for r in a["s1"]["results"])
    # multi-chunk documents are shown by their passages, not by the chunk the engine matched
    assert any(GAP in r["shownText"] for e in a.values() for r in e["results"])

    # a second run sharing the judgment cache judges nothing again
    shared = evaluate(
        [
            *common,
            "--run",
            str(run),
            "--corpus",
            str(FIXTURES),
            "--db",
            str(tmp_path / "none.sqlite"),
            "--cache",
            str(tmp_path / "a.sqlite"),
        ],
        tmp_path / "shared",
    )
    assert shared[-1]["labelsJudged"] == 0 and shared[-1]["labelsCached"] == sum(len(e["results"]) for e in a.values())


def label_requests(server: FakeLLMServer) -> list[tuple[str, str, str]]:
    """``(query, source, text)`` of every single-label request the fake model received."""
    out = []
    for request in server.requests:
        if "record_label" not in offered_tools(request.api, request.body):
            continue
        user = "\n".join(str(m.get("content")) for m in request.body.get("messages", []) if m.get("role") == "user")
        (doc,) = fenced_documents(user)
        out.append((query_of(user), doc["source"], doc["text"]))
    return out


def test_a_document_returned_by_the_builtin_search_and_by_a_trec_run_gets_one_call_and_one_label(built, tmp_path):
    db, query_set, run = built
    with FakeLLMServer() as llm:
        env = {"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": llm.openai_base_url}
        lines = evaluate(
            ["--queries", str(query_set), "--provider", "openai", "--db", str(db), "--search-mode", "hybrid"]
            + ["--run", str(run), "--corpus", str(FIXTURES), "--cache", str(tmp_path / "c.sqlite")],
            tmp_path / "compare",
            env,
        )
        asked = label_requests(llm)
    builtin, replay = evaluations(lines, "hybrid"), evaluations(lines, "run:run")
    assert set(builtin) == set(replay) == {i for i, _ in QUERIES}
    pairs = {(q, r["source"]) for q, e in builtin.items() for r in e["results"]} | {
        (q, r["source"]) for q, e in replay.items() for r in e["results"]
    }
    # the request log: one label call per (query, document), whichever system returned it
    assert len(asked) == len({(q, s) for q, s, _ in asked}) == len(pairs)
    assert sum(e["labelsJudged"] for e in replay.values()) == 0
    assert sum(e["labelsCached"] for e in replay.values()) == sum(len(e["results"]) for e in replay.values())
    labels = defaultdict(set)
    for system in (builtin, replay):
        for qid, e in system.items():
            for r in e["results"]:
                labels[(qid, r["source"])].add((r["relevance"], r["shownText"]))
    assert all(len(v) == 1 for v in labels.values())
    assert ("s1", "config/settings.schema.json") in labels
    # the judge was shown the passages the store gives, word for word (as the fence renders them)
    for query, source, text in asked:
        shown = shown_by_the_rule(source, query, intent_of(query))
        assert text == render_document(source, shown.anchor, shown.text).body
    # snippet quality stays a property of each system: one list-level call per system and query
    lists = [r for r in llm.requests if "record_list_verdict" in offered_tools(r.api, r.body)]
    assert len(lists) == 2 * len(QUERIES)
    assert lines[-1]["comparison"]["judgedOnce"]["labelsCached"] == sum(len(e["results"]) for e in replay.values())


# -- external searches --------------------------------------------------------------------------------------
def command(results: list[dict]) -> str:
    return shlex.join([sys.executable, "-c", f"import json; print(json.dumps({results!r}))"])


def test_an_external_search_with_a_document_store_is_shown_the_stores_passages_not_its_own_text(built, tmp_path):
    db, query_set, _ = built
    source = "runbooks/redis-cache-failover.md"
    own = [{"source": source, "snippet": "Promote the replica (the system's own chunk).", "score": 2.0}]
    lines = evaluate(
        ["--queries", str(query_set), "--provider", "offline", "--search-command", command(own), "--corpus", str(FIXTURES)]
        + ["--db", str(db), "--no-cache"],
        tmp_path / "store",
    )
    for qid, e in evaluations(lines).items():
        (r,) = e["results"]
        query = dict(QUERIES)[qid]
        assert r["shownFrom"] == "document" and r["snippet"] == "Promote the replica (the system's own chunk)."
        shown = shown_by_the_rule(source, query, intent_of(query))
        assert r["shownText"] == render_document(source, shown.anchor, shown.text).body


def test_without_a_document_store_an_external_result_is_judged_on_its_whole_own_text(built, tmp_path):
    _, query_set, _ = built
    long_text = "Promote the replica. " + "The failover steps follow in detail. " * 40  # ~1,500 characters
    lines = evaluate(
        ["--queries", str(query_set), "--provider", "offline", "--search-command", command([{"source": "x.md", "text": long_text}])]
        + ["--db", str(tmp_path / "none.sqlite"), "--no-cache"],
        tmp_path / "own",
    )
    for e in evaluations(lines).values():
        (r,) = e["results"]
        assert r["shownFrom"] == "result" and r["shownText"] == long_text
        assert len(r["snippet"]) <= 400 < r["shownChars"]  # the snippet is a window; the judge reads it all


def test_a_copy_of_the_index_gives_the_same_text_as_the_folder(built, tmp_path):
    # the index holds the chunks the folder store makes: every result of every query, in every mode
    db, _, _ = built
    copy = tmp_path / "index.sqlite"
    shutil.copy(db, copy)
    from judge_runner.search.sqlite import SQLiteIndex

    store = FolderDocuments(FIXTURES, HashEmbedder())
    with SQLiteIndex(copy, embedder=HashEmbedder()) as index:
        for _, query in QUERIES:
            for mode in ("hybrid", "fts", "vector"):
                for hit in index.search(query, mode=mode, limit=10, intent=intent_of(query)).results:
                    shown = store.passages(hit.source, query, intent_of(query))
                    assert (hit.textFrom, hit.textAnchor, hit.text) == ("document", shown.anchor, shown.text), (query, hit.source)
                assert all(h.textFrom == "result" for h in index.search(query, mode=mode, limit=10, passages=False).results)
