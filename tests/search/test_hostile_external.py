"""External searches that misbehave: an endpoint or a command must never hang a run, flood
its memory, or fail with a message that hides what happened. The HTTP side runs against the loopback
endpoint of tests/support/engines/hostile_http.py, the command side against small Python commands."""

from __future__ import annotations

import shlex
import sys
import time

import pytest

from judge_runner.search.external import CommandSearch
from judge_runner.search.http_search import HttpSearch
from judge_runner.search.mapping import ExternalSearchError, ReplyRules
from tests.support.engines.hostile_http import HostileServer


def py(code: str) -> str:
    """A command template running ``code`` with this Python (no shell)."""
    return shlex.join([sys.executable, "-c", code])


@pytest.fixture(scope="module")
def server():
    with HostileServer(drip_s=0.5, size=300 * 1024 * 1024) as hostile:
        yield hostile


def search(server: HostileServer, path: str, **kwargs) -> HttpSearch:
    return HttpSearch(server.url(path), **{"backoff": 0.01, "max_retries": 0, **kwargs})


# -- no hang -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/drip", "/drip-headers"])
def test_a_reply_dripped_byte_by_byte_ends_at_the_timeout(server, path):
    # regression: one byte every 0.5 s kept query 1 going past 58 s under --search-timeout 5 (the timeout was per read)
    started = time.monotonic()
    with pytest.raises(ExternalSearchError, match=r"did not answer within 2 s") as caught:
        search(server, path, timeout=2).search("q")
    assert caught.value.kind == "search_timeout"
    assert time.monotonic() - started < 4


def test_retries_of_a_dripping_endpoint_stop_at_the_call_deadline(server):
    started = time.monotonic()
    with pytest.raises(ExternalSearchError, match="did not answer") as caught:
        search(server, "/drip", timeout=1, max_retries=10, deadline=2.5).search("q")
    assert time.monotonic() - started < 4.5
    assert 2 <= caught.value.attempts <= 4


def test_a_300_mb_reply_is_cut_at_the_bound_and_says_so(server):
    started = time.monotonic()
    with pytest.raises(ExternalSearchError, match=r"sent more than 1 MiB; stopped reading there") as caught:
        search(server, "/huge", timeout=30, reply=ReplyRules(max_bytes=1024 * 1024)).search("q")
    assert caught.value.kind == "search_output"
    assert time.monotonic() - started < 10


def test_a_gzip_bomb_is_cut_at_the_bound(server):
    with pytest.raises(ExternalSearchError, match=r"more than 1 MiB once decompressed"):
        search(server, "/gzip-bomb", reply=ReplyRules(max_bytes=1024 * 1024)).search("q")


# -- clear messages ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [307, 308])
def test_307_and_308_are_followed_with_the_post_and_its_body(server, status):
    server.requests.clear()
    answer = search(server, f"/redirect/{status}").search("q")
    assert [h.source for h in answer.results] == ["a.md"]
    assert [(m, p) for m, p, _ in server.requests] == [("POST", f"/redirect/{status}"), ("POST", "/ok")]


@pytest.mark.parametrize("status", [301, 302, 303])
def test_redirects_that_would_turn_the_post_into_a_get_name_their_target(server, status):
    # regression: a 302 became "HTTP 405" (the POST re-sent as a GET); a 307 said "answered HTTP 307" without the target
    server.requests.clear()
    with pytest.raises(ExternalSearchError) as caught:
        search(server, f"/redirect/{status}/abs").search("q")
    message = str(caught.value)
    assert f"answered HTTP {status}, a redirect to {server.url('/ok')}" in message
    assert f"--search-url {server.url('/ok')}" in message and "405" not in message
    assert [m for m, _, _ in server.requests] == ["POST"]  # nothing re-sent as a GET


def test_a_redirect_loop_stops_and_says_so(server):
    with pytest.raises(ExternalSearchError, match=r"redirected more than 5 times \(last to http://127\.0\.0\.1:\d+/loop\)"):
        search(server, "/loop").search("q")


def test_a_cross_origin_redirect_does_not_carry_the_token(server):
    token = {"Authorization": "Bearer tok-123"}
    assert search(server, "/redirect/307", headers=token).search("q").results  # same origin: the header goes along
    assert server.requests[-1][2].get("Authorization") == "Bearer tok-123"
    with HostileServer() as other:
        assert search(server, f"/redirect-to-port/{other.port}", headers=token).search("q").results
        assert server.requests[-1][2].get("Authorization") == "Bearer tok-123"
        assert [(p, h.get("Authorization")) for _, p, h in other.requests] == [("/ok", None)]


@pytest.mark.parametrize("path", ["/gzip", "/deflate"])
def test_content_codings_are_decoded(server, path):
    # regression: a gzip body was "invalid JSON" plus binary in the message
    assert [h.snippet for h in search(server, path).search("q").results] == ["alpha"]
    assert "gzip" in server.requests[-1][2].get("Accept-Encoding", "")


def test_an_unknown_content_coding_is_named(server):
    with pytest.raises(ExternalSearchError, match=r"Content-Encoding 'br', which judge-runner cannot decode"):
        search(server, "/br").search("q")


@pytest.mark.parametrize("path", ["/chunked-bad", "/short"])
def test_a_broken_transfer_is_a_named_transport_error(server, path):
    # regression: a malformed chunked body was a raw IncompleteRead, not retried, the endpoint not named
    with pytest.raises(ExternalSearchError) as caught:
        search(server, path, max_retries=1).search("q")
    message = str(caught.value)
    assert message.startswith(f"search endpoint {server.url(path)} could not be reached: the reply broke off mid-transfer")
    assert caught.value.kind == "search_failed" and caught.value.attempts == 2


@pytest.mark.parametrize("path", ["/chunked-bad-then-ok", "/short-then-ok"])
def test_a_broken_transfer_is_retried(server, path):
    answer = search(server, path, max_retries=2).search("q")
    assert [h.source for h in answer.results] == ["a.md"] and server.counts[path] == 2


# -- no silent wrong text ----------------------------------------------------------------------------------
def test_a_reply_in_the_charset_it_names_is_decoded_in_it(server):
    answer = search(server, "/latin1").search("q")
    assert answer.results[0].snippet == "café crème" and answer.notes == []


def test_a_cp1252_reply_without_charset_is_decoded_with_a_note(server):
    answer = search(server, "/cp1252").search("q")
    assert answer.results[0].snippet == "naïve café, “quoted” – déjà vu"
    assert answer.notes == [f"search endpoint {server.url('/cp1252')} did not return UTF-8: decoded as cp1252"]


# -- commands ----------------------------------------------------------------------------------------------
OK_JSON = '[{"id": "a.md", "text": "alpha"}]'


def test_a_grandchild_in_its_own_session_holding_stdout_does_not_hold_the_query():
    # regression: valid JSON printed, exit 0, a grandchild (own session) keeps stdout open: waited past the timeout
    code = (
        "import os, subprocess, sys; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], start_new_session=True); "
        f"print({OK_JSON!r}); sys.stdout.flush()"
    )
    started = time.monotonic()
    answer = CommandSearch(py(code), timeout=10).search("q")
    assert time.monotonic() - started < 5
    assert [h.source for h in answer.results] == ["a.md"]
    assert any("kept its output open" in note for note in answer.notes)


def test_a_background_child_in_the_same_group_does_not_throw_the_results_away(tmp_path):
    # regression: with a `sleep 120 &` child, finished results were thrown away as "did not finish"
    marker = tmp_path / "child.pid"
    code = (
        "import subprocess, sys; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        f"open({str(marker)!r}, 'w').write(str(child.pid)); "
        f"print({OK_JSON!r})"
    )
    started = time.monotonic()
    answer = CommandSearch(py(code), timeout=5).search("q")
    assert time.monotonic() - started < 4
    assert [h.source for h in answer.results] == ["a.md"]
    import os

    pid = int(marker.read_text())
    for _ in range(50):  # the leftover child was killed with the command's process group
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the background child is still alive")


def test_a_shell_pipeline_that_prints_then_exits_is_read_whole():
    code = "import sys, time; [print(i, file=sys.stderr) for i in range(3)]; time.sleep(0.8); print(" + repr(OK_JSON) + ")"
    answer = CommandSearch(py(code), timeout=5).search("q")
    assert [h.source for h in answer.results] == ["a.md"] and answer.notes == []


def test_a_command_printing_300_mb_is_cut_and_killed():
    # regression: 79 s and 4.2 GB of memory for one query, and `truncated: false`
    code = "import sys\nblock = b' ' * 1048576\nfor _ in range(300): sys.stdout.buffer.write(block)\nsys.stdout.buffer.write(b'[]')"
    started = time.monotonic()
    with pytest.raises(ExternalSearchError, match=r"printed more than 2 MiB; stopped reading there and killed it") as caught:
        CommandSearch(py(code), timeout=30, max_bytes=2 * 1024 * 1024).search("q")
    assert caught.value.kind == "search_output"
    assert time.monotonic() - started < 10


def test_a_command_flooding_stderr_keeps_only_its_end():
    code = "import sys\nfor i in range(200000): sys.stderr.write(f'line {i}\\n')\nsys.exit(2)"
    with pytest.raises(ExternalSearchError, match=r"exited with status 2: line 199997 \| line 199998 \| line 199999"):
        CommandSearch(py(code), timeout=30).search("q")


def test_a_command_that_never_reads_a_long_stdin_query_still_ends():
    search = CommandSearch(py(f"print({OK_JSON!r})"), timeout=5)
    assert search.on_stdin
    assert [h.source for h in search.search("q" * 1_000_000).results] == ["a.md"]


@pytest.mark.parametrize(
    "encoding, note",
    [("cp1252", "decoded as cp1252"), ("utf-16", "decoded as utf-16-le"), ("utf-8", None)],
)
def test_command_output_in_another_encoding_is_decoded_with_a_note(encoding, note):
    # regression: cp1252 output was decoded to U+FFFD with no note
    text = '[{"id": "a.md", "text": "naïve café, “quoted” – déjà vu, Straße"}]'
    code = f"import sys; sys.stdout.buffer.write({text.encode(encoding)!r})"
    answer = CommandSearch(py(code), timeout=10).search("q")
    assert answer.results[0].snippet == "naïve café, “quoted” – déjà vu, Straße"
    assert [n.split(": ", 1)[-1] for n in answer.notes] == ([note] if note else [])


def test_evaluate_against_a_dripping_endpoint_ends_with_a_timeout_error_line(server, tmp_path):
    # the run: `evaluate --search-url <drip> --search-timeout 5` was still in query 1 after 58 s
    import json

    from tests.support.clitools import invoke, run_lines

    queries = tmp_path / "q.json"
    queries.write_text(json.dumps({"queries": [{"id": "q1", "query": "reindex", "queryIntent": "i", "queryType": "keyword"}]}))
    started = time.monotonic()
    result = invoke(
        ["evaluate", "--queries", str(queries), "--search-url", server.url("/drip"), "--search-timeout", "1", "--provider", "offline"]
        + ["--out-dir", str(tmp_path / "r"), "--no-cache"],
        {"JUDGE_RUNNER_EMBEDDER": "hash"},
    )
    assert time.monotonic() - started < 15
    assert result.exit_code == 3, result.output  # the one query failed: the run is incomplete
    (error,) = [line for line in run_lines(tmp_path / "r") if line["type"] == "error"]
    assert error["errorType"] == "search_timeout" and "did not answer within 1 s" in error["message"]
