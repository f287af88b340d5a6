"""The LLM judge: the three calls of :mod:`judge_runner.judging.requests`, each through :func:`ask`, the one
re-ask loop that returns only a valid reply."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge_runner.judging.fence import RenderedDocument
from judge_runner.judging.protocol import LabelReply, ListVerdict
from judge_runner.judging.requests import (
    JudgeRequest,
    ListItem,
    Output,
    batched_request,
    labels_in_search_order,
    list_request,
    order_written,
    pointwise_request,
    reply_problems,
)
from judge_runner.llm.base import ChatProvider, ToolResult, ToolSpec, Turn
from judge_runner.llm.errors import InvalidOutputError, LLMError, RefusalError, TruncatedError
from judge_runner.llm.pricing import Usage, add_cost

SNIPPET_CHARS_SHOWN = 500
"""Most characters of a result's snippet kept in the run file."""
MAX_REASKS = 2
JUDGE_MAX_TOKENS = 4096
LABEL_MAX_TOKENS = 1024


def label_max_tokens(provider: object) -> int:
    """A pointwise call's output-token limit: :data:`LABEL_MAX_TOKENS` plus the reasoning allowance."""
    return LABEL_MAX_TOKENS + int(getattr(provider, "reasoning_allowance", 0) or 0)


def judge_max_tokens(provider: object) -> int:
    """A batched or list call's output-token limit: :data:`JUDGE_MAX_TOKENS` plus the reasoning allowance."""
    return JUDGE_MAX_TOKENS + int(getattr(provider, "reasoning_allowance", 0) or 0)


TOOL_DESCRIPTIONS = {
    "record_label": "Record the grade of this document.",
    "record_labels": "Record the grade of every document shown.",
    "record_list_verdict": "Record the verdict on this list of labelled results.",
}


def parse_json_reply(text: str) -> tuple[object, list[str]]:
    """``(data, recoveries)`` of a text reply, recovering only one outer markdown fence or prose around
    exactly one JSON object. Raises ValueError when no single object can be read."""
    stripped = text.strip()
    try:
        return json.loads(stripped), []
    except json.JSONDecodeError as exc:
        first = exc  # kept with its position: "Expecting value: line 1 column 13 (char 12)"
    fence = re.fullmatch(r"```(?:json)?\s*\n(.*)\n\s*```", stripped, re.DOTALL)
    if fence:
        try:
            return json.loads(fence.group(1)), ["stripped code fence"]
        except json.JSONDecodeError as exc:
            raise ValueError(f"fenced reply is not valid JSON: {exc}") from None
    start, end = stripped.find("{"), stripped.rfind("}")
    if start != -1 and end > start:
        try:
            data = json.loads(stripped[start : end + 1])
        except json.JSONDecodeError as exc:
            raise ValueError(f"reply is not valid JSON: {exc}") from None
        return data, ["removed prose around the JSON object"]
    raise ValueError(f"reply contains no JSON object ({first})" if stripped else "reply contains no JSON object (it is empty)")


@dataclass
class Answer:
    """A validated reply: usage over every attempt and re-ask, cost in USD (None: unknown), latency in
    seconds."""

    data: dict[str, Any]
    usage: Usage
    cost_usd: float | None
    attempts: int
    recoveries: list[str] = field(default_factory=list)
    model_returned: str | None = None
    latency_s: float = 0.0


def ask(
    provider: ChatProvider,
    request: JudgeRequest,
    sampling: Mapping[str, Any] | None = None,
    log: Callable[[str], None] = lambda m: None,
    max_tokens: int = JUDGE_MAX_TOKENS,
    what: str = "judgment",
) -> Answer:
    """A reply to ``request`` that passes :func:`judge_runner.judging.requests.reply_problems`: an invalid
    one is re-asked up to MAX_REASKS times, a truncated one retried once with twice the token limit. Raises
    InvalidOutputError, TruncatedError, RefusalError or a transport LLMError, carrying what was spent."""
    tool = ToolSpec(request.tool_name, TOOL_DESCRIPTIONS.get(request.tool_name, "Record the judgment."), request.schema)
    turns = [Turn("user", text=request.user)]
    usage, attempts = Usage(), 0
    cost: float | None = 0.0
    truncated_once = False
    reasks = 0
    started = time.monotonic()
    while True:
        try:
            reply = provider.complete(
                request.system, turns, [tool], force_tool=tool.name, max_tokens=max_tokens, cache_system=True, sampling=sampling
            )
        except LLMError as exc:  # the re-asks before it were paid for too
            spent(exc, usage + (exc.usage or Usage()), add_cost(cost, exc.cost_usd if exc.usage is not None else 0.0))
            raise
        usage = usage + reply.usage
        cost = add_cost(cost, reply.cost_usd)
        attempts += reply.attempts
        if reply.stop == "refusal":
            raise spent(RefusalError(f"the judge refused: {reply.text[:200]}", attempts), usage, cost)
        if reply.stop == "max_tokens":
            if truncated_once:
                raise spent(TruncatedError(f"the {what} was cut off at {max_tokens} output tokens twice", attempts), usage, cost)
            truncated_once, max_tokens = True, max_tokens * 2
            continue
        recoveries: list[str] = []
        use = next((u for u in reply.tool_uses if u.name == tool.name), None)
        data: object
        if use is not None:
            data, raw = use.input, json.dumps(use.input)
        else:
            raw = reply.text
            try:
                data, recoveries = parse_json_reply(reply.text)
            except ValueError as exc:
                data, recoveries = None, [str(exc)]
        problems = reply_problems(data, request) if data is not None else recoveries
        if not problems and isinstance(data, dict):
            return Answer(data, usage, cost, attempts, recoveries, reply.model or None, round(time.monotonic() - started, 3))
        log(f"invalid {what}: {'; '.join(problems[:3])}\nraw reply: {raw[:2000]}")
        reasks += 1
        if reasks > MAX_REASKS:
            raise spent(InvalidOutputError(f"{what} failed validation: " + "; ".join(problems[:3]), attempts), usage, cost)
        turns.append(Turn("assistant", text=reply.text or None, tool_uses=reply.tool_uses))
        feedback = "Your reply was invalid:\n" + "\n".join(problems) + f"\nCall {tool.name} again with a valid reply."
        if reply.tool_uses:
            turns.append(Turn("user", tool_results=[ToolResult(u.id, feedback, True) for u in reply.tool_uses]))
        else:
            turns.append(Turn("user", text=feedback))


def spent(error: LLMError, usage: Usage, cost: float | None) -> LLMError:
    """``error`` carrying what its call spent (``cost_usd`` in USD)."""
    error.usage, error.cost_usd = usage, cost
    return error


class LLMJudge:
    """The :class:`~judge_runner.judging.protocol.Judge` of an LLM. ``batching``: the provider's
    :class:`~judge_runner.llm.batch.BatchCoordinator` in ``--batch`` mode, else None."""

    heuristic = False

    def __init__(self, provider: ChatProvider, output: Output = "reason-first"):
        self.provider = provider
        self.name = provider.name
        self.model = provider.model
        self.batching = getattr(provider, "coordinator", None)
        self.output: Output = output

    @property
    def reasoning_effort(self) -> str | None:
        """The effort sent with each call when the model reasons (None: it does not)."""
        return str(getattr(self.provider, "reasoning_effort", "")) if getattr(self.provider, "reasoning_allowance", 0) else None

    @property
    def cache_model(self) -> str:
        """The requested model, with the reasoning effort when it reasons (another effort may grade otherwise)."""
        effort = self.reasoning_effort
        return f"{self.model}+effort-{effort}" if effort else self.model

    def with_output(self, output: Output) -> LLMJudge:
        """This judge under other output rules, on the same provider."""
        return LLMJudge(self.provider, output)

    def label_one(
        self, query: str, intent: str, document: RenderedDocument, sampling: Mapping[str, Any], log: Callable[[str], None] = lambda m: None
    ) -> LabelReply:
        request = pointwise_request(query, intent, document, output=self.output)
        a = ask(self.provider, request, sampling, log, label_max_tokens(self.provider), "label")
        return LabelReply(
            label=a.data["relevance"],
            reason=a.data.get("reason", ""),
            injection_suspected=a.data["injectionSuspected"],
            model_returned=a.model_returned,
            usage=a.usage,
            cost_usd=a.cost_usd,
            latency_s=a.latency_s,
            attempts=a.attempts,
            recoveries=tuple(a.recoveries),
            order=order_written(a.data, self.output),
        )

    def label_batch(
        self,
        query: str,
        intent: str,
        documents: Sequence[RenderedDocument],
        order: Sequence[int],
        sampling: Mapping[str, Any],
        log: Callable[[str], None] = lambda m: None,
    ) -> list[LabelReply]:
        """The labels in the documents' own order; the call's cost is on the first."""
        request = batched_request(query, intent, documents, order, output=self.output)
        a = ask(self.provider, request, sampling, log, judge_max_tokens(self.provider), "labels")
        out = []
        for k, item in enumerate(labels_in_search_order(a.data, request)):
            paid = k == 0
            out.append(
                LabelReply(
                    label=item["relevance"],
                    reason=item["reason"],
                    injection_suspected=item["injectionSuspected"],
                    model_returned=a.model_returned,
                    usage=a.usage if paid else Usage(),
                    cost_usd=a.cost_usd if paid else 0.0,
                    latency_s=a.latency_s if paid else 0.0,
                    attempts=a.attempts if paid else 0,
                    recoveries=tuple(a.recoveries) if paid else (),
                    shown_as=item["shownAs"],
                    order=item["order"],
                )
            )
        return out

    def list_verdict(
        self,
        query: str,
        intent: str,
        expected_sources: Sequence[str],
        items: Sequence[ListItem],
        sampling: Mapping[str, Any],
        log: Callable[[str], None] = lambda m: None,
    ) -> ListVerdict:
        a = ask(
            self.provider,
            list_request(query, intent, expected_sources, items),
            sampling,
            log,
            judge_max_tokens(self.provider),
            "list verdict",
        )
        d = a.data
        return ListVerdict(
            coverage=float(d["scores"]["coverage"]),
            snippet_quality=float(d["scores"]["snippetQuality"]),
            holistic=d["holistic"],
            analysis=d["analysis"],
            suggestions=d["suggestions"],
            model_returned=a.model_returned,
            usage=a.usage,
            cost_usd=a.cost_usd,
            latency_s=a.latency_s,
            attempts=a.attempts,
            recoveries=tuple(a.recoveries),
        )
