"""Searches judge-runner does not run itself, behind the same backend protocol as the built-in search
(:class:`~judge_runner.search.base.SearchBackend`): a command (:class:`CommandSearch`, here) or an HTTP
endpoint (:class:`~judge_runner.search.http_search.HttpSearch`). Both map the other system's JSON with a
:class:`~judge_runner.search.mapping.FieldMapping` and fetch missing text from a document store.

Nothing the other side does can hang a run: a command is given ``timeout`` seconds from its start to
its last byte (its output is read with that deadline, not until end of file, so a background process
that inherited the pipe cannot hold the query), once it has exited its output is taken within a short
grace (:data:`EXIT_GRACE_S`) and whatever is left of its process group is killed, and at most
:data:`~judge_runner.search.mapping.MAX_REPLY_BYTES` of its output is read.

Every failure raises :class:`~judge_runner.search.mapping.ExternalSearchError`, which the run loop
records as an ``error`` line with ``stage: search`` (never a zero score). Secrets stay out of run
files, logs and messages: header values are read from environment variables at start-up and never
written anywhere, URLs are recorded without credentials or query string, and command arguments that
look like secrets are recorded as ``***``.
"""

from __future__ import annotations

import os
import re
import selectors
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from judge_runner.core.models import SearchMode
from judge_runner.search.base import SearchAnswer
from judge_runner.search.mapping import (
    MAX_REPLY_BYTES,
    ExternalSearchError,
    FieldMapping,
    ReplyRules,
    answer_from_reply,
    decode_reply,
    megabytes,
)

_SECRET_ARG = re.compile(r"(?i)(token|secret|password|passwd|api[-_]?key|auth)")
EXIT_GRACE_S = 0.5
"""Seconds the output of a command that has exited is still read, for what is left in the pipe; a
process it left behind that keeps the pipe open is not waited for longer."""
STDERR_KEPT_BYTES = 64 * 1024  # the end of stderr kept for the error message; the rest is read and dropped
_POLL_S = 0.05  # how often a running command is checked for having exited while its pipes stay quiet


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
    program is an interpreter (``python tests/support/engines/bm25s_search.py ...`` -> ``bm25s_search``)."""
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
    command prints JSON results on stdout (mapped with ``mapping``). ``timeout`` is in seconds from
    the start to the last byte read; a command that outlives it is killed with its process group.
    ``max_bytes``: the most of its stdout read (:data:`~judge_runner.search.mapping.MAX_REPLY_BYTES`).
    Raises ValueError for an empty template.
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
        max_bytes: int = MAX_REPLY_BYTES,
    ):
        self.argv = shlex.split(template)
        if not self.argv:
            raise ValueError("the search command is empty")
        self.timeout, self.mapping, self.documents = timeout, mapping or FieldMapping(), documents
        self.snippet_chars, self.cwd, self.max_bytes = snippet_chars, cwd, max_bytes
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
            "maxReplyBytes": self.max_bytes,
            "documents": getattr(self.documents, "label", None),
        }

    def _argv(self, query: str, mode: str, limit: int) -> list[str]:
        return [a.replace("{query}", query).replace("{limit}", str(limit)).replace("{mode}", mode) for a in self.argv]

    def search(self, query: str, mode: SearchMode = "hybrid", limit: int = 10, *, intent: str = "") -> SearchAnswer:
        """Run the command for ``query`` and map what it prints (``intent`` chooses only the passages of a
        document store, never goes to the command). Raises ExternalSearchError (kinds
        ``search_timeout``: not done within ``timeout`` seconds, killed; ``search_failed``: not found or
        non-zero exit; ``search_output``: nothing, not JSON, or more than ``max_bytes`` printed, cut
        there and killed; ``search_unknown_source``)."""
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
            output = collect_output(process, query.encode("utf-8") if self.on_stdin else b"", self.timeout, self.max_bytes)
        finally:
            _kill_group(process)
        if output.cut:
            raise ExternalSearchError(
                f"{what} printed more than {megabytes(self.max_bytes)}; stopped reading there and killed it "
                "(a reply of search results is far smaller: is it printing whole documents or a log on stdout?)",
                "search_output",
            )
        if output.timed_out:
            raise ExternalSearchError(f"{what} did not finish within {self.timeout:g} s (killed)", "search_timeout")
        if process.returncode != 0:
            tail = output.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            status = process.returncode
            raise ExternalSearchError(f"{what} exited with status {status}" + (f": {' | '.join(tail)[:300]}" if tail else " (no stderr)"))
        reply, notes = decode_reply(output.stdout, what)
        if output.left_open:
            notes.append(f"{what} exited while a process it started kept its output open; read what it had printed")
        return answer_from_reply(
            reply, ReplyRules(self.mapping, self.documents, self.snippet_chars), query, mode, limit, started, notes, intent
        )


@dataclass
class CommandOutput:
    """What :func:`collect_output` read: ``stdout`` (at most the bound), the end of ``stderr``, and how
    reading ended: ``cut`` (stdout passed the bound), ``timed_out`` (the command had not exited by the
    deadline), ``left_open`` (it exited but something else kept a pipe open past the grace)."""

    stdout: bytes = b""
    stderr: bytes = b""
    cut: bool = False
    timed_out: bool = False
    left_open: bool = False
    _out: list[bytes] = field(default_factory=list, repr=False)
    _size: int = 0


def collect_output(process: subprocess.Popen, stdin: bytes, timeout: float, max_bytes: int = MAX_REPLY_BYTES) -> CommandOutput:
    """Write ``stdin`` to ``process`` and read its stdout and stderr until both end, with a deadline of
    ``timeout`` seconds from now for everything. Reading stops early when stdout passes ``max_bytes``
    (``cut``), and :data:`EXIT_GRACE_S` after the process exits when a pipe is still open (a child it
    left in the background holds it: ``left_open``). Never blocks past the deadline; the caller kills
    what is left (:func:`_kill_group`)."""
    deadline = time.monotonic() + timeout
    result = CommandOutput()
    err = bytearray()
    pipes = [p for p in (process.stdin, process.stdout, process.stderr) if p is not None]
    with selectors.DefaultSelector() as selector:
        for pipe in pipes:
            os.set_blocking(pipe.fileno(), False)
        pending = memoryview(stdin)
        if process.stdin is not None:
            if pending:
                selector.register(process.stdin, selectors.EVENT_WRITE)
            else:
                process.stdin.close()
        for reader in (process.stdout, process.stderr):
            if reader is not None:
                selector.register(reader, selectors.EVENT_READ)
        exited_at: float | None = None
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and now >= exited_at + EXIT_GRACE_S:
                result.left_open = True
                break
            if now >= deadline:
                result.timed_out = exited_at is None
                result.left_open = exited_at is not None
                break
            limit = deadline if exited_at is None else min(deadline, exited_at + EXIT_GRACE_S)
            for key, _ in selector.select(min(limit - now, _POLL_S if exited_at is None else limit - now)):
                source = key.fileobj
                if source is process.stdin:
                    try:
                        sent = os.write(key.fd, pending[:65536])
                    except (BrokenPipeError, BlockingIOError) as exc:
                        sent = 0 if isinstance(exc, BlockingIOError) else len(pending)
                    pending = pending[sent:]
                    if not pending:
                        selector.unregister(source)
                        process.stdin.close()
                    continue
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(source)
                    continue
                if source is process.stdout:
                    result._out.append(chunk)
                    result._size += len(chunk)
                    if result._size > max_bytes:
                        result.cut = True
                        break
                else:
                    err += chunk
                    del err[:-STDERR_KEPT_BYTES]
            if result.cut:
                break
    for pipe in pipes:
        if not pipe.closed:
            pipe.close()
    result.stdout = b"".join(result._out)[:max_bytes]
    result._out.clear()
    result.stderr = bytes(err)
    if not result.timed_out and not result.cut:
        try:  # it exited, or closed its pipes and may still be finishing: wait for its status, within the deadline
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            result.timed_out = True
    return result


def _kill_group(process: subprocess.Popen) -> None:
    """Kill whatever is left of the command's process group (it runs in a session of its own: its
    background children go with it) and reap the command."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
        pass
