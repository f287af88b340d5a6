"""What a run will cost before it spends: the judge calls it would make, their tokens and their price.

:class:`RecordingJudge` sends nothing: driven through the real protocol, it renders each request the LLM
judge would send, lays it out in the provider's wire format and counts its tokens. Units: tokens and USD.
Sources of the constants:

- :data:`CHARS_PER_TOKEN` = 4: OpenAI's rule of thumb for English ("one token is roughly 4
  characters"), and what the loopback fake server counts. No tokenizer is shipped (tiktoken downloads
  its files; Anthropic's is not public). Anthropic's tool-use system prompt is left out.
- expected output: a reason of :data:`TYPICAL_REASON_CHARS` (the middle of the label schema's "under 200
  characters") plus :data:`TOOL_CALL_TOKENS` of tool-call framing.
- reasoning models: the tokens their effort is assumed to take (``pricing.json``'s ``reasoningTokens``).
- worst case: every call writes its whole ``max_tokens``; re-asks are not counted
  (``--max-budget-usd`` bounds them).
- prompt caching and batch prices: ``pricing.json`` (``cacheMinTokens``, ``batchDiscount``).

docs/cost.md tells the estimate and how close it comes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from judge_runner.judging.cache import CachedJudgment
from judge_runner.judging.fence import RenderedDocument
from judge_runner.judging.llm_judge import JUDGE_MAX_TOKENS, LABEL_MAX_TOKENS, TOOL_DESCRIPTIONS
from judge_runner.judging.protocol import LabelReply, ListVerdict
from judge_runner.judging.requests import JudgeRequest, ListItem, batched_request, list_request, pointwise_request
from judge_runner.llm.anthropic_provider import AnthropicProvider
from judge_runner.llm.base import ChatRequest, ToolSpec, Turn
from judge_runner.llm.budget import Budget
from judge_runner.llm.openai_provider import OpenAIProvider
from judge_runner.llm.pricing import DEFAULT_EFFORT, Price, reasoning_tokens, reasons, unsized
from judge_runner.llm.retry import RetryPolicy

CHARS_PER_TOKEN = 4
TOOL_CALL_TOKENS = 20
"""Output tokens of a tool call's framing (id, name, type) around its JSON input."""
TYPICAL_REASON_CHARS = 120
MIN_CACHEABLE_TOKENS = 1024
"""The shortest prompt prefix both vendors cache (Anthropic Sonnet and Opus; OpenAI), tokens."""
PLACEHOLDER_LABEL = 1
PLACEHOLDER_REASON = ("The text names the subject of the query but does not show the steps the intent asks for. " * 2)[
    :TYPICAL_REASON_CHARS
]
EXPECTED_AGENT_TURNS = 8
"""Phase one, rough: requests a typical exploring agent makes (list, glob, about five reads, submit)."""
AGENT_TURN_OUTPUT_TOKENS = 150
"""Phase one, rough: output tokens of one exploring turn (a tool call and a sentence)."""
QUERY_OUTPUT_TOKENS = 120
"""Phase one, rough: output tokens per query in ``submit_queries`` (about 480 characters of JSON)."""
AGENT_MAX_TOKENS = 8192
"""``max_tokens`` of every phase-one request."""
CONTEXT_TOKENS = 200_000
"""Phase one's worst case: no request is longer than a 200k-token context window (Claude's standard)."""
ROUGH_SNIPPET_CHARS = 240
MODES = ("sync", "batch", "cached", "batch+cached")


def tokens(part: Any) -> int:
    """Estimated tokens of a JSON-ready value: its JSON length over :data:`CHARS_PER_TOKEN`, at least 1."""
    return max(1, len(json.dumps(part, sort_keys=True, ensure_ascii=False)) // CHARS_PER_TOKEN)


_READ = {"anthropic": ("system", "messages", "tools"), "openai": ("messages", "tools", "response_format")}
"""The request-body fields the model reads (and the fake server counts), per wire format."""


@cache
def _layout(provider: str) -> AnthropicProvider | OpenAIProvider | None:
    """A provider used only for its ``request_body`` (nothing is sent), or None for one without a wire format."""
    if provider == "anthropic":
        return AnthropicProvider("layout", RetryPolicy(), Budget(), api_key="dry-run-layout-only")
    if provider == "openai":
        return OpenAIProvider("layout", RetryPolicy(), Budget(), api_key="dry-run-layout-only")
    return None


def wire_parts(provider: str, system: str, user: str, tools: Sequence[ToolSpec], force_tool: str | None) -> tuple[dict, dict]:
    """``(parts the model reads, the cacheable prefix among them)`` of one request as ``provider``'s own
    ``request_body`` lays it out; another provider gets the neutral shape the budget estimates."""
    turns = [Turn("user", text=user)]
    layout = _layout(provider)
    if layout is not None:
        body = layout.request_body(
            ChatRequest(
                system=system, turns=turns, tools=list(tools), force_tool=force_tool, max_tokens=LABEL_MAX_TOKENS, cache_system=True
            )
        )
        parts = {key: body.get(key) for key in _READ[provider]}
        if provider == "anthropic":
            return parts, {"system": body["system"], "tools": body.get("tools")}
        return parts, {"system": body["messages"][0], "tools": body.get("tools"), "response_format": body.get("response_format")}
    neutral = [{"role": "user", "text": user}]
    tool_list = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools]
    return {"system": system, "messages": neutral, "tools": tool_list}, {"system": system, "tools": tool_list}


@dataclass(frozen=True)
class PlannedCall:
    """One call a run would make: ``kind`` (``label``, ``labels``, ``list`` or ``agent``), tokens in, expected
    out and at most (``max_output_tokens``), the ``prefix_tokens`` a prompt cache could serve, ``prefix_id``
    (equal ids share a prefix), and the ``reasoning_tokens`` part of the output."""

    kind: str
    input_tokens: int
    output_tokens: int
    max_output_tokens: int
    prefix_tokens: int = 0
    prefix_id: str = ""
    reasoning_tokens: int = 0


def plan_request(
    provider: str,
    kind: str,
    request: JudgeRequest,
    max_tokens: int,
    reply: Mapping[str, Any],
    model: str = "",
    effort: str = DEFAULT_EFFORT,
) -> PlannedCall:
    """The :class:`PlannedCall` of one forced-tool request expecting ``reply``; a reasoning ``model`` adds
    the reasoning tokens of ``effort``."""
    tool = ToolSpec(request.tool_name, TOOL_DESCRIPTIONS.get(request.tool_name, "Record the judgment."), request.schema)
    parts, prefix = wire_parts(provider, request.system, request.user, [tool], tool.name)
    prefix_json = json.dumps(prefix, sort_keys=True, ensure_ascii=False)
    reasoning, allowance = reasoning_tokens(effort) if reasons(model) else (0, 0)
    return PlannedCall(
        kind,
        tokens(parts),
        tokens(dict(reply)) + TOOL_CALL_TOKENS + reasoning,
        max_tokens + allowance,
        tokens(prefix),
        hashlib.sha256(prefix_json.encode("utf-8")).hexdigest()[:16],
        reasoning,
    )


def _typical_label(doc_id: str | None = None) -> dict[str, Any]:
    label = {"reason": PLACEHOLDER_REASON, "injectionSuspected": False, "relevance": PLACEHOLDER_LABEL}
    return {"id": doc_id, **label} if doc_id else label


TYPICAL_LIST_REPLY: dict[str, Any] = {
    "analysis": {"coverage": PLACEHOLDER_REASON + " " + PLACEHOLDER_REASON[:40], "snippetQuality": PLACEHOLDER_REASON},
    "scores": {"coverage": 0.5, "snippetQuality": 0.5},
    "holistic": {"relevance": 0.5, "ranking": 0.5, "overall": 0.5},
    "suggestions": [PLACEHOLDER_REASON[:90]],
}


class RecordingJudge:
    """A :class:`~judge_runner.judging.protocol.Judge` that records the calls an LLM judge would make and
    answers each with a placeholder; nothing is sent. ``layouts``: more ``(provider, model)`` to lay calls
    out for (:meth:`calls_for`). Not thread-safe."""

    heuristic = False

    def __init__(
        self,
        provider: str,
        model: str,
        layouts: Sequence[tuple[str, str]] = (),
        effort: str = DEFAULT_EFFORT,
        *,
        cache_model: str | None = None,
        heuristic: bool = False,
    ):
        self.name = provider
        self.model = model
        self.effort = effort
        # the cache identity of the judge it stands for (the heuristic's embedder is in its cache model)
        self.cache_model, self.heuristic = cache_model or model, heuristic
        self._calls: dict[tuple[str, str], list[PlannedCall]] = {(provider, model): []}
        for layout in layouts:
            self._calls.setdefault(layout, [])

    @property
    def calls(self) -> list[PlannedCall]:
        return self._calls[(self.name, self.model)]

    def calls_for(self, provider: str, model: str) -> list[PlannedCall]:
        """The same calls laid out for ``provider`` (one of the ``layouts``; empty for another)."""
        return self._calls.get((provider, model), [])

    def _record(self, kind: str, request: JudgeRequest, max_tokens: int, reply: Mapping[str, Any]) -> None:
        for (provider, model), calls in self._calls.items():
            calls.append(plan_request(provider, kind, request, max_tokens, reply, model, self.effort))

    def label_one(
        self, query: str, intent: str, document: RenderedDocument, sampling: Mapping[str, Any], log: Callable[[str], None] = lambda m: None
    ) -> LabelReply:
        self._record("label", pointwise_request(query, intent, document), LABEL_MAX_TOKENS, _typical_label())
        return LabelReply(label=PLACEHOLDER_LABEL, reason=PLACEHOLDER_REASON)

    def label_batch(
        self,
        query: str,
        intent: str,
        documents: Sequence[RenderedDocument],
        order: Sequence[int],
        sampling: Mapping[str, Any],
        log: Callable[[str], None] = lambda m: None,
    ) -> list[LabelReply]:
        request = batched_request(query, intent, documents, order)
        reply = {"labels": [_typical_label(i) for i in request.ids]}
        self._record("labels", request, JUDGE_MAX_TOKENS, reply)
        shown = {original: request.ids[k] for k, original in enumerate(request.shown_order)}
        return [LabelReply(label=PLACEHOLDER_LABEL, reason=PLACEHOLDER_REASON, shown_as=shown[i]) for i in range(len(documents))]

    def list_verdict(
        self,
        query: str,
        intent: str,
        expected_sources: Sequence[str],
        items: Sequence[ListItem],
        sampling: Mapping[str, Any],
        log: Callable[[str], None] = lambda m: None,
    ) -> ListVerdict:
        request = list_request(query, intent, expected_sources, items)
        self._record("list", request, JUDGE_MAX_TOKENS, TYPICAL_LIST_REPLY)
        r = TYPICAL_LIST_REPLY
        return ListVerdict(
            coverage=0.5,
            snippet_quality=0.5,
            holistic=dict(r["holistic"]),
            analysis=dict(r["analysis"]),
            suggestions=list(r["suggestions"]),
        )


class DryRunCache:
    """The judgment cache as a dry run sees it: reads go to ``cache`` (None: none), writes stay in memory, so
    a judgment made once and then reused is counted once. Nothing is written."""

    def __init__(self, cache: Any | None):
        self.cache = cache
        self.stored: dict[str, CachedJudgment] = {}

    def get(self, key: str) -> CachedJudgment | None:
        if key in self.stored:
            return self.stored[key]
        return self.cache.get(key) if self.cache is not None else None

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedJudgment]:
        keys = list(keys)
        found = dict(self.cache.get_many(keys)) if self.cache is not None else {}
        found.update({k: self.stored[k] for k in keys if k in self.stored})
        return found

    def judge_labels(self, judge_key: str, topics: Iterable[str], models: Iterable[str] | None = None) -> dict[tuple[str, str], list[int]]:
        return self.cache.judge_labels(judge_key, topics, models) if self.cache is not None else {}

    def put(self, key: str, judgment: CachedJudgment, mode: str) -> None:
        self.stored[key] = judgment

    def put_many(self, items: Iterable[tuple[str, CachedJudgment, str]]) -> None:
        for key, judgment, _ in items:
            self.stored[key] = judgment


@dataclass(frozen=True)
class Cost:
    """Expected and worst-case USD of a set of calls in one mode; None when the model's price is unknown."""

    expected: float | None
    worst: float | None


def _usd(tokens_in: int, tokens_out: int, price: Price) -> float:
    return (tokens_in * price.input + tokens_out * price.output) / 1_000_000


def costs(calls: Sequence[PlannedCall], price: Price | None) -> dict[str, Cost]:
    """USD of ``calls`` in each mode of :data:`MODES`: ``sync``, ``batch`` (``price.for_batch()``), ``cached``
    (each prefix of at least ``price.cache_min_tokens`` written once, then read) and ``batch+cached``. Worst
    case: every call writes ``max_output_tokens``."""
    if price is None:
        return {mode: Cost(None, None) for mode in MODES}
    inp = sum(c.input_tokens for c in calls)
    out = sum(c.output_tokens for c in calls)
    worst_out = sum(c.max_output_tokens for c in calls)
    batch = price.for_batch()  # halves every token class, cache reads and writes included (pricing.json batchSource)
    return {
        "sync": Cost(_usd(inp, out, price), _usd(inp, worst_out, price)),
        "batch": Cost(_usd(inp, out, batch), _usd(inp, worst_out, batch)),
        "cached": _cached(calls, price, out, worst_out),
        "batch+cached": _cached(calls, batch, out, worst_out),
    }


def cache_reads(calls: Sequence[PlannedCall], price: Price | None) -> int:
    """Input tokens expected to be read from the prompt cache: each later call of a cacheable prefix."""
    minimum = price.cache_min_tokens if price is not None else MIN_CACHEABLE_TOKENS
    seen: set[str] = set()
    reads = 0
    for c in calls:
        if c.prefix_id in seen and c.prefix_tokens >= minimum:
            reads += c.prefix_tokens
        seen.add(c.prefix_id)
    return reads


def caching_plan(calls: Sequence[PlannedCall], price: Price | None) -> dict[str, Any]:
    """Per kind of call, its largest cacheable prefix (tokens) beside the model's minimum; ``cached``: the
    kinds that reach it, ``notCached``: the others."""
    minimum = price.cache_min_tokens if price is not None else MIN_CACHEABLE_TOKENS
    prefix: dict[str, int] = {}
    for c in calls:
        prefix[c.kind] = max(prefix.get(c.kind, 0), c.prefix_tokens)
    return {
        "minimumTokens": minimum,
        "prefixTokens": prefix,
        "cached": sorted(k for k, n in prefix.items() if n >= minimum),
        "notCached": sorted(k for k, n in prefix.items() if n < minimum),
        "expectedReadTokens": cache_reads(calls, price),
    }


def caching_note(figures: dict[str, Any]) -> str | None:
    """One line on which kinds of call the prompt cache serves and which it cannot; None without calls."""
    plan = figures.get("promptCache") or {}
    if not plan.get("prefixTokens"):
        return None
    name = f"{figures['provider']}/{figures['model']}"
    short = [f"{k} {plan['prefixTokens'][k]:,}" for k in plan["notCached"]]
    if not plan["cached"]:
        return (
            f"prompt cache, {name}: no caching: the cacheable prefix (tool schema and system prompt: {', '.join(short)} tokens) "
            f"is under the model's minimum of {plan['minimumTokens']:,} tokens; every call pays plain input"
        )
    cached = ", ".join(f"{k} {plan['prefixTokens'][k]:,}" for k in plan["cached"])
    tail = f"; not cached (under {plan['minimumTokens']:,}): {', '.join(short)}" if short else ""
    return f"prompt cache, {name}: prefix read from the cache after each kind's first call ({cached} tokens){tail}"


def _cached(calls: Sequence[PlannedCall], price: Price, out: int, worst_out: int) -> Cost:
    """USD with each prefix of at least ``price.cache_min_tokens`` written once and read by later calls."""
    seen: set[str] = set()
    cached_in = 0.0
    for c in calls:
        prefix = c.prefix_tokens if c.prefix_tokens >= price.cache_min_tokens else 0
        rate = price.cache_read if c.prefix_id in seen else price.cache_write
        seen.add(c.prefix_id)
        cached_in += (prefix * rate + (c.input_tokens - prefix) * price.input) / 1_000_000
    return Cost(cached_in + out * price.output / 1_000_000, cached_in + worst_out * price.output / 1_000_000)


@dataclass
class ModelEstimate:
    """The calls one judge would make and their cost (``price`` None: unknown). ``chosen``: the run's judge;
    ``labels_cached`` / ``labels_to_judge``: labels the judgment cache serves, and those needing a call."""

    provider: str
    model: str
    price: Price | None
    calls: list[PlannedCall] = field(default_factory=list)
    chosen: bool = False
    labels_cached: int = 0
    labels_to_judge: int = 0
    human_labels: int = 0

    @property
    def cache_minimum(self) -> int:
        """Tokens: the model's ``cacheMinTokens``, or :data:`MIN_CACHEABLE_TOKENS`."""
        return self.price.cache_min_tokens if self.price is not None else MIN_CACHEABLE_TOKENS

    def figures(self) -> dict[str, Any]:
        """The JSON figures: calls, tokens, calls by kind, USD by mode (``{expected, worst}``; null without a price)."""
        kinds: dict[str, dict[str, int]] = {}
        for c in self.calls:
            k = kinds.setdefault(c.kind, {"calls": 0, "inputTokens": 0, "outputTokens": 0})
            k["calls"] += 1
            k["inputTokens"] += c.input_tokens
            k["outputTokens"] += c.output_tokens
        modes = costs(self.calls, self.price)
        return {
            "provider": self.provider,
            "model": self.model,
            "chosen": self.chosen,
            "calls": len(self.calls),
            "inputTokens": sum(c.input_tokens for c in self.calls),
            "outputTokens": sum(c.output_tokens for c in self.calls),
            "worstOutputTokens": sum(c.max_output_tokens for c in self.calls),
            "reasoningTokens": sum(c.reasoning_tokens for c in self.calls),
            "sizing": unsized(self.model),
            "cacheablePrefixTokens": sum(c.prefix_tokens for c in self.calls if c.prefix_tokens >= self.cache_minimum),
            "labelsToJudge": self.labels_to_judge,
            "labelsCached": self.labels_cached,
            "humanLabels": self.human_labels,
            "byKind": kinds,
            "promptCache": caching_plan(self.calls, self.price),
            "costUsd": {
                m: {
                    "expected": None if c.expected is None else round(c.expected, 6),
                    "worst": None if c.worst is None else round(c.worst, 6),
                }
                for m, c in modes.items()
            },
        }

    def summary_block(self, batch: bool = False) -> dict[str, Any]:
        """The run summary's ``estimate`` block: cost in the run's mode (cached; at batch prices when ``batch``),
        with plain ``batch`` and ``cached`` beside it. ``self.price`` is the standard price, never halved."""
        by_mode = costs(self.calls, self.price)
        run_mode = by_mode["batch+cached" if batch else "cached"]

        def usd(value: float | None) -> float | None:
            return None if value is None else round(value, 6)

        return {
            "calls": len(self.calls),
            "inputTokens": sum(c.input_tokens for c in self.calls),
            "outputTokens": sum(c.output_tokens for c in self.calls),
            "costUsd": usd(run_mode.expected),
            "worstCaseCostUsd": usd(run_mode.worst),
            "batch": batch,
            "batchCostUsd": usd(by_mode["batch"].expected),
            "cachedCostUsd": usd(by_mode["cached"].expected),
            "cacheReadTokens": cache_reads(self.calls, self.price),
        }
