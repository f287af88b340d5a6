"""The one retry layer every provider shares (SDK clients are built with ``max_retries=0``).

Retried: connection errors, timeouts, HTTP 408, 409, 429 and 5xx (including Anthropic's 529
``overloaded_error``). Never retried: 400, 401, 403, 404, 413, 422, and a 429 that says the account's
spend limit or quota is reached. The wait before attempt n+1 is
``max(Retry-After, min(cap, base * 2**(n-1)) * jitter)`` (exponential backoff with full jitter, as AWS's
"Exponential Backoff And Jitter" recommends), never past the logical call's deadline. A Retry-After
seen by one call pauses every call sharing the policy, so concurrent calls do not stampede.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import tenacity

from judge_runner.llm.errors import AuthError, LLMError, RequestError, SpendLimitError, TransientError
from judge_runner.llm.wire import server_message

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))
SPEND_LIMIT_CODES = frozenset({"enforced_spend_limit_reached", "insufficient_quota", "billing_hard_limit_reached"})
_TRANSIENT_CLASS_NAMES = frozenset(
    {"APIConnectionError", "APITimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout", "WriteTimeout",
     "PoolTimeout", "ConnectError", "ReadError", "RemoteProtocolError", "TransportError", "NetworkError"}
)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of an SDK error (``APIStatusError.status_code``), None for transport errors."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_spend_limit(exc: BaseException) -> bool:
    """True for a 429 that says the account's spend limit or quota is reached (anthropic
    ``error_code == "enforced_spend_limit_reached"``, openai ``code == "insufficient_quota"``)."""
    if status_of(exc) != 429:
        return False
    codes = {getattr(exc, "error_code", None), getattr(exc, "code", None)}
    return bool(codes & SPEND_LIMIT_CODES)


def is_transport_error(exc: BaseException) -> bool:
    """Connection failures and timeouts of either SDK or of httpx2 itself (a stalled stream can raise a
    raw ``httpx2.ReadTimeout``), recognised by class name so neither SDK must be imported here."""
    return any(cls.__name__ in _TRANSIENT_CLASS_NAMES for cls in type(exc).__mro__) or isinstance(exc, TimeoutError)


def is_retryable(exc: BaseException) -> bool:
    """Whether another attempt of the same request may succeed."""
    if isinstance(exc, LLMError):
        return exc.retryable  # a provider's own typed error says so itself
    status = status_of(exc)
    if status is not None:
        return status in RETRYABLE_STATUS and not is_spend_limit(exc)
    return is_transport_error(exc)


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms`` or ``retry-after`` (seconds) from
    ``exc.response.headers``; None when absent or unparsable (HTTP-date forms are ignored)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None


def translate(exc: BaseException, attempts: int) -> LLMError:
    """Map a final SDK/transport error to our error kinds; the message names the status, the server's
    error type and the server's own message (truncated, secrets removed: :func:`wire.server_message`),
    never request headers (so never the API key)."""
    if isinstance(exc, LLMError):
        return exc
    status = status_of(exc)
    detail = getattr(exc, "type", None) or getattr(exc, "code", None) or type(exc).__name__
    where = f"HTTP {status} ({detail})" if status else f"{type(exc).__name__}"
    said = server_message(exc) if status else None
    if said:
        where += f": {said}"
    if status in (401, 403):
        return AuthError(f"the API key was refused: {where}", attempts)
    if status == 402 or is_spend_limit(exc):  # 402: Anthropic's billing_error (no credit left)
        return SpendLimitError(f"the provider account's spend limit is reached: {where}", attempts)
    if is_retryable(exc):
        return TransientError(f"{where} after {attempts} attempt(s)", attempts)
    return RequestError(f"the provider refused the request: {where}", attempts)


@dataclass
class RetryPolicy:
    """Retry settings shared by all calls of a run.

    ``max_retries``: retries after the first attempt (3 -> at most 4 requests); ``base_s``: first
    backoff (seconds); ``cap_s``: longest single wait (seconds); ``deadline_s``: bound on one logical
    call with all its retries (seconds); ``sleep``: injectable for tests.
    """

    max_retries: int = 3
    base_s: float = 1.0
    cap_s: float = 120.0
    deadline_s: float = 240.0
    sleep: Callable[[float], None] = time.sleep
    _pause_until: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _backoff(self, attempt: int) -> float:
        return min(self.cap_s, self.base_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        wait = self._backoff(state.attempt_number)
        server = retry_after_seconds(exc) if exc else None
        if server is not None:
            wait = max(wait, min(server, self.cap_s))
            with self._lock:  # one shared back-off: the other calls wait too
                self._pause_until = max(self._pause_until, time.monotonic() + wait)
        remaining = self.deadline_s - (time.monotonic() - state.start_time)
        return max(0.0, min(wait, remaining))

    def _honour_shared_pause(self, deadline_at: float) -> None:
        """Wait out a Retry-After pause another attempt recorded, but never past this call's deadline."""
        with self._lock:
            delay = min(self._pause_until, deadline_at) - time.monotonic()
        if delay > 0:
            self.sleep(delay)

    def call(self, fn: Callable[[], T], on_attempt: Callable[[], None] | None = None) -> tuple[T, int]:
        """Run ``fn`` with retries; returns ``(result, attempts)``. Raises an :class:`LLMError` kind
        (AuthError, SpendLimitError, TransientError, RequestError) when it finally fails."""
        attempts = 0
        deadline_at = time.monotonic() + self.deadline_s

        def attempt() -> T:
            nonlocal attempts
            self._honour_shared_pause(deadline_at)
            attempts += 1
            if on_attempt:
                on_attempt()
            return fn()

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1) | tenacity.stop_after_delay(self.deadline_s),
            wait=self._wait,
            retry=tenacity.retry_if_exception(is_retryable),
            sleep=self.sleep,
            reraise=True,
        )
        try:
            return retrying(attempt), attempts
        except LLMError:
            raise
        except Exception as exc:
            if status_of(exc) is None and not is_transport_error(exc):
                raise  # a programming error, not a provider failure: let it surface
            raise translate(exc, attempts) from None
