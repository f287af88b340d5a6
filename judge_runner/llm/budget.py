"""The run's spending limit: worst case checked before each call, actual usage added after it."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field

from judge_runner.llm.errors import BudgetExhausted, CallsStopped, CallTooExpensive
from judge_runner.llm.pricing import Price, Usage, cache_savings_usd, cost_usd

DEFAULT_PER_CALL_CAP_USD = 0.50


class BudgetDeferred(Exception):
    """A call does not fit now but may once the calls in flight settle (``reserve(defer=True)``)."""


@dataclass
class Reservation:
    """Worst-case USD and tokens held for a call in flight. ``tokens``: what the token cap holds (0: none)."""

    usd: float
    tokens: int = 0
    worst_tokens: int = 0


@dataclass
class Budget:
    """Thread-safe accounting of one run's spend in USD. Each call's worst case is reserved first, so the
    cost never exceeds ``max_usd``; ``per_call_cap_usd`` bounds one call. An unknown price or unreported
    usage makes the cost unknown (None), never 0; then ``max_tokens`` (all tokens over the run) is the cap,
    and an unreported reply stays charged at its worst case."""

    max_usd: float | None = None
    per_call_cap_usd: float = DEFAULT_PER_CALL_CAP_USD
    max_tokens: int | None = None
    usage: Usage = field(default_factory=Usage)
    spent_usd: float = 0.0
    cost_known: bool = True
    exhausted: bool = False
    unreported_usd: float = 0.0
    unreported_tokens: int = 0
    saved_usd: float = 0.0
    halted: str | None = None
    _held: float = 0.0
    _held_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def tokens_used(self) -> int:
        """Every token so far, plus the worst case of each unreported reply."""
        u = self.usage
        return u.input_tokens + u.output_tokens + u.cache_write_tokens + u.cache_read_tokens + self.unreported_tokens

    @property
    def charged_usd(self) -> float:
        """The known cost plus the worst case of unreported replies, in USD."""
        return self.spent_usd + self.unreported_usd

    @property
    def held_usd(self) -> float:
        """USD held for calls in flight."""
        return self._held

    def halt(self, reason: str) -> None:
        """Start no call or retry from now on (CallsStopped); requests already sent still settle."""
        with self._lock:
            self.halted = self.halted or reason

    def check_running(self) -> None:
        """Raise CallsStopped once halted; called before every HTTP attempt."""
        if self.halted is not None:
            raise CallsStopped(f"the run stopped ({self.halted}) before this request was sent")

    def reserve(self, price: Price | None, input_tokens: int, max_tokens: int, defer: bool = False, margin_usd: float = 0.0) -> Reservation:
        """Hold a call's worst case, keeping ``margin_usd`` free besides. Raises BudgetExhausted (marking
        the budget exhausted) or CallTooExpensive; with ``defer``, BudgetDeferred instead of exhausting."""
        worst_tokens = input_tokens + max_tokens
        worst = None if price is None else (input_tokens * price.input + max_tokens * price.output) / 1_000_000
        self.check_running()
        if worst is not None and worst > self.per_call_cap_usd:
            raise CallTooExpensive(f"worst-case cost ${worst:.4f} of one call is above the per-call cap ${self.per_call_cap_usd:.2f}")
        with self._lock:
            if self.exhausted:
                raise BudgetExhausted("the run's budget is spent")
            too_many = self.max_tokens is not None and self.tokens_used + self._held_tokens + worst_tokens > self.max_tokens
            too_dear = worst is not None and self.max_usd is not None and self.charged_usd + self._held + worst + margin_usd > self.max_usd
            if defer and (too_many or too_dear):
                raise BudgetDeferred("waiting for the calls in flight to settle")
            if self.max_tokens is not None and too_many:
                self.exhausted = True
                raise BudgetExhausted(
                    f"starting another call could exceed --max-budget-tokens {self.max_tokens} "
                    f"(used {self.tokens_used}, in flight {self._held_tokens}, this call up to {worst_tokens})"
                )
            if worst is not None and self.max_usd is not None and too_dear:
                self.exhausted = True
                unreported = f" of which ${self.unreported_usd:.4f} worst case for replies without usage" if self.unreported_usd else ""
                raise BudgetExhausted(
                    f"starting another call could exceed --max-budget-usd {self.max_usd:.2f} "
                    f"(spent ${self.charged_usd:.4f}{unreported}, in flight ${self._held:.4f}, this call up to ${worst:.4f})"
                )
            held_tokens = worst_tokens if self.max_tokens is not None else 0
            self._held += worst or 0.0
            self._held_tokens += held_tokens
        return Reservation(worst or 0.0, held_tokens, worst_tokens)

    def settle(self, reservation: Reservation, usage: Usage, price: Price | None) -> float | None:
        """Release ``reservation`` and add the real usage; returns the USD cost (None: unknown). A reply
        without usage stays charged at its worst case."""
        cost = cost_usd(usage, price)
        with self._lock:
            self._held = max(0.0, self._held - reservation.usd)
            self._held_tokens = max(0, self._held_tokens - reservation.tokens)
            self.usage = self.usage + usage
            saved = cache_savings_usd(dataclasses.replace(usage, unreported=0), price)
            self.saved_usd += saved or 0.0
            if usage.unreported:
                self.unreported_usd += reservation.usd * usage.unreported
                self.unreported_tokens += reservation.worst_tokens * usage.unreported
                known = cost_usd(dataclasses.replace(usage, unreported=0), price)
                if known is not None:
                    self.spent_usd += known  # the replies that did report usage
            if cost is None:
                self.cost_known = False
            else:
                self.spent_usd += cost
        return cost

    @property
    def total_cost_usd(self) -> float | None:
        """USD spent so far; None when any call's cost is unknown."""
        return round(self.spent_usd, 6) if self.cost_known else None

    @property
    def total_saved_usd(self) -> float | None:
        """USD prompt caching saved so far; None when the run's cost is unknown."""
        return round(self.saved_usd, 6) if self.cost_known else None


def estimate_tokens(text: str) -> int:
    """One token per 3 characters: conservative (English averages about 4; CJK is denser)."""
    return len(text) // 3 + 1
