"""A search behind an HTTP endpoint (``--search-url``): :class:`HttpSearch`, one ``POST`` of the query
per search, JSON results back, mapped like a command's (:mod:`judge_runner.search.mapping`).

The exchange is made with :mod:`http.client` so that every part of it is bounded and said plainly:

- **a deadline for the whole exchange**: ``timeout`` seconds from connecting to the last byte of the
  body, whatever the server does (a socket timeout bounds one read only); a watchdog closes the
  connection at the deadline. Retries stop at the call's ``deadline`` (default 4 x ``timeout``);
- **redirects as HTTP clients do for a POST** (RFC 9110, section 15.4): 307 and 308 are followed with
  the same method and body (at most :data:`MAX_REDIRECTS`; the ``--search-header`` values only to the
  same origin, as requests and httpx drop credentials on a cross-origin redirect; never from https to
  http); 301, 302 and 303, which clients answer by re-sending the POST as a GET (the query lost: the
  server answered HTTP 405), are not followed and the error names the target to use instead;
- **content codings decoded** (``gzip``, ``x-gzip``, ``deflate``; ``Accept-Encoding`` says so), other
  codings refused by name;
- **at most** :data:`~judge_runner.search.mapping.MAX_REPLY_BYTES` read, compressed or not (the
  decompressor is bounded too);
- **broken transfers** (a malformed chunked body, a connection closed mid-reply, a bad status line) are
  transport errors: retried like connection errors and timeouts, and reported naming the endpoint;
- proxies from the environment (``http_proxy``, ``https_proxy``, ``all_proxy``, ``no_proxy``), never for
  loopback (:mod:`judge_runner.core.proxies`); an error through a proxy names it (without credentials).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import threading
import time
import zlib
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import tenacity

from judge_runner.core.models import SearchMode
from judge_runner.core.proxies import proxy_for
from judge_runner.search.base import SearchAnswer
from judge_runner.search.mapping import ExternalSearchError, ReplyRules, answer_from_reply, decode_reply, megabytes

RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))  # as the LLM layer (llm/retry.py)
MAX_REDIRECTS = 5
FOLLOWED_REDIRECTS = frozenset({307, 308})  # keep the method and the body (RFC 9110, 15.4.8 and 15.4.9)
REFUSED_REDIRECTS = frozenset({301, 302, 303})  # clients change a POST into a GET there (RFC 9110, 15.4.2-15.4.4)
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class _HttpStatus(Exception):
    def __init__(self, status: int, retry_after: float | None, url: str):
        super().__init__(f"HTTP {status}")
        self.status, self.retry_after, self.url = status, retry_after, url


class _Transport(Exception):
    """A transfer that broke (retryable): ``reason`` says how, ``timed_out`` when the deadline ended it."""

    def __init__(self, reason: str, url: str, timed_out: bool = False):
        super().__init__(reason)
        self.reason, self.url, self.timed_out = reason, url, timed_out


@dataclass
class _Reply:
    status: int
    headers: Message
    body: bytes
    url: str


def parse_headers(specs: list[str] | tuple[str, ...], environ: dict[str, str] | None = None) -> dict[str, str]:
    """``["Authorization=env:SEARCH_TOKEN", "X-Team=search"]`` as headers: ``env:NAME`` takes the value of
    environment variable NAME (so the secret is never on the command line or in a config file), any
    other value is used as it is. Raises ValueError naming a malformed spec or an unset variable (never a value)."""
    env: Any = os.environ if environ is None else environ
    headers: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--search-header needs NAME=VALUE or NAME=env:VARIABLE, got {name.strip() or spec[:20]!r}")
        if value.startswith("env:"):
            variable = value[4:]
            if not env.get(variable):
                raise ValueError(f"--search-header {name.strip()}: environment variable {variable} is not set")
            value = env[variable]
        headers[name.strip()] = value
    return headers


def public_url(url: str) -> str:
    """``url`` without user, password, query string or fragment (fit for a run file or a message)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
    """``(connection, request target, proxy headers)`` for ``url``, through its proxy
    (:func:`judge_runner.core.proxies.proxy_for`: never for loopback). Raises ExternalSearchError for a
    proxy that is not ``http://`` (http.client speaks neither SOCKS nor TLS to a proxy)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port
    target = urlunsplit(("", "", parts.path or "/", parts.query, ""))
    proxy = proxy_for(url)
    extra: dict[str, str] = {}
    if proxy:
        if proxy.scheme != "http":
            raise ExternalSearchError(
                f"search endpoint {public_url(url)}: the proxy {proxy.shown} is not an http:// proxy, which the HTTP search "
                f"needs; set no_proxy={host} to reach the endpoint directly",
                "search_failed",
            )
        via = urlsplit(proxy.url)
        if via.username:
            token = base64.b64encode(f"{unquote(via.username)}:{unquote(via.password or '')}".encode()).decode()
            extra["Proxy-Authorization"] = f"Basic {token}"
        if parts.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                via.hostname or "", via.port or 80, timeout=timeout, context=ssl.create_default_context()
            )
            conn.set_tunnel(host, port, headers=extra)
            return conn, target, {}
        return http.client.HTTPConnection(via.hostname or "", via.port or 80, timeout=timeout), url, extra
    if parts.scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl.create_default_context()), target, {}
    return http.client.HTTPConnection(host, port, timeout=timeout), target, {}


def _through(url: str) -> str:
    """`` through the proxy <proxy>`` when a request to ``url`` goes through one, else ``""``."""
    proxy = proxy_for(url)
    return f" through the proxy {proxy.shown}" if proxy else ""


def _abort(sockets: list[socket.socket], fired: threading.Event) -> None:
    """Shut the exchange's socket down from the watchdog thread (a read blocked in it returns at once;
    http.client drops its own reference once a ``Connection: close`` reply starts, the reply keeps
    reading from it) and set ``fired``, so that what was read is not taken for the whole reply."""
    fired.set()
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _read_body(response: http.client.HTTPResponse, max_bytes: int, url: str) -> bytes:
    """The body as sent (still content-coded), at most ``max_bytes``. Raises ExternalSearchError past it."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read1(65536)
        if not chunk:
            if response.length:  # the connection ended before Content-Length bytes came
                raise http.client.IncompleteRead(b"".join(chunks), response.length)
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise ExternalSearchError(
                f"search endpoint {public_url(url)} sent more than {megabytes(max_bytes)}; stopped reading there", "search_output"
            )
        chunks.append(chunk)


def _content_decoded(body: bytes, coding: str, max_bytes: int, url: str) -> bytes:
    """``body`` with its ``Content-Encoding`` undone (codings applied in order, undone in reverse),
    at most ``max_bytes`` of decoded bytes. Raises ExternalSearchError for an unknown coding, a body
    that does not decode, or one that decodes past the bound."""
    where = f"search endpoint {public_url(url)}"
    for name in reversed([c.strip().lower() for c in coding.split(",") if c.strip()]):
        if name == "identity":
            continue
        if name not in _DECODERS:
            raise ExternalSearchError(
                f"{where} sent its reply with Content-Encoding {name!r}, which judge-runner cannot decode (gzip and deflate only)",
                "search_output",
            )
        try:
            decoder = zlib.decompressobj(_DECODERS[name])
            decoded = decoder.decompress(body, max_bytes + 1)
        except zlib.error as exc:
            if name != "deflate":
                raise ExternalSearchError(f"{where} sent a {name} body that does not decompress ({exc})", "search_output") from None
            try:  # "deflate" sent as a raw deflate stream (without the zlib header), as some servers do
                decoder = zlib.decompressobj(-zlib.MAX_WBITS)
                decoded = decoder.decompress(body, max_bytes + 1)
            except zlib.error as raw_exc:
                raise ExternalSearchError(f"{where} sent a deflate body that does not decompress ({raw_exc})", "search_output") from None
        if len(decoded) > max_bytes or decoder.unconsumed_tail:
            raise ExternalSearchError(
                f"{where} sent a {name} reply of more than {megabytes(max_bytes)} once decompressed; stopped there", "search_output"
            )
        body = decoded
    return body


class HttpSearch:
    """A search behind an HTTP endpoint: ``POST url`` with JSON ``{"query", "limit", "mode"}``, JSON
    results back, read by ``reply`` (:class:`~judge_runner.search.mapping.ReplyRules`).

    ``headers`` go with every request (:func:`parse_headers`); ``timeout`` bounds one whole exchange and
    ``deadline`` the call with its retries (seconds; default 4 x ``timeout``). Transport errors, timeouts
    and HTTP 408/409/429/5xx are retried up to ``max_retries`` times, waiting ``max(Retry-After,
    exponential backoff with jitter)`` from ``backoff`` seconds up to :attr:`retry_cap`. Raises ValueError
    for a URL that is not http(s)."""

    retry_cap = 30.0
    """The longest wait between two attempts, seconds."""

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        deadline: float | None = None,
        reply: ReplyRules | None = None,
        name: str | None = None,
    ):
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise ValueError(f"--search-url must be an http(s) URL, got {public_url(url)!r}")
        self.url, self.headers = url, dict(headers or {})
        self.timeout, self.max_retries, self.backoff = timeout, max_retries, backoff
        self.deadline = deadline if deadline is not None else 4 * timeout
        self.reply = reply = reply or ReplyRules()
        self.mapping, self.documents, self.max_bytes = reply.mapping, reply.documents, reply.max_bytes
        self.name = name or (urlsplit(url).hostname or "http")

    def describe(self) -> dict[str, Any]:
        """What provenance records: the kind, the URL without credentials or query, header names only."""
        return {
            "kind": "http",
            "url": public_url(self.url),
            "headers": sorted(self.headers),
            "fields": self.mapping.describe(),
            "timeoutS": self.timeout,
            "deadlineS": self.deadline,
            "maxRetries": self.max_retries,
            "maxReplyBytes": self.max_bytes,
            "documents": self.documents.label if self.documents is not None else None,
        }

    def _scrub(self, text: str) -> str:
        for value in self.headers.values():
            if len(value) >= 4:
                text = text.replace(value, "***")
        return text

    def _exchange(self, url: str, body: bytes, headers: dict[str, str], ends: float) -> _Reply:
        """One request and its whole reply by ``ends`` (a ``time.monotonic()``). Raises _Transport."""
        left = ends - time.monotonic()
        if left <= 0:
            raise _Transport("no time left", url, timed_out=True)
        conn, target, extra = _connection(url, min(self.timeout, left))
        fired, sockets = threading.Event(), list[socket.socket]()
        watchdog = threading.Timer(left, _abort, args=(sockets, fired))
        watchdog.daemon = True
        watchdog.start()
        try:
            conn.connect()  # bounded by the connection's timeout; the watchdog covers everything after
            sockets.append(conn.sock)
            if fired.is_set():
                raise TimeoutError
            conn.request("POST", target, body=body, headers={**headers, **extra})
            response = conn.getresponse()
            data = _read_body(response, self.max_bytes, url)
            if fired.is_set():
                raise TimeoutError
            return _Reply(response.status, response.headers, data, url)
        except (OSError, http.client.HTTPException) as exc:
            if fired.is_set() or isinstance(exc, TimeoutError):
                raise _Transport("timed out", url, timed_out=True) from None
            raise _Transport(self._scrub(_describe_transport(exc))[:200], url) from None
        finally:
            watchdog.cancel()
            conn.close()

    def _post(self, body: bytes, call_ends: float) -> _Reply:
        """POST ``body``, following 307/308 redirects; returns the final 2xx reply. Raises _HttpStatus,
        _Transport or ExternalSearchError (a refused redirect, which is not retried)."""
        url, sent = self.url, self.headers
        base = {"Content-Type": "application/json", "Accept": "application/json", "Accept-Encoding": "gzip, deflate"}
        for _ in range(MAX_REDIRECTS + 1):
            reply = self._exchange(url, body, {**base, **sent}, min(time.monotonic() + self.timeout, call_ends))
            if 200 <= reply.status < 300:
                return reply
            if reply.status in FOLLOWED_REDIRECTS | REFUSED_REDIRECTS:
                location = reply.headers.get("Location")
                if not location:
                    raise ExternalSearchError(
                        f"search endpoint {public_url(url)} answered HTTP {reply.status} without a Location", "search_failed"
                    )
                target = urljoin(url, location)
                shown = public_url(target)
                if urlsplit(target).scheme not in ("http", "https"):
                    raise ExternalSearchError(
                        f"search endpoint {public_url(url)} redirected (HTTP {reply.status}) to {shown!r}, which is not http(s)"
                    )
                if reply.status in REFUSED_REDIRECTS:
                    raise ExternalSearchError(
                        f"search endpoint {public_url(url)} answered HTTP {reply.status}, a redirect to {shown}; not followed, since "
                        "HTTP clients re-send a POST there as a GET without the query: give --search-url "
                        f"{shown} (or make the server answer 307/308)",
                        "search_failed",
                    )
                if urlsplit(url).scheme == "https" and urlsplit(target).scheme == "http":
                    raise ExternalSearchError(
                        f"search endpoint {public_url(url)} redirected to {shown}, from https to plain http; not followed"
                    )
                if _origin(target) != _origin(self.url):
                    sent = {}  # credentials stay with the origin they were given for
                url = target
                continue
            retry_after = None
            try:
                retry_after = float(reply.headers.get("Retry-After", "")) if reply.headers.get("Retry-After") else None
            except ValueError:
                pass
            raise _HttpStatus(reply.status, retry_after, url)
        raise ExternalSearchError(
            f"search endpoint {public_url(self.url)} redirected more than {MAX_REDIRECTS} times (last to {public_url(url)})"
        )

    def _wait(self, state: tenacity.RetryCallState) -> float:
        backoff = tenacity.wait_exponential_jitter(multiplier=self.backoff, max=self.retry_cap)(state)
        exc = state.outcome.exception() if state.outcome else None
        retry_after = getattr(exc, "retry_after", None) or 0.0
        return max(min(retry_after, self.retry_cap), backoff)

    @staticmethod
    def _transient(exc: BaseException) -> bool:
        if isinstance(exc, _HttpStatus):
            return exc.status in RETRYABLE_STATUS
        return isinstance(exc, _Transport)

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10, *, intent: str = "") -> SearchAnswer:
        """POST the query and map the reply (``intent`` chooses only the passages of a document store, never
        goes to the endpoint). Raises ExternalSearchError (kinds ``search_timeout``,
        ``search_failed``: HTTP error, refused redirect or unreachable after the retries,
        ``search_output``: not JSON, too large, an unknown coding; ``search_unknown_source``);
        ``attempts`` counts the requests made."""
        started = time.perf_counter()
        call_ends = time.monotonic() + self.deadline
        where = public_url(self.url)
        body = json.dumps({"query": query, "limit": limit, "mode": mode}).encode("utf-8")
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1) | tenacity.stop_after_delay(self.deadline),
            wait=self._wait,
            retry=tenacity.retry_if_exception(self._transient),
            reraise=True,
        )
        attempts = 0
        try:
            for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    reply = self._post(body, call_ends)
        except _HttpStatus as exc:
            at = ("" if exc.url == self.url else f" (redirected to {public_url(exc.url)})") + _through(exc.url)
            raise ExternalSearchError(f"search endpoint {where} answered HTTP {exc.status}{at}", "search_failed", attempts) from None
        except _Transport as exc:
            at = ("" if exc.url == self.url else f" (redirected to {public_url(exc.url)})") + _through(exc.url)
            raise ExternalSearchError(
                f"search endpoint {where}{at} "
                + (
                    f"did not answer within {self.timeout:g} s (its whole reply)"
                    if exc.timed_out
                    else f"could not be reached: {exc.reason}"
                )
                + f" ({attempts} attempt(s))",
                "search_timeout" if exc.timed_out else "search_failed",
                attempts,
            ) from None
        except ExternalSearchError as exc:
            exc.attempts = attempts
            raise
        try:
            data = _content_decoded(reply.body, reply.headers.get("Content-Encoding") or "", self.max_bytes, reply.url)
            reply_json, notes = decode_reply(data, f"search endpoint {where}", reply.headers.get_content_charset())
            return answer_from_reply(reply_json, self.reply, query, mode, limit, started, notes, intent)
        except ExternalSearchError as exc:
            exc.attempts = attempts
            exc.args = (self._scrub(str(exc)),)
            raise


def _describe_transport(exc: BaseException) -> str:
    """A short reason for a broken transfer: ``"the connection was refused"``, ``"the reply broke off
    (IncompleteRead: 0 bytes read)"``."""
    if isinstance(exc, ConnectionRefusedError):
        return "the connection was refused"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without a reply"
    if isinstance(exc, http.client.IncompleteRead):
        return f"the reply broke off mid-transfer (a malformed or truncated body: {exc!r})"
    if isinstance(exc, http.client.HTTPException):
        return f"the reply is not valid HTTP ({type(exc).__name__}: {exc})"
    if isinstance(exc, socket.gaierror):
        return f"the host name does not resolve ({exc.strerror or exc})"
    return f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"
