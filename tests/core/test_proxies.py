"""Which proxy a request goes through: never one for loopback, the variables as set for other hosts."""

from __future__ import annotations

import pytest

from judge_runner.core.proxies import is_loopback, proxy_for
from tests.support.proxy import set_proxy_variables


@pytest.mark.parametrize("host", ["127.0.0.1", "127.5.6.7", "::1", "[::1]", "localhost", "LOCALHOST."])
def test_loopback_hosts(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["10.0.0.1", "192.168.1.2", "search.example.test", "localhost.example.test", "::2", ""])
def test_other_hosts(host):
    assert not is_loopback(host)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/search", "https://[::1]:9/v1", "http://localhost/x", "http://127.1.2.3/"])
def test_loopback_never_goes_through_a_proxy(monkeypatch, url):
    set_proxy_variables(monkeypatch, "http://proxy.example.test:3128")
    assert proxy_for(url) is None


def test_other_hosts_use_the_schemes_variable_then_all_proxy(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert proxy_for("http://search.example.test/s") is None
    monkeypatch.setenv("ALL_PROXY", "socks5://fallback.example.test:1080")
    monkeypatch.setenv("HTTPS_PROXY", "http://alice:s3cret@tls.example.test:3128")
    monkeypatch.setenv("http_proxy", "plain.example.test:8080")
    plain, tls = proxy_for("http://search.example.test/s"), proxy_for("https://api.example.test/v1")
    assert plain is not None and plain.url == "http://plain.example.test:8080" and plain.variable == "http_proxy"
    assert tls is not None and tls.shown == "http://tls.example.test:3128 from HTTPS_PROXY" and "s3cret" not in tls.shown
    monkeypatch.delenv("http_proxy")
    fallback = proxy_for("http://search.example.test/s")
    assert fallback is not None and fallback.scheme == "socks5" and fallback.variable == "ALL_PROXY"


def test_no_proxy_exempts_a_host(monkeypatch):
    set_proxy_variables(monkeypatch, "http://proxy.example.test:3128")
    monkeypatch.setenv("no_proxy", "internal.example.test")
    assert proxy_for("http://search.internal.example.test/s") is None
    assert proxy_for("http://search.example.test/s") is not None
