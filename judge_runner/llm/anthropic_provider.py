"""Anthropic Messages API provider (tool use, prompt caching on the system prompt).

API reference: https://docs.anthropic.com/en/api/messages. The client is built with ``max_retries=0``:
:mod:`judge_runner.llm.retry` is the only retry layer. ``ANTHROPIC_BASE_URL`` points it elsewhere
(tests use a loopback fake server).

Requests the API accepts whatever the conversation holds: an assistant turn with nothing in it (a
reply with ``content: []``) is dropped and the user turns around it merged (the API answers 400 to an
empty turn), empty or whitespace-only text blocks are left out, and a model's non-finite number is
echoed back as the string "NaN" (a strict JSON encoder refuses NaN). A reply without ``usage`` (or with
a token count null) has unknown cost, never 0. A call that forces its only tool (a judge's label or
verdict) sends it with ``strict: true`` where the SDK's tool type has the field (anthropic 2.x does), its
schema put into the form strict tool use accepts by the SDK's own ``transform_schema`` (constraints the
API cannot enforce move into the descriptions; the caller validates the full schema anyway). A 200 whose body is not a message is a
:class:`~judge_runner.llm.errors.MalformedReplyError` (retried like a 5xx).
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

from judge_runner.llm.base import ChatProvider, ChatRequest, Completion, StopReason, ToolSpec, ToolUse, Turn
from judge_runner.llm.budget import Budget
from judge_runner.llm.errors import MalformedReplyError
from judge_runner.llm.pricing import Usage
from judge_runner.llm.retry import ErrorClass, RetryPolicy, classify_status
from judge_runner.llm.wire import decode_error_text, direct_mounts, json_safe

_STOP: dict[str, StopReason] = {
    "tool_use": "tool_use",
    "end_turn": "end",
    "stop_sequence": "end",
    "pause_turn": "end",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}


@cache
def strict_tools_supported() -> bool:
    """Whether the installed SDK's tool type has ``strict`` (guaranteed schema-valid tool input)."""
    import anthropic

    return "strict" in getattr(anthropic.types.ToolParam, "__annotations__", {})


def _tool(tool: ToolSpec, strict: bool) -> dict[str, Any]:
    """A tool definition as the Messages API takes it; ``strict``: with ``strict: true`` and its schema in
    the form strict tool use accepts (``anthropic.transform_schema``)."""
    if not strict:
        return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
    import anthropic

    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": anthropic.transform_schema(tool.input_schema),
        "strict": True,
    }


class AnthropicProvider(ChatProvider):
    """Claude through the official ``anthropic`` SDK. Needs ANTHROPIC_API_KEY."""

    name = "anthropic"

    def __init__(
        self,
        model: str,
        retry: RetryPolicy,
        budget: Budget,
        timeout_s: float = 60.0,
        api_key: str | None = None,
        base_url: str | None = None,
    ) -> None:
        super().__init__(model, retry, budget, timeout_s)
        import anthropic

        base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        mounts = direct_mounts(base_url)  # a loopback server past any proxy
        self._client = anthropic.Anthropic(
            api_key=api_key or os.environ.get("ANTHROPIC_API_KEY"),
            base_url=base_url,
            max_retries=0,
            timeout=timeout_s,
            http_client=anthropic.DefaultHttpxClient(mounts=mounts) if mounts else None,
        )

    def classify(self, exc: BaseException) -> ErrorClass | None:
        """``anthropic.APIStatusError`` by its status and ``error_code`` (e.g. ``enforced_spend_limit_reached``) and ``type`` (:func:`classify_status`);
        ``anthropic.APIConnectionError`` (timeouts included) and a raw ``httpx2.TransportError`` from a stalled
        stream retryable; anything else is not a provider failure (None)."""
        import anthropic
        import httpx2

        if isinstance(exc, anthropic.APIStatusError):
            return classify_status(exc.status_code, (exc.error_code, exc.type))
        if isinstance(exc, (anthropic.APIConnectionError, httpx2.TransportError, TimeoutError)):
            return "retryable"
        return None

    @staticmethod
    def _messages(turns: list[Turn]) -> list[dict]:
        """The conversation as Messages API turns: no empty turn, no empty text block, no non-finite
        number; consecutive turns of one role are merged into one (what the API does itself)."""
        messages: list[dict] = []
        for turn in turns:
            blocks: list[dict] = []
            for result in turn.tool_results:
                blocks.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": result.tool_use_id,
                        "content": result.content or "(empty)",
                        "is_error": result.is_error,
                    }
                )
            if turn.text and turn.text.strip():
                blocks.append({"type": "text", "text": turn.text})
            for use in turn.tool_uses:
                blocks.append({"type": "tool_use", "id": use.id, "name": use.name, "input": json_safe(use.input)})
            if not blocks:
                continue
            if messages and messages[-1]["role"] == turn.role:
                messages[-1]["content"].extend(blocks)
            else:
                messages.append({"role": turn.role, "content": blocks})
        return messages

    @staticmethod
    def _usage(u: Any) -> Usage:
        """Normalised usage; none reported (or a token count null) is ``unreported``: cost unknown."""
        inp, out = getattr(u, "input_tokens", None), getattr(u, "output_tokens", None)
        if not isinstance(inp, int) or not isinstance(out, int):
            return Usage(unreported=1)
        return Usage(
            input_tokens=inp,
            output_tokens=out,
            cache_write_tokens=getattr(u, "cache_creation_input_tokens", 0) or 0,
            cache_read_tokens=getattr(u, "cache_read_input_tokens", 0) or 0,
        )

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The Messages API request body of one call (``messages.create`` keyword arguments without the
        timeout; also one Message Batches request's ``params``). No sampling field is sent: anthropic 2.x
        takes neither temperature nor seed."""
        system, tools, force_tool = request.system, request.tools, request.force_tool
        system_block: dict[str, Any] = {"type": "text", "text": system}
        if request.cache_system:
            system_block["cache_control"] = {"type": "ephemeral"}
        kwargs: dict[str, Any] = {}
        if tools:
            strict = bool(force_tool) and len(tools) == 1 and tools[0].name == force_tool and strict_tools_supported()
            kwargs["tools"] = [_tool(t, strict) for t in tools]
            kwargs["tool_choice"] = {"type": "tool", "name": force_tool} if force_tool else {"type": "auto"}
        # anthropic 2.x has no temperature parameter: current Claude models sample at their own setting
        return {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "system": [system_block],
            "messages": self._messages(request.turns),
            **kwargs,
        }

    def parse_message(self, message: Any) -> Completion:
        """A :class:`Completion` from a Messages API ``Message`` (a synchronous reply, or a succeeded
        Message Batches result). Raises MalformedReplyError when ``message`` is not a message."""
        content = getattr(message, "content", None)
        if not isinstance(content, list):
            raise MalformedReplyError(f"the server's reply is not a message: {str(message)[:200]!r}")
        text = "".join(b.text for b in content if b.type == "text" and isinstance(getattr(b, "text", None), str))
        uses = [
            ToolUse(b.id, b.name, b.input if isinstance(b.input, dict) else {"__value__": b.input}) for b in content if b.type == "tool_use"
        ]
        return Completion(
            text=text,
            tool_uses=uses,
            stop=_STOP.get(message.stop_reason or "", "end"),
            usage=self._usage(message.usage),
            model=message.model or self.model,
        )

    def _send(self, request: ChatRequest, timeout: float) -> Completion:
        body = self.request_body(request)
        try:
            message = self._client.messages.create(**body, timeout=timeout)
        except json.JSONDecodeError as exc:
            raise MalformedReplyError(f"the server's reply is not valid JSON: {decode_error_text(exc)}") from None
        return self.parse_message(message)
