"""A search run as a command per query, behind the built-in search's protocol. Nothing the command does can
hang a run: one deadline from its start to its last byte, a bounded read, and its process group killed
after. Every failure raises :class:`~judge_runner.search.mapping.ExternalSearchError`; secret-looking
arguments are recorded as ``***``. See docs/external-search.md.
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
    DocumentStore,
    ExternalSearchError,
    FieldMapping,
    ReplyRules,
    answer_from_reply,
    decode_reply,
    megabytes,
)

_SECRET_ARG = re.compile(r"(?i)(token|secret|password|passwd|api[-_]?key|auth)")
EXIT_GRACE_S = 0.5
"""Seconds an exited command's pipes are still read; a child holding them open is not waited for."""
STDERR_KEPT_BYTES = 64 * 1024  # the end of stderr kept for the error message; the rest is read and dropped
_POLL_S = 0.05  # how often a running command is checked for having exited while its pipes stay quiet


def redact_argument(arg: str) -> str:
    """``--token=abc`` -> ``--token=***``; a bare name (``--api-key``) is kept."""
    if "=" in arg and _SECRET_ARG.search(arg.split("=", 1)[0]):
        return arg.split("=", 1)[0] + "=***"
    return arg


def redact_command(argv: list[str]) -> str:
    """The command line with arguments after or holding a secret-looking name as ``***``."""
    out, hide_next = [], False
    for arg in argv:
        out.append("***" if hide_next and "{" not in arg else redact_argument(arg))
        hide_next = arg.startswith("-") and "=" not in arg and bool(_SECRET_ARG.search(arg))
    return shlex.join(out)


_INTERPRETERS = re.compile(r"^(python[\d.]*|node|ruby|perl|sh|bash|uv|uvx|npx|java|php)$")


def command_name(argv: list[str]) -> str:
    """The program's file name, or the script's stem when the program is an interpreter."""
    program = os.path.basename(argv[0])
    if _INTERPRETERS.match(program):
        script = next((a for a in argv[1:] if not a.startswith("-") and "{" not in a), None)
        if script:
            return os.path.splitext(os.path.basename(script))[0] or program
    return program


class CommandSearch:
    """A search run as a command for each query: ``mysearch --json --limit {limit}``, without a shell.
    ``{query}``, ``{limit}`` and ``{mode}`` are replaced in each argument; without ``{query}`` the query
    goes to stdin. ``timeout``: seconds from start to last byte. Raises ValueError for an empty template.
    """

    def __init__(
        self,
        template: str,
        *,
        timeout: float = 60.0,
        mapping: FieldMapping | None = None,
        documents: DocumentStore | None = None,
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
        """The command's answer for ``query`` (``intent`` never reaches it). Raises ExternalSearchError:
        ``search_timeout``, ``search_failed``, ``search_output`` or ``search_unknown_source``."""
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
    """What :func:`collect_output` read, and how reading ended: ``cut``, ``timed_out`` or ``left_open``."""

    stdout: bytes = b""
    stderr: bytes = b""
    cut: bool = False
    timed_out: bool = False
    left_open: bool = False
    _out: list[bytes] = field(default_factory=list, repr=False)
    _size: int = 0


def collect_output(process: subprocess.Popen, stdin: bytes, timeout: float, max_bytes: int = MAX_REPLY_BYTES) -> CommandOutput:
    """Write ``stdin`` and read stdout and stderr within ``timeout`` seconds, stopping past ``max_bytes``
    or :data:`EXIT_GRACE_S` after exit. Never blocks past the deadline; the caller kills what is left."""
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
    """Kill the command's process group, background children too, and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
        pass
