"""OpenAI Chat Completions provider (function calling), also for OpenAI-compatible local servers.

API reference: https://platform.openai.com/docs/api-reference/chat. ``OPENAI_BASE_URL`` points the
client at an OpenAI-compatible server (Ollama, vLLM, llama.cpp); those get ``max_tokens`` (the field
they all accept), OpenAI itself ``max_completion_tokens``. Built with ``max_retries=0``.
"""

from __future__ import annotations

import json
import os

from judge_runner.llm.base import ChatProvider, Completion, ToolUse, Turn
from judge_runner.llm.pricing import Usage

DEFAULT_MODEL = "gpt-4.1"
_STOP = {"tool_calls": "tool_use", "function_call": "tool_use", "stop": "end", "length": "max_tokens", "content_filter": "refusal"}


class OpenAIProvider(ChatProvider):
    """GPT models, or any OpenAI-compatible server, through the official ``openai`` SDK."""

    name = "openai"

    def __init__(self, model: str, retry, budget, timeout_s: float = 60.0, api_key: str | None = None, base_url: str | None = None):
        super().__init__(model, retry, budget, timeout_s)
        import openai

        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._client = openai.OpenAI(
            # a local server usually needs no key, but the SDK insists on one
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or ("not-needed" if self.base_url else None),
            base_url=self.base_url,
            max_retries=0,
            timeout=timeout_s,
        )

    @staticmethod
    def _messages(system: str, turns: list[Turn]) -> list[dict]:
        messages: list[dict] = [{"role": "system", "content": system}]
        for turn in turns:
            for result in turn.tool_results:
                content = f"ERROR: {result.content}" if result.is_error else result.content
                messages.append({"role": "tool", "tool_call_id": result.tool_use_id, "content": content})
            if turn.role == "assistant":
                message: dict = {"role": "assistant", "content": turn.text or None}
                if turn.tool_uses:
                    message["tool_calls"] = [
                        {"id": u.id, "type": "function", "function": {"name": u.name, "arguments": json.dumps(u.input)}}
                        for u in turn.tool_uses
                    ]
                messages.append(message)
            elif turn.text:
                messages.append({"role": "user", "content": turn.text})
        return messages

    def _send(self, system, turns, tools, force_tool, max_tokens, cache_system) -> Completion:
        kwargs: dict = {"max_tokens" if self.base_url else "max_completion_tokens": max_tokens}
        if tools:
            kwargs["tools"] = [
                {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
                for t in tools
            ]
            kwargs["tool_choice"] = {"type": "function", "function": {"name": force_tool}} if force_tool else "auto"
        if not self.model.startswith(("o1", "o3", "o4", "gpt-5")):  # reasoning models accept only the default
            kwargs["temperature"] = 0.0
        response = self._client.chat.completions.create(model=self.model, messages=self._messages(system, turns), **kwargs)
        choice = response.choices[0]
        message = choice.message
        uses = []
        for call in message.tool_calls or []:
            try:
                arguments = json.loads(call.function.arguments or "{}")
            except json.JSONDecodeError:
                arguments = {"__unparsable_arguments__": call.function.arguments}
            uses.append(ToolUse(call.id, call.function.name, arguments if isinstance(arguments, dict) else {"__value__": arguments}))
        stop = _STOP.get(choice.finish_reason or "", "end")
        if getattr(message, "refusal", None):
            stop = "refusal"
        elif uses and stop == "end":
            stop = "tool_use"
        u = response.usage
        cached = 0
        if u is not None and getattr(u, "prompt_tokens_details", None) is not None:
            cached = getattr(u.prompt_tokens_details, "cached_tokens", 0) or 0
        usage = Usage(
            input_tokens=(u.prompt_tokens - cached) if u else 0,
            output_tokens=u.completion_tokens if u else 0,
            cache_read_tokens=cached,
        )
        text = message.content or (message.refusal if getattr(message, "refusal", None) else "") or ""
        return Completion(text=text, tool_uses=uses, stop=stop, usage=usage, model=response.model or self.model)
