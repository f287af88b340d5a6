"""OpenAI Chat Completions provider, also for OpenAI-compatible servers (Ollama, vLLM, llama.cpp).

API reference: https://platform.openai.com/docs/api-reference/chat. Phase one's agent uses function
calling. A call that forces its only tool (the judge's ``record_label``) is a structured-output
request instead: ``response_format`` ``json_schema`` with ``strict: true``
(https://platform.openai.com/docs/guides/structured-outputs); the reply is validated by the caller
whatever the server enforced. ``OPENAI_BASE_URL`` points the client at a compatible server; those get
``max_tokens`` (the field they all accept), OpenAI itself ``max_completion_tokens``. Built with
``max_retries=0``: :mod:`judge_runner.llm.retry` is the only retry layer.

**Requests every compatible server accepts.** No message carries ``"content": null`` (llama-cpp-python
refuses it with a 500; an absent key crashes its chat template; ``""`` works everywhere), no assistant
turn is empty, and no non-finite number is sent (a model's NaN is echoed back as the string "NaN").

**Capabilities learned per server** (:class:`ServerCapabilities`, shared by the generator and the judge
that talk to one server, kept for the run): when the server refuses an optional request feature, with
a 400, a 422, or a 500 whose message names the field, the same request is sent again at once without
it, one stderr line says what was downgraded, and later requests skip it. The ladders:

- structured output: ``json_schema`` strict → (local servers) ``json_object`` with the schema in
  llama-cpp-python's ``schema`` extension → ``json_object`` → no ``response_format``; from
  ``json_object`` on, the schema is stated in the system prompt;
- a forced tool: named (``{"type": "function", "function": {"name": ...}}``) → ``"required"`` with only
  that tool offered → ``"auto"`` with only that tool offered and an instruction to call it;
- ``tool_choice: "auto"`` → omitted; ``seed`` → omitted; ``temperature`` → omitted.

**Reasoning models** (gpt-5, the o-series: :func:`judge_runner.llm.pricing.reasons`) take no temperature;
they are sent ``reasoning_effort`` explicitly (:attr:`OpenAIProvider.reasoning_effort`, the setting
``reasoning_effort``, low by default for the judge), and the judge's token limits add the effort's
reasoning allowance (:attr:`OpenAIProvider.reasoning_allowance`): their reasoning counts against
``max_completion_tokens``.

A bare 400/422 that names no field, on a ``json_schema`` request, also downgrades it (servers without
structured outputs often say only "invalid request"). The refused request counts as an HTTP request
of the call (``Completion.attempts``, ``error.attempts``).

**Local servers** (:func:`judge_runner.llm.wire.is_local_url`: loopback or private address) usually
serve one request at a time and finish a request whose client has gone. There a timeout is not
retried (:class:`~judge_runner.llm.errors.LocalServerTimeout` says why): the retry would queue behind
the abandoned generation. See :mod:`judge_runner.llm.local_server` for the run's defaults.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from judge_runner.llm.base import ChatProvider, ChatRequest, Completion, StopReason, ToolSpec, ToolUse, Turn
from judge_runner.llm.budget import Budget
from judge_runner.llm.errors import LocalServerTimeout, MalformedReplyError
from judge_runner.llm.local_server import local_server_setup, share_server
from judge_runner.llm.pricing import Usage, reasoning_tokens, reasons
from judge_runner.llm.retry import ErrorClass, RetryPolicy, classify_status
from judge_runner.llm.wire import (
    decode_error_text,
    direct_mounts,
    dumps_safe,
    is_local_url,
    server_message,
)

DEFAULT_SEED = 0  # a fixed seed: servers that honour it sample reproducibly (with temperature 0)
STRUCTURED_ID = "structured-output"  # id of a ToolUse that came back as structured content, not a tool call
# keywords strict structured outputs do not accept; the caller validates the full schema anyway
_UNSUPPORTED_STRICT = {"minLength", "maxLength", "pattern", "format", "$schema", "$id", "title"}
# statuses with which servers refuse a request feature: 400 (OpenAI, vLLM, Ollama), 422 (FastAPI
# validation), 500 (llama-cpp-python answers its own validation errors so)
_REFUSAL_STATUS = frozenset({400, 422, 500})
# words of a 400 that is about the conversation, not a request feature: never a reason to downgrade
_OTHER_PROBLEMS = ("context", "token", "too long", "too large", "messages")
_STOP: dict[str, StopReason] = {
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "stop": "end",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def strict_schema(schema: Any) -> Any:
    """A copy of a JSON Schema without the keywords OpenAI's strict mode rejects."""
    if isinstance(schema, dict):
        return {k: strict_schema(v) for k, v in schema.items() if k not in _UNSUPPORTED_STRICT}
    if isinstance(schema, list):
        return [strict_schema(v) for v in schema]
    return schema


GRAMMAR_STRING_CAP = 400  # characters: the longest free-text field the verdict schema allows (labels' reason)
_NOT_FOR_GRAMMAR = {"$schema", "$id", "title", "pattern", "format"}


def grammar_schema(schema: Any) -> Any:
    """A copy of a JSON Schema for a server that turns it into a sampling grammar (llama-cpp-python's
    ``json_object`` ``schema``): length bounds kept, every string without ``maxLength`` capped at
    GRAMMAR_STRING_CAP characters (so a small model cannot ramble until ``max_tokens`` cuts the JSON
    off), and ``pattern``/``format`` left out (its converter supports only part of them)."""
    if isinstance(schema, dict):
        out = {k: grammar_schema(v) for k, v in schema.items() if k not in _NOT_FOR_GRAMMAR}
        if out.get("type") == "string" and "maxLength" not in out and "enum" not in out:
            out["maxLength"] = GRAMMAR_STRING_CAP
        return out
    if isinstance(schema, list):
        return [grammar_schema(v) for v in schema]
    return schema


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class ServerCapabilities:
    """What one server accepts, learned from its refusals during a run (thread-safe).

    ``structured``: the rung of the structured-output ladder in use (``STRUCTURED``); ``forced_tool``:
    that of the forced-tool ladder (``FORCED_TOOL``); ``auto_tool_choice``: whether ``tool_choice:
    "auto"`` is sent; ``dropped``: optional fields no longer sent (``seed``, ``temperature``).
    ``notes`` keeps every downgrade line, each also passed once to ``log`` (stderr by default).
    """

    STRUCTURED = ("json_schema", "json_object_schema", "json_object", "prompt")
    FORCED_TOOL = ("named", "required", "auto")
    # (capability, refused value) -> what was refused; (capability, new value) -> what is used instead
    _REFUSED: ClassVar[dict] = {
        ("structured", "json_schema"): "response_format json_schema",
        ("structured", "json_object_schema"): "response_format json_object with a schema",
        ("structured", "json_object"): "response_format json_object",
        ("forced_tool", "named"): 'a forced named tool (tool_choice {"type": "function", ...})',
        ("forced_tool", "required"): 'tool_choice "required"',
        ("auto_tool_choice", True): 'tool_choice "auto"',
        ("seed", True): "seed",
        ("temperature", True): "temperature",
    }
    _INSTEAD: ClassVar[dict] = {
        ("structured", "json_object_schema"): "JSON mode (json_object) constrained by the schema (llama-cpp-python's extension), "
        "the schema also in the prompt, the reply validated by judge-runner",
        ("structured", "json_object"): "JSON mode (json_object) with the schema in the prompt, the reply validated by judge-runner",
        ("structured", "prompt"): "no response_format: the schema in the prompt, the reply validated by judge-runner",
        ("forced_tool", "required"): 'tool_choice "required" with only that tool offered',
        ("forced_tool", "auto"): 'tool_choice "auto" with only that tool offered and an instruction to call it',
        ("auto_tool_choice", False): "no tool_choice (the server's default)",
        ("seed", False): "no seed (sampling may differ between runs)",
        ("temperature", False): "the model's default temperature",
    }

    def __init__(self, server: str, local: bool, log: Callable[[str], None] | None = None):
        self.server = server
        self.local = local
        self.structured = "json_schema"
        self.forced_tool = "named"
        self.auto_tool_choice = True
        self.dropped: set[str] = set()
        self.notes: list[str] = []
        self.log = log or _stderr
        self._lock = threading.Lock()

    def current(self, capability: str) -> Any:
        """The value in use for ``capability`` (``structured``, ``forced_tool``, ``auto_tool_choice``,
        ``seed`` or ``temperature``; the last two are True while sent)."""
        if capability in ("seed", "temperature"):
            return capability not in self.dropped
        return getattr(self, capability)

    def downgrade(self, capability: str, used: Any, status: int, said: str | None) -> bool:
        """Step ``capability`` down from ``used`` (the value the refused request carried). Returns True
        when the request should be sent again (this or another thread lowered it), False when there is
        nothing left to drop. Logs one line per real downgrade."""
        with self._lock:
            now = self.current(capability)
            if now != used:
                return True  # another call already learned it
            if capability == "structured":
                ladder = [s for s in self.STRUCTURED if self.local or s != "json_object_schema"]
                if used == ladder[-1]:
                    return False
                self.structured = ladder[ladder.index(used) + 1]
            elif capability == "forced_tool":
                if used == self.FORCED_TOOL[-1]:
                    return False
                self.forced_tool = self.FORCED_TOOL[self.FORCED_TOOL.index(used) + 1]
            elif capability == "auto_tool_choice":
                if not used:
                    return False
                self.auto_tool_choice = False
            elif used:
                self.dropped.add(capability)
            else:
                return False
            what, instead = self._REFUSED[(capability, used)], self._INSTEAD[(capability, self.current(capability))]
            note = (
                f"note: the server at {self.server} does not accept {what} (HTTP {status}"
                f"{': ' + said if said else ''}); for the rest of the run: {instead}"
            )
            self.notes.append(note)
        self.log(note)
        return True


class OpenAIProvider(ChatProvider):
    """GPT models, or any OpenAI-compatible server, through the official ``openai`` SDK.

    ``capabilities``: a :class:`ServerCapabilities` to share with another provider of the same server
    (the CLI gives the generator the judge's); a fresh one otherwise. ``local``: the base URL is a
    loopback or private address (see the module docstring)."""

    name = "openai"

    def __init__(
        self,
        model: str,
        retry: RetryPolicy,
        budget: Budget,
        timeout_s: float = 60.0,
        api_key: str | None = None,
        base_url: str | None = None,
        capabilities: ServerCapabilities | None = None,
    ) -> None:
        super().__init__(model, retry, budget, timeout_s)
        import openai

        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.local = is_local_url(self.base_url)
        self.reasons = reasons(model) is True  # gpt-5, the o-series: reasoning_effort instead of temperature
        self.capabilities = capabilities or ServerCapabilities(self.base_url or "https://api.openai.com/v1", self.local)
        mounts = direct_mounts(self.base_url)  # a loopback server past any proxy
        self._client = openai.OpenAI(
            # a local server usually needs no key, but the SDK insists on one
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or ("not-needed" if self.base_url else None),
            base_url=self.base_url,
            max_retries=0,
            timeout=timeout_s,
            http_client=openai.DefaultHttpxClient(mounts=mounts) if mounts else None,
        )

    @property
    def reasoning_allowance(self) -> int:
        """A reasoning model's allowance at :attr:`reasoning_effort` (:func:`judge_runner.llm.pricing.reasoning_tokens`), else 0."""
        return reasoning_tokens(self.reasoning_effort)[1] if self.reasons else 0

    def prepare_run(self, partner: ChatProvider | None, concurrency: int, concurrency_set: bool) -> tuple[int, list[str]]:
        """Share what is learned about the server with ``partner`` (:func:`judge_runner.llm.local_server.share_server`), and
        for a local server use concurrency 1 unless the user set it and say that ``--timeout`` counts queue
        time (:func:`judge_runner.llm.local_server.local_server_setup`)."""
        share_server(partner, self)
        return local_server_setup(self.base_url, concurrency, concurrency_set, self.timeout_s)

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

    @property
    def json_schema_supported(self) -> bool:
        """Whether this server still gets ``response_format`` ``json_schema``."""
        return self.capabilities.structured == "json_schema"

    # -- request building --------------------------------------------------------------------------

    @staticmethod
    def _messages(system: str, turns: list[Turn]) -> list[dict]:
        """The conversation as Chat Completions messages: never ``content: null``, never an empty
        assistant turn (dropped; the user text after it joins the user message before it, keeping the
        user/assistant alternation strict chat templates demand), never a non-finite number."""
        messages: list[dict] = [{"role": "system", "content": system}]

        def add_user(text: str) -> None:
            last = messages[-1]
            if last["role"] == "user" and isinstance(last.get("content"), str):
                last["content"] += "\n\n" + text
            else:
                messages.append({"role": "user", "content": text})

        for turn in turns:
            for result in turn.tool_results:
                content = f"ERROR: {result.content}" if result.is_error else result.content
                if result.tool_use_id == STRUCTURED_ID:  # feedback on structured content is a user message
                    add_user(content or "(empty)")
                else:
                    messages.append({"role": "tool", "tool_call_id": result.tool_use_id, "content": content or "(empty)"})
            if turn.role == "assistant":
                structured = [u for u in turn.tool_uses if u.id == STRUCTURED_ID]
                calls = [u for u in turn.tool_uses if u.id != STRUCTURED_ID]
                text = dumps_safe(structured[0].input) if structured else (turn.text or "")
                if not text.strip() and not calls:
                    continue  # an empty reply: nothing to echo
                message: dict = {"role": "assistant", "content": text}
                if calls:
                    message["tool_calls"] = [
                        {"id": u.id, "type": "function", "function": {"name": u.name, "arguments": dumps_safe(u.input)}} for u in calls
                    ]
                messages.append(message)
            elif turn.text:
                add_user(turn.text)
        return messages

    def _request(self, request: ChatRequest, timeout: float, structured: ToolSpec | None) -> tuple[dict, dict]:
        """``(create() keyword arguments, the capability values they use)`` at the server's current
        capabilities. ``sampling["seed"]`` (the judge's per-trial seed) replaces the default seed."""
        system, turns, tools, force_tool = request.system, request.turns, request.tools, request.force_tool
        max_tokens, sampling = request.max_tokens, request.sampling
        caps = self.capabilities
        kwargs: dict = {"model": self.model, "timeout": timeout, "max_tokens" if self.base_url else "max_completion_tokens": max_tokens}
        used: dict = {}
        if self.reasons:
            kwargs["reasoning_effort"] = self.reasoning_effort  # sent explicitly: the API's default (medium) spends more
        elif caps.current("temperature"):
            kwargs["temperature"] = 0.0  # reasoning models take only their default
            used["temperature"] = True
        if caps.current("seed"):
            kwargs["seed"] = int(sampling["seed"]) if sampling and sampling.get("seed") is not None else DEFAULT_SEED
            used["seed"] = True
        if structured is not None:
            level = used["structured"] = caps.structured
            if level == "json_schema":
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": structured.name,
                        "description": structured.description,
                        "schema": strict_schema(structured.input_schema),
                        "strict": True,
                    },
                }
            else:
                system = (
                    f"{system}\n\nReply with only one JSON object, no prose and no code fence, that matches this "
                    f"JSON Schema:\n{json.dumps(structured.input_schema)}"
                )
                if level == "json_object_schema":  # llama-cpp-python's extension: grammar-constrained JSON
                    kwargs["response_format"] = {"type": "json_object", "schema": grammar_schema(structured.input_schema)}
                elif level == "json_object":
                    kwargs["response_format"] = {"type": "json_object"}
        elif tools:
            offered = tools
            if force_tool:
                level = used["forced_tool"] = caps.forced_tool
                if level == "named":
                    kwargs["tool_choice"] = {"type": "function", "function": {"name": force_tool}}
                else:
                    offered = [t for t in tools if t.name == force_tool] or tools
                    if level == "required":
                        kwargs["tool_choice"] = "required"
                    else:
                        system = f"{system}\n\nCall the {force_tool} tool now."
            if "tool_choice" not in kwargs and caps.auto_tool_choice:
                kwargs["tool_choice"] = "auto"
                used["auto_tool_choice"] = True
            kwargs["tools"] = [
                {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
                for t in offered
            ]
        kwargs["messages"] = self._messages(system, turns)
        return kwargs, used

    @staticmethod
    def _refused_capability(status: int, said: str, used: dict, param: str | None = None) -> str | None:
        """Which capability of the request the server's refusal names, or None. ``param``: the field
        the error body names (OpenAI's ``error.param``)."""
        text = said.lower()
        if (
            "structured" in used
            and used["structured"] != "prompt"
            and any(k in text for k in ("response_format", "json_schema", "json_object", "'text'"))
        ):
            return "structured"
        if "forced_tool" in used and "tool_choice" in text:
            return "forced_tool"
        if "auto_tool_choice" in used and "tool_choice" in text:
            return "auto_tool_choice"
        for field in ("seed", "temperature"):
            if field in used and field in text:
                return field
        if status == 500 and not text and used.get("forced_tool") == "required":
            return "forced_tool"  # llama-cpp-python answers "required" with a 500 and an empty message (measured)
        if (
            status in (400, 422)
            and used.get("structured") == "json_schema"
            and param in (None, "", "response_format")
            and not any(k in text for k in _OTHER_PROBLEMS)
        ):
            return "structured"  # a server without structured outputs that names no field
        return None

    # -- sending -----------------------------------------------------------------------------------

    @staticmethod
    def _structured_tool(tools: list[ToolSpec], force_tool: str | None) -> ToolSpec | None:
        """The tool a call forces when it is its only tool: sent as structured output, not a tool call."""
        return tools[0] if force_tool and len(tools) == 1 and tools[0].name == force_tool else None

    def request_body(self, request: ChatRequest) -> dict:
        """The Chat Completions request body of one call at the server's current capabilities (also one
        Batch API request's ``body``), without the client-side timeout."""
        kwargs, _ = self._request(request, 0.0, self._structured_tool(request.tools, request.force_tool))
        kwargs.pop("timeout", None)
        return kwargs

    def parse_body(self, body: dict, tools: list[ToolSpec], force_tool: str | None) -> Completion:
        """A :class:`Completion` from a chat completion as JSON (a Batch API output line's
        ``response.body``), read as the synchronous reply to the same call. Raises MalformedReplyError
        when it is not a chat completion."""
        from openai.types.chat import ChatCompletion
        from pydantic import ValidationError

        try:
            response = ChatCompletion.model_validate(body)
        except ValidationError as exc:
            raise MalformedReplyError(f"the batch result is not a chat completion: {str(exc)[:200]}") from None
        structured = self._structured_tool(tools, force_tool)
        return self._completion(response, structured.name if structured else None)

    def _send(self, request: ChatRequest, timeout: float) -> Completion:
        import openai

        structured = self._structured_tool(request.tools, request.force_tool)
        extra = 0  # requests refused for a capability, then sent again without it
        while True:
            kwargs, used = self._request(request, timeout, structured)
            try:
                try:
                    response = self._client.chat.completions.create(**kwargs)
                except openai.APIStatusError as exc:
                    said = server_message(exc, limit=2000) or ""
                    param = exc.body.get("param") if isinstance(exc.body, dict) else None
                    capability = (
                        self._refused_capability(exc.status_code, said, used, param if isinstance(param, str) else None)
                        if exc.status_code in _REFUSAL_STATUS
                        else None
                    )
                    if capability and self.capabilities.downgrade(capability, used[capability], exc.status_code, server_message(exc)):
                        extra += 1
                        continue
                    raise
                except openai.APITimeoutError:
                    if not self.local:
                        raise  # retried by the retry layer
                    raise LocalServerTimeout(
                        f"no reply from the local server {self.base_url} within {timeout:.0f} s (the time includes waiting in "
                        f"its queue); not retried, since the server may still be generating this request and a retry would "
                        f"queue behind it: raise --timeout, or keep --concurrency 1"
                    ) from None
                except json.JSONDecodeError as exc:
                    raise MalformedReplyError(f"the server's reply is not valid JSON: {decode_error_text(exc)}") from None
                completion = self._completion(response, structured.name if structured else None)
            except Exception as exc:
                exc.extra_requests = extra  # type: ignore[attr-defined]  # the refused requests count too
                raise
            completion.usage.calls += extra
            return completion

    # -- reply parsing -----------------------------------------------------------------------------

    @staticmethod
    def _usage(u: Any) -> Usage:
        """Normalised usage; a reply without usage, or with a token count that is not a number, is
        ``unreported`` (cost unknown, never 0) and adds no tokens."""
        prompt = getattr(u, "prompt_tokens", None)
        completion = getattr(u, "completion_tokens", None)
        if not isinstance(prompt, int) or not isinstance(completion, int) or isinstance(prompt, bool):
            return Usage(unreported=1)
        details = getattr(u, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", 0) if details is not None else 0
        cached = cached if isinstance(cached, int) and 0 <= cached <= prompt else 0
        return Usage(input_tokens=prompt - cached, output_tokens=completion, cache_read_tokens=cached)

    def _completion(self, response: Any, structured_name: str | None = None) -> Completion:
        """Normalise a chat completion; structured content that parses as one JSON object becomes a
        ToolUse named ``structured_name`` (anything else stays text for the caller to recover or re-ask).
        Raises MalformedReplyError for a body that is not a completion or has no choice."""
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list):
            raise MalformedReplyError(f"the server's reply is not a chat completion: {str(response)[:200]!r}")
        if not choices or getattr(choices[0], "message", None) is None:
            raise MalformedReplyError(
                "the server's reply holds no message (choices: [])"
                if not choices
                else "the server's reply holds a choice without a message"
            )
        choice = choices[0]
        message = choice.message
        uses: list[ToolUse] = []
        for call in message.tool_calls or []:
            function = getattr(call, "function", None)
            raw = getattr(function, "arguments", None) or "{}"
            try:
                arguments = json.loads(raw)
            except json.JSONDecodeError as exc:
                arguments = {"__unparsable_arguments__": raw, "__json_error__": str(exc)}
            uses.append(
                ToolUse(
                    call.id or f"call_{len(uses)}",
                    getattr(function, "name", None) or "",
                    arguments if isinstance(arguments, dict) else {"__value__": arguments},
                )
            )
        stop: StopReason = _STOP.get(choice.finish_reason or "", "end")
        if getattr(message, "refusal", None):
            stop = "refusal"
        elif uses and stop == "end":
            stop = "tool_use"
        usage = self._usage(response.usage)
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
