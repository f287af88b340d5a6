"""Anthropic Messages API provider (tool use, prompt caching on the system prompt).

API reference: https://docs.anthropic.com/en/api/messages. The client is built with ``max_retries=0``:
:mod:`judge_runner.llm.retry` is the only retry layer. ``ANTHROPIC_BASE_URL`` points it elsewhere
(tests use a loopback fake server).
"""

from __future__ import annotations

import os

from judge_runner.llm.base import ChatProvider, Completion, ToolUse, Turn
from judge_runner.llm.pricing import Usage
from judge_runner.llm.retry import ErrorClass, classify_status

_STOP = {"tool_use": "tool_use", "end_turn": "end", "stop_sequence": "end", "pause_turn": "end",
         "max_tokens": "max_tokens", "model_context_window_exceeded": "max_tokens", "refusal": "refusal"}


class AnthropicProvider(ChatProvider):
    """Claude through the official ``anthropic`` SDK. Needs ANTHROPIC_API_KEY."""

    name = "anthropic"

    def __init__(self, model: str, retry, budget, timeout_s: float = 60.0, api_key: str | None = None, base_url: str | None = None):
        super().__init__(model, retry, budget, timeout_s)
        import anthropic

        self._client = anthropic.Anthropic(
            api_key=api_key or os.environ.get("ANTHROPIC_API_KEY"),
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
            max_retries=0,
            timeout=timeout_s,
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
        messages = []
        for turn in turns:
            blocks: list[dict] = []
            for result in turn.tool_results:
                blocks.append({"type": "tool_result", "tool_use_id": result.tool_use_id, "content": result.content, "is_error": result.is_error})
            if turn.text:
                blocks.append({"type": "text", "text": turn.text})
            for use in turn.tool_uses:
                blocks.append({"type": "tool_use", "id": use.id, "name": use.name, "input": use.input})
            messages.append({"role": turn.role, "content": blocks})
        return messages

    def _send(self, system, turns, tools, force_tool, max_tokens, cache_system, timeout, sampling=None) -> Completion:
        # ``sampling`` is accepted for the shared signature; anthropic 2.x takes neither temperature nor seed,
        # so judge_fingerprint.sampling_settings("anthropic") is empty and nothing is sent
        system_block = {"type": "text", "text": system}
        if cache_system:
            system_block["cache_control"] = {"type": "ephemeral"}
        kwargs = {}
        if tools:
            kwargs["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools]
            kwargs["tool_choice"] = {"type": "tool", "name": force_tool} if force_tool else {"type": "auto"}
        message = self._client.messages.create(
            # anthropic 2.x has no temperature parameter: current Claude models sample at their own setting
            model=self.model, max_tokens=max_tokens, system=[system_block], messages=self._messages(turns), timeout=timeout, **kwargs,
        )
        text = "".join(b.text for b in message.content if b.type == "text")
        uses = [ToolUse(b.id, b.name, dict(b.input)) for b in message.content if b.type == "tool_use"]
        u = message.usage
        usage = Usage(
            input_tokens=u.input_tokens or 0,
            output_tokens=u.output_tokens or 0,
            cache_write_tokens=getattr(u, "cache_creation_input_tokens", 0) or 0,
            cache_read_tokens=getattr(u, "cache_read_input_tokens", 0) or 0,
        )
        return Completion(text=text, tool_uses=uses, stop=_STOP.get(message.stop_reason or "", "end"), usage=usage, model=message.model)
