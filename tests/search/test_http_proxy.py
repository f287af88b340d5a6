"""The HTTP search behind a company proxy: loopback endpoints are reached directly whatever the proxy
variables say (with ``http_proxy`` set and no ``no_proxy``, a run against ``127.0.0.1`` used to go to the
proxy, answer 503 and blame the endpoint); other hosts go through the proxy as set, and a failure there
names the proxy, never its password."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from judge_runner.search.http_search import HttpSearch
from judge_runner.search.mapping import ExternalSearchError
from tests.support.clitools import invoke, run_lines
from tests.support.proxy import RecordingProxy, set_proxy_variables

pytestmark = pytest.mark.hash_embedder

ANSWER = "runbooks/opensearch-reindex.md"


@pytest.fixture
def endpoint():
    """A loopback search answering every POST with one result; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps([{"source": ANSWER, "text": "Reindex OpenSearch with an alias swap.", "score": 1.0}]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/search"
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(monkeypatch):
    with RecordingProxy(503) as recording:
        set_proxy_variables(monkeypatch, recording.url.replace("http://", "http://alice:pa55word@"))
        yield recording


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_loopback_endpoint_is_reached_directly(endpoint, proxy, host):
    answer = HttpSearch(endpoint.replace("127.0.0.1", host), max_retries=0).search("reindex")
    assert [r.source for r in answer.results] == [ANSWER]
    assert proxy.seen == []


def test_another_host_goes_through_the_proxy_which_its_failure_names(proxy):
    with pytest.raises(ExternalSearchError) as caught:
        HttpSearch("http://search.example.test/search", max_retries=0).search("reindex")
    assert proxy.seen == ["POST http://search.example.test/search"]
    assert (proxy.auth[0] or "").startswith("Basic ")
    message = str(caught.value)
    assert "answered HTTP 503" in message and f"through the proxy {proxy.url} from http_proxy" in message
    assert "pa55word" not in message and "alice" not in message


def test_https_goes_through_a_tunnel_of_the_proxy(proxy):
    with pytest.raises(ExternalSearchError) as caught:
        HttpSearch("https://search.example.test/search", max_retries=0).search("reindex")
    assert proxy.seen == ["CONNECT search.example.test:443"]
    assert f"through the proxy {proxy.url} from https_proxy" in str(caught.value) and "pa55word" not in str(caught.value)


def test_a_proxy_http_client_cannot_speak_is_named(monkeypatch, proxy):
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("ALL_PROXY", "socks5://bob:hunter22@127.0.0.1:9")
    monkeypatch.delenv("all_proxy")
    with pytest.raises(ExternalSearchError) as caught:
        HttpSearch("http://search.example.test/search", max_retries=0).search("reindex")
    message = str(caught.value)
    assert "socks5://127.0.0.1:9 from ALL_PROXY is not an http:// proxy" in message and "no_proxy=search.example.test" in message
    assert "hunter22" not in message and proxy.seen == []


def test_a_run_against_a_loopback_search_url_never_reaches_the_proxy(endpoint, proxy, tmp_path: Path):
    queries = tmp_path / "q.json"
    query = {
        "id": "q1",
        "query": "reindex opensearch",
        "queryIntent": "How to reindex.",
        "queryType": "keyword",
        "expectedSources": [ANSWER],
    }
    queries.write_text(json.dumps({"queries": [query]}), encoding="utf-8")
    result = invoke(
        ["evaluate", "--queries", str(queries), "--provider", "offline", "--no-cache", "--db", str(tmp_path / "none.sqlite")]
        + ["--out-dir", str(tmp_path / "r"), "--search-url", endpoint],
        {"JUDGE_RUNNER_EMBEDDER": "hash"},
    )
    assert result.exit_code == 0, result.output
    assert [line["type"] for line in run_lines(tmp_path / "r")].count("evaluation") == 1
    assert proxy.seen == []
