"""The provider SDKs behind a company proxy: a loopback ``base_url`` (a local model server) is reached
directly whatever the proxy variables say; another host goes through the proxy as set, and the error
names the proxy, never its password. Real SDKs, a loopback fake server and a loopback recording proxy."""

from __future__ import annotations

import pytest

from judge_runner.llm.anthropic_provider import AnthropicProvider
from judge_runner.llm.base import Turn
from judge_runner.llm.budget import Budget
from judge_runner.llm.errors import TransientError
from judge_runner.llm.openai_provider import OpenAIProvider
from judge_runner.llm.retry import RetryPolicy
from tests.support.fakes.fake_llm import FakeLLMServer
from tests.support.fault_runs import make_provider
from tests.support.proxy import RecordingProxy, set_proxy_variables

APIS = ["anthropic", "openai"]


@pytest.fixture
def proxy(monkeypatch):
    with RecordingProxy(503) as recording:
        set_proxy_variables(monkeypatch, recording.url.replace("http://", "http://alice:pa55word@"))
        yield recording


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_loopback_server_is_reached_directly(proxy, api, host):
    with FakeLLMServer() as server:
        server.anthropic_base_url = server.anthropic_base_url.replace("127.0.0.1", host)
        server.openai_base_url = server.openai_base_url.replace("127.0.0.1", host)
        reply = make_provider(server, api).complete("system", [Turn("user", text="say hi")], [])
    assert reply.attempts == 1 and len(server.requests) == 1
    assert proxy.seen == []


@pytest.mark.parametrize("api", APIS)
def test_another_host_goes_through_the_proxy_which_the_error_names(proxy, api):
    cls = AnthropicProvider if api == "anthropic" else OpenAIProvider
    provider = cls("m", RetryPolicy(max_retries=0), Budget(), timeout_s=5, api_key="k", base_url="http://llm.example.test/v1")
    with pytest.raises(TransientError) as caught:
        provider.complete("system", [Turn("user", text="say hi")], [])
    assert len(proxy.seen) == 1 and proxy.seen[0].startswith("POST http://llm.example.test/v1/")
    message = str(caught.value)
    assert "HTTP 503" in message and f"through the proxy {proxy.url} from http_proxy after" in message
    assert "pa55word" not in message
