"""A loopback HTTP proxy that records what reaches it and answers every request (a CONNECT included) with
one status, and the proxy variables a company machine sets, all pointing at it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


class RecordingProxy:
    """``with RecordingProxy(503) as proxy``: ``proxy.url`` (``http://127.0.0.1:PORT``), ``proxy.seen``
    (``"METHOD target"`` of each request that reached it), ``proxy.auth`` (the Proxy-Authorization headers)."""

    def __init__(self, status: int = 503):
        self.status = status
        self.seen: list[str] = []
        self.auth: list[str | None] = []

    def __enter__(self) -> RecordingProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def answer(self) -> None:
                proxy.seen.append(f"{self.command} {self.path}")
                proxy.auth.append(self.headers.get("Proxy-Authorization"))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = b"proxy: upstream unreachable"
                self.send_response(proxy.status)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_CONNECT = answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def set_proxy_variables(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """Every proxy variable set to ``url``, and no ``no_proxy``."""
    for name in PROXY_VARIABLES:
        monkeypatch.setenv(name, url)
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
