"""The one retry layer every provider shares (SDK clients retry nothing). Retried: connection errors,
timeouts, HTTP 408, 409, 429 and 5xx, but not a 429 for a spend limit. The wait before attempt n+1 is
``max(Retry-After, min(cap, base * 2**(n-1)) * jitter)`` (full jitter, AWS's "Exponential Backoff And
Jitter"), never past the call's deadline; a Retry-After pauses every call sharing the policy.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import tenacity

from judge_runner.core.proxies import proxy_for
from judge_runner.llm.errors import AuthError, LLMError, RequestError, SpendLimitError, TransientError
from judge_runner.llm.wire import server_message

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))
SPEND_LIMIT_CODES = frozenset({"enforced_spend_limit_reached", "insufficient_quota", "billing_hard_limit_reached"})

ErrorClass = Literal["retryable", "auth", "spend_limit", "bad_request"]
"""Retried; the key refused (exit 2); the spend limit reached (exit 3); a request retrying cannot fix."""
Classifier = Callable[[BaseException], "ErrorClass | None"]
"""The :data:`ErrorClass` of a provider failure; None for any other exception, which is re-raised."""


def classify_status(status: int, codes: Iterable[object] = ()) -> ErrorClass:
    """401/403 auth; 402 or a 429 with a spend-limit code spend_limit; 408, 409, 429, 5xx retryable; else
    bad_request."""
    if status in (401, 403):
        return "auth"
    if status == 402 or (status == 429 and bool(set(codes) & SPEND_LIMIT_CODES)):
        return "spend_limit"
    if status in RETRYABLE_STATUS:
        return "retryable"
    return "bad_request"


def status_of(exc: BaseException) -> int | None:
    """The int ``status_code`` of an SDK-shaped error, else None."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def classify_generic(exc: BaseException) -> ErrorClass | None:
    """The classifier of a provider that knows no SDK: HTTP statuses, ``TimeoutError`` and
    ``ConnectionError``."""
    status = status_of(exc)
    if status is not None:
        return classify_status(status, {getattr(exc, "error_code", None), getattr(exc, "code", None)})
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return "retryable"
    return None


def is_spend_limit(exc: BaseException, classify: Classifier = classify_generic) -> bool:
    """True for a failure that says the account's spend limit or quota is reached."""
    return classify(exc) == "spend_limit"


def is_retryable(exc: BaseException, classify: Classifier = classify_generic) -> bool:
    """Whether another attempt of the same request may succeed (an :class:`LLMError` says so itself)."""
    if isinstance(exc, LLMError):
        return exc.retryable
    return classify(exc) == "retryable"


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after``; None when absent or an HTTP date."""
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


def through_proxy(exc: BaseException) -> str:
    """`` through the proxy <proxy>`` when the failed request went through one, else ``""``."""
    url = getattr(getattr(exc, "request", None), "url", None)
    proxy = proxy_for(str(url)) if url is not None else None
    return f" through the proxy {proxy.shown}" if proxy else ""


def translate(exc: BaseException, attempts: int, classify: Classifier = classify_generic) -> LLMError:
    """A final provider failure as our error kind (unknown: RequestError). The message never holds request
    headers, so never the API key."""
    if isinstance(exc, LLMError):
        return exc
    status = status_of(exc)
    detail = getattr(exc, "type", None) or getattr(exc, "code", None) or type(exc).__name__
    where = f"HTTP {status} ({detail})" if status else f"{type(exc).__name__}"
    said = server_message(exc) if status else None
    if said:
        where += f": {said}"
    where += through_proxy(exc)
    kind = classify(exc)
    if kind == "auth":
        return AuthError(f"the API key was refused: {where}", attempts)
    if kind == "spend_limit":
        return SpendLimitError(f"the provider account's spend limit is reached: {where}", attempts)
    if kind == "retryable":
        return TransientError(f"{where} after {attempts} attempt(s)", attempts)
    return RequestError(f"the provider refused the request: {where}", attempts)


@dataclass
class RetryPolicy:
    """Retry settings shared by all calls of a run. ``max_retries``: retries after the first attempt;
    ``base_s``, ``cap_s``: first and longest wait; ``deadline_s``: one call with its retries (seconds)."""

    max_retries: int = 3
    base_s: float = 1.0
    cap_s: float = 120.0
    deadline_s: float = 240.0
    sleep: Callable[[float], None] = time.sleep
    _pause_until: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _backoff(self, attempt: int) -> float:
        return float(min(self.cap_s, self.base_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0))

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
        with self._lock:
            delay = min(self._pause_until, deadline_at) - time.monotonic()
        if delay > 0:
            self.sleep(delay)

    def call(
        self, fn: Callable[[], T], on_attempt: Callable[[], None] | None = None, classify: Classifier = classify_generic
    ) -> tuple[T, int]:
        """``(result, attempts)`` of ``fn`` with retries. Raises AuthError, SpendLimitError, TransientError
        or RequestError when it finally fails, and an exception ``classify`` does not know as it is."""
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
            retry=tenacity.retry_if_exception(lambda exc: is_retryable(exc, classify)),
            sleep=self.sleep,
            reraise=True,
        )
        try:
            return retrying(attempt), attempts
        except LLMError:
            raise
        except Exception as exc:
            if classify(exc) is None:
                raise  # a programming error, not a provider failure: let it surface
            raise translate(exc, attempts, classify) from None
