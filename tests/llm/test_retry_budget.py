"""judge_runner.llm.retry, budget and pricing, without any network: fake SDK-shaped exceptions and an
injected clock and sleep."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import pytest
import tenacity

import judge_runner.llm.retry as retry_mod
from judge_runner.llm.budget import Budget, Reservation, estimate_tokens
from judge_runner.llm.errors import (
    AuthError,
    BudgetExhausted,
    CallTooExpensive,
    InvalidOutputError,
    RequestError,
    SpendLimitError,
    TransientError,
)
from judge_runner.llm.pricing import Price, Usage, cost_usd, price_for, pricing_table
from judge_runner.llm.retry import RetryPolicy, is_retryable, retry_after_seconds, translate

# -- fakes ----------------------------------------------------------------------------------------


class FakeStatusError(Exception):
    """Shaped like anthropic/openai ``APIStatusError``: status_code, response.headers, error codes."""

    def __init__(
        self,
        status: int,
        headers: dict | None = None,
        error_code: str | None = None,
        code: str | None = None,
        type_: str | None = None,
        message: str = "boom",
    ):
        super().__init__(message)
        self.status_code = status
        self.response = SimpleNamespace(headers=headers or {})
        self.error_code = error_code
        self.code = code
        self.type = type_


class APIConnectionError(ConnectionError):
    """Like the SDKs' connection error; the generic classifier knows the standard library's
    ConnectionError (the real SDK classes are each provider's own ``classify``: test_provider_errors.py)."""


class APITimeoutError(APIConnectionError):
    pass


class ReadTimeout(TimeoutError):
    """Like httpx's raw read timeout (a TimeoutError for the generic classifier)."""


class FakeClock:
    """monotonic() that only moves when sleep() is called."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture()
def clock(monkeypatch) -> FakeClock:
    clock = FakeClock()
    monkeypatch.setattr(retry_mod, "time", clock)
    monkeypatch.setattr(tenacity, "time", clock)
    return clock


def failing(*errors, result="ok"):
    """A callable that raises each error in turn, then returns ``result``; counts its calls."""
    queue = list(errors)
    calls = {"n": 0}

    def fn():
        calls["n"] += 1
        if queue:
            raise queue.pop(0)
        return result

    fn.calls = calls  # type: ignore[attr-defined]
    return fn


# -- is_retryable ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_retryable_statuses(status):
    assert is_retryable(FakeStatusError(status)) is True


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_non_retryable_statuses(status):
    assert is_retryable(FakeStatusError(status)) is False


@pytest.mark.parametrize(
    "exc",
    [
        FakeStatusError(429, error_code="enforced_spend_limit_reached"),
        FakeStatusError(429, code="insufficient_quota"),
        FakeStatusError(429, code="billing_hard_limit_reached"),
    ],
)
def test_spend_limit_429_is_not_retryable(exc):
    assert is_retryable(exc) is False


def test_plain_rate_limit_429_with_other_code_is_retryable():
    assert is_retryable(FakeStatusError(429, code="rate_limit_exceeded", type_="rate_limit_error")) is True


@pytest.mark.parametrize("exc", [APIConnectionError("down"), APITimeoutError("slow"), ReadTimeout("stalled"), TimeoutError()])
def test_transport_errors_are_retryable(exc):
    assert is_retryable(exc) is True


@pytest.mark.parametrize("exc", [ValueError("bug"), KeyError("x"), RuntimeError("y")])
def test_programming_errors_are_not_retryable(exc):
    assert is_retryable(exc) is False


def test_non_integer_status_code_is_ignored():
    exc = FakeStatusError(503)
    exc.status_code = "503"  # type: ignore[assignment]
    assert is_retryable(exc) is False


# -- retry_after_seconds --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the precise header wins
        ({"retry-after-ms": "soon", "retry-after": "3"}, 3.0),  # garbage falls through to the next
        ({"retry-after": "garbage"}, None),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),
        ({"retry-after": "-5"}, None),
        ({"retry-after": "nan"}, None),
        ({}, None),
    ],
)
def test_retry_after_seconds(headers, expected):
    value = retry_after_seconds(FakeStatusError(429, headers=headers))
    if expected is None:
        assert value is None
    else:
        assert value == pytest.approx(expected)


def test_retry_after_without_response():
    assert retry_after_seconds(APIConnectionError("x")) is None
    exc = FakeStatusError(429)
    exc.response = None
    assert retry_after_seconds(exc) is None


# -- translate ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (FakeStatusError(401), AuthError),
        (FakeStatusError(403), AuthError),
        (FakeStatusError(429, error_code="enforced_spend_limit_reached"), SpendLimitError),
        (FakeStatusError(429, code="insufficient_quota"), SpendLimitError),
        (FakeStatusError(429), TransientError),
        (FakeStatusError(503), TransientError),
        (FakeStatusError(529, type_="overloaded_error"), TransientError),
        (APIConnectionError("down"), TransientError),
        (FakeStatusError(400), RequestError),
        (FakeStatusError(404), RequestError),
        (FakeStatusError(413), RequestError),
    ],
)
def test_translate_kinds(exc, kind):
    error = translate(exc, attempts=3)
    assert type(error) is kind
    assert error.attempts == 3


def test_translate_message_names_status_and_type_but_not_secrets():
    exc = FakeStatusError(
        529, headers={"x-api-key": "sk-ant-SECRET123"}, type_="overloaded_error", message="request with x-api-key sk-ant-SECRET123 failed"
    )
    error = translate(exc, attempts=4)
    assert "529" in str(error) and "overloaded_error" in str(error)
    assert "SECRET123" not in str(error)


def test_translate_passes_llm_errors_through():
    original = InvalidOutputError("bad", 2)
    assert translate(original, attempts=9) is original


# -- RetryPolicy.call -----------------------------------------------------------------------------


def test_fail_twice_then_succeed_makes_three_attempts(clock):
    fn = failing(FakeStatusError(503), APIConnectionError("reset"))
    attempts_seen = []
    policy = RetryPolicy(sleep=clock.sleep)
    result, attempts = policy.call(fn, on_attempt=lambda: attempts_seen.append(1))
    assert result == "ok"
    assert attempts == 3
    assert fn.calls["n"] == 3
    assert len(attempts_seen) == 3
    assert len(clock.sleeps) == 2


def test_always_503_makes_four_attempts_then_transient_error(clock):
    fn = failing(*[FakeStatusError(503) for _ in range(10)])
    policy = RetryPolicy(sleep=clock.sleep)
    with pytest.raises(TransientError) as info:
        policy.call(fn)
    assert info.value.attempts == 4
    assert fn.calls["n"] == 4
    assert len(clock.sleeps) == 3


@pytest.mark.parametrize("max_retries", [0, 1, 5])
def test_max_retries_bounds_attempts(clock, max_retries):
    fn = failing(*[FakeStatusError(500) for _ in range(20)])
    with pytest.raises(TransientError) as info:
        RetryPolicy(max_retries=max_retries, sleep=clock.sleep).call(fn)
    assert fn.calls["n"] == max_retries + 1 == info.value.attempts


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (FakeStatusError(401), AuthError),
        (FakeStatusError(403), AuthError),
        (FakeStatusError(400), RequestError),
        (FakeStatusError(404), RequestError),
        (FakeStatusError(413), RequestError),
        (FakeStatusError(429, error_code="enforced_spend_limit_reached"), SpendLimitError),
    ],
)
def test_non_retryable_errors_make_one_attempt(clock, exc, kind):
    fn = failing(exc)
    with pytest.raises(kind) as info:
        RetryPolicy(sleep=clock.sleep).call(fn)
    assert info.value.attempts == 1
    assert fn.calls["n"] == 1
    assert clock.sleeps == []


def test_programming_errors_surface_unchanged(clock):
    fn = failing(KeyError("oops"))
    with pytest.raises(KeyError):
        RetryPolicy(sleep=clock.sleep).call(fn)
    assert fn.calls["n"] == 1


def test_llm_errors_from_fn_are_not_retried_or_wrapped(clock):
    err = InvalidOutputError("bad schema", 1)
    fn = failing(err)
    with pytest.raises(InvalidOutputError) as info:
        RetryPolicy(sleep=clock.sleep).call(fn)
    assert info.value is err
    assert fn.calls["n"] == 1


def test_backoff_is_exponential_with_jitter_and_capped(clock, monkeypatch):
    monkeypatch.setattr(retry_mod.random, "uniform", lambda a, b: b)  # no jitter: the upper bound
    fn = failing(*[FakeStatusError(503) for _ in range(10)])
    with pytest.raises(TransientError):
        RetryPolicy(max_retries=5, base_s=1.0, cap_s=5.0, sleep=clock.sleep).call(fn)
    assert clock.sleeps == pytest.approx([1.0, 2.0, 4.0, 5.0, 5.0])


def test_backoff_jitter_stays_within_half_to_full(clock):
    random.seed(1234)
    fn = failing(*[FakeStatusError(503) for _ in range(10)])
    with pytest.raises(TransientError):
        RetryPolicy(max_retries=3, base_s=2.0, cap_s=100.0, sleep=clock.sleep).call(fn)
    for n, wait in enumerate(clock.sleeps, start=1):
        full = 2.0 * 2 ** (n - 1)
        assert full / 2 <= wait <= full


def test_wait_honours_retry_after(clock):
    fn = failing(FakeStatusError(429, headers={"retry-after": "7"}), FakeStatusError(503, headers={"retry-after-ms": "2500"}))
    result, attempts = RetryPolicy(base_s=0.1, sleep=clock.sleep).call(fn)
    assert (result, attempts) == ("ok", 3)
    assert clock.sleeps[0] == pytest.approx(7.0)
    assert clock.sleeps[1] == pytest.approx(2.5)
    assert len(clock.sleeps) == 2  # the shared pause has already passed: no extra wait


def test_retry_after_is_a_floor_not_a_ceiling(clock, monkeypatch):
    monkeypatch.setattr(retry_mod.random, "uniform", lambda a, b: b)
    fn = failing(FakeStatusError(429, headers={"retry-after": "1"}))
    RetryPolicy(base_s=4.0, sleep=clock.sleep).call(fn)
    assert clock.sleeps == pytest.approx([4.0])  # backoff 4 s beats the server's 1 s


def test_retry_after_is_capped(clock):
    fn = failing(FakeStatusError(429, headers={"retry-after": "3600"}))
    RetryPolicy(cap_s=30.0, sleep=clock.sleep).call(fn)
    assert clock.sleeps == pytest.approx([30.0])


def test_waits_never_pass_the_deadline(clock):
    fn = failing(*[FakeStatusError(429, headers={"retry-after": "6"}) for _ in range(10)])
    with pytest.raises(TransientError) as info:
        RetryPolicy(max_retries=10, deadline_s=10.0, sleep=clock.sleep).call(fn)
    assert sum(clock.sleeps) <= 10.0 + 1e-9
    assert clock.sleeps == pytest.approx([6.0, 4.0])
    assert info.value.attempts == 3


def test_retry_after_pauses_other_calls_sharing_the_policy():
    # a sleep that does not advance time: the shared pause is still ahead when the next call starts
    sleeps: list[float] = []
    policy = RetryPolicy(sleep=sleeps.append)
    policy.call(failing(FakeStatusError(429, headers={"retry-after": "5"})))
    assert sleeps[0] == pytest.approx(5.0)
    sleeps.clear()
    result, attempts = policy.call(failing())  # a fresh call on the same policy
    assert (result, attempts) == ("ok", 1)
    assert len(sleeps) == 1 and 4.0 < sleeps[0] <= 5.0


# -- Budget ---------------------------------------------------------------------------------------

PRICE = Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.3)


def test_reserve_and_settle_arithmetic():
    budget = Budget(max_usd=1.0)
    r = budget.reserve(PRICE, input_tokens=1000, max_tokens=2000)
    assert r.usd == pytest.approx((1000 * 3 + 2000 * 15) / 1e6)  # 0.033
    assert budget._held == pytest.approx(0.033)
    cost = budget.settle(r, Usage(input_tokens=1000, output_tokens=500, cache_write_tokens=100, cache_read_tokens=1000, calls=2), PRICE)
    assert cost == pytest.approx((1000 * 3 + 500 * 15 + 100 * 3.75 + 1000 * 0.3) / 1e6)
    assert budget._held == 0.0
    assert budget.spent_usd == pytest.approx(cost)
    assert budget.total_cost_usd == pytest.approx(round(cost, 6))
    assert budget.usage == Usage(1000, 500, 100, 1000, 2)
    assert budget.exhausted is False


def test_usage_adds_up_over_calls():
    budget = Budget()
    for _ in range(3):
        budget.settle(budget.reserve(PRICE, 10, 10), Usage(input_tokens=100, output_tokens=10, calls=1), PRICE)
    assert budget.usage == Usage(300, 30, 0, 0, 3)
    assert budget.spent_usd == pytest.approx(3 * (100 * 3 + 10 * 15) / 1e6)


def test_budget_exhausted_when_worst_case_would_exceed_max():
    budget = Budget(max_usd=0.05)
    first = budget.reserve(PRICE, 1000, 2000)  # 0.033 held
    with pytest.raises(BudgetExhausted):
        budget.reserve(PRICE, 1000, 2000)  # 0.066 > 0.05 in the worst case
    assert budget.exhausted is True
    budget.settle(first, Usage(input_tokens=10, output_tokens=10), PRICE)
    with pytest.raises(BudgetExhausted):  # once exhausted, no new call starts
        budget.reserve(PRICE, 1, 1)


def test_reservation_exactly_at_the_max_is_allowed():
    budget = Budget(max_usd=0.033)
    r = budget.reserve(PRICE, 1000, 2000)
    assert r.usd == pytest.approx(0.033)
    assert budget.exhausted is False


@pytest.mark.parametrize("seed", range(5))
def test_total_spent_never_exceeds_max_in_a_loop(seed):
    rng = random.Random(seed)
    budget = Budget(max_usd=1.0, per_call_cap_usd=0.5)
    calls = 0
    while True:
        input_tokens, max_tokens = rng.randint(100, 20_000), rng.randint(100, 8000)
        try:
            r = budget.reserve(PRICE, input_tokens, max_tokens)
        except BudgetExhausted:
            break
        # a real call never uses more than its worst case
        used = Usage(input_tokens=input_tokens, output_tokens=rng.randint(0, max_tokens), calls=1)
        budget.settle(r, used, PRICE)
        calls += 1
        assert budget.spent_usd <= 1.0 + 1e-12
        assert calls < 10_000
    assert budget.spent_usd <= 1.0
    assert calls >= 1
    assert budget.exhausted is True


def test_calls_at_full_worst_case_stop_exactly_in_time():
    budget = Budget(max_usd=1.0)
    worst = (10_000 * 3 + 4000 * 15) / 1e6  # 0.09
    calls = 0
    with pytest.raises(BudgetExhausted):
        while True:
            r = budget.reserve(PRICE, 10_000, 4000)
            budget.settle(r, Usage(input_tokens=10_000, output_tokens=4000), PRICE)
            calls += 1
    assert calls == math.floor(1.0 / worst) == 11
    assert budget.spent_usd == pytest.approx(11 * worst)


def test_call_too_expensive_over_the_per_call_cap():
    budget = Budget(max_usd=100.0, per_call_cap_usd=0.01)
    with pytest.raises(CallTooExpensive):
        budget.reserve(PRICE, 1000, 2000)  # 0.033 > 0.01
    assert budget.exhausted is False
    assert budget._held == 0.0
    assert budget.reserve(PRICE, 100, 100).usd == pytest.approx((300 + 1500) / 1e6)


def test_unknown_price_gives_unknown_cost_never_zero():
    budget = Budget(max_usd=1.0)
    r = budget.reserve(None, 1000, 2000)
    assert isinstance(r, Reservation)
    cost = budget.settle(r, Usage(input_tokens=1000, output_tokens=500, calls=1), None)
    assert cost is None
    assert budget.total_cost_usd is None
    assert budget.cost_known is False
    assert budget.usage.input_tokens == 1000  # tokens are still counted
    # a later priced call does not make the total "known" again
    budget.settle(budget.reserve(PRICE, 10, 10), Usage(input_tokens=10), PRICE)
    assert budget.total_cost_usd is None


def test_cost_usd():
    assert cost_usd(Usage(input_tokens=1_000_000), PRICE) == pytest.approx(3.0)
    assert cost_usd(Usage(output_tokens=2_000_000), PRICE) == pytest.approx(30.0)
    assert cost_usd(Usage(), PRICE) == 0.0
    assert cost_usd(Usage(input_tokens=5), None) is None


def test_estimate_tokens_is_conservative():
    assert estimate_tokens("") == 1
    assert estimate_tokens("abc") == 2
    assert estimate_tokens("x" * 3000) == 1001
    assert estimate_tokens("索引" * 100) >= 200 // 3


def test_usage_addition():
    assert Usage(1, 2, 3, 4, 5) + Usage(10, 20, 30, 40, 50) == Usage(11, 22, 33, 44, 55)


# -- pricing --------------------------------------------------------------------------------------


def table_price(name: str) -> Price:
    p = pricing_table()["models"][name]
    return Price(p["input"], p["output"], p["cacheWrite"], p["cacheRead"], p["cacheMinTokens"], p.get("reasoning", False))


def test_price_for_exact_names():
    for name in pricing_table()["models"]:
        assert price_for(name) == table_price(name)


@pytest.mark.parametrize(
    ("model", "base"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-haiku-4-5@20251001", "claude-haiku-4-5"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("gpt-5-2025-08-07", "gpt-5"),
    ],
)
def test_price_for_dated_snapshots(model, base):
    assert price_for(model) == table_price(base)


@pytest.mark.parametrize(
    "model",
    [
        "llama-3-70b",
        "my-local-model",
        "claude",
        "claude-opus",
        "gpt",
        "",
        "gpt-5-pro",  # a different, pricier model: not gpt-5
        "gpt-4o-audio-preview",  # not gpt-4o
        "claude-sonnet-4-5-turbo",  # not a dated snapshot
    ],
)
def test_price_for_unknown_models_is_none(model):
    assert price_for(model) is None


def test_batch_price_halves_every_token_class():
    """Both batch APIs bill every token class at half the standard rate (pricing.json batchDiscount)."""
    from judge_runner.llm.pricing import Usage, cost_usd, price_for

    standard = price_for("claude-sonnet-4-6")
    assert standard is not None
    batch = standard.for_batch()
    usage = Usage(input_tokens=1000, output_tokens=200, cache_write_tokens=300, cache_read_tokens=4000)
    assert cost_usd(usage, batch) == pytest.approx(cost_usd(usage, standard) / 2)
    assert batch.cache_read == pytest.approx(standard.cache_read / 2)
