"""The bm25s engine (:mod:`tests.support.engines.bm25s_search`) as a small loopback HTTP search service:
``POST /search`` with ``{"query", "limit"}`` answers ``{"hits": [{"doc_id", "body", "_score"}]}`` (field
names unlike ours on purpose, to exercise ``--search-fields``). Optional behaviours for tests: a
required bearer token, and a list of statuses to answer first (429, 503...) before serving.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.engines.bm25s_search import Engine


class Bm25sService:
    """Serve ``engine`` on 127.0.0.1 (a free port) in a daemon thread; ``url`` is the endpoint. Use as
    a context manager. ``requests`` records (path, headers) of every request."""

    def __init__(self, corpus: Path, token: str | None = None, fail_first: list[int] | None = None, with_text: bool = True):
        self.engine = Engine(corpus)
        self.token, self.fail_first, self.with_text = token, list(fail_first or []), with_text
        self.requests: list[dict] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                service.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if service.fail_first:
                    status = service.fail_first.pop(0)
                    self.send_response(status)
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    return
                if service.token and self.headers.get("Authorization") != f"Bearer {service.token}":
                    self.send_response(401)
                    self.end_headers()
                    return
                hits = [
                    {"doc_id": i, "_score": s, **({"body": t} if service.with_text else {})}
                    for i, s, t in service.engine.search(str(body.get("query", "")), int(body.get("limit", 10)))
                ]
                data = json.dumps({"hits": hits}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/search"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Bm25sService:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
