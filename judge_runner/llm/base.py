"""The provider protocol: one :class:`ChatRequest` in, one :class:`Completion` out.

Adding a provider is one new file with a subclass of :class:`ChatProvider` that implements ``_send``
(one HTTP request, no retries) and ``classify`` (which of its SDK's errors are retryable, a refused key,
a spent account or a bad request), plus one entry in :mod:`judge_runner.llm.registry`. Retries, budget
and usage accounting live here, shared by all.
"""

from __future__ import annotations

import dataclasses
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from judge_runner.llm.budget import Budget, Reservation, estimate_tokens
from judge_runner.llm.errors import LLMError
from judge_runner.llm.pricing import DEFAULT_EFFORT, Price, Usage, price_for
from judge_runner.llm.retry import ErrorClass, RetryPolicy, classify_generic

StopReason = Literal["tool_use", "end", "max_tokens", "refusal"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call: name, description and JSON Schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolUse:
    """A tool call the model made."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """Our answer to a tool call."""

    tool_use_id: str
    content: str
    is_error: bool = False


@dataclass
class Turn:
    """One message of the conversation: a user turn (text and/or tool results) or an assistant turn
    (text and/or tool calls)."""

    role: Literal["user", "assistant"]
    text: str | None = None
    tool_uses: list[ToolUse] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ChatRequest:
    """One logical call as every provider lays it out: the ``system`` prompt and ``turns``, the ``tools``
    offered and ``force_tool`` (the one the model must call), ``max_tokens`` of output, ``cache_system``
    (the system prompt marked cacheable) and ``sampling`` fields (``{"temperature": 0, "seed": 7}``,
    ``judge_runner.judging.fingerprint.sampling_settings``) for a provider that takes them."""

    system: str
    turns: list[Turn] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)
    force_tool: str | None = None
    max_tokens: int = 4096
    cache_system: bool = False
    sampling: Mapping[str, Any] | None = None


@dataclass
class Completion:
    """A model reply: text, tool calls, normalised stop reason, usage summed over every attempt,
    USD cost (None when the price is unknown), and the HTTP requests it took."""

    text: str
    tool_uses: list[ToolUse]
    stop: StopReason
    usage: Usage
    model: str
    cost_usd: float | None = None
    attempts: int = 1


class ChatProvider(ABC):
    """Base of the network providers. ``timeout_s`` bounds one HTTP attempt (seconds)."""

    name: str = "base"
    reasoning_effort: str = DEFAULT_EFFORT
    """The effort sent to a model that reasons before answering (:attr:`reasoning_allowance` > 0); unused otherwise."""

    def __init__(self, model: str, retry: RetryPolicy, budget: Budget, timeout_s: float = 60.0):
        self.model = model
        self.retry = retry
        self.budget = budget
        self.timeout_s = timeout_s
        self.price: Price | None = price_for(model)

    @property
    def reasoning_allowance(self) -> int:
        """Output tokens a call adds to its limit for the model's reasoning (0: the model does not reason
        before answering, or this provider sends no reasoning model)."""
        return 0

    def prepare_run(self, partner: ChatProvider | None, concurrency: int, concurrency_set: bool) -> tuple[int, list[str]]:
        """Adjust a run to this provider's server before it starts: ``(judge concurrency to use, notes for
        stderr)``. ``partner`` is the other role's provider (the query writer's), which may share what this
        one learns about a common server; ``concurrency_set`` says whether the user chose the concurrency.
        The default changes nothing; the OpenAI-compatible provider serialises a local server's requests
        (:func:`judge_runner.llm.local_server.local_server_setup`)."""
        return concurrency, []

    def classify(self, exc: BaseException) -> ErrorClass | None:
        """The :data:`~judge_runner.llm.retry.ErrorClass` of a failure of :meth:`_send` (retryable, auth,
        spend_limit, bad_request), None for an exception that is no provider failure (a bug, re-raised).
        Each provider overrides it to recognise its own SDK's errors; this default knows only errors with
        an int ``status_code`` and the standard library's timeouts and connection errors."""
        return classify_generic(exc)

    @abstractmethod
    def _send(self, request: ChatRequest, timeout: float) -> Completion:
        """One HTTP request bounded by ``timeout`` seconds; raises the SDK's own errors."""

    def _reserve(self, input_tokens: int, max_tokens: int) -> Reservation:
        """Hold the worst case of one call in the budget (``input_tokens`` estimated, ``max_tokens`` of
        output); raises BudgetExhausted or CallTooExpensive. ``--batch`` overrides it to wait for room."""
        return self.budget.reserve(self.price, input_tokens, max_tokens)

    def complete(
        self,
        system: str,
        turns: list[Turn],
        tools: list[ToolSpec],
        force_tool: str | None = None,
        max_tokens: int = 4096,
        cache_system: bool = False,
        sampling: Mapping[str, Any] | None = None,
    ) -> Completion:
        """One logical call (:class:`ChatRequest`'s fields) with retries and budget. Raises an ``LLMError`` kind
        (BudgetExhausted and CallTooExpensive before any request is sent); ``Completion.model`` is the model id
        the API returned."""
        request = ChatRequest(
            system=system,
            turns=turns,
            tools=tools,
            force_tool=force_tool,
            max_tokens=max_tokens,
            cache_system=cache_system,
            sampling=dict(sampling) if sampling else None,
        )
        prompt = system + json.dumps([dataclasses.asdict(t) for t in turns], ensure_ascii=False)
        prompt += json.dumps([dataclasses.asdict(t) for t in tools])
        reservation = self._reserve(estimate_tokens(prompt), max_tokens)
        total = Usage()
        deadline = time.monotonic() + self.retry.deadline_s

        def once() -> Completion:
            nonlocal total
            # each attempt gets --timeout, but never more than what is left of the call's deadline
            timeout = max(0.05, min(self.timeout_s, deadline - time.monotonic()))
            try:
                reply = self._send(request, timeout)
            except Exception as exc:
                # an attempt may have made more than one request (openai's json_schema fallback)
                total = total + Usage(calls=getattr(exc, "extra_requests", 0))
                raise
            total = total + reply.usage
            return reply

        def count_request() -> None:
            nonlocal total
            self.budget.check_running()  # no attempt (a retry) starts once the run stopped: no request, none counted
            total = total + Usage(calls=1)

        try:
            reply, _ = self.retry.call(once, on_attempt=count_request, classify=self.classify)
        except BaseException as exc:
            cost = self.budget.settle(reservation, total, self.price)
            if isinstance(exc, LLMError):
                exc.attempts = max(exc.attempts, total.calls)  # every HTTP request of this call
                exc.usage, exc.cost_usd = total, cost  # what the failed call spent: its query's error line carries it
            raise
        cost = self.budget.settle(reservation, total, self.price)
        reply.usage = total
        reply.cost_usd = cost
        reply.attempts = total.calls  # HTTP requests: retries plus any extra request inside an attempt
        return reply
