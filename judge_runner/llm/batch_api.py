"""The batch APIs' contract: :class:`BatchBackend`, the plain data it returns, a request's stable
``custom_id``, and what a failed availability check means."""

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
"""How one request of a batch ended, in Anthropic's words (OpenAI's mapped onto them)."""

_DELIMITER = re.compile(r"document-[0-9a-f]{16}")


class BatchUnavailable(Exception):
    """The server has no batch API, or it refused the check."""


class BatchUnreachable(Exception):
    """The server did not answer the batch API check at all."""


def check_failure(exc: BaseException, provider: ChatProvider, request: str, where: str, no_api: str) -> Exception:
    """The error a failed batch-API check means: AuthError or SpendLimitError for a refused key,
    BatchUnreachable without an HTTP answer, else BatchUnavailable (``no_api`` for a 404 or 405)."""
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
    """A batch's progress: requests ``done`` of ``total``, and the API's own status word."""

    ended: bool
    done: int
    total: int
    state: str


@dataclass(frozen=True)
class ItemResult:
    """One request's ``outcome``, with its raw reply (``value``) or its LLMError (``error``)."""

    outcome: Outcome
    value: Any = None
    error: LLMError | None = None


@dataclass(frozen=True)
class BatchResults:
    """An ended batch's readable ``items`` by ``custom_id``, and the count of ``unreadable`` lines."""

    items: dict[str, ItemResult]
    unreadable: int = 0


def read_jsonl(text: str | bytes) -> tuple[list[dict[str, Any]], int]:
    """``(objects, unreadable)``: the lines that are JSON objects, and how many non-empty lines are not."""
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
    """One batch API over a synchronous provider, reusing its request bodies and reply parsing."""

    provider: ChatProvider

    def check(self) -> None:
        """One free request proving the server has the batch API; raises BatchUnavailable."""
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
        """An ended batch's results. Raises the SDK's errors."""
        ...

    def cancel(self, batch_id: str) -> None:
        """Ask the API to cancel the batch."""
        ...


def custom_id(body: dict) -> str:
    """``jr-`` and 40 hex digits of the sha256 of the body with every fence delimiter replaced, so the same
    call in another process has the same id."""
    text = _DELIMITER.sub("document-0", json.dumps(body, sort_keys=True, ensure_ascii=False))
    return "jr-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]
