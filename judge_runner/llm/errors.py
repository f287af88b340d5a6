"""Errors of the LLM layer, each a kind the run loop treats differently.

``kind`` is what an ``error`` line records as ``errorType``. Messages never contain API keys.
"""

from __future__ import annotations

from typing import Any


class LLMError(RuntimeError):
    """A logical LLM call failed. ``attempts`` counts the HTTP requests made for it. ``retryable``: a
    provider raised it from one attempt and another attempt of the same request may succeed. ``usage``
    (a :class:`judge_runner.llm.pricing.Usage`) and ``cost_usd`` (USD, None when unknown): what the failed
    call spent (every attempt, and the re-asks before it), set where it is settled; None when it spent
    nothing (it failed before any request)."""

    kind = "llm_error"
    retryable = False
    usage: Any = None
    cost_usd: float | None = None

    def __init__(self, message: str, attempts: int = 0):
        super().__init__(message)
        self.attempts = attempts


class AuthError(LLMError):
    """The API key was refused (401/403): nothing can succeed, the run stops with exit code 2."""

    kind = "auth_error"


class SpendLimitError(LLMError):
    """The provider account's spend limit is reached: the run stops (exit code 3)."""

    kind = "spend_limit"


class TransientError(LLMError):
    """Rate limit, overload, 5xx, timeout or connection error still failing after every retry."""

    kind = "transient_error"


class LocalServerTimeout(TransientError):
    """A local server (loopback or private address) sent no reply within ``--timeout``. Not retried: a
    single-slot server keeps generating the abandoned request, so a retry would only queue behind it."""

    kind = "timeout"


class MalformedReplyError(LLMError):
    """The server answered 200 with something that is not a usable reply (a body that is not JSON,
    ``choices: []``, no message): retried like a 5xx, this kind when it persists."""

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
    """The run stopped (Ctrl+C, SIGTERM, a run file that cannot be written) while this call waited to start
    or to retry: no request was sent for it (:meth:`judge_runner.llm.budget.Budget.halt`)."""

    kind = "interrupted"
