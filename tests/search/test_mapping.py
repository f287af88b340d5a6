"""An external search's results are cut at the limit as the system ranked them, then merged:
a search that returned one file 10 times and the answer 11th was merged before the cut, so the answer
scored at rank 2 (R@10 1.0), and nothing in ``searchNotes`` said so. Every adapter: a command, an HTTP
endpoint and a TREC run."""

from __future__ import annotations

import json
import shlex
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.clitools import invoke, run_lines

pytestmark = pytest.mark.hash_embedder

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NOISE, ANSWER = "notes/hr-faq.txt", "runbooks/opensearch-reindex.md"
REPLY = [{"source": NOISE, "text": f"Holiday policy, part {i}.", "score": 20 - i} for i in range(10)] + [
    {"source": ANSWER, "text": "Reindex OpenSearch with an alias swap.", "score": 1}
]


class FixedReply:
    """A loopback HTTP search answering every POST with ``REPLY``."""

    def __enter__(self):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.dumps(REPLY).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/search"

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def evaluate_with(tmp_path: Path, adapter: list[str]) -> dict:
    queries = tmp_path / "q.json"
    queries.write_text(
        json.dumps(
            {
                "queries": [
                    {
                        "id": "q1",
                        "query": "reindex opensearch",
                        "queryIntent": "How to reindex.",
                        "queryType": "keyword",
                        "expectedSources": [ANSWER],
                    }
                ]
            }
        ),
        encoding="utf-8",
    )
    result = invoke(
        ["evaluate", "--queries", str(queries), "--provider", "offline", "--no-cache", "--db", str(tmp_path / "none.sqlite")]
        + ["--out-dir", str(tmp_path / "r"), *adapter],
        {"JUDGE_RUNNER_EMBEDDER": "hash"},
    )
    assert result.exit_code == 0, result.output
    (line,) = [line for line in run_lines(tmp_path / "r") if line["type"] == "evaluation"]
    return line


def check(line: dict) -> None:
    assert [r["source"] for r in line["results"]] == [NOISE]  # the answer was 11th: past the cut
    assert line["metrics"]["R@10"] == 0.0 and line["metrics"]["nDCG@10"] == 0.0
    (note,) = [n for n in line["searchNotes"] if "repeated a document" in n]
    assert note.startswith(f"9 of the first 10 results repeated a document listed before ('{NOISE}' x10)")
    assert note.endswith("each document is judged once, at its first place (1 document judged); results after the first 10 are not read")


def test_a_command(tmp_path):
    check(evaluate_with(tmp_path, ["--search-command", shlex.join([sys.executable, "-c", f"import json; print(json.dumps({REPLY!r}))"])]))


def test_an_http_search(tmp_path):
    with FixedReply() as url:
        check(evaluate_with(tmp_path, ["--search-url", url]))


def test_a_trec_run(tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("".join(f"q1 Q0 {r['source']} {i} {r['score']} t\n" for i, r in enumerate(REPLY, start=1)), encoding="utf-8")
    check(evaluate_with(tmp_path, ["--run", str(run), "--corpus", str(FIXTURES)]))


def test_a_reply_without_repeats_has_no_note(tmp_path):
    reply = [REPLY[0], REPLY[-1]]
    line = evaluate_with(tmp_path, ["--search-command", shlex.join([sys.executable, "-c", f"import json; print(json.dumps({reply!r}))"])])
    assert [r["source"] for r in line["results"]] == [NOISE, ANSWER] and not line["searchNotes"]
