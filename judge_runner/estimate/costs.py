"""What a run will cost before it spends: the judge calls it would make, their tokens and their price.

The estimate is built from the requests themselves. :class:`RecordingJudge` is a
:class:`~judge_runner.judging.protocol.Judge` that sends nothing: each call renders the exact request the LLM judge
would send (:mod:`judge_runner.judging.requests`), lays it out as the provider's wire format does
(:func:`wire_parts`, the providers' own ``request_body``), counts its tokens and answers with a placeholder. Driven through the real protocol
(:func:`judge_runner.judging.labelling.judge_query`, or calibrate's labeller) it makes exactly the calls the run
would make: same modes, trials, judgment-cache keys (:class:`DryRunCache` reads the cache and keeps what
the run would store in memory), human-labelled results judged too (the run keeps their judge label).

Units: tokens (integers) and USD. Sources of the constants:

- :data:`CHARS_PER_TOKEN` = 4: one token per four characters of the request's JSON, OpenAI's rule of
  thumb for English text ("one token is roughly 4 characters"), and exactly what the loopback fake server
  counts (``tests/support/fakes/fake_llm.py``). No tokenizer is shipped: tiktoken needs BPE files downloaded at
  run time, and Anthropic's tokenizer is not public (its ``count_tokens`` endpoint is exact, but asking it
  sends the prompts). Left out: the tool-use system prompt Anthropic adds to requests that offer tools
  (a few hundred tokens each).
- expected output: the JSON of a typical reply (:data:`TYPICAL_REASON_CHARS`, the middle of the label
  schema's "one sentence, under 200 characters") plus :data:`TOOL_CALL_TOKENS` of tool-call framing;
- reasoning models (gpt-5, the o-series: :func:`judge_runner.llm.pricing.reasons`): each call also spends
  the reasoning tokens its effort is assumed to take (``pricing.json``'s ``reasoningTokens``: expected, billed
  as output), and its limit adds the effort's allowance;
- worst case: every call writes its whole ``max_tokens`` (:data:`judge_runner.judging.llm_judge.LABEL_MAX_TOKENS`
  per pointwise label, :data:`judge_runner.judging.llm_judge.JUDGE_MAX_TOKENS` per batched or list call). Re-asks
  are not counted: they happen only on an invalid reply (at most ``MAX_REASKS`` = 2 per call, plus one
  retry at twice the limit on a cut-off reply) and ``--max-budget-usd`` bounds them;
- prompt caching: the cacheable prefix (tool schema and system prompt) of each distinct request kind is
  written once at the cache-write price and read at the cache-read price by every later call
  (``pricing.json``); a prefix under the model's ``cacheMinTokens`` (``pricing.json``; 1024 when the
  price is unknown, :data:`MIN_CACHEABLE_TOKENS`) is not cached;
- batch: every token class at ``Price.for_batch()`` (``pricing.json``'s ``batchDiscount``, 0.5).
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
"""The shortest prompt prefix both vendors cache (Anthropic: 1024 tokens for Sonnet and Opus models, more
for some Haiku models; OpenAI: 1024 tokens)."""
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
"""``max_tokens`` of every phase-one request (``judge_runner.querygen.agent.generate_with_llm``)."""
CONTEXT_TOKENS = 200_000
"""Phase one's worst case: no request is longer than a 200k-token context window (Claude's standard window;
a longer request is refused, which ends phase one)."""
ROUGH_SNIPPET_CHARS = 240
MODES = ("sync", "batch", "cached", "batch+cached")


def tokens(part: Any) -> int:
    """Estimated tokens of a JSON-ready value: the length of its JSON text (keys sorted, non-ASCII kept)
    divided by :data:`CHARS_PER_TOKEN`, at least 1."""
    return max(1, len(json.dumps(part, sort_keys=True, ensure_ascii=False)) // CHARS_PER_TOKEN)


_READ = {"anthropic": ("system", "messages", "tools"), "openai": ("messages", "tools", "response_format")}
"""The request-body fields the model reads (and the fake server counts), per provider's wire format."""


@cache
def _layout(provider: str) -> AnthropicProvider | OpenAIProvider | None:
    """A provider instance used only to lay requests out (its ``request_body``; nothing is sent: the key is
    a placeholder), or None for a provider without a wire format of its own."""
    if provider == "anthropic":
        return AnthropicProvider("layout", RetryPolicy(), Budget(), api_key="dry-run-layout-only")
    if provider == "openai":
        return OpenAIProvider("layout", RetryPolicy(), Budget(), api_key="dry-run-layout-only")
    return None


def wire_parts(provider: str, system: str, user: str, tools: Sequence[ToolSpec], force_tool: str | None) -> tuple[dict, dict]:
    """``(parts the model reads, the cacheable prefix among them)`` of one request as ``provider`` lays it
    out, from the provider's own ``request_body`` (the body a synchronous call or a batch request sends):
    Anthropic Messages (tools, system blocks marked cacheable, messages), OpenAI Chat Completions
    (messages, tools, and a forced single tool as ``response_format`` json_schema strict), or for another
    provider the neutral shape the budget estimates (``llm.base.ChatProvider.complete``)."""
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
    """One call a run would make: ``kind`` (``label``, ``labels``, ``list`` or ``agent``), estimated
    ``input_tokens``, expected ``output_tokens``, ``max_output_tokens`` (the worst case), the
    ``prefix_tokens`` a prompt cache could serve and ``prefix_id`` (calls with equal ids share a prefix);
    ``reasoning_tokens``: the part of ``output_tokens`` a reasoning model is expected to reason."""

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
    """The :class:`PlannedCall` of one judge request sent through its forced tool, expecting ``reply`` (the
    tool input a typical judge writes); a reasoning ``model`` adds the reasoning tokens of ``effort``."""
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
    """A :class:`~judge_runner.judging.protocol.Judge` that records the calls an LLM judge of ``provider`` and
    ``model`` would make (:attr:`calls`) and answers each with a placeholder label or verdict; nothing is
    sent. ``layouts``: more ``(provider, model)`` pairs to lay each call out for (:meth:`calls_for`; for
    calibrate, whose calls do not depend on the judge). Not thread-safe: drive it from one thread."""

    heuristic = False

    def __init__(self, provider: str, model: str, layouts: Sequence[tuple[str, str]] = (), effort: str = DEFAULT_EFFORT):
        self.name = provider
        self.model = model
        self.effort = effort
        self._calls: dict[tuple[str, str], list[PlannedCall]] = {(provider, model): []}
        for layout in layouts:
            self._calls.setdefault(layout, [])

    @property
    def calls(self) -> list[PlannedCall]:
        """The calls recorded, laid out for this judge's own provider."""
        return self._calls[(self.name, self.model)]

    def calls_for(self, provider: str, model: str) -> list[PlannedCall]:
        """The same calls laid out for ``provider`` (one of the ``layouts`` given; empty for another)."""
        return self._calls.get((provider, model), [])

    def _record(self, kind: str, request: JudgeRequest, max_tokens: int, reply: Mapping[str, Any]) -> None:
        for (provider, model), calls in self._calls.items():
            calls.append(plan_request(provider, kind, request, max_tokens, reply, model, self.effort))

    def label_one(
        self, query: str, intent: str, document: RenderedDocument, sampling: Mapping[str, Any], log: Callable[[str], None] = lambda m: None
    ) -> LabelReply:
        """Record one pointwise label call."""
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
        """Record one batched label call."""
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
        """Record one list-level call."""
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
    """The judgment cache as a dry run sees it: reads go to ``cache`` (None: no cache), and what the run
    would store is kept in memory, so a judgment the run would make once and then reuse is counted once.
    Nothing is written."""

    def __init__(self, cache: Any | None):
        self.cache = cache
        self.stored: dict[str, CachedJudgment] = {}

    def get(self, key: str) -> CachedJudgment | None:
        """The judgment under ``key``: stored in this dry run, else in the cache."""
        if key in self.stored:
            return self.stored[key]
        return self.cache.get(key) if self.cache is not None else None

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedJudgment]:
        """``{key: judgment}`` of the keys found (as :meth:`JudgmentCache.get_many`)."""
        keys = list(keys)
        found = dict(self.cache.get_many(keys)) if self.cache is not None else {}
        found.update({k: self.stored[k] for k in keys if k in self.stored})
        return found

    def judge_labels(self, judge_key: str, topics: Iterable[str], models: Iterable[str] | None = None) -> dict[tuple[str, str], list[int]]:
        """The judge's labels of ``topics`` stored in the cache (:meth:`JudgmentCache.judge_labels`); none without one."""
        return self.cache.judge_labels(judge_key, topics, models) if self.cache is not None else {}

    def put(self, key: str, judgment: CachedJudgment, mode: str) -> None:
        """Keep ``judgment`` in memory (the real run would store it)."""
        self.stored[key] = judgment

    def put_many(self, items: Iterable[tuple[str, CachedJudgment, str]]) -> None:
        """Keep every ``(key, judgment, mode)`` in memory."""
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
    """USD of ``calls`` in each mode of :data:`MODES`: ``sync`` (standard prices), ``batch``
    (``price.for_batch()``) and ``cached`` (standard prices, each distinct prefix written to the prompt
    cache by its first call and read by the later ones when it is at least ``price.cache_min_tokens``, the
    model's minimum in ``pricing.json``, e.g. 4096 for Haiku 4.5), and ``batch+cached`` (the cached figure
    at batch prices: what a ``--batch`` run pays, the judge marking its prompt cacheable; a synchronous run
    pays ``cached``). Worst case: every call writes ``max_output_tokens``."""
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
    """Input tokens the calls are expected to read from the prompt cache: each later call of a prefix at
    least the model's minimum (``price.cache_min_tokens``; :data:`MIN_CACHEABLE_TOKENS` when the price is
    unknown) reads it."""
    minimum = price.cache_min_tokens if price is not None else MIN_CACHEABLE_TOKENS
    seen: set[str] = set()
    reads = 0
    for c in calls:
        if c.prefix_id in seen and c.prefix_tokens >= minimum:
            reads += c.prefix_tokens
        seen.add(c.prefix_id)
    return reads


def caching_plan(calls: Sequence[PlannedCall], price: Price | None) -> dict[str, Any]:
    """What the prompt cache can do for the calls, per kind (``label``, ``labels``, ``list``): the largest
    cacheable prefix (tool schema and system prompt, tokens) beside the model's minimum; ``cached``: the
    kinds whose prefix reaches it, ``notCached``: the others (billed as plain input, every call)."""
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
    """One line on a judge's prompt caching, from :meth:`ModelEstimate.figures`: which kinds of call the
    cache serves, and which it cannot (their prefix under the model's minimum); None without calls."""
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
    """Expected and worst-case USD at ``price`` with each distinct prefix written to the prompt cache by
    its first call and read by the later ones (a prefix shorter than ``price.cache_min_tokens`` is billed
    as input)."""
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
    """The calls one judge (``provider``/``model``, ``price`` or None) would make, and what they cost.
    ``chosen``: the judge the run would use (the others are shown for comparison); ``labels_cached``,
    ``labels_to_judge``: labels served by the judgment cache, and labels needing a call."""

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
        """The shortest prefix this model caches (tokens): its ``cacheMinTokens``, or :data:`MIN_CACHEABLE_TOKENS`."""
        return self.price.cache_min_tokens if self.price is not None else MIN_CACHEABLE_TOKENS

    def figures(self) -> dict[str, Any]:
        """The JSON figures: calls, tokens, calls by kind, and USD by mode (``{expected, worst}``; null when
        the price is unknown)."""
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
        """The run summary's ``estimate`` block (:class:`judge_runner.runs.summary_blocks.RunEstimate`): calls, input and
        output tokens, and USD (null when the price is unknown): ``costUsd`` and ``worstCaseCostUsd`` in the
        mode the run uses (the judge always marks its prompt cacheable, so: cached, at batch prices when
        ``batch``), beside the expected cost at plain ``batch`` and ``cached`` prices. ``self.price`` is the
        standard price (never an already-halved batch price)."""
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
