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
    """USD per million tokens. ``cache_min_tokens``: the shortest prefix the vendor caches."""

    input: float
    output: float
    cache_write: float
    cache_read: float
    cache_min_tokens: int = 1024
    reasoning: bool = False

    def for_batch(self) -> Price:
        """Every token class at ``batchDiscount`` (0.5) of this rate (``pricing.json``'s ``batchSource``)."""
        f = batch_discount()
        return Price(self.input * f, self.output * f, self.cache_write * f, self.cache_read * f, self.cache_min_tokens, self.reasoning)


@dataclass
class Usage:
    """Token counts of calls, summed with ``+``. ``input_tokens`` excludes cached tokens; ``calls`` counts
    HTTP requests; ``unreported`` counts replies without usage, whose cost is unknown, never 0."""

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
    return cast(dict, json.loads(resources.files("judge_runner.llm").joinpath("pricing.json").read_text(encoding="utf-8")))


def batch_discount() -> float:
    """The share of the standard price a batch API bills (0.5)."""
    return float(pricing_table().get("batchDiscount", 1.0))


def price_for(model: str) -> Price | None:
    """The price of ``model`` or of its undated base entry; None when unknown (cost unknown, never 0)."""
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
DIRECT_FAMILIES = ("gpt-4", "gpt-3", "claude")
EFFORTS = ("minimal", "low", "medium", "high")
DEFAULT_EFFORT = "low"
"""A judge call's reasoning effort: a grade of one passage needs little."""


def reasons(model: str) -> bool | None:
    """Whether ``model`` reasons before it answers, by its entry or its family; None when unknown."""
    price = price_for(model)
    if price is not None:
        return price.reasoning
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith(REASONING_FAMILIES):
        return True
    return False if name.startswith(DIRECT_FAMILIES) else None


def reasoning_tokens(effort: str = DEFAULT_EFFORT) -> tuple[int, int]:
    """``(expected, allowance)`` reasoning tokens of a judge call at ``effort``. Raises ValueError for an
    unknown effort."""
    table = pricing_table()["reasoningTokens"]
    if effort not in table:
        raise ValueError(f"reasoning effort must be one of {', '.join(table)}, got {effort!r}")
    return int(table[effort]["expected"]), int(table[effort]["allowance"])


def sizing_problem(model: str) -> str | None:
    """Why ``model``'s token limits cannot be sized, for a warning; None when they can."""
    if reasons(model) is not None:
        return None
    return (
        "it is unknown whether it reasons before answering: its calls get the limits of a model that does not "
        f"(a reasoning model may be cut off; use a known family, {', '.join(REASONING_FAMILIES)}, or add it to pricing.json)"
    )


def unsized(model: str) -> str | None:
    """What is unknown of ``model``'s price and sizing, for a warning; None when both are known."""
    problems = [] if price_for(model) is not None else ["no price is known (pricing.json): its cost is reported as unknown"]
    sizing = sizing_problem(model)
    return "; ".join([*problems, *([sizing] if sizing else [])]) or None


def add_cost(total: float | None, cost: float | None) -> float | None:
    """Sum of two USD costs; unknown (None) stays unknown."""
    return None if total is None or cost is None else total + cost


def cost_usd(usage: Usage, price: Price | None) -> float | None:
    """USD cost of ``usage``; None when the price or a reply's usage is unknown."""
    if price is None or usage.unreported:
        return None
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_write_tokens * price.cache_write
        + usage.cache_read_tokens * price.cache_read
    ) / 1_000_000


def cache_savings_usd(usage: Usage, price: Price | None) -> float | None:
    """USD prompt caching saved: ``(reads * (input - cache_read) - writes * (cache_write - input)) / 1e6``,
    negative when writes were not read back enough. None when the price or a reply's usage is unknown."""
    if price is None or usage.unreported:
        return None
    reads = usage.cache_read_tokens * (price.input - price.cache_read)
    premium = usage.cache_write_tokens * (price.cache_write - price.input)
    return (reads - premium) / 1_000_000
