"""A loopback HTTP search endpoint that misbehaves on purpose, one behaviour per path, for the tests of
:class:`judge_runner.search.http_search.HttpSearch`:

- ``/ok``: ``{"results": [{"id": "a.md", "text": "alpha"}]}`` (the answer every good path leads to);
- ``/drip``: a valid reply sent one byte every ``drip_s`` seconds (headers first, then the body);
- ``/drip-headers``: the status line and headers themselves one byte at a time;
- ``/redirect/<status>``: that status with ``Location: /ok`` (``/redirect/<status>/abs`` an absolute URL);
- ``/redirect-to-port/<port>``: 307 to ``/ok`` of another server on 127.0.0.1 (another origin);
- ``/loop``: 307 to itself, forever;
- ``/gzip``, ``/deflate``, ``/br``: the reply with that Content-Encoding (``br`` is not really brotli);
- ``/gzip-bomb``: a gzip body that inflates past any sane bound;
- ``/chunked-bad``: ``Transfer-Encoding: chunked`` with a chunk size that is not hex;
- ``/short``: ``Content-Length`` larger than what is sent, then the connection closes;
- ``/huge``: ``size`` bytes of a JSON list, as fast as the socket takes them;
- ``/latin1``: the reply in ISO-8859-1, saying so in ``Content-Type``; ``/cp1252``: in cp1252, saying nothing.

``requests`` records ``(method, path, headers)`` of every request. A path ending in ``-then-ok``
(``/chunked-bad-then-ok``) misbehaves on its first request only, then serves ``/ok``'s reply (a retry).
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OK = {"results": [{"id": "a.md", "text": "alpha"}]}


class HostileServer:
    """Serve the behaviours above on 127.0.0.1 (a free port) in daemon threads; a context manager.
    ``url(path)`` is the endpoint of a behaviour."""

    def __init__(self, drip_s: float = 0.5, size: int = 300 * 1024 * 1024):
        self.drip_s, self.size = drip_s, size
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.counts: dict[str, int] = {}
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in (headers or {"Content-Type": "application/json"}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            def _drip(self, data: bytes) -> None:
                for i in range(len(data)):
                    if server.stop.is_set():
                        return
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    time.sleep(server.drip_s)

            def do_GET(self):
                self.requests_log()
                self._send(405, b'{"error": "method not allowed"}')

            def requests_log(self):
                server.requests.append((self.command, self.path, dict(self.headers)))

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.requests_log()
                path = self.path.split("?")[0]
                ok = json.dumps(OK).encode()
                seen = server.counts.get(path, 0)
                server.counts[path] = seen + 1
                if path.endswith("-then-ok"):  # misbehave once, then serve
                    path = "/ok" if seen else path.removesuffix("-then-ok")
                if path == "/ok":
                    self._send(200, ok)
                elif path == "/drip":
                    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(ok)}\r\nConnection: close\r\n\r\n"
                    self.wfile.write(head.encode())
                    self._drip(ok)
                elif path == "/drip-headers":
                    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(ok)}\r\n\r\n"
                    self._drip(head.encode() + ok)
                elif path.startswith("/redirect/"):
                    parts = path.split("/")
                    target = f"http://127.0.0.1:{server.port}/ok" if parts[-1] == "abs" else "/ok"
                    self._send(int(parts[2]), b"", {"Location": target})
                elif path.startswith("/redirect-to-port/"):
                    self._send(307, b"", {"Location": f"http://127.0.0.1:{path.split('/')[2]}/ok"})
                elif path == "/loop":
                    self._send(307, b"", {"Location": "/loop"})
                elif path == "/gzip":
                    self._send(200, gzip.compress(ok), {"Content-Type": "application/json", "Content-Encoding": "gzip"})
                elif path == "/deflate":
                    self._send(200, zlib.compress(ok), {"Content-Type": "application/json", "Content-Encoding": "deflate"})
                elif path == "/br":
                    self._send(200, b"\x8b\x00\x80" + ok, {"Content-Type": "application/json", "Content-Encoding": "br"})
                elif path == "/gzip-bomb":
                    self._send(200, gzip.compress(b"[" + b" " * (64 * 1024 * 1024) + b"]"), {"Content-Encoding": "gzip"})
                elif path == "/chunked-bad":
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                    self.wfile.write(b'5\r\n{"res\r\nzz-not-hex\r\n')
                    self.close_connection = True
                elif path == "/short":
                    self.wfile.write(
                        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(ok) + 50}\r\n\r\n".encode()
                    )
                    self.wfile.write(ok)
                    self.close_connection = True
                elif path == "/huge":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(server.size))
                    self.end_headers()
                    block = b" " * 65536
                    sent = 0
                    try:
                        while sent < server.size and not server.stop.is_set():
                            self.wfile.write(block)
                            sent += len(block)
                    except OSError:
                        return
                elif path == "/latin1":
                    body = json.dumps({"results": [{"id": "a.md", "text": "café crème"}]}, ensure_ascii=False).encode("latin-1")
                    self._send(200, body, {"Content-Type": "application/json; charset=ISO-8859-1"})
                elif path == "/cp1252":
                    body = json.dumps({"results": [{"id": "a.md", "text": "naïve café, “quoted” – déjà vu"}]}, ensure_ascii=False)
                    self._send(200, body.encode("cp1252"), {"Content-Type": "application/json"})
                else:
                    self._send(404, b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> HostileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
