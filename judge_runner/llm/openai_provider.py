"""OpenAI Chat Completions provider, also for OpenAI-compatible local servers.

API reference: https://platform.openai.com/docs/api-reference/chat. Phase one's agent uses function
calling. A call that forces its only tool (the judge's ``record_label``) is a structured-output
request instead: ``response_format`` ``json_schema`` with ``strict: true``
(https://platform.openai.com/docs/guides/structured-outputs); a server that rejects that with a 400
gets JSON mode (``json_object``) with the schema stated in the system prompt, for the rest of the run,
and the reply is validated by the caller either way. ``OPENAI_BASE_URL`` points the client at an
OpenAI-compatible server (Ollama, vLLM, llama.cpp); those get ``max_tokens`` (the field they all
accept), OpenAI itself ``max_completion_tokens``. Built with ``max_retries=0``.
"""

from __future__ import annotations

import json
import os

from judge_runner.llm.base import ChatProvider, Completion, ToolSpec, ToolUse, Turn
from judge_runner.llm.pricing import Usage
from judge_runner.llm.retry import ErrorClass, classify_status

STRUCTURED_ID = "structured-output"  # id of a ToolUse that came back as structured content, not a tool call
# keywords strict structured outputs do not accept; the caller validates the full schema anyway
_UNSUPPORTED_STRICT = {"minLength", "maxLength", "pattern", "format", "$schema", "$id", "title"}


def strict_schema(schema):
    """A copy of a JSON Schema without the keywords OpenAI's strict mode rejects."""
    if isinstance(schema, dict):
        return {k: strict_schema(v) for k, v in schema.items() if k not in _UNSUPPORTED_STRICT}
    if isinstance(schema, list):
        return [strict_schema(v) for v in schema]
    return schema
_STOP = {"tool_calls": "tool_use", "function_call": "tool_use", "stop": "end", "length": "max_tokens", "content_filter": "refusal"}


class OpenAIProvider(ChatProvider):
    """GPT models, or any OpenAI-compatible server, through the official ``openai`` SDK."""

    name = "openai"

    def __init__(self, model: str, retry, budget, timeout_s: float = 60.0, api_key: str | None = None, base_url: str | None = None):
        super().__init__(model, retry, budget, timeout_s)
        import openai

        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.json_schema_supported = True
        self._client = openai.OpenAI(
            # a local server usually needs no key, but the SDK insists on one
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or ("not-needed" if self.base_url else None),
            base_url=self.base_url,
            max_retries=0,
            timeout=timeout_s,
        )

    def classify(self, exc: BaseException) -> ErrorClass | None:
        """``openai.APIStatusError`` by its status and ``code`` (e.g. ``insufficient_quota``) (:func:`classify_status`);
        ``openai.APIConnectionError`` (timeouts included) and a raw ``httpx2.TransportError`` from a stalled
        stream retryable; anything else is not a provider failure (None)."""
        import httpx2
        import openai

        if isinstance(exc, openai.APIStatusError):
            return classify_status(exc.status_code, (exc.code,))
        if isinstance(exc, (openai.APIConnectionError, httpx2.TransportError, TimeoutError)):
            return "retryable"
        return None

    @staticmethod
    def _messages(system: str, turns: list[Turn]) -> list[dict]:
        messages: list[dict] = [{"role": "system", "content": system}]
        for turn in turns:
            for result in turn.tool_results:
                content = f"ERROR: {result.content}" if result.is_error else result.content
                if result.tool_use_id == STRUCTURED_ID:  # feedback on structured content is a user message
                    messages.append({"role": "user", "content": content})
                else:
                    messages.append({"role": "tool", "tool_call_id": result.tool_use_id, "content": content})
            if turn.role == "assistant":
                structured = [u for u in turn.tool_uses if u.id == STRUCTURED_ID]
                calls = [u for u in turn.tool_uses if u.id != STRUCTURED_ID]
                text = json.dumps(structured[0].input) if structured else turn.text
                message: dict = {"role": "assistant", "content": text or None}
                if calls:
                    message["tool_calls"] = [
                        {"id": u.id, "type": "function", "function": {"name": u.name, "arguments": json.dumps(u.input)}}
                        for u in calls
                    ]
                messages.append(message)
            elif turn.text:
                messages.append({"role": "user", "content": turn.text})
        return messages

    def _sampling(self, max_tokens: int, timeout: float, sampling: dict | None = None) -> dict:
        """Output limit (``max_tokens`` for compatible servers, else ``max_completion_tokens``), the
        request's timeout (seconds), and temperature 0 where the model accepts it (reasoning models take
        only their default); ``sampling["seed"]`` is sent as ``seed`` when given."""
        kwargs: dict = {"max_tokens" if self.base_url else "max_completion_tokens": max_tokens, "timeout": timeout}
        if not self.model.startswith(("o1", "o3", "o4", "gpt-5")):
            kwargs["temperature"] = 0.0
        if sampling and sampling.get("seed") is not None:
            kwargs["seed"] = int(sampling["seed"])
        return kwargs

    def _send(self, system, turns, tools, force_tool, max_tokens, cache_system, timeout, sampling=None) -> Completion:
        if force_tool and len(tools) == 1 and tools[0].name == force_tool:
            return self._send_structured(system, turns, tools[0], max_tokens, timeout, sampling)
        kwargs = self._sampling(max_tokens, timeout, sampling)
        if tools:
            kwargs["tools"] = [
                {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
                for t in tools
            ]
            kwargs["tool_choice"] = {"type": "function", "function": {"name": force_tool}} if force_tool else "auto"
        response = self._client.chat.completions.create(model=self.model, messages=self._messages(system, turns), **kwargs)
        return self._completion(response)

    def _send_structured(self, system: str, turns: list[Turn], tool: ToolSpec, max_tokens: int, timeout: float,
                         sampling: dict | None = None) -> Completion:
        """One structured-output request: json_schema strict, or JSON mode once the server refused it."""
        import openai

        kwargs = self._sampling(max_tokens, timeout, sampling)
        extra_calls = 0
        if self.json_schema_supported:
            try:
                response = self._client.chat.completions.create(
                    model=self.model, messages=self._messages(system, turns),
                    response_format={"type": "json_schema", "json_schema": {
                        "name": tool.name, "description": tool.description, "schema": strict_schema(tool.input_schema), "strict": True}},
                    **kwargs)
                return self._completion(response, tool.name)
            except openai.BadRequestError:
                self.json_schema_supported = False  # e.g. a local server without structured outputs
                extra_calls = 1
        system = (f"{system}\n\nReply with only one JSON object, no prose and no code fence, that matches this "
                  f"JSON Schema:\n{json.dumps(tool.input_schema)}")
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=self._messages(system, turns), response_format={"type": "json_object"}, **kwargs)
        except Exception as exc:
            exc.extra_requests = extra_calls  # type: ignore[attr-defined]  # the refused request counts too
            raise
        completion = self._completion(response, tool.name)
        completion.usage.calls += extra_calls
        return completion

    def _completion(self, response, structured_name: str | None = None) -> Completion:
        """Normalise a chat completion; structured content that parses as one JSON object becomes a
        ToolUse named ``structured_name`` (anything else stays text for the caller to recover or re-ask)."""
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
        if structured_name and stop in ("end", "tool_use") and not uses:
            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                data = None
            if isinstance(data, dict):
                uses = [ToolUse(STRUCTURED_ID, structured_name, data)]
            stop = "tool_use" if uses else "end"
        return Completion(text=text, tool_uses=uses, stop=stop, usage=usage, model=response.model or self.model)
