"""Searches judge-runner does not run itself, behind the same backend protocol as the built-in search
(:class:`~judge_runner.search.base.SearchBackend`): a command (:class:`CommandSearch`) or an HTTP
endpoint (:class:`HttpSearch`). Both map the other system's JSON with a
:class:`~judge_runner.search.mapping.FieldMapping` and fetch missing text from a document store.

Every failure raises :class:`~judge_runner.search.mapping.ExternalSearchError`, which the run loop
records as an ``error`` line with ``stage: search`` (never a zero score). Secrets stay out of run
files, logs and messages: header values are read from environment variables at start-up and never
written anywhere, URLs are recorded without credentials or query string, and command arguments that
look like secrets are recorded as ``***``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import tenacity

from judge_runner.core.models import SearchMode
from judge_runner.search.base import SearchAnswer
from judge_runner.search.mapping import ExternalSearchError, FieldMapping, dig, map_hits

RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))  # as the LLM layer (llm/retry.py)
_SECRET_ARG = re.compile(r"(?i)(token|secret|password|passwd|api[-_]?key|auth)")


def _answer(
    query: str, mode: SearchMode, reply: Any, mapping: FieldMapping, limit: int, documents: Any, snippet_chars: int, started: float
) -> SearchAnswer:
    hits = map_hits(reply, mapping, query, limit, documents, snippet_chars)
    confident = dig(reply, "confident") if isinstance(reply, dict) else None
    return SearchAnswer(
        query=query,
        mode=mode,
        results=hits,
        confident=bool(hits) and (confident if isinstance(confident, bool) else True),
        latencyMs=round((time.perf_counter() - started) * 1000, 3),
    )


def _decode(text: str, what: str) -> Any:
    if not text.strip():
        raise ExternalSearchError(f"{what} returned nothing (expected JSON results)", "search_output")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExternalSearchError(
            f"{what} returned invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): {text.strip()[:120]!r}", "search_output"
        ) from None


def redact_argument(arg: str) -> str:
    """A command argument fit for a run file: ``--token=abc`` -> ``--token=***``; an argument that only
    names a secret (``--api-key``) is kept, and :func:`redact_command` hides the value after it."""
    if "=" in arg and _SECRET_ARG.search(arg.split("=", 1)[0]):
        return arg.split("=", 1)[0] + "=***"
    return arg


def redact_command(argv: list[str]) -> str:
    """The command line as recorded in provenance: arguments after or holding a secret-looking name
    (token, secret, password, api key, auth) replaced with ``***``."""
    out, hide_next = [], False
    for arg in argv:
        out.append("***" if hide_next and "{" not in arg else redact_argument(arg))
        hide_next = arg.startswith("-") and "=" not in arg and bool(_SECRET_ARG.search(arg))
    return shlex.join(out)


_INTERPRETERS = re.compile(r"^(python[\d.]*|node|ruby|perl|sh|bash|uv|uvx|npx|java|php)$")


def command_name(argv: list[str]) -> str:
    """A short name for a command: the program's file name, or the script's (without suffix) when the
    program is an interpreter (``python tests/engines/bm25s_search.py ...`` -> ``bm25s_search``)."""
    program = os.path.basename(argv[0])
    if _INTERPRETERS.match(program):
        script = next((a for a in argv[1:] if not a.startswith("-") and "{" not in a), None)
        if script:
            return os.path.splitext(os.path.basename(script))[0] or program
    return program


class CommandSearch:
    """A search run as a command for each query: ``mysearch --json --limit {limit}``.

    The template is split with :func:`shlex.split` and run without a shell. In each argument
    ``{query}``, ``{limit}`` and ``{mode}`` are replaced; the query is one argument wherever
    ``{query}`` appears, else it is written to the command's stdin (UTF-8, no trailing newline). The
    command prints JSON results on stdout (mapped with ``mapping``). ``timeout`` is in seconds; a
    command that outlives it is killed with its process group. Raises ValueError for an empty template.
    """

    def __init__(
        self,
        template: str,
        *,
        timeout: float = 60.0,
        mapping: FieldMapping | None = None,
        documents: Any = None,
        snippet_chars: int = 400,
        name: str | None = None,
        cwd: str | None = None,
    ):
        self.argv = shlex.split(template)
        if not self.argv:
            raise ValueError("the search command is empty")
        self.timeout, self.mapping, self.documents = timeout, mapping or FieldMapping(), documents
        self.snippet_chars, self.cwd = snippet_chars, cwd
        self.on_stdin = not any("{query}" in arg for arg in self.argv)
        self.name = name or command_name(self.argv)

    def describe(self) -> dict[str, Any]:
        """What provenance records: the kind, the command (secret-looking arguments hidden), the mapping."""
        return {
            "kind": "command",
            "command": redact_command(self.argv),
            "queryOn": "stdin" if self.on_stdin else "argument",
            "fields": self.mapping.describe(),
            "timeoutS": self.timeout,
            "documents": getattr(self.documents, "label", None),
        }

    def _argv(self, query: str, mode: str, limit: int) -> list[str]:
        return [a.replace("{query}", query).replace("{limit}", str(limit)).replace("{mode}", mode) for a in self.argv]

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10) -> SearchAnswer:
        """Run the command for ``query`` and map what it prints. Raises ExternalSearchError (kinds
        ``search_timeout``, ``search_failed``: not found or non-zero exit, ``search_output``: nothing or
        not JSON, ``search_unknown_source``)."""
        started = time.perf_counter()
        what = f"search command {self.name!r}"
        try:
            process = subprocess.Popen(
                self._argv(query, mode, limit),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            raise ExternalSearchError(f"{what} could not be started: {exc.strerror or exc}") from None
        try:
            out, err = process.communicate(query.encode("utf-8") if self.on_stdin else b"", timeout=self.timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.communicate()
            raise ExternalSearchError(f"{what} did not finish within {self.timeout:g} s (killed)", "search_timeout") from None
        if process.returncode != 0:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise ExternalSearchError(
                f"{what} exited with status {process.returncode}" + (f": {' | '.join(tail)[:300]}" if tail else " (no stderr)")
            )
        reply = _decode(out.decode("utf-8", "replace"), what)
        return _answer(query, mode, reply, self.mapping, limit, self.documents, self.snippet_chars, started)


class _HttpStatus(Exception):
    def __init__(self, status: int, retry_after: float | None):
        super().__init__(f"HTTP {status}")
        self.status, self.retry_after = status, retry_after


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


class HttpSearch:
    """A search behind an HTTP endpoint: ``POST url`` with JSON ``{"query", "limit", "mode"}``, JSON
    results back (mapped with ``mapping``).

    ``headers`` are sent with every request (see :func:`parse_headers`); ``timeout`` bounds one attempt
    (seconds). Connection errors, timeouts and HTTP 408/409/429/5xx are retried up to ``max_retries``
    times with tenacity, waiting ``max(Retry-After, exponential backoff with jitter)`` (base
    ``backoff`` seconds, at most ``retry_cap``), as the LLM layer does (llm/retry.py). Raises ValueError
    for a URL that is not http(s).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        retry_cap: float = 30.0,
        mapping: FieldMapping | None = None,
        documents: Any = None,
        snippet_chars: int = 400,
        name: str | None = None,
    ):
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise ValueError(f"--search-url must be an http(s) URL, got {public_url(url)!r}")
        self.url, self.headers = url, dict(headers or {})
        self.timeout, self.max_retries, self.backoff, self.retry_cap = timeout, max_retries, backoff, retry_cap
        self.mapping, self.documents, self.snippet_chars = mapping or FieldMapping(), documents, snippet_chars
        self.name = name or (urlsplit(url).hostname or "http")

    def describe(self) -> dict[str, Any]:
        """What provenance records: the kind, the URL without credentials or query, header names only."""
        return {
            "kind": "http",
            "url": public_url(self.url),
            "headers": sorted(self.headers),
            "fields": self.mapping.describe(),
            "timeoutS": self.timeout,
            "maxRetries": self.max_retries,
            "documents": getattr(self.documents, "label", None),
        }

    def _scrub(self, text: str) -> str:
        for value in self.headers.values():
            if len(value) >= 4:
                text = text.replace(value, "***")
        return text

    def _post(self, body: bytes) -> bytes:
        request = urllib.request.Request(
            self.url, data=body, method="POST", headers={"Content-Type": "application/json", "Accept": "application/json", **self.headers}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - http(s) checked in __init__
                return response.read()
        except urllib.error.HTTPError as exc:
            retry_after = None
            try:
                retry_after = float(exc.headers.get("retry-after", "")) if exc.headers else None
            except ValueError:
                pass
            exc.close()
            raise _HttpStatus(exc.code, retry_after) from None

    def _wait(self, state: tenacity.RetryCallState) -> float:
        backoff = tenacity.wait_exponential_jitter(multiplier=self.backoff, max=self.retry_cap)(state)
        exc = state.outcome.exception() if state.outcome else None
        retry_after = getattr(exc, "retry_after", None) or 0.0
        return max(min(retry_after, self.retry_cap), backoff)

    @staticmethod
    def _transient(exc: BaseException) -> bool:
        if isinstance(exc, _HttpStatus):
            return exc.status in RETRYABLE_STATUS
        return isinstance(exc, (urllib.error.URLError, TimeoutError, ConnectionError))

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10) -> SearchAnswer:
        """POST the query and map the reply. Raises ExternalSearchError (kinds ``search_timeout``,
        ``search_failed``: HTTP error or unreachable after the retries, ``search_output``,
        ``search_unknown_source``); ``attempts`` counts the requests made."""
        started = time.perf_counter()
        where = public_url(self.url)
        body = json.dumps({"query": query, "limit": limit, "mode": mode}).encode("utf-8")
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=tenacity.retry_if_exception(self._transient),
            reraise=True,
        )
        attempts = 0
        try:
            for attempt in retrying:
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    raw = self._post(body)
        except _HttpStatus as exc:
            raise ExternalSearchError(f"search endpoint {where} answered HTTP {exc.status}", "search_failed", attempts) from None
        except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            timed_out = isinstance(exc, TimeoutError) or isinstance(reason, TimeoutError)
            raise ExternalSearchError(
                f"search endpoint {where} "
                + (f"did not answer within {self.timeout:g} s" if timed_out else f"could not be reached: {self._scrub(str(reason))[:200]}")
                + f" ({attempts} attempt(s))",
                "search_timeout" if timed_out else "search_failed",
                attempts,
            ) from None
        reply = _decode(self._scrub(raw.decode("utf-8", "replace")), f"search endpoint {where}")
        try:
            return _answer(query, mode, reply, self.mapping, limit, self.documents, self.snippet_chars, started)
        except ExternalSearchError as exc:
            exc.attempts = attempts
            raise
