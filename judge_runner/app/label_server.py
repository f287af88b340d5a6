"""``judge-runner label``: the labelling job and its HTTP server on loopback.

The server binds 127.0.0.1 only (port 0: any free one) and answers only under a secret path, a random token
(:func:`secrets.token_urlsafe`, 192 bits) that the job prints in the page's URL: another local user, or a web
page in the labeller's browser, cannot read or post labels without it. It also refuses a ``Host`` that is
not the loopback address it listens on (DNS rebinding) and a POST that is not JSON. Every response says
``Cache-Control: no-store`` and ``Referrer-Policy: no-referrer`` (the token never leaves in a Referer), and
the page carries a Content-Security-Policy that allows only its own inline style and script (by nonce) and
requests to its own origin.

Routes under ``/<token>``: ``/`` the page (:mod:`.label_page`); ``GET /api/state``; ``POST /api/label``
``{"item", "grade"}``, ``/api/skip`` ``{"item"}``, ``/api/undo`` ``{}``, each answering the new state
(:meth:`judge_runner.app.label_session.LabelSession.view`); 409 with the state when the item is not the
current one (a second tab, a stale page). Ctrl+C stops it; everything given is already on disk.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from judge_runner.app.label_page import page
from judge_runner.app.label_session import LabelSession
from judge_runner.config import Settings
from judge_runner.core.failures import UsageError
from judge_runner.core.printer import Printer
from judge_runner.judging.cache import CacheError, JudgmentCache
from judge_runner.judging.label_plan import DEFAULT_WIDTH, plan_pairs, plan_queries, recommended_queries
from judge_runner.judging.qrels import import_human_qrels
from judge_runner.runs.read import RunFile, read_judged_runs

HOST = "127.0.0.1"
MAX_BODY = 4096


class LabelServer(ThreadingHTTPServer):
    """The labelling page's server for one :class:`LabelSession` (see the module docstring). ``url`` is what
    to open; ``shutdown()`` (another thread) or Ctrl+C in :meth:`serve_forever` stops it."""

    daemon_threads = True

    def __init__(self, session: LabelSession, labeller: str, port: int = 0):
        super().__init__((HOST, port), _Handler)
        self.session, self.labeller = session, labeller
        self.token = secrets.token_urlsafe(24)
        self.nonce = secrets.token_urlsafe(16)
        self.port = int(self.server_address[1])
        self.hosts = {f"{HOST}:{self.port}", f"localhost:{self.port}"}

    @property
    def url(self) -> str:
        """The page's address, secret path included."""
        return f"http://{HOST}:{self.port}/{self.token}/"


class _Handler(BaseHTTPRequestHandler):
    server: LabelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no access log: the path holds the token
        pass

    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        self._send(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8")

    def _route(self) -> str | None:
        """The path after the token, or None (answered 403/404 already) for a request without the right one."""
        host = self.headers.get("Host", "")
        if host not in self.server.hosts:
            self._json(403, {"error": "this server answers only on its loopback address"})
            return None
        path = urlsplit(self.path).path
        head, _, rest = path.lstrip("/").partition("/")
        if not hmac.compare_digest(head.encode(), self.server.token.encode()):
            self._json(404 if not head or head == "favicon.ico" else 403, {"error": "not found"})
            return None
        return "/" + rest

    def do_GET(self) -> None:
        route = self._route()
        if route is None:
            return
        if route == "/":
            csp = (
                f"default-src 'none'; script-src 'nonce-{self.server.nonce}'; style-src 'nonce-{self.server.nonce}'; "
                "connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
            )
            self._send(200, page(self.server.nonce).encode("utf-8"), "text/html; charset=utf-8", {"Content-Security-Policy": csp})
        elif route == "/api/state":
            self._json(200, self.server.session.view())
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self) -> None:
        route = self._route()
        if route is None:
            return
        kind = route.removeprefix("/api/")
        if kind not in ("label", "skip", "undo"):
            self._json(404, {"error": "not found"})
            return
        if not self.headers.get("Content-Type", "").startswith("application/json"):
            self._json(415, {"error": "send JSON"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._json(413, {"error": "too large"})
            return
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            self._json(400, {"error": "the body is not a JSON object"})
            return
        session = self.server.session
        try:
            session.act(kind, body.get("item"), self.server.labeller, body.get("grade"))
        except ValueError as exc:
            self._json(409, {"error": str(exc), "state": session.view()})
            return
        self._json(200, {"state": session.view()})


def cache_importer(settings: Settings, name: str, printer: Printer):
    """A session's importer: the qrels file into the judgment cache of ``settings`` as the human qrels set
    ``name`` (:func:`judge_runner.judging.qrels.import_human_qrels`, what ``qrels import`` does; an empty file
    removes the set). None with ``--no-cache``. Raises UsageError when the cache cannot be opened."""
    path = settings.cache_path
    if path is None:
        return None
    try:
        JudgmentCache(path).close()
    except CacheError as exc:
        raise UsageError(str(exc)) from None

    def importer(qrels: Path, count: int) -> None:
        with JudgmentCache(path) as cache:
            if count:
                import_human_qrels(cache, qrels, name)
            else:
                cache.delete_human_qrels(name)

    return importer


@dataclass(frozen=True)
class Sampling:
    """How to draw the items of a new session: ``kind`` (``queries`` or ``pairs``), ``queries`` (None: the
    number recommended for ``width``), ``per_label`` (pairs mode), ``width`` (full width of the 95% interval
    of mean nDCG@10 aimed at), ``seed``."""

    kind: str = "queries"
    queries: int | None = None
    per_label: int = 25
    width: float = DEFAULT_WIDTH
    seed: int = 13


def new_session(session: LabelSession, runs: Sequence[RunFile], sampling: Sampling, labeller: str, printer: Printer) -> None:
    """Draw the items (:mod:`judge_runner.judging.label_plan`) and start ``session`` with them, saying how many
    queries the width asks for."""
    try:
        recommended, sd, scored = recommended_queries(runs, sampling.width)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    advice = (
        f"about {recommended} of the {scored} queries give a 95% interval of mean nDCG@10 at most {sampling.width:g} wide "
        f"(the run's per-query nDCG@10 spreads with sd {sd:.2f}; fewer when the judge tracks your labels)"
    )
    if sampling.kind == "queries":
        count = sampling.queries or recommended
        items = plan_queries(runs, count, sampling.seed)
        printer.note(f"sampled {min(count, scored)} whole queries ({len(items)} documents): {advice}")
    else:
        items = plan_pairs(runs, sampling.per_label, sampling.seed)
        printer.note(f"sampled {len(items)} pairs, up to {sampling.per_label} per judge label 0-3")
    details = {
        "sampling": sampling.kind,
        "seed": sampling.seed,
        "width": sampling.width,
        "recommended": advice if sampling.kind == "queries" else None,
        "runs": [str(r.path) for r in runs],
        "runIds": [r.run_id for r in runs],
        "labeller": labeller,
    }
    session.start(items, details)


def label_job(
    settings: Settings,
    name: str,
    results: Sequence[Path],
    sampling: Sampling,
    labeller: str,
    folder: Path,
    port: int,
    printer: Printer,
    ready: Any = None,
) -> LabelSession:
    """``judge-runner label``: open (or start, from the run files ``results``) the session ``name`` in
    ``folder``, serve its page on loopback until Ctrl+C, and say what was saved. ``ready(server)`` is called
    once the server listens (tests; the job then serves in this thread as usual). Returns the session.
    Raises UsageError for a bad name, unreadable runs, a new session without runs, or a port in use."""
    session = LabelSession(folder, name, cache_importer(settings, name, printer))
    if session.exists():
        session.open()
        if results:
            printer.note(f"resuming {session.journal}: its own sample is kept, the run files given are not read again")
    else:
        if not results:
            raise UsageError(f"no labelling session {name!r} in {folder}: give the run files to sample from")
        new_session(session, read_judged_runs(results), sampling, labeller, printer)
    try:
        server = LabelServer(session, labeller, port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {HOST}:{port}: {exc}") from None
    view = session.view()
    printer.out(f"labelling {name}: {view['progress']['labelled']} of {view['progress']['total']} labelled; open")
    printer.out(f"  {server.url}")
    printer.note("keys: 0-3 label, s skip, u undo; every label is saved at once; Ctrl+C stops the server")
    if ready is not None:
        threading.Thread(target=ready, args=(server,), daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        printer.err("stopped (Ctrl+C)")
    finally:
        server.server_close()
    view = session.view()
    imported = " and imported into the judgment cache" if session.importer is not None else ""
    printer.out(
        f"{view['progress']['labelled']} of {view['progress']['total']} labelled by now: {session.qrels}{imported} as {name!r} "
        f"(journal {session.journal}); run the same command to go on"
    )
    return session
