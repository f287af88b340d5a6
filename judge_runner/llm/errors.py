"""Errors of the LLM layer; ``kind`` is an ``error`` line's ``errorType``. Messages never hold API keys."""

from __future__ import annotations

from typing import Any


class LLMError(RuntimeError):
    """A call failed. ``attempts``: HTTP requests made; ``retryable``: another attempt may succeed;
    ``usage`` and ``cost_usd`` (USD, None: unknown): what it spent, re-asks included."""

    kind = "llm_error"
    retryable = False
    usage: Any = None
    cost_usd: float | None = None

    def __init__(self, message: str, attempts: int = 0):
        super().__init__(message)
        self.attempts = attempts


class AuthError(LLMError):
    """The API key was refused (401/403): the run stops, exit 2."""

    kind = "auth_error"


class SpendLimitError(LLMError):
    """The account's spend limit is reached: the run stops, exit 3."""

    kind = "spend_limit"


class TransientError(LLMError):
    """Rate limit, overload, 5xx, timeout or connection error still failing after every retry."""

    kind = "transient_error"


class LocalServerTimeout(TransientError):
    """A local server sent no reply within ``--timeout``. Not retried: it would queue behind the
    abandoned generation."""

    kind = "timeout"


class MalformedReplyError(LLMError):
    """A 200 that is no usable reply; retried like a 5xx."""

    kind = "malformed_reply"
    retryable = True


class RequestError(LLMError):
    """A request the provider refused as invalid (400, 404, 413): retrying cannot help."""

    kind = "request_error"


class InvalidOutputError(LLMError):
    """The model's reply failed its schema even after the re-asks."""

    kind = "invalid_output"


class TruncatedError(LLMError):
    """The reply was cut off by max_tokens."""

    kind = "truncated"


class RefusalError(LLMError):
    """The model refused to answer."""

    kind = "refusal"


class BudgetExhausted(LLMError):
    """Starting this call could take the run past ``--max-budget-usd``: no new call starts."""

    kind = "budget_exhausted"


class CallTooExpensive(LLMError):
    """This call's worst-case cost is above the per-call cap."""

    kind = "call_too_expensive"


class CallsStopped(LLMError):
    """The run stopped while this call waited to start or retry; no request was sent for it."""

    kind = "interrupted"
