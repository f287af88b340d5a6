"""The batch APIs' contract (``--batch``): what a backend for the Anthropic Message Batches API or the
OpenAI Batch API offers (:class:`BatchBackend`: create, poll, fetch results, cancel), the plain data it
returns (:class:`BatchStatus`, :class:`ItemResult`), the stable ``custom_id`` of a request, and how a
failed availability check is told apart (no batch API, server unreachable, refused key). The coordinator
that gathers calls into batches is :mod:`judge_runner.llm.batch`. A result file is read line by line
(:func:`read_jsonl`): a line cut short costs its own request only.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from judge_runner.llm.base import ChatProvider, ChatRequest, Completion, ToolSpec
from judge_runner.llm.errors import LLMError
from judge_runner.llm.retry import translate
from judge_runner.llm.wire import server_message

Outcome = Literal["succeeded", "errored", "expired", "canceled"]
"""How one request of a batch ended, in both APIs' words (Anthropic's result types; OpenAI's mapped onto them)."""

_DELIMITER = re.compile(r"document-[0-9a-f]{16}")


class BatchUnavailable(Exception):
    """The server has no batch API (a local OpenAI-compatible server), or it refused the check."""


class BatchUnreachable(Exception):
    """The server did not answer the batch API check at all (connection refused, DNS, timeout)."""


def check_failure(exc: BaseException, provider: ChatProvider, request: str, where: str, no_api: str) -> Exception:
    """What a failed batch-API check (``request``, e.g. ``GET /v1/batches``, to the server at ``where``)
    means, by the synchronous provider's own classification: a refused key is the AuthError (or
    SpendLimitError) a synchronous call would raise; no HTTP answer is BatchUnreachable ("cannot
    reach"); a 404 or 405 is BatchUnavailable (``no_api``: the server has no batch API); any other
    answer is BatchUnavailable saying what the server answered."""
    status = getattr(exc, "status_code", None)
    said = server_message(exc) or type(exc).__name__
    kind = provider.classify(exc)
    if kind in ("auth", "spend_limit"):
        return translate(exc, 1, provider.classify)
    if not isinstance(status, int):
        return BatchUnreachable(f"cannot reach {where} ({request}: {said})")
    if status in (404, 405):
        return BatchUnavailable(f"{no_api}: {request} answered HTTP {status}: {said}")
    return BatchUnavailable(f"the batch API at {where} did not answer the check ({request}: HTTP {status}: {said})")


@dataclass(frozen=True)
class BatchStatus:
    """A batch's progress: ``ended`` (no request is processing any more), requests ``done`` of
    ``total``, and the API's own status word (``in_progress``, ``ended``, ``finalizing``...)."""

    ended: bool
    done: int
    total: int
    state: str


@dataclass(frozen=True)
class ItemResult:
    """One request's result: ``outcome`` and either the raw reply (``value``, what the backend's
    ``parse`` reads) or the LLMError it becomes (``error``)."""

    outcome: Outcome
    value: Any = None
    error: LLMError | None = None


@dataclass(frozen=True)
class BatchResults:
    """What an ended batch's result file holds: ``items`` by ``custom_id`` (every line that could be read),
    and ``unreadable``, the lines that could not (cut short, not JSON, not a result): their requests have
    no result here, and the coordinator asks for them again."""

    items: dict[str, ItemResult]
    unreadable: int = 0


def read_jsonl(text: str | bytes) -> tuple[list[dict[str, Any]], int]:
    """``(objects, unreadable)`` of a JSON Lines file: every line that is a JSON object, and the number of
    non-empty lines that are not (a line cut short by a dropped connection or a half-written file). One bad
    line never costs the others (https://jsonlines.org: each line is a value of its own)."""
    raw = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    objects: list[dict[str, Any]] = []
    unreadable = 0
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            unreadable += 1
            continue
        if isinstance(value, dict) and value.get("custom_id") is not None:
            objects.append(value)
        else:
            unreadable += 1
    return objects, unreadable


class BatchBackend(Protocol):
    """One batch API over one synchronous provider (whose request building and reply parsing it reuses)."""

    provider: ChatProvider

    def check(self) -> None:
        """Make one free request proving the server has the batch API; raises BatchUnavailable."""
        ...

    def body(self, request: ChatRequest) -> dict:
        """The request body the synchronous provider would send for this call."""
        ...

    def parse(self, value: Any, tools: list[ToolSpec], force_tool: str | None) -> Completion:
        """A succeeded item's raw reply as the synchronous provider parses a reply."""
        ...

    def submit(self, requests: Sequence[tuple[str, dict]]) -> str:
        """Create a batch of ``(custom_id, body)`` requests; returns its id. Raises the SDK's errors."""
        ...

    def status(self, batch_id: str) -> BatchStatus:
        """The batch's progress. Raises the SDK's errors."""
        ...

    def results(self, batch_id: str) -> BatchResults:
        """Every readable result of an ended batch by ``custom_id``, and how many lines were unreadable.
        Raises the SDK's errors."""
        ...

    def cancel(self, batch_id: str) -> None:
        """Ask the API to cancel the batch."""
        ...


def custom_id(body: dict) -> str:
    """The stable id of a request: ``jr-`` and 40 hex digits of the sha256 of its body (keys sorted)
    with every fence delimiter (``document-`` + 16 random hex digits, :func:`fence.new_delimiter`)
    replaced, so the same call made by another process has the same id (both APIs accept
    ``[A-Za-z0-9_-]{1,64}``)."""
    text = _DELIMITER.sub("document-0", json.dumps(body, sort_keys=True, ensure_ascii=False))
    return "jr-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]
