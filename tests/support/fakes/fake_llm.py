"""A fake LLM server for judge-runner's tests.

judge-runner talks to language models through the real ``anthropic`` and
``openai`` Python SDKs: in phase one a model explores a corpus with file tools
and submits search queries; in phase two a model judges search results by
calling a ``record_verdict`` tool.  Tests must exercise the real SDKs (their
request building, response parsing, error classes, retries and timeouts), so
instead of mocking the SDKs we run a small HTTP server on loopback that speaks
their wire formats:

* ``POST /v1/messages``          -- Anthropic Messages API (non-streaming)
* ``POST /v1/chat/completions``  -- OpenAI Chat Completions API (non-streaming)
* the Anthropic Message Batches and OpenAI Batch APIs, each item answered by the
  brain like a synchronous request (``server.batches``: tests/support/fakes/fake_batches.py)

Point a client at it and it behaves like a (very simple) model::

    with FakeLLMServer() as srv:
        client = anthropic.Anthropic(base_url=srv.anthropic_base_url,
                                     api_key="test-key", max_retries=0)
        msg = client.messages.create(model="m", max_tokens=100, messages=[...])
        assert srv.count("anthropic") == 1

What the "model" says is decided by a *brain*: a callable ``brain(api, body)``
that receives ``"anthropic"`` or ``"openai"`` and the parsed request JSON, and
returns a :class:`ToolCall` or :class:`Text` (or a list of them for several
content blocks / parallel tool calls).  The server wraps that reply in the
API's response shape, with deterministic ids and token usage.  Without a brain
the server uses :class:`DefaultBrain`, which plays judge-runner's two phases.

Failures are injected per request with :class:`Fault` objects queued on
``server.faults`` (HTTP errors with realistic bodies and headers, delays,
hung requests, connection resets, malformed model output).

Only the standard library is used; the server binds ``127.0.0.1`` on an
ephemeral port and never touches any other network.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import struct
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from typing import Any

__all__ = [
    "DefaultBrain",
    "Fault",
    "FakeLLMServer",
    "LLAMA_CPP_PYTHON",
    "Quirks",
    "RecordedRequest",
    "Text",
    "ToolCall",
    "offered_tools",
    "tool_results",
]

_STOPS = ("end", "max_tokens", "refusal")


# --------------------------------------------------------------------------
# Replies and faults
# --------------------------------------------------------------------------


@dataclass
class ToolCall:
    """The model calls the tool ``name`` with arguments ``input``.

    ``stop`` is one of ``"end"`` (normal: anthropic ``stop_reason="tool_use"``,
    openai ``finish_reason="tool_calls"``), ``"max_tokens"`` (anthropic
    ``max_tokens``, openai ``length``) or ``"refusal"`` (anthropic ``refusal``,
    openai ``content_filter`` with ``message.refusal`` set).

    For an openai request that asks for structured output
    (``response_format`` of type ``json_schema`` or ``json_object``) and does
    not offer a function tool of this name, the call comes back the way
    structured output does: ``message.content = json.dumps(input)`` with
    ``finish_reason="stop"``.
    """

    name: str
    input: dict
    stop: str = "end"

    def __post_init__(self) -> None:
        if self.stop not in _STOPS:
            raise ValueError(f"stop must be one of {_STOPS}, not {self.stop!r}")


@dataclass
class Text:
    """The model answers with plain text.

    ``stop`` is one of ``"end"`` (anthropic ``end_turn``, openai ``stop``),
    ``"max_tokens"`` (anthropic ``max_tokens``, openai ``length``) or
    ``"refusal"`` (anthropic ``refusal``; openai ``content_filter`` with the
    text moved to ``message.refusal`` and ``content`` null).
    """

    text: str
    stop: str = "end"

    def __post_init__(self) -> None:
        if self.stop not in _STOPS:
            raise ValueError(f"stop must be one of {_STOPS}, not {self.stop!r}")


Reply = ToolCall | Text
Brain = Callable[[str, dict], Reply | list]


@dataclass
class Fault:
    """A failure applied to one model request, instead of or before its reply.

    Queue faults on ``FakeLLMServer.faults``; each incoming model request (on
    either API, after the API-key check) pops the first one.  Fields are
    applied in this order:

    * ``wait_for_requests`` -- hold the request until ``server.requests`` holds
      this many model requests (an event, not a sleep: those calls are known
      to be in flight together, however loaded the machine), at most
      ``WAIT_FOR_REQUESTS_S`` (then it goes on, and the test's counts fail).
    * ``delay_s``  -- sleep first (interrupted if the server stops).
    * ``hang``     -- accept the request and never answer, until the server
      stops (which it still does promptly).  Use with a client timeout.
    * ``reset``    -- close the socket without any response (TCP RST), which
      the SDKs raise as ``APIConnectionError``.
    * ``status``   -- answer with this HTTP status, ``headers`` (e.g.
      ``{"retry-after": "1"}`` or ``{"retry-after-ms": "200"}``) and ``body``.
      When ``body`` is None a realistic error body for the API is used
      (anthropic ``{"type": "error", "error": {"type": "rate_limit_error",
      "message": ...}}``, openai ``{"error": {"message", "type", "param",
      "code"}}``).  A status below 400 with a ``body`` sends that body as is.
    * ``body`` without ``status`` -- answer 200 with ``body`` verbatim (for
      responses the SDK cannot parse).
    * ``raw_body`` -- answer ``status`` (200 when unset) with this exact string
      as the HTTP body, ``Content-Type: application/json`` unless ``headers``
      say otherwise (a truncated or HTML body the SDK cannot decode).
    * ``raw_text`` -- answer 200 with this exact string as the model's text
      content (fenced JSON, prose around JSON, invalid JSON ...).
    * otherwise (only ``delay_s``/``headers``) -- the normal reply, with
      ``headers`` added.
    """

    status: int | None = None
    headers: dict = field(default_factory=dict)
    body: dict | None = None
    wait_for_requests: int = 0
    delay_s: float = 0.0
    hang: bool = False
    reset: bool = False
    raw_text: str | None = None
    raw_body: str | None = None


WAIT_FOR_REQUESTS_S = 60.0
"""The longest a ``Fault.wait_for_requests`` holds its request (a bound for a broken test, not a timing)."""


@dataclass
class Quirks:
    """Behaviours of real OpenAI-compatible servers (``/v1/chat/completions`` only).

    The defaults are a well-behaved server. :data:`LLAMA_CPP_PYTHON` holds the
    behaviours measured on llama-cpp-python 0.3.36's server; each
    field can also be set alone.

    * ``null_content_status`` -- answer this status (500 there) to a request
      holding a message whose ``content`` is null, or an assistant message
      without ``content`` and without ``tool_calls``.
    * ``json_schema_status`` -- answer this status to ``response_format``
      ``json_schema`` (500 on llama-cpp-python; 422 on servers whose request
      validation is FastAPI's), with ``json_schema_message``.
    * ``required_tool_choice_status`` -- answer this status to
      ``tool_choice: "required"`` (500 there, with an empty message).
    * ``named_tool_choice_status`` -- answer this status to a forced named
      tool (``tool_choice: {"type": "function", ...}``): servers that accept
      only the string forms.
    * ``seed_status`` -- answer this status to a request holding ``seed``.
    * ``serial`` -- one request at a time: requests queue, and a request keeps
      being served (its latency slept, its brain called) after the client gave
      up on it, exactly like a single-slot local server.
    * ``usage`` -- ``"reported"`` (default), ``"null"`` (``"usage": null``),
      ``"null-fields"`` (``{"prompt_tokens": null, ...}``) or ``"absent"``.
      Applies to both APIs (anthropic: ``usage`` null, fields null, absent).
    """

    null_content_status: int | None = None
    json_schema_status: int | None = None
    json_schema_message: str = "Input should be 'text' or 'json_object'"
    required_tool_choice_status: int | None = None
    named_tool_choice_status: int | None = None
    seed_status: int | None = None
    serial: bool = False
    usage: str = "reported"

    def __post_init__(self) -> None:
        if self.usage not in ("reported", "null", "null-fields", "absent"):
            raise ValueError(f"usage must be reported, null, null-fields or absent, not {self.usage!r}")


# what llama-cpp-python 0.3.36's server does (measured; ENVIRONMENT.md)
LLAMA_CPP_PYTHON = Quirks(null_content_status=500, json_schema_status=500, required_tool_choice_status=500, serial=True)


def quirk_error(api: str, quirks: Quirks, body: dict) -> tuple[int, dict] | None:
    """The ``(status, error body)`` a server with ``quirks`` answers to ``body``, or None.

    500s carry the message in ``{"error": {"message", "type": "internal_server_error"}}`` as
    llama-cpp-python does (its pydantic error, then a ``File "..."`` traceback trailer); 422s in
    FastAPI's ``{"detail": [{"loc", "msg", "type"}]}`` shape."""
    if api != "openai":
        return None

    def error(status: int, loc: list, msg: str) -> tuple[int, dict]:
        if status == 422:
            return status, {"detail": [{"type": "value_error", "loc": ["body", *loc], "msg": msg}]}
        # llama-cpp-python's shape: the pydantic error, then a traceback trailer (measured on 0.3.36)
        detail = {"type": "literal_error", "loc": ("body", *loc), "msg": msg}
        message = (
            (
                f'1 validation error:\n  {detail!r}\n\n  File "/venv/lib/python3.11/site-packages/llama_cpp/server/app.py", '
                f"line 376, in create_chat_completion\n    POST /v1/chat/completions"
            )
            if msg
            else ""
        )
        return status, {"error": {"message": message, "type": "internal_server_error", "param": None, "code": None}}

    for i, message in enumerate(body.get("messages") or []):
        if quirks.null_content_status and isinstance(message, dict):
            if message.get("content", "") is None or (
                message.get("role") == "assistant" and "content" not in message and not message.get("tool_calls")
            ):
                return error(quirks.null_content_status, ["messages", i, "content"], "Input should be a valid string")
    rf = body.get("response_format")
    if quirks.json_schema_status and isinstance(rf, dict) and rf.get("type") == "json_schema":
        return error(quirks.json_schema_status, ["response_format", "type"], quirks.json_schema_message)
    tc = body.get("tool_choice")
    if quirks.required_tool_choice_status and tc == "required":
        return error(quirks.required_tool_choice_status, ["tool_choice"], "")  # llama-cpp-python: a 500, message empty
    if quirks.named_tool_choice_status and isinstance(tc, dict):
        return error(quirks.named_tool_choice_status, ["tool_choice"], "Input should be 'none', 'auto' or 'required'")
    if quirks.seed_status and "seed" in body:
        return error(quirks.seed_status, ["seed"], "Extra inputs are not permitted")
    return None


def anthropic_message_problem(body: dict) -> str | None:
    """What the real Messages API refuses with a 400 in ``messages`` (None when fine): a message with
    empty content (except a final assistant message), or an empty or whitespace-only text block."""
    messages = body.get("messages") or []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        final_assistant = i == len(messages) - 1 and message.get("role") == "assistant"
        if (content in (None, "", []) or (isinstance(content, str) and not content.strip())) and not final_assistant:
            return f"messages.{i}: all messages must have non-empty content except for the optional final assistant message"
        for j, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict) and block.get("type") == "text" and not str(block.get("text") or "").strip():
                return f"messages.{i}.content.{j}.text: text content blocks must contain non-whitespace text"
    return None


@dataclass
class RecordedRequest:
    """One model request the server received (faulted ones included).

    ``api`` is ``"anthropic"`` or ``"openai"``; ``path`` the request path;
    ``body`` the parsed JSON (``{}`` if it was not JSON); ``headers`` the
    request headers with lower-cased names and every credential
    (``authorization``, ``x-api-key``, ``api-key``) replaced by
    ``"REDACTED"``; ``time`` the ``time.monotonic()`` arrival time.
    ``status`` is the HTTP status answered (0 for hang/reset) and ``fault``
    the :class:`Fault` applied, if any.
    """

    api: str
    path: str
    body: dict
    headers: dict
    time: float
    status: int = 0
    fault: Fault | None = None


# --------------------------------------------------------------------------
# Helpers for reading requests (also useful for custom brains)
# --------------------------------------------------------------------------


def offered_tools(api: str, body: dict) -> dict[str, dict]:
    """Return ``{tool name: JSON schema}`` for the tools a request offers.

    anthropic: ``tools[i] = {"name", "input_schema"}``; openai:
    ``tools[i] = {"type": "function", "function": {"name", "parameters"}}``
    plus a ``response_format`` of type ``json_schema`` (under its name).
    """
    tools: dict[str, dict] = {}
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if api == "anthropic":
            if "name" in tool and "input_schema" in tool:
                tools[tool["name"]] = tool.get("input_schema") or {}
        else:
            fn = tool.get("function")
            if tool.get("type", "function") == "function" and isinstance(fn, dict) and "name" in fn:
                tools[fn["name"]] = fn.get("parameters") or {}
    if api == "openai":
        rf = body.get("response_format")
        if isinstance(rf, dict) and rf.get("type") == "json_schema":
            js = rf.get("json_schema") or {}
            if js.get("name"):
                tools.setdefault(js["name"], js.get("schema") or {})
    return tools


def _function_tool_names(api: str, body: dict) -> set[str]:
    """Names of real tools (not response_format) offered by the request."""
    if api == "anthropic":
        return {t["name"] for t in body.get("tools") or [] if isinstance(t, dict) and "name" in t}
    names = set()
    for t in body.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and "name" in fn:
            names.add(fn["name"])
    return names


def _content_text(content: Any) -> str:
    """Flatten tool-result content (a string or a list of text blocks)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    return str(content)


def tool_results(api: str, body: dict) -> list[tuple[str | None, str]]:
    """Return the tool results in the conversation, oldest first.

    Each item is ``(tool name or None, result text)``; the name is found by
    matching the result's ``tool_use_id`` / ``tool_call_id`` against the
    assistant's earlier tool calls.  anthropic results are ``tool_result``
    blocks in user messages; openai results are ``role: "tool"`` messages.
    """
    names: dict[str, str] = {}
    results: list[tuple[str | None, str]] = []
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        role, content = msg.get("role"), msg.get("content")
        if role == "assistant":
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        names[str(block.get("id"))] = str(block.get("name"))
            for call in msg.get("tool_calls") or []:
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict):
                    names[str(call.get("id"))] = str(fn.get("name"))
        elif role == "tool":
            results.append((names.get(str(msg.get("tool_call_id"))), _content_text(content)))
        elif role == "user" and isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results.append((names.get(str(block.get("tool_use_id"))), _content_text(block.get("content"))))
    return results


LABEL_FIRST_TOOLS = ("record_label", "record_labels", "record_list_verdict")


def first_user_text(body: dict) -> str:
    """The text of the conversation's first user message (either API): the judge's request."""
    for msg in body.get("messages") or []:
        if isinstance(msg, dict) and msg.get("role") == "user":
            return _content_text(msg.get("content"))
    return ""


def _forced_tool(api: str, body: dict) -> str | None:
    """The tool name a request forces through ``tool_choice``, if any."""
    tc = body.get("tool_choice")
    if not isinstance(tc, dict):
        return None
    if api == "anthropic" and tc.get("type") == "tool":
        return tc.get("name")
    if api == "openai" and tc.get("type") == "function":
        return (tc.get("function") or {}).get("name")
    return None


def _estimate_tokens(part: Any) -> int:
    """Deterministic token estimate: a quarter of the JSON length, at least 1."""
    return max(1, len(json.dumps(part, sort_keys=True, ensure_ascii=False)) // 4)


# --------------------------------------------------------------------------
# Prompt caching
# --------------------------------------------------------------------------

CACHE_TTL_S = 300.0
"""Seconds a cache entry lives after its last use: Anthropic's default ``ephemeral`` TTL (5 minutes,
refreshed on every hit) and the low end of OpenAI's 5-10 minutes of inactivity."""

ANTHROPIC_CACHE_MINIMUM = {
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4-0": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-4-0": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}
"""Minimum cacheable prompt length (tokens) per Anthropic model: a marked prefix shorter than this is
neither written nor read (both cache counters stay 0, the request bills at the input price). Source:
platform.claude.com/docs/en/build-with-claude/prompt-caching, "Cache limitations" (as of 2026: 4096
for Opus 4.6, Opus 4.5 and Haiku 4.5; 1024 for Sonnet 4.6, Sonnet 4.5, Opus 4.1, Opus 4, Sonnet 4 and
Sonnet 3.7; 2048 for Haiku 3.5 and Haiku 3). A model not listed gets ANTHROPIC_DEFAULT_MINIMUM."""
ANTHROPIC_DEFAULT_MINIMUM = 1024
OPENAI_CACHE_MINIMUM = 1024
OPENAI_CACHE_STEP = 128
"""OpenAI caches prompts of 1024 tokens or more; hits come in 128-token increments
(platform.openai.com/docs/guides/prompt-caching)."""


def anthropic_cache_minimum(model: str) -> int:
    """The minimum cacheable prefix (tokens) of ``model`` (:data:`ANTHROPIC_CACHE_MINIMUM`, a dated
    snapshot name matching its base name; :data:`ANTHROPIC_DEFAULT_MINIMUM` for a model not listed)."""
    for name in sorted(ANTHROPIC_CACHE_MINIMUM, key=len, reverse=True):
        if model == name or model.startswith(name + "-") or model.startswith(name + "@"):
            return ANTHROPIC_CACHE_MINIMUM[name]
    return ANTHROPIC_DEFAULT_MINIMUM


def anthropic_cached_prefix(body: dict) -> list | None:
    """The prefix an Anthropic request marks for caching, or None when no block carries
    ``cache_control``. The API builds the prefix in the order tools, system, messages and caches it up
    to and including the last marked block, so everything before the marker (the tool definitions
    included) is part of it."""
    blocks: list = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, list):
        blocks += system
    elif isinstance(system, str):
        blocks.append({"type": "text", "text": system})
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            blocks += content
        elif content is not None:
            blocks.append({"type": "text", "text": content})
    marked = [i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("cache_control")]
    return blocks[: marked[-1] + 1] if marked else None


def openai_prompt_text(body: dict) -> str:
    """A Chat Completions request's prompt as one string in the order OpenAI's prefix cache sees it:
    tool definitions and the structured-output schema first (the schema "serves as a prefix to the
    system message"), then the messages in order."""
    head = json.dumps({"tools": body.get("tools"), "response_format": body.get("response_format")}, sort_keys=True, ensure_ascii=False)
    return head + "".join(json.dumps(m, sort_keys=True, ensure_ascii=False) for m in body.get("messages") or [])


def openai_cached_tokens(shared_chars: int, prompt_tokens: int) -> int:
    """Cached tokens for a prompt that shares ``shared_chars`` leading characters with an earlier one:
    0 below OPENAI_CACHE_MINIMUM tokens (a quarter of the characters, as every fake count), else that
    many tokens rounded down to a 1024 + k*128 step, never more than ``prompt_tokens``."""
    shared = min(shared_chars // 4, prompt_tokens)
    if shared < OPENAI_CACHE_MINIMUM:
        return 0
    return OPENAI_CACHE_MINIMUM + (shared - OPENAI_CACHE_MINIMUM) // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP


class PromptCache:
    """The fake's provider-side prompt cache, per model (thread-safe). An entry becomes usable when the
    response that wrote it begins (a request that arrived earlier, still in flight beside it, misses it
    too: "a cache entry only becomes available after the first response begins", Anthropic's prompt
    caching guide) and lives ``ttl_s`` seconds after its last use; :meth:`clear` forgets everything (a
    provider cache long expired, as between two weekly runs)."""

    def __init__(self, ttl_s: float = CACHE_TTL_S) -> None:
        self.ttl_s = ttl_s
        self._entries: dict[tuple[str, str], tuple[float, float]] = {}  # key -> (written at, last used)
        self._lock = threading.Lock()

    def _live(self, now: float) -> None:
        for key in [k for k, (_, used) in self._entries.items() if now - used > self.ttl_s]:
            del self._entries[key]

    def touch(self, model: str, prefix: str, arrived: float | None = None) -> bool:
        """Record a use of ``prefix`` by a request that arrived at ``arrived`` (``time.monotonic()``; None:
        now): True when it was already cached for that request (a read), False on a write."""
        now = time.monotonic()
        arrived = now if arrived is None else arrived
        with self._lock:
            self._live(now)
            entry = self._entries.get((model, prefix))
            hit = entry is not None and entry[0] <= arrived
            self._entries[(model, prefix)] = (entry[0] if entry is not None else now, now)
        return hit

    def openai_cached(self, model: str, prompt: str, prompt_tokens: int, arrived: float | None = None) -> int:
        """OpenAI's ``cached_tokens`` for ``prompt`` (:func:`openai_prompt_text`) of a request that arrived
        at ``arrived``: the longest prefix it shares with an earlier prompt of ``model`` whose response
        had begun by then (:func:`openai_cached_tokens`); the prompt is then cached itself."""
        now = time.monotonic()
        arrived = now if arrived is None else arrived
        with self._lock:
            self._live(now)
            shared = 0
            for (m, earlier), (written, _) in self._entries.items():
                if m == model and written <= arrived:
                    shared = max(shared, len(os.path.commonprefix([earlier, prompt])))
            entry = self._entries.get((model, prompt))
            self._entries[(model, prompt)] = (entry[0] if entry is not None else now, now)
        return openai_cached_tokens(shared, prompt_tokens)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()


# --------------------------------------------------------------------------
# The default brain
# --------------------------------------------------------------------------


class DefaultBrain:
    """A deterministic stand-in model for judge-runner's two phases.

    The phase is recognised from the tools offered (see :func:`offered_tools`):

    * **Phase one** (``submit_queries`` offered, alongside ``list_dir``,
      ``glob``, ``read_file``, ``grep``): with no tool result yet it calls
      ``list_dir {"path": "."}``; after one, ``glob {"pattern": "**/*.md"}``;
      after two, ``read_file`` on the first path the glob returned (skipped if
      it returned none); then ``submit_queries``.  A ``tool_choice`` forcing
      ``submit_queries`` submits at once.  It submits N queries, N being
      ``queries.minItems`` of the submit_queries schema (else ``maxItems``,
      else 5): ids ``q01``..., built round-robin from the globbed paths with
      query types cycling keyword, natural-language, identifier, conceptual,
      ambiguous, multilingual and ``expectedSources = [path]``; the last query
      is always off-topic ("how do I bake sourdough bread", no sources).  If
      the glob found nothing, every query is off-topic.
    * **Phase two** (``record_verdict`` offered as a tool, or as an openai
      ``response_format`` json_schema): a valid verdict with N labels, N being
      ``labels.minItems`` (else ``maxItems``, else 5); label i has relevance
      ``max(0, 3 - (i - 1))``.  N == 0 gives empty labels, zero scores and the
      suggestion "Return results for on-topic queries".
      In JSON mode (an openai request without a json_schema or a tool that
      asks for JSON), the verdict's schema is read from the request itself:
      ``response_format.schema`` (llama-cpp-python's extension of
      ``json_object``), else the JSON Schema after the last ``JSON Schema:``
      in the system message (where a client without structured outputs states
      it); a schema with a ``labels`` property is a verdict's.
    * Anything else: ``Text("ok")``.

    Glob results are read as one relative path per line; lines with spaces
    (notes such as "(truncated, 12 more)") or without a '/' or '.' are ignored.
    """

    QUERY_TYPES = ("keyword", "natural-language", "identifier", "conceptual", "ambiguous", "multilingual")
    OFF_TOPIC = "how do I bake sourdough bread"
    _OTHER_OFF_TOPIC = (
        "best hiking trails near Lisbon",
        "what is the capital of Australia",
        "how to fix a flat bicycle tyre",
        "weather forecast for tomorrow",
    )

    def __call__(self, api: str, body: dict) -> Reply:
        tools = offered_tools(api, body)
        forced = _forced_tool(api, body)
        if "submit_queries" in tools and forced in (None, "submit_queries"):
            return self.phase_one(api, body, tools, force_submit=forced == "submit_queries")
        if "record_verdict" in tools and forced in (None, "record_verdict"):
            return ToolCall("record_verdict", self.verdict(self._pinned_count(tools["record_verdict"], "labels")))
        for name in LABEL_FIRST_TOOLS:  # the label-first protocol: an honest judge (tests/support/fakes/honest_judge.py)
            if name in tools and forced in (None, name):
                from tests.support.fakes.honest_judge import fit_to_schema, honest_reply

                return ToolCall(name, fit_to_schema(honest_reply(name, first_user_text(body)), tools[name]))
        schema = self.json_mode_schema(api, body)
        if schema is not None:  # JSON mode: which protocol tool the schema belongs to
            props = schema.get("properties") or {}
            if "holistic" in props:
                from tests.support.fakes.honest_judge import honest_reply

                return ToolCall("record_list_verdict", honest_reply("record_list_verdict", first_user_text(body)))
            if "relevance" in props:
                from tests.support.fakes.honest_judge import honest_reply

                return ToolCall("record_label", honest_reply("record_label", first_user_text(body)))
            items = (props.get("labels") or {}).get("items") or {}
            if "id" in (items.get("properties") or {}):
                from tests.support.fakes.honest_judge import honest_reply

                return ToolCall("record_labels", honest_reply("record_labels", first_user_text(body)))
            if "labels" in props:
                return ToolCall("record_verdict", self.verdict(self._pinned_count(schema, "labels")))
        return Text("ok")

    @staticmethod
    def json_mode_schema(api: str, body: dict) -> dict | None:
        """The schema of a JSON-mode request (see the class docstring), or None."""
        if api != "openai" or body.get("tools"):
            return None
        rf = body.get("response_format") if isinstance(body.get("response_format"), dict) else {}
        if rf.get("type") == "json_schema":
            return None
        if isinstance(rf.get("schema"), dict):
            return rf["schema"]
        messages = body.get("messages") or []
        system = messages[0].get("content") if messages and isinstance(messages[0], dict) else None
        marker = "JSON Schema:"
        if not isinstance(system, str) or marker not in system:
            return None
        try:
            schema, _ = json.JSONDecoder().raw_decode(system[system.rindex(marker) + len(marker) :].lstrip())
        except ValueError:
            return None
        return schema if isinstance(schema, dict) else None

    # -- phase one ---------------------------------------------------------

    def phase_one(self, api: str, body: dict, tools: dict[str, dict], force_submit: bool = False) -> Reply:
        """Pick the next exploration step, or submit the queries."""
        results = tool_results(api, body)
        paths = self._glob_paths(results)
        n_queries = self._pinned_count(tools["submit_queries"], "queries")
        if not force_submit:
            if len(results) == 0 and "list_dir" in tools:
                return ToolCall("list_dir", {"path": "."})
            if len(results) == 1 and "glob" in tools:
                return ToolCall("glob", {"pattern": "**/*.md"})
            if len(results) == 2 and paths and "read_file" in tools:
                return ToolCall("read_file", {"path": paths[0]})
        return ToolCall("submit_queries", {"queries": self.queries(paths, n_queries)})

    @staticmethod
    def _glob_paths(results: list[tuple[str | None, str]]) -> list[str]:
        text = None
        for name, content in results:
            if name == "glob":
                text = content
                break
        if text is None and len(results) >= 2 and results[1][0] is None:
            text = results[1][1]  # ids unknown: the second result is the glob's
        if not text:
            return []
        paths = []
        for line in text.splitlines():
            line = line.strip()
            if not line or " " in line or "\t" in line:
                continue
            if ("/" in line or "." in line) and set(line) - {".", "/"}:
                paths.append(line)
        return paths

    @staticmethod
    def _pinned_count(schema: dict, prop: str, default: int = 5) -> int:
        spec = ((schema or {}).get("properties") or {}).get(prop) or {}
        for key in ("minItems", "maxItems"):
            if isinstance(spec.get(key), int):
                return spec[key]
        return default

    def queries(self, paths: list[str], n: int) -> list[dict]:
        """Build the N queries submitted in phase one."""
        out: list[dict] = []
        for i in range(n):
            qid = f"q{i + 1:02d}"
            if i == n - 1 or not paths:
                text = self.OFF_TOPIC if i == n - 1 else self._OTHER_OFF_TOPIC[i % len(self._OTHER_OFF_TOPIC)]
                out.append(
                    {
                        "id": qid,
                        "query": text,
                        "queryIntent": "An off-topic question the corpus cannot answer; the search should abstain.",
                        "queryType": "off-topic",
                        "expectedSources": [],
                    }
                )
                continue
            path = paths[i % len(paths)]
            qtype = self.QUERY_TYPES[i % len(self.QUERY_TYPES)]
            stem = os.path.splitext(os.path.basename(path.rstrip("/")))[0] or path
            words = " ".join(stem.replace("-", " ").replace("_", " ").split())[:200] or stem[:200]
            text = {
                "keyword": words,
                "natural-language": f"how does {words} work",
                "identifier": stem[:200],
                "conceptual": f"what is the idea behind {words}",
                "ambiguous": words.split()[0] if words.split() else words,
                "multilingual": f"documentación sobre {words}",
            }[qtype]
            out.append(
                {
                    "id": qid,
                    "query": text,
                    "queryIntent": f"Find the part of {path} that explains {words}.",
                    "queryType": qtype,
                    "expectedSources": [path],
                }
            )
        return out

    # -- phase two ---------------------------------------------------------

    @staticmethod
    def verdict(n: int) -> dict:
        """A verdict valid against the retired single-call schema (tests/data/judge_verdict_v1.schema.json) pinned to N labels."""
        if n == 0:
            return {
                "labels": [],
                "analysis": {
                    "relevance": "No results were returned.",
                    "ranking": "There is nothing to rank.",
                    "coverage": "No results, so nothing of the intent is covered.",
                    "snippetQuality": "No snippets were shown.",
                },
                "scores": {"relevance": 0.0, "ranking": 0.0, "coverage": 0.0, "snippetQuality": 0.0, "overall": 0.0},
                "suggestions": ["Return results for on-topic queries"],
            }
        return {
            "labels": [
                {
                    "rank": i,
                    "relevance": max(0, 3 - (i - 1)),
                    "reason": f"Result {i} is {['irrelevant', 'related', 'highly relevant', 'perfectly relevant'][max(0, 3 - (i - 1))]} to the query.",
                }
                for i in range(1, n + 1)
            ],
            "analysis": {
                "relevance": "The top results address the query directly.",
                "ranking": "The most relevant result is ranked first.",
                "coverage": "The main aspects of the intent are covered.",
                "snippetQuality": "Snippets show the matching passage.",
            },
            "scores": {"relevance": 0.8, "ranking": 0.7, "coverage": 0.6, "snippetQuality": 0.75, "overall": 0.7},
            "suggestions": ["Boost title matches for identifier queries"],
        }


# --------------------------------------------------------------------------
# Response shapes
# --------------------------------------------------------------------------

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_OPENAI_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", "service_unavailable"),
}
_MESSAGES = {
    400: "Invalid request.",
    401: "Invalid API key.",
    403: "Permission denied.",
    404: "Not found.",
    408: "Request timed out.",
    413: "Request too large.",
    429: "Rate limit exceeded. Please retry after the time given in the retry-after header.",
    500: "Internal server error.",
    502: "Bad gateway.",
    503: "Service unavailable.",
    504: "Gateway timeout.",
    529: "Overloaded.",
}


def _error_body(api: str, status: int, message: str | None = None) -> dict:
    msg = message or _MESSAGES.get(status, f"Error {status}.")
    if api == "anthropic":
        etype = _ANTHROPIC_ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": etype, "message": msg}}
    etype, code = _OPENAI_ERROR_TYPES.get(status) or (("server_error", None) if status >= 500 else ("invalid_request_error", None))
    return {"error": {"message": msg, "type": etype, "param": None, "code": code}}


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


class _StopServing(Exception):
    """Raised inside a handler when the server is stopping."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # never join handler threads (hung requests)
    fake: FakeLLMServer

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a possibly slow DNS
        # lookup; loopback needs none of that.
        TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = host, port


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # keep test output quiet

    def setup(self) -> None:
        super().setup()
        try:  # headers and body go out as separate writes; avoid Nagle delays
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self.server.fake._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.fake._track(self.connection, False)

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (ConnectionError, OSError, _StopServing):
            self.close_connection = True

    def do_GET(self) -> None:
        from tests.support.fakes.fake_batches import is_batch_path

        if is_batch_path(self.path.split("?", 1)[0]):
            self.server.fake.batches.handle(self, "GET")
        else:
            self._not_found()

    def do_POST(self) -> None:
        from tests.support.fakes.fake_batches import is_batch_path

        if is_batch_path(self.path.split("?", 1)[0]):
            self.server.fake.batches.handle(self, "POST")
        else:
            self.server.fake._handle_post(self)

    # -- low-level helpers used by FakeLLMServer ---------------------------

    def _not_found(self) -> None:
        self.send_json(404, {"error": {"type": "not_found_error", "message": f"Unknown path {self.path}"}})

    def read_body(self) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def send_json(self, status: int, payload: Any, headers: dict | None = None) -> None:
        self.send_raw(status, json.dumps(payload).encode("utf-8"), {"Content-Type": "application/json", **(headers or {})})

    def send_raw(self, status: int, data: bytes, headers: dict) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(str(name), str(value))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def reset_connection(self) -> None:
        """Drop the connection with a TCP RST and no response."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        # The real close happens once rfile/wfile are closed in finish().
        self.connection.close()


class FakeLLMServer:
    """A loopback HTTP server speaking the Anthropic and OpenAI chat APIs.

    Use it as a context manager: ``__enter__`` starts it in a daemon thread on
    ``127.0.0.1`` with an ephemeral port, ``__exit__`` stops it promptly, even
    with requests hung by a ``Fault(hang=True)``.

    Arguments:
        brain: ``brain(api, body) -> ToolCall | Text | list[ToolCall | Text]``
            decides each reply; ``api`` is ``"anthropic"`` or ``"openai"`` and
            ``body`` the parsed request JSON.  Defaults to :class:`DefaultBrain`.
            An exception in the brain is answered with a 500 whose message
            carries the traceback.
        latency_s: sleep added to every model request.
        invalid_keys: API keys answered with 401 ``authentication_error`` (in
            the API's shape).  A request without any key also gets 401.  The
            key is read from ``x-api-key`` or ``Authorization: Bearer``.
        quirks: behaviours of a real OpenAI-compatible server (:class:`Quirks`,
            e.g. :data:`LLAMA_CPP_PYTHON`); checked after faults are applied.

    Attributes:
        url / anthropic_base_url: ``"http://127.0.0.1:PORT"``.
        openai_base_url: ``url + "/v1"``.
        requests: list of :class:`RecordedRequest`, one per model request.
        in_flight / max_in_flight: model requests being served now / the most
            served at once (from their arrival to their answer; faulted and
            refused ones included).
        faults: FIFO list of :class:`Fault`; each model request that passes
            the key check pops the first one.

    Prompt caching is modelled from the requests seen (:class:`PromptCache`):
    Anthropic usage reports ``cache_creation_input_tokens`` for the first
    request with a given marked prefix (tools, then system blocks, then
    message blocks, up to the last block with ``cache_control``) and
    ``cache_read_input_tokens`` for later requests of the same model with the
    same prefix, but only when the prefix reaches the model's minimum
    (:func:`anthropic_cache_minimum`); OpenAI usage reports
    ``prompt_tokens_details.cached_tokens`` for the longest prefix shared with
    an earlier request of the same model, from 1024 tokens in 128-token steps
    (:func:`openai_cached_tokens`).  An entry serves only requests that
    arrived after the response that wrote it began (concurrent first
    requests each write).  Entries expire ``cache_ttl_s`` after
    their last use (5 minutes, both vendors' default).  ``stream: true`` is
    refused with a 400, and so are Anthropic messages the real API refuses
    (:func:`anthropic_message_problem`: empty turns, empty text blocks).
    """

    def __init__(
        self,
        brain: Brain | None = None,
        latency_s: float = 0.0,
        invalid_keys: Iterable[str] = frozenset({"invalid-key"}),
        quirks: Quirks | None = None,
        cache_ttl_s: float = CACHE_TTL_S,
    ) -> None:
        self.brain: Brain = brain if brain is not None else DefaultBrain()
        self.prompt_cache = PromptCache(cache_ttl_s)
        self.quirks = quirks or Quirks()
        self._serial = threading.Lock()
        self.latency_s = latency_s
        self.invalid_keys = set(invalid_keys)
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.faults: list[Fault] = []
        self.url = ""
        self.anthropic_base_url = ""
        self.openai_base_url = ""
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # a model request was recorded (Fault.wait_for_requests)
        self._stop = threading.Event()
        self._ids = itertools.count(1)
        self._conns: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        from tests.support.fakes.fake_batches import FakeBatches

        self.batches = FakeBatches(self)  # the batch APIs (tests/support/fakes/fake_batches.py)

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> FakeLLMServer:
        """Start serving (what ``__enter__`` does)."""
        if self._httpd is not None:
            return self
        self._stop.clear()
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.fake = self
        self._httpd = httpd
        port = httpd.server_address[1]
        self.url = f"http://127.0.0.1:{port}"
        self.anthropic_base_url = self.url
        self.openai_base_url = self.url + "/v1"
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, name=f"FakeLLMServer:{port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: wake hung/sleeping handlers and drop open connections."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stop.set()
        httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- inspection ----------------------------------------------------------

    def count(self, api: str | None = None) -> int:
        """Number of model requests received, optionally only for one API."""
        with self._lock:
            return sum(1 for r in self.requests if api is None or r.api == api)

    # -- internals -----------------------------------------------------------

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and self._stop.wait(seconds):
            raise _StopServing()

    def _wait_for_requests(self, count: int) -> None:
        """Until ``self.requests`` holds ``count`` model requests (or ``WAIT_FOR_REQUESTS_S`` passed)."""
        deadline = time.monotonic() + WAIT_FOR_REQUESTS_S
        with self._arrived:
            while len(self.requests) < count and not self._stop.is_set() and time.monotonic() < deadline:
                self._arrived.wait(0.1)
        if self._stop.is_set():
            raise _StopServing()

    def _pop_fault(self) -> Fault | None:
        with self._lock:
            return self.faults.pop(0) if self.faults else None

    def _handle_post(self, h: _Handler) -> None:
        path = h.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/messages":
            api = "anthropic"
        elif path == "/v1/chat/completions":
            api = "openai"
        else:
            h.read_body()
            h._not_found()
            return

        raw = h.read_body()
        parse_error = ""
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("request body must be a JSON object")
        except ValueError as exc:
            body = None
            parse_error = str(exc)
        headers = {k.lower(): v for k, v in h.headers.items()}
        key = headers.get("x-api-key") or ""
        auth = headers.get("authorization") or ""
        if not key and auth.lower().startswith("bearer "):
            key = auth[7:].strip()
        if not key:
            key = headers.get("api-key") or ""
        for secret in ("authorization", "x-api-key", "api-key"):
            if secret in headers:
                headers[secret] = "REDACTED"
        rec = RecordedRequest(api=api, path=h.path, body=body or {}, headers=headers, time=time.monotonic())
        with self._lock:
            self.requests.append(rec)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._arrived.notify_all()
        try:
            self._answer_post(h, api, body, rec, key, parse_error)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer_post(self, h: _Handler, api: str, body: dict | None, rec: RecordedRequest, key: str, parse_error: str) -> None:
        """Answer one recorded model request: the key check, the body check, then faults and the brain."""

        def answer(status: int, payload: Any, extra: dict | None = None) -> None:
            rec.status = status
            rid = f"req_fake{self._next_id():012d}"
            hdrs = {"request-id": rid} if api == "anthropic" else {"x-request-id": rid}
            hdrs.update(extra or {})
            h.send_json(status, payload, hdrs)

        if not key:
            answer(401, _error_body(api, 401, "Missing API key."))
            return
        if key in self.invalid_keys:
            answer(401, _error_body(api, 401, "invalid x-api-key" if api == "anthropic" else "Incorrect API key provided."))
            return
        if body is None:
            answer(400, _error_body(api, 400, f"Request body is not valid JSON: {parse_error}"))
            return

        fault = self._pop_fault()
        rec.fault = fault
        # a serial server works on one request at a time, and on to the end even when its client has left
        with self._serial if self.quirks.serial else contextlib.nullcontext():
            self._serve(h, api, body, rec, fault, answer)

    def _serve(self, h: _Handler, api: str, body: dict, rec: RecordedRequest, fault: Fault | None, answer) -> None:
        """Apply ``fault``, the quirks, then the brain's reply, to one model request."""
        self._sleep(self.latency_s)
        extra_headers: dict = {}
        if fault is not None:
            self._wait_for_requests(fault.wait_for_requests)
            self._sleep(fault.delay_s)
            if fault.hang:
                self._stop.wait()
                raise _StopServing()
            if fault.reset:
                h.reset_connection()
                return
            extra_headers = dict(fault.headers)
            if fault.raw_body is not None:
                rec.status = fault.status or 200
                h.send_raw(rec.status, fault.raw_body.encode("utf-8"), {"Content-Type": "application/json", **extra_headers})
                return
            if fault.status is not None:
                if fault.body is not None:
                    payload = fault.body
                elif fault.status >= 400:
                    payload = _error_body(api, fault.status)
                else:
                    payload = None
                if payload is not None:
                    answer(fault.status, payload, extra_headers)
                    return
            elif fault.body is not None:
                answer(200, fault.body, extra_headers)
                return

        if body.get("stream"):
            answer(400, _error_body(api, 400, "stream: true is not supported by FakeLLMServer; use non-streaming requests."))
            return
        if api == "anthropic" and (problem := anthropic_message_problem(body)):
            answer(400, _error_body(api, 400, problem))
            return
        refused = quirk_error(api, self.quirks, body)
        if refused is not None:
            answer(*refused)
            return

        if fault is not None and fault.raw_text is not None:
            replies: list[Reply] = [Text(fault.raw_text)]
        else:
            try:
                result = self.brain(api, body)
                replies = list(result) if isinstance(result, (list, tuple)) else [result]
                if not replies or not all(isinstance(r, (ToolCall, Text)) for r in replies):
                    raise TypeError(f"brain must return ToolCall, Text or a list of them, not {result!r}")
            except Exception:
                answer(500, _error_body(api, 500, "FakeLLMServer brain failed:\n" + traceback.format_exc()))
                return

        if api == "anthropic":
            payload = self._anthropic_message(body, replies, rec.time)
        else:
            payload = self._openai_completion(body, replies, rec.time)
        self._apply_usage_quirk(api, payload)
        answer(200, payload, extra_headers)

    def batch_reply(self, api: str, body: dict) -> dict:
        """The payload (message or chat completion) a synchronous request with ``body`` would get from the
        brain, for one item of a batch (no faults, no quirks)."""
        result = self.brain(api, body)
        replies = list(result) if isinstance(result, (list, tuple)) else [result]
        return self._anthropic_message(body, replies) if api == "anthropic" else self._openai_completion(body, replies)

    def _apply_usage_quirk(self, api: str, payload: dict) -> None:
        mode = self.quirks.usage
        if mode == "null":
            payload["usage"] = None
        elif mode == "absent":
            payload.pop("usage", None)
        elif mode == "null-fields":
            payload["usage"] = {k: None for k in payload["usage"]}

    def _anthropic_message(self, body: dict, replies: list[Reply], arrived: float | None = None) -> dict:
        content: list[dict] = []
        for r in replies:
            if isinstance(r, ToolCall):
                content.append({"type": "tool_use", "id": f"toolu_fake{self._next_id():016d}", "name": r.name, "input": r.input})
            else:
                content.append({"type": "text", "text": r.text})
        stop = replies[-1].stop
        if stop == "end":
            stop_reason = "tool_use" if any(isinstance(r, ToolCall) for r in replies) else "end_turn"
        else:
            stop_reason = stop
        message: dict = {
            "id": f"msg_fake{self._next_id():016d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or "fake-model",
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": self._anthropic_usage(body, content, arrived),
        }
        if stop_reason == "refusal":
            message["stop_details"] = {"type": "refusal", "category": None, "explanation": None}
        return message

    def _anthropic_usage(self, body: dict, content: list[dict], arrived: float | None = None) -> dict:
        total = _estimate_tokens({"system": body.get("system"), "messages": body.get("messages"), "tools": body.get("tools")})
        prefix = anthropic_cached_prefix(body)
        creation = read = 0
        if prefix is not None:
            size = _estimate_tokens(prefix)
            if size >= anthropic_cache_minimum(str(body.get("model"))):
                key = json.dumps(prefix, sort_keys=True, ensure_ascii=False)
                if self.prompt_cache.touch(str(body.get("model")), key, arrived):
                    read = size
                else:
                    creation = size
        return {
            "input_tokens": max(1, total - creation - read),
            "output_tokens": _estimate_tokens(content),
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
        }

    def _openai_completion(self, body: dict, replies: list[Reply], arrived: float | None = None) -> dict:
        rf = body.get("response_format")
        structured = isinstance(rf, dict) and rf.get("type") in ("json_schema", "json_object")
        function_names = _function_tool_names("openai", body)
        texts: list[str] = []
        tool_calls: list[dict] = []
        for r in replies:
            if isinstance(r, ToolCall):
                if structured and r.name not in function_names:
                    texts.append(json.dumps(r.input))
                else:
                    tool_calls.append(
                        {
                            "id": f"call_fake{self._next_id():016d}",
                            "type": "function",
                            "function": {"name": r.name, "arguments": json.dumps(r.input)},
                        }
                    )
            else:
                texts.append(r.text)
        stop = replies[-1].stop
        message: dict = {
            "role": "assistant",
            "content": "".join(texts) if texts else None,
            "refusal": None,
            "annotations": [],
        }
        if tool_calls:
            message["tool_calls"] = tool_calls
        if stop == "end":
            finish = "tool_calls" if tool_calls else "stop"
        elif stop == "max_tokens":
            finish = "length"
        else:
            finish = "content_filter"
            message["refusal"] = message["content"] or "I'm sorry, I can't help with that."
            message["content"] = None
        prompt = _estimate_tokens({"messages": body.get("messages"), "tools": body.get("tools"), "response_format": rf})
        completion = _estimate_tokens(message)
        cached = self.prompt_cache.openai_cached(str(body.get("model")), openai_prompt_text(body), prompt, arrived)
        return {
            "id": f"chatcmpl-fake{self._next_id():016d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            },
            "system_fingerprint": None,
        }
