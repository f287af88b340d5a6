"""Each provider classifies its own SDK's errors (retryable, auth, spend limit, bad request), built from
real SDK exception objects; nothing is sent anywhere."""

from __future__ import annotations

import anthropic
import httpx2
import openai
import pytest

from judge_runner.llm.anthropic_provider import AnthropicProvider
from judge_runner.llm.budget import Budget
from judge_runner.llm.errors import AuthError, RequestError, SpendLimitError, TransientError
from judge_runner.llm.openai_provider import OpenAIProvider
from judge_runner.llm.retry import RetryPolicy, translate

REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")


def status_error(sdk, status: int, body: dict):
    response = httpx2.Response(status, json=body, request=REQUEST)
    return sdk.APIStatusError(f"HTTP {status}", response=response, body=body)


@pytest.fixture(params=["anthropic", "openai"])
def provider(request):
    cls = AnthropicProvider if request.param == "anthropic" else OpenAIProvider
    return cls("m", RetryPolicy(), Budget(), api_key="test-key", base_url="http://127.0.0.1:9")


def sdk_of(provider):
    return anthropic if isinstance(provider, AnthropicProvider) else openai


def spend_body(provider) -> dict:
    if isinstance(provider, AnthropicProvider):
        return {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "spend limit", "details": {"error_code": "enforced_spend_limit_reached"}},
        }
    return {"code": "insufficient_quota", "type": "insufficient_quota", "message": "quota"}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (401, "auth"),
        (403, "auth"),
        (402, "spend_limit"),
        (429, "retryable"),
        (408, "retryable"),
        (500, "retryable"),
        (529, "retryable"),
        (400, "bad_request"),
        (404, "bad_request"),
        (413, "bad_request"),
    ],
)
def test_status_errors(provider, status, expected):
    assert provider.classify(status_error(sdk_of(provider), status, {"error": {"type": "x"}})) == expected


def test_spend_limit_429_is_not_retried(provider):
    exc = status_error(sdk_of(provider), 429, spend_body(provider))
    assert provider.classify(exc) == "spend_limit"
    assert isinstance(translate(exc, 1, provider.classify), SpendLimitError)


def test_transport_errors_are_retryable(provider):
    sdk = sdk_of(provider)
    assert provider.classify(sdk.APIConnectionError(request=REQUEST)) == "retryable"
    assert provider.classify(sdk.APITimeoutError(request=REQUEST)) == "retryable"
    assert provider.classify(httpx2.ReadTimeout("stalled stream", request=REQUEST)) == "retryable"


def test_programming_errors_are_not_provider_failures(provider):
    assert provider.classify(ValueError("bug")) is None
    assert provider.classify(KeyError("x")) is None


def test_another_sdks_error_is_not_mistaken_for_ours():
    """Classification is by the provider's own SDK classes, not by class names shared between SDKs."""
    claude = AnthropicProvider("m", RetryPolicy(), Budget(), api_key="k", base_url="http://127.0.0.1:9")
    assert claude.classify(anthropic.APIConnectionError(request=REQUEST)) == "retryable"
    foreign = type("APIConnectionError", (Exception,), {})("same name, other library")
    assert claude.classify(foreign) is None


def test_translate_uses_the_providers_classification(provider):
    sdk = sdk_of(provider)
    assert isinstance(translate(status_error(sdk, 401, {}), 1, provider.classify), AuthError)
    assert isinstance(translate(sdk.APIConnectionError(request=REQUEST), 4, provider.classify), TransientError)
    assert isinstance(translate(status_error(sdk, 400, {}), 1, provider.classify), RequestError)


def test_retry_policy_retries_what_the_provider_calls_retryable(provider):
    sdk = sdk_of(provider)
    errors = [sdk.APIConnectionError(request=REQUEST), status_error(sdk, 529, {})]

    def flaky():
        if errors:
            raise errors.pop(0)
        return "ok"

    policy = RetryPolicy(sleep=lambda s: None, base_s=0.0)
    assert policy.call(flaky, classify=provider.classify) == ("ok", 3)
    with pytest.raises(ValueError):
        policy.call(lambda: (_ for _ in ()).throw(ValueError("bug")), classify=provider.classify)
