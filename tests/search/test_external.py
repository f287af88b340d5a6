"""External search adapters: the field mapping, the document store, CommandSearch and
HttpSearch against the real bm25s engine (tests/support/engines/) and against commands that misbehave."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from judge_runner.search.documents import BeirDocuments, DocumentStoreError, FolderDocuments, open_documents
from judge_runner.search.external import CommandSearch, redact_command
from judge_runner.search.http_search import HttpSearch, parse_headers, public_url
from judge_runner.search.mapping import ExternalSearchError, FieldMapping, ReplyRules, map_hits
from tests.support.engines.bm25s_service import Bm25sService

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
BM25S = [sys.executable, str(ROOT / "tests" / "support" / "engines" / "bm25s_search.py"), "--corpus", str(FIXTURES)]


def py(code: str) -> str:
    """A command template running ``code`` with this Python (no shell)."""
    import shlex

    return shlex.join([sys.executable, "-c", code])


# -- mapping ---------------------------------------------------------------------------------------------
def test_field_mapping_parses_and_rejects_unknown_keys():
    mapping = FieldMapping.parse("id=doc_id, text=_source.body,score=_score")
    assert mapping.paths == {"id": "doc_id", "text": "_source.body", "score": "_score"}
    assert FieldMapping.parse({"id": "docno"}).paths == {"id": "docno"}
    with pytest.raises(ValueError, match="unknown search field 'body'"):
        FieldMapping.parse("body=text")
    with pytest.raises(ValueError, match="needs a key"):
        FieldMapping.parse("id=")


def test_map_hits_reads_nested_elasticsearch_shape():
    reply = {
        "hits": {
            "hits": [
                {"_id": "a.md", "_score": 3.5, "_source": {"body": "alpha beta gamma", "title": "A"}},
                {"_id": "b.md", "_score": 1.0, "_source": {"body": "beta"}},
            ]
        }
    }
    mapping = FieldMapping.parse("results=hits.hits,id=_id,text=_source.body,score=_score,anchor=_source.title")
    hits, notes = map_hits(reply, mapping, "beta", limit=10)
    assert notes == []
    assert [(h.rank, h.source, h.score, h.anchor, h.snippet) for h in hits] == [
        (1, "a.md", 3.5, "A", "alpha beta gamma"),
        (2, "b.md", 1.0, None, "beta"),
    ]


def test_map_hits_fetches_missing_text_from_the_fixtures():
    hits, _ = map_hits([{"id": "runbooks/opensearch-reindex.md"}], FieldMapping(), "reindex", 10, FolderDocuments(FIXTURES))
    assert hits[0].snippet and hits[0].lineEnd >= hits[0].lineStart >= 1
    assert hits[0].score == 1.0  # no score: 1 / rank


def test_map_hits_names_results_for_files_that_do_not_exist():
    with pytest.raises(ExternalSearchError, match=r"2 result\(s\) have no text.*'ghost\.md', '\.\./\.\./etc/passwd'") as caught:
        map_hits(
            [{"id": "ghost.md"}, {"id": "../../etc/passwd"}, {"id": "runbooks/opensearch-reindex.md"}],
            FieldMapping(),
            "q",
            10,
            FolderDocuments(FIXTURES),
        )
    assert caught.value.kind == "search_unknown_source"


@pytest.mark.parametrize(
    "reply, message",
    [
        ({"data": []}, "holds no list of results"),
        ([1, 2], "result 1 is not an object"),
        ([{"score": 1}], "result 1 has no document id"),
    ],
)
def test_map_hits_rejects_replies_that_are_not_results(reply, message):
    with pytest.raises(ExternalSearchError, match=message):
        map_hits(reply, FieldMapping(), "q", 10)


def test_beir_documents_and_open_documents(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "title": "Cats", "text": "Cats purr."}\nnot json\n', encoding="utf-8")
    store = open_documents(corpus)
    assert isinstance(store, BeirDocuments)
    shown = store.passages("d1", "purr")
    assert (shown.text, shown.anchor) == ("Cats purr.", "Cats")
    assert store.passages("d2", "x") is None
    with pytest.raises(DocumentStoreError, match="does not exist"):
        open_documents(tmp_path / "missing")


# -- command ---------------------------------------------------------------------------------------------
def test_command_search_runs_bm25s_with_the_query_as_one_argument():
    import shlex

    search = CommandSearch(shlex.join(BM25S + ["--limit", "{limit}", "{query}"]), documents=FolderDocuments(FIXTURES))
    answer = search.search("opensearch reindex; rm -rf / $(whoami)", limit=3)
    assert 1 <= len(answer.results) <= 3 and answer.results[0].source == "runbooks/opensearch-reindex.md"
    assert answer.confident and answer.results[0].snippet
    assert search.describe()["queryOn"] == "argument"


def test_command_search_sends_the_query_on_stdin_without_placeholder():
    import shlex

    search = CommandSearch(shlex.join(BM25S + ["--with-text"]), mapping=FieldMapping.parse("id=id,text=text"))
    answer = search.search("incident postmortem", limit=2)
    assert search.on_stdin and len(answer.results) == 2


@pytest.mark.parametrize(
    "code, kind, message",
    [
        ("import sys; sys.stderr.write('index is locked'); sys.exit(3)", "search_failed", "exited with status 3: index is locked"),
        ("print('<html>oops</html>')", "search_output", "invalid JSON"),
        ("pass", "search_output", "returned nothing"),
        ("import time; time.sleep(30)", "search_timeout", "did not finish within 0.5 s"),
    ],
)
def test_command_search_failures_are_clear(code, kind, message):
    started = time.monotonic()
    with pytest.raises(ExternalSearchError, match=message) as caught:
        CommandSearch(py(code), timeout=0.5).search("q")
    assert caught.value.kind == kind
    assert time.monotonic() - started < 10


def test_command_not_found():
    with pytest.raises(ExternalSearchError, match="could not be started"):
        CommandSearch("/no/such/search-binary {query}").search("q")


def test_command_empty_list_is_an_answer_without_results():
    answer = CommandSearch(py("print('[]')")).search("q")
    assert answer.results == [] and answer.confident is False


def test_redact_command_hides_secret_arguments():
    assert (
        redact_command(["s", "--api-key", "abc123", "--token=xyz", "--limit", "{limit}"])
        == "s --api-key '***' '--token=***' --limit '{limit}'"
    )


# -- HTTP ------------------------------------------------------------------------------------------------
def test_http_search_against_the_bm25s_service_with_a_token_from_env():
    secret = "s3cr3t-token-value"
    with Bm25sService(FIXTURES, token=secret) as service:
        headers = parse_headers(["Authorization=env:SEARCH_TOKEN"], environ={"SEARCH_TOKEN": f"Bearer {secret}"})
        search = HttpSearch(
            service.url, headers=headers, reply=ReplyRules(FieldMapping.parse("results=hits,id=doc_id,text=body,score=_score"))
        )
        answer = search.search("opensearch reindex", limit=4)
        assert answer.results[0].source == "runbooks/opensearch-reindex.md"
        assert service.requests[-1]["body"] == {"query": "opensearch reindex", "limit": 4, "mode": "hybrid"}
        assert secret not in json.dumps(search.describe())
        assert search.describe()["headers"] == ["Authorization"]


def test_http_search_retries_429_and_503_then_succeeds():
    with Bm25sService(FIXTURES, fail_first=[429, 503]) as service:
        search = HttpSearch(service.url, backoff=0.01, reply=ReplyRules(FieldMapping.parse("id=doc_id,text=body")))
        assert search.search("reindex", limit=2).results
        assert len(service.requests) == 3


def test_http_search_gives_up_and_never_leaks_the_token():
    secret = "Bearer leaky-token-123"
    with Bm25sService(FIXTURES, fail_first=[500] * 10) as service:
        search = HttpSearch(service.url + "?api_key=zzz", headers={"Authorization": secret}, max_retries=2, backoff=0.01)
        with pytest.raises(ExternalSearchError) as caught:
            search.search("q")
    assert caught.value.attempts == 3 and "HTTP 500" in str(caught.value)
    assert "leaky" not in str(caught.value) and "zzz" not in str(caught.value)


def test_http_search_401_is_not_retried():
    with Bm25sService(FIXTURES, token="t") as service:
        with pytest.raises(ExternalSearchError, match="HTTP 401"):
            HttpSearch(service.url, backoff=0.01).search("q")
        assert len(service.requests) == 1


def test_http_search_unreachable_and_timeout():
    import socket
    import threading

    with socket.socket() as sock:  # a port that accepts nothing: refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ExternalSearchError, match="could not be reached"):
        HttpSearch(f"http://127.0.0.1:{port}/s", max_retries=1, backoff=0.01).search("q")
    listener = socket.socket()  # accepts but never answers: timeout
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    threading.Thread(target=lambda: [listener.accept() for _ in range(3)], daemon=True).start()
    try:
        with pytest.raises(ExternalSearchError, match="did not answer within 0.3 s") as caught:
            HttpSearch(f"http://127.0.0.1:{listener.getsockname()[1]}/s", timeout=0.3, max_retries=1, backoff=0.01).search("q")
        assert caught.value.kind == "search_timeout"
    finally:
        listener.close()


def test_parse_headers_and_public_url():
    with pytest.raises(ValueError, match="SEARCH_TOKEN is not set") as caught:
        parse_headers(["Authorization=env:SEARCH_TOKEN"], environ={})
    assert "Authorization" in str(caught.value)
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_headers(["nonsense"])
    assert public_url("https://user:pw@host:8443/a/search?key=1#x") == "https://host:8443/a/search"
    with pytest.raises(ValueError, match="http"):
        HttpSearch("file:///etc/passwd")


def test_map_hits_collapses_repeated_documents_to_their_first_place_after_the_cut():
    reply = [
        {"id": "a", "text": "x", "score": 3},
        {"id": "a", "text": "y", "score": 2},
        {"id": "b", "text": "z", "score": 1},
        {"id": "c", "text": "w", "score": 0.5},
    ]
    hits, notes = map_hits(reply, FieldMapping(), "q", limit=3)
    assert [(h.rank, h.source, h.snippet) for h in hits] == [(1, "a", "x"), (2, "b", "z")]  # c was 4th: never read
    assert notes == [
        "1 of the first 3 results repeated a document listed before ('a' x2): each document is judged once, at its first "
        "place (2 documents judged); results after the first 3 are not read"
    ]
    _, shorter = map_hits(reply[:3], FieldMapping(), "q", limit=10)  # nothing was cut: the note says only the merge
    assert shorter == [
        "1 of the first 3 results repeated a document listed before ('a' x2): each document is judged once, at its first place (2 documents judged)"
    ]


def test_one_file_returned_ten_times_does_not_pull_the_eleventh_result_into_the_list():
    # regression: merged before the cut, the answer (11th) scored at rank 2, R@10 1.0, and nothing said so
    reply = [{"id": "noise.md", "text": f"noise part {i}", "score": 20 - i} for i in range(10)] + [
        {"id": "answer.md", "text": "the answer", "score": 1}
    ]
    hits, notes = map_hits(reply, FieldMapping(), "answer", limit=10)
    assert [h.source for h in hits] == ["noise.md"]
    assert "9 of the first 10 results repeated a document listed before ('noise.md' x10)" in notes[0]
