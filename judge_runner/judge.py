"""Phase two's judge: query, intent and ranked results in; a validated verdict out.

The verdict is checked against ``schemas/judge_verdict.schema.json`` with the number of labels pinned
to the number of results shown, then against finite-number and rank-order rules jsonschema does not
cover (its ``number`` accepts NaN). ``overall`` is recomputed here as the weighted mean of the four
dimensions; the judge's own figure is kept as ``judgeOverall``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from string import Template

import jsonschema

from judge_runner.llm.base import ChatProvider, ToolResult, ToolSpec, Turn
from judge_runner.llm.errors import InvalidOutputError, RefusalError, TruncatedError
from judge_runner.llm.pricing import Usage, add_cost
from judge_runner.models import DIMENSIONS, Query, Verdict
from judge_runner.resources import load_prompt, pinned_schema
from judge_runner.search.base import SearchAnswer

SNIPPET_CHARS_SHOWN = 500
MAX_REASKS = 2
JUDGE_MAX_TOKENS = 4096
DEFAULT_WEIGHTS = {d: 1.0 for d in DIMENSIONS}


@dataclass
class JudgeOutcome:
    """A verdict plus what it cost: usage over every attempt and re-ask, USD (None if unknown),
    HTTP requests made, and the recoveries applied to the raw reply (e.g. ``"stripped code fence"``)."""

    verdict: Verdict
    usage: Usage
    cost_usd: float | None
    attempts: int
    recoveries: list[str]


def verdict_schema(result_count: int) -> dict:
    """The verdict schema with ``labels`` pinned to exactly ``result_count`` items."""
    return pinned_schema("judge_verdict.schema.json", "labels", result_count)


def verdict_problems(data: object, result_count: int) -> list[str]:
    """Everything wrong with a raw verdict (empty when valid): schema errors, non-finite numbers,
    ranks not 1..N in order."""
    validator = jsonschema.Draft202012Validator(verdict_schema(result_count))
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(data)]
    if problems or not isinstance(data, dict):
        return problems[:20]
    for name, value in data["scores"].items():
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(f"scores/{name}: must be a finite number in [0, 1], got {value}")
    ranks = [label["rank"] for label in data["labels"]]
    if ranks != list(range(1, result_count + 1)):
        problems.append(f"labels must carry ranks 1..{result_count} in order, got {ranks}")
    return problems


def overall_score(scores: dict[str, float], weights: dict[str, float] | None = None) -> float:
    """Weighted mean of the four dimensions (equal weights by default). Raises ValueError when the
    weights are negative or sum to zero."""
    weights = weights or DEFAULT_WEIGHTS
    if any(weights.get(d, 0.0) < 0 for d in DIMENSIONS):
        raise ValueError("dimension weights must be >= 0")
    total = sum(weights.get(d, 0.0) for d in DIMENSIONS)
    if total <= 0:
        raise ValueError("dimension weights must not all be zero")
    return round(sum(scores[d] * weights.get(d, 0.0) for d in DIMENSIONS) / total, 6)


def parse_json_reply(text: str) -> tuple[object, list[str]]:
    """Parse a JSON object from a text reply, recovering only where it is safe: one outer markdown
    fence, or prose around exactly one JSON object. Returns ``(data, recoveries)``; raises ValueError
    when no single object can be read."""
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


def render_results(answer: SearchAnswer) -> str:
    """The results block of the judge prompt: one header line and the snippet (at most 500 characters)
    per result. Result text is data; a literal ``</results>`` inside it is defused."""
    def defuse(text: str) -> str:
        return text.replace("</results>", "</ results>")

    blocks = []
    for hit in answer.results:
        snippet = defuse(hit.snippet[:SNIPPET_CHARS_SHOWN])
        anchor = defuse(hit.anchor or "-")  # a heading is document text too
        blocks.append(
            f"[{hit.rank}] source: {defuse(hit.source)} | anchor: {anchor} | lines {hit.lineStart}-{hit.lineEnd} | score {hit.score:.4f}\n{snippet}"
        )
    return "\n\n".join(blocks) if blocks else "(no results)"


def judge_messages(query: Query, answer: SearchAnswer) -> tuple[str, str]:
    """``(system prompt, user message)`` for one judgment."""
    system = load_prompt("judge_system.md")
    user = Template(load_prompt("judge_user.md")).substitute(
        query=query.query,
        intent=query.queryIntent,
        query_type=query.queryType,
        confident="true" if answer.confident else "false",
        result_count=len(answer.results),
        results=render_results(answer),
    )
    return system, user


def judge_with_llm(provider: ChatProvider, query: Query, answer: SearchAnswer, log=lambda m: None) -> JudgeOutcome:
    """Ask the provider's judge for a verdict through the forced ``record_verdict`` tool.

    A reply that fails validation is re-asked up to MAX_REASKS times with what was wrong; a reply cut
    off by max_tokens is retried once with twice the limit. Raises InvalidOutputError, TruncatedError,
    RefusalError or any transport LLMError. The raw invalid reply goes to ``log`` (never the API key).
    """
    n = len(answer.results)
    system, user = judge_messages(query, answer)
    tool = ToolSpec("record_verdict", "Record the verdict for this search.", verdict_schema(n))
    turns = [Turn("user", text=user)]
    usage, cost, attempts = Usage(), 0.0, 0
    max_tokens = JUDGE_MAX_TOKENS
    truncated_once = False
    reasks = 0
    while True:
        reply = provider.complete(system, turns, [tool], force_tool="record_verdict", max_tokens=max_tokens, cache_system=True)
        usage = usage + reply.usage
        cost = add_cost(cost, reply.cost_usd)
        attempts += reply.attempts
        if reply.stop == "refusal":
            raise RefusalError(f"the judge refused: {reply.text[:200]}", attempts)
        if reply.stop == "max_tokens":
            if truncated_once:
                raise TruncatedError(f"the verdict was cut off at {max_tokens} output tokens twice", attempts)
            truncated_once, max_tokens = True, max_tokens * 2
            continue
        recoveries: list[str] = []
        use = next((u for u in reply.tool_uses if u.name == "record_verdict"), None)
        if use is not None:
            data, raw = use.input, json.dumps(use.input)
        else:
            raw = reply.text
            try:
                data, recoveries = parse_json_reply(reply.text)
            except ValueError as exc:
                data, recoveries = None, [str(exc)]
        problems = verdict_problems(data, n) if data is not None else recoveries
        if not problems:
            return JudgeOutcome(Verdict.model_validate(data), usage, cost, attempts, recoveries)
        log(f"invalid verdict for {query.id}: {'; '.join(problems[:3])}\nraw reply: {raw[:2000]}")
        reasks += 1
        if reasks > MAX_REASKS:
            error = InvalidOutputError("verdict failed validation: " + "; ".join(problems[:3]), attempts)
            error.usage, error.cost_usd = usage, cost  # type: ignore[attr-defined]
            raise error
        turns.append(Turn("assistant", text=reply.text or None, tool_uses=reply.tool_uses))
        feedback = "Your verdict was invalid:\n" + "\n".join(problems) + f"\nCall record_verdict again with exactly {n} labels."
        if reply.tool_uses:
            turns.append(Turn("user", tool_results=[ToolResult(u.id, feedback, True) for u in reply.tool_uses]))
        else:
            turns.append(Turn("user", text=feedback))


class LLMJudge:
    """The :class:`~judge_runner.roles.Judge` of an LLM: :func:`judge_with_llm` with ``provider``.
    ``name`` and ``model`` are the provider's (recorded in the run file's provenance)."""

    heuristic = False

    def __init__(self, provider: ChatProvider):
        self.provider = provider
        self.name = provider.name
        self.model = provider.model

    def judge(self, query: Query, answer: SearchAnswer, log: Callable[[str], None] = lambda message: None) -> JudgeOutcome:
        """See :func:`judge_with_llm`."""
        return judge_with_llm(self.provider, query, answer, log)
