"""The run's spending limit: worst case checked before each call, actual usage added after it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from judge_runner.llm.errors import BudgetExhausted, CallTooExpensive
from judge_runner.llm.pricing import Price, Usage, cost_usd

DEFAULT_PER_CALL_CAP_USD = 0.50


@dataclass
class Reservation:
    """Worst-case USD held for a call in flight (released when it settles)."""

    usd: float


@dataclass
class Budget:
    """Thread-safe accounting of one run's spend.

    ``max_usd``: the run's cap (None: no cap). ``per_call_cap_usd``: the most one call may cost in the
    worst case. Before a call, :meth:`reserve` takes its worst case (estimated input tokens at the input
    price plus ``max_tokens`` at the output price) against what is left after the calls in flight, so
    the run's cost never exceeds ``max_usd``. With an unknown price the cost is unknown (None), never 0.
    """

    max_usd: float | None = None
    per_call_cap_usd: float = DEFAULT_PER_CALL_CAP_USD
    usage: Usage = field(default_factory=Usage)
    spent_usd: float = 0.0
    cost_known: bool = True
    exhausted: bool = False
    _held: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reserve(self, price: Price | None, input_tokens: int, max_tokens: int) -> Reservation:
        """Hold the worst case of a call. Raises BudgetExhausted (and marks the budget exhausted) or
        CallTooExpensive."""
        if price is None:
            return Reservation(0.0)
        worst = (input_tokens * price.input + max_tokens * price.output) / 1_000_000
        if worst > self.per_call_cap_usd:
            raise CallTooExpensive(
                f"worst-case cost ${worst:.4f} of one call is above the per-call cap ${self.per_call_cap_usd:.2f}"
            )
        with self._lock:
            if self.exhausted:
                raise BudgetExhausted("the run's budget is spent")
            if self.max_usd is not None and self.spent_usd + self._held + worst > self.max_usd:
                self.exhausted = True
                raise BudgetExhausted(
                    f"starting another call could exceed --max-budget-usd {self.max_usd:.2f} "
                    f"(spent ${self.spent_usd:.4f}, in flight ${self._held:.4f}, this call up to ${worst:.4f})"
                )
            self._held += worst
        return Reservation(worst)

    def settle(self, reservation: Reservation, usage: Usage, price: Price | None) -> float | None:
        """Release a reservation and add what the call really used; returns its USD cost (None if unknown)."""
        cost = cost_usd(usage, price)
        with self._lock:
            self._held = max(0.0, self._held - reservation.usd)
            self.usage = self.usage + usage
            if cost is None:
                self.cost_known = False
            else:
                self.spent_usd += cost
        return cost

    @property
    def total_cost_usd(self) -> float | None:
        """USD spent so far; None when any call had an unknown price."""
        return round(self.spent_usd, 6) if self.cost_known else None


def estimate_tokens(text: str) -> int:
    """A conservative token estimate for budgeting: one token per 3 characters (English averages about
    4 characters per token for both vendors' tokenizers; CJK text is denser, so we stay on the safe side)."""
    return len(text) // 3 + 1
