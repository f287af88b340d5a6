"""Model prices (USD per million tokens) from ``pricing.json``, and the cost of a call's usage."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import cast

_SNAPSHOT_SUFFIX = re.compile(r"(?:[-@]\d{8}|-\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class Price:
    """USD per million tokens: input, output, cache write and cache read; ``cache_min_tokens``: the
    shortest prompt prefix the vendor caches (tokens; ``pricing.json``'s ``cacheMinSource``); ``reasoning``:
    the model reasons before it answers (``reasoningSource``)."""

    input: float
    output: float
    cache_write: float
    cache_read: float
    cache_min_tokens: int = 1024
    reasoning: bool = False

    def for_batch(self) -> Price:
        """This price on a batch API: every token class at ``batchDiscount`` (0.5) of the standard rate
        (``pricing.json``'s ``batchSource``: Anthropic Message Batches and OpenAI Batch both halve it)."""
        f = batch_discount()
        return Price(self.input * f, self.output * f, self.cache_write * f, self.cache_read * f, self.cache_min_tokens, self.reasoning)


@dataclass
class Usage:
    """Token counts of one or more calls (summed with ``+``). ``input_tokens`` excludes cached tokens,
    as both Anthropic's and (after our normalisation) OpenAI's usage report them; ``calls`` counts
    HTTP requests; ``unreported`` counts the replies whose usage the server did not report (``usage``
    null or absent, or a token field null: several local servers do this). Those replies add no
    tokens here; their cost is unknown, never 0 (:func:`cost_usd`), and the budget keeps their worst
    case charged (:meth:`judge_runner.llm.budget.Budget.settle`)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    calls: int = 0
    unreported: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.calls + other.calls,
            self.unreported + other.unreported,
        )


@lru_cache(maxsize=1)
def pricing_table() -> dict:
    """The parsed ``pricing.json`` (``source``, ``updated``, ``models``)."""
    return cast(dict, json.loads(resources.files("judge_runner.llm").joinpath("pricing.json").read_text(encoding="utf-8")))


def batch_discount() -> float:
    """The share of the standard price a batch API bills (0.5), from ``pricing.json``."""
    return float(pricing_table().get("batchDiscount", 1.0))


def price_for(model: str) -> Price | None:
    """The price of ``model``, matching a dated snapshot name (``claude-sonnet-4-5-20250929``) to its
    base entry; None when the model is not in the table (cost is then unknown, never 0)."""
    models = pricing_table()["models"]
    # only a snapshot date is stripped ("-20250929", "@20251001", "-2024-08-06"): any other suffix names
    # another model ("gpt-5-pro" is not "gpt-5") whose price we do not know
    for name in (model, _SNAPSHOT_SUFFIX.sub("", model)):
        if name in models:
            p = models[name]
            return Price(
                p["input"], p["output"], p["cacheWrite"], p["cacheRead"], int(p.get("cacheMinTokens", 1024)), bool(p.get("reasoning"))
            )
    return None


REASONING_FAMILIES = ("o1", "o3", "o4", "gpt-5")
"""Model names of OpenAI's reasoning models (``pricing.json``'s ``reasoningSource``)."""
DIRECT_FAMILIES = ("gpt-4", "gpt-3", "claude")
"""Model names of models that answer without reasoning first (Claude without extended thinking, which
judge-runner never turns on)."""
EFFORTS = ("minimal", "low", "medium", "high")
DEFAULT_EFFORT = "low"
"""The reasoning effort of a judge call: a grade of one passage needs little (the setting ``reasoning_effort``)."""


def reasons(model: str) -> bool | None:
    """Whether ``model`` reasons before it answers: its ``pricing.json`` entry says, else its name's family
    (:data:`REASONING_FAMILIES`, :data:`DIRECT_FAMILIES`); None when the product cannot tell, so cannot size
    its token limit (a local server's model, a new family)."""
    price = price_for(model)
    if price is not None:
        return price.reasoning
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith(REASONING_FAMILIES):
        return True
    return False if name.startswith(DIRECT_FAMILIES) else None


def reasoning_tokens(effort: str = DEFAULT_EFFORT) -> tuple[int, int]:
    """``(expected, allowance)``: the reasoning tokens a judge call of a reasoning model is assumed to spend at
    ``effort``, and what its token limit adds for them (``pricing.json``'s ``reasoningTokens``). Raises
    ValueError for an unknown effort."""
    table = pricing_table()["reasoningTokens"]
    if effort not in table:
        raise ValueError(f"reasoning effort must be one of {', '.join(table)}, got {effort!r}")
    return int(table[effort]["expected"]), int(table[effort]["allowance"])


def sizing_problem(model: str) -> str | None:
    """Why ``model``'s token limits cannot be sized, in words for a warning (it is unknown whether it reasons);
    None when they can."""
    if reasons(model) is not None:
        return None
    return (
        "it is unknown whether it reasons before answering: its calls get the limits of a model that does not "
        f"(a reasoning model may be cut off; use a known family, {', '.join(REASONING_FAMILIES)}, or add it to pricing.json)"
    )


def unsized(model: str) -> str | None:
    """What cannot be known of ``model`` before a run, in words for a warning: its price (cost then unknown)
    and its sizing (:func:`sizing_problem`); None when both are known."""
    problems = [] if price_for(model) is not None else ["no price is known (pricing.json): its cost is reported as unknown"]
    sizing = sizing_problem(model)
    return "; ".join([*problems, *([sizing] if sizing else [])]) or None


def add_cost(total: float | None, cost: float | None) -> float | None:
    """Sum of two USD costs where either may be unknown (None): unknown stays unknown, never 0."""
    return None if total is None or cost is None else total + cost


def cost_usd(usage: Usage, price: Price | None) -> float | None:
    """USD cost of ``usage`` at ``price``; None when the price is unknown or a reply's usage was not
    reported (``usage.unreported``)."""
    if price is None or usage.unreported:
        return None
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_write_tokens * price.cache_write
        + usage.cache_read_tokens * price.cache_read
    ) / 1_000_000


def cache_savings_usd(usage: Usage, price: Price | None) -> float | None:
    """USD that prompt caching saved on ``usage`` at ``price``: what its cache reads would have cost as
    plain input minus what they cost, minus the premium its cache writes paid over plain input
    (``(reads * (input - cache_read) - writes * (cache_write - input)) / 1e6``). Negative when writes were
    not read back enough to pay for themselves; 0 without caching. OpenAI bills no write premium
    (``cacheWrite`` = ``input`` in ``pricing.json``). None when the price is unknown or a reply's usage
    was not reported."""
    if price is None or usage.unreported:
        return None
    reads = usage.cache_read_tokens * (price.input - price.cache_read)
    premium = usage.cache_write_tokens * (price.cache_write - price.input)
    return (reads - premium) / 1_000_000
