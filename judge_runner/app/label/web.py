"""The labelling page's HTTP server: loopback only, behind a secret path, strict about what it accepts.

It binds 127.0.0.1 and answers only under a random token path (192 bits). It refuses a ``Host`` that is
not a loopback name or an ``--allow-host`` (DNS rebinding), a cross-site POST (CSRF), and a body that is
not a well-formed JSON object, with a JSON ``{"error"}`` and the HTTP status that fits; a journal that
cannot be written answers 507/500 (the act is not saved). docs/calibration.md tells the rules.
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Annotated, Any
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from judge_runner.app.crashlog import log_traceback, scrub
from judge_runner.app.label.page import page
from judge_runner.core.failures import is_disk_full, one_line
from judge_runner.human.journal import LabelSession, StaleAct

HOST = "127.0.0.1"
MAX_BODY = 4096  # bytes: an act is a few dozen
READ_TIMEOUT_S = 10.0  # seconds a connection may stay silent: a body that stops coming is answered 400, an idle connection closed
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_NAME = r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\]"
_HOST_RE = re.compile(rf"(?P<name>{_NAME})(?::(?P<port>[0-9]{{1,5}}))?")


@dataclass(frozen=True)
class HostRule:
    """A Host the page also answers (``--allow-host``): ``name`` (lower case), ``port`` (None: any)."""

    name: str
    port: int | None = None

    def matches(self, name: str, port: int | None) -> bool:
        return name == self.name and (self.port is None or port == self.port)

    def __str__(self) -> str:
        return self.name if self.port is None else f"{self.name}:{self.port}"


def split_host(text: str) -> tuple[str, int | None] | None:
    """``("devbox", 8080)`` of ``devbox:8080`` (lower-cased; port None when absent), or None when it is no host
    name, IP address or ``[IPv6]`` with an optional port 1-65535."""
    match = _HOST_RE.fullmatch(text.strip().lower())
    if match is None:
        return None
    port = int(match["port"]) if match["port"] else None
    if port is not None and not 1 <= port <= 65535:
        return None
    return match["name"], port


def parse_host_rule(text: str) -> HostRule:
    """The :class:`HostRule` of ``NAME`` or ``NAME:PORT``. Raises ValueError for anything else (a URL, a path,
    a port outside 1-65535)."""
    parts = split_host(text)
    if parts is None:
        raise ValueError(f"{text!r} is not a host name or address with an optional :PORT (e.g. devbox:8080)")
    return HostRule(*parts)


# -- what the page posts --------------------------------------------------------------------------------

TabId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{8,64}$")]
ItemId = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class _Act(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    tab: TabId


class LabelAct(_Act):
    """``POST /api/label``: the current item and its grade 0-3, from the page's tab."""

    item: ItemId
    grade: Annotated[int, Field(ge=0, le=3)]


class SkipAct(_Act):
    """``POST /api/skip``: the current item, from the page's tab."""

    item: ItemId


class UndoAct(_Act):
    """``POST /api/undo``: the tab's last grade."""


ACTS: dict[str, type[_Act]] = {"label": LabelAct, "skip": SkipAct, "undo": UndoAct}
"""The acts the page posts, by route (``/api/<kind>``)."""

ROUTES: dict[str, tuple[str, ...]] = {"/": ("GET", "HEAD"), "/api/state": ("GET", "HEAD"), **{f"/api/{k}": ("POST",) for k in ACTS}}


class Refusal(Exception):
    """Answered with ``status`` and ``{"error": message}``, then the connection closed: its body may not have
    been read, so what follows on it is not a request."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def _problems(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors(include_input=False, include_url=False)]
    return "; ".join(parts[:4])


class LabelServer(ThreadingHTTPServer):
    """The labelling page's server for one :class:`LabelSession`. ``on_error(line)`` hears of a bug met while
    answering (the traceback goes to the error log). ``shutdown()`` from another thread or Ctrl+C stops it."""

    daemon_threads = True

    def __init__(
        self,
        session: LabelSession,
        labeller: str,
        port: int = 0,
        allow_hosts: Sequence[HostRule] = (),
        on_error: Callable[[str], None] | None = None,
    ):
        super().__init__((HOST, port), _Handler)
        self.session, self.labeller = session, labeller
        self.allow_hosts = tuple(allow_hosts)
        self.on_error = on_error or (lambda line: print(line, file=sys.stderr))
        self.read_timeout_s = READ_TIMEOUT_S
        self.token = secrets.token_urlsafe(24)
        self.nonce = secrets.token_urlsafe(16)
        self.port = int(self.server_address[1])

    @property
    def url(self) -> str:
        """The page's address, secret path included."""
        return f"http://{HOST}:{self.port}/{self.token}/"

    def forwarded_urls(self) -> list[str]:
        """The page's address through each ``--allow-host`` that names a port."""
        return [f"http://{rule}/{self.token}/" for rule in self.allow_hosts if rule.port is not None]

    def host_allowed(self, host: str) -> bool:
        """Whether a request's Host is a loopback name (any port) or an allowed one."""
        parts = split_host(host)
        if parts is None:
            return False
        name, port = parts
        return name in LOOPBACK_NAMES or any(rule.matches(name, port) for rule in self.allow_hosts)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A peer that went away is not reported; any other error is a bug, logged with its traceback (never
        printed: the request line holds the token)."""
        exc = sys.exc_info()[1]
        if exc is None or isinstance(exc, (ConnectionError, TimeoutError)):
            return
        _report_bug(self, exc)


def _report_bug(server: LabelServer, exc: BaseException) -> None:
    logged = log_traceback(exc)
    where = f"; traceback in {logged}" if logged else ""
    server.on_error(scrub(f"internal error answering the labelling page (a bug): {one_line(exc).replace(server.token, '<token>')}{where}"))


class _Handler(BaseHTTPRequestHandler):
    server: LabelServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.read_timeout_s)

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

    def _json(self, status: int, payload: dict[str, Any], extra: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8", extra)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals as JSON; an unknown method is a 405."""
        self.close_connection = True
        if code == HTTPStatus.NOT_IMPLEMENTED:
            code, message = HTTPStatus.METHOD_NOT_ALLOWED, f"method {self.command!r} not allowed"
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        if getattr(self, "request_version", "HTTP/1.1") == "HTTP/0.9":
            self.request_version = "HTTP/1.0"
        self._json(code, {"error": message or phrase}, {"Connection": "close"})

    def do_GET(self) -> None:
        self._serve()

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

    def _serve(self) -> None:
        if self.command != "POST" and (
            self.headers.get("Content-Length", "0").strip() not in ("", "0") or self.headers.get("Transfer-Encoding")
        ):
            self.close_connection = True  # a body nobody reads: what follows it on this connection is no request
        try:
            self._dispatch()
        except Refusal as refusal:
            self.close_connection = True
            self._json(refusal.status, {"error": refusal.message}, {**refusal.headers, "Connection": "close"})
        except (ConnectionError, TimeoutError):
            self.close_connection = True  # the peer went away mid-answer
        except Exception as exc:  # a bug: one line for the labeller, the traceback in the error log
            self.close_connection = True
            _report_bug(self.server, exc)
            self._json(500, {"error": f"internal error (a bug): {type(exc).__name__}; the label may not be saved: reload the page"})

    def _dispatch(self) -> None:
        route, query = self._route()
        methods = ROUTES.get(route)
        if methods is None:
            raise Refusal(404, "not found")
        if self.command not in methods:
            raise Refusal(405, f"{route} takes {' or '.join(methods)}", headers={"Allow": ", ".join(methods)})
        session = self.server.session
        if route == "/":
            nonce = self.server.nonce
            csp = (
                f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
                "connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
            )
            self._send(200, page(nonce).encode("utf-8"), "text/html; charset=utf-8", {"Content-Security-Policy": csp})
        elif route == "/api/state":
            tab = query.get("tab", [None])[-1]
            if tab is not None and not re.fullmatch(r"[A-Za-z0-9_-]{8,64}", tab):
                raise Refusal(400, "tab: 8-64 letters, digits, '_' or '-'")
            self._json(200, session.view(tab))
        else:
            self._act(route.removeprefix("/api/"), session)

    def _route(self) -> tuple[str, dict[str, list[str]]]:
        """The path after the token and the query, once the Host, the origin and the token are right."""
        host = self.headers.get("Host", "")
        if not self.server.host_allowed(host):
            raise Refusal(
                403,
                f"this server answers requests addressed to 127.0.0.1 or localhost (any port, so a local port forward works), "
                f"not to {host or 'no Host'!r}: a web page whose name points at 127.0.0.1 could otherwise reach the labels "
                "(DNS rebinding). Through a forward under another name, start `judge-runner label` with --allow-host NAME[:PORT]",
            )
        if self.command == "POST":
            origin = self.headers.get("Origin")
            site = (self.headers.get("Sec-Fetch-Site") or "").lower()
            if (origin is not None and origin.lower() != f"http://{host.lower()}") or site in ("cross-site", "same-site"):
                raise Refusal(403, f"refused: a request from another site ({origin or site}) may not label")
        parts = urlsplit(self.path)
        head, _, rest = parts.path.lstrip("/").partition("/")
        if not hmac.compare_digest(head.encode("utf-8", "replace"), self.server.token.encode()):
            raise Refusal(404 if not head or head == "favicon.ico" else 403, "not found")
        return "/" + rest, parse_qs(parts.query)

    def _body(self) -> dict[str, Any]:
        """The JSON object a POST sends. Raises Refusal (400, 411, 413, 415) for anything else."""
        if not (self.headers.get("Content-Type") or "").split(";")[0].strip().lower() == "application/json":
            raise Refusal(415, "send JSON (Content-Type: application/json)")
        if self.headers.get("Transfer-Encoding"):
            raise Refusal(411, "send the body with a Content-Length, not a Transfer-Encoding")
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths:
            raise Refusal(411, "a POST needs a Content-Length")
        if len(lengths) > 1 or not re.fullmatch(r"[0-9]{1,18}", lengths[0].strip()):
            raise Refusal(400, "bad Content-Length")
        length = int(lengths[0])
        if length > MAX_BODY:
            raise Refusal(413, f"a body of at most {MAX_BODY} bytes")
        try:
            data = self.rfile.read(length)
        except TimeoutError:
            raise Refusal(
                400, f"the body is shorter than its Content-Length (nothing more came in {self.server.read_timeout_s:g} s)"
            ) from None
        if len(data) < length:
            raise Refusal(400, "the body is shorter than its Content-Length")
        try:
            body = json.loads(data.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=_unique_keys)
        except _DuplicateKey as exc:
            raise Refusal(400, f"the body names {exc.args[0]!r} twice") from None
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise Refusal(400, "the body is not JSON in UTF-8") from None
        if not isinstance(body, dict):
            raise Refusal(400, "the body is not a JSON object")
        return body

    def _act(self, kind: str, session: LabelSession) -> None:
        body = self._body()
        try:
            act = ACTS[kind].model_validate(body)
        except ValidationError as exc:
            raise Refusal(400, _problems(exc)) from None
        try:
            session.act(kind, getattr(act, "item", None), self.server.labeller, getattr(act, "grade", None), tab=act.tab)
        except StaleAct as exc:
            self._json(409, {"error": str(exc), "state": session.view(act.tab)})
            return
        except OSError as exc:
            status = 507 if is_disk_full(exc) else 500
            what = "the disk holding the journal is full" if status == 507 else f"the journal cannot be written ({exc.strerror or exc})"
            self._json(status, {"error": f"NOT saved: {what}; {session.journal}", "state": session.view(act.tab)})
            return
        self._json(200, {"state": session.view(act.tab)})


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _DuplicateKey(ValueError):
    """A JSON object naming a key twice (``json`` would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out
