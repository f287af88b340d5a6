"""Which proxy an HTTP request goes through, read from the environment, for every HTTP client of judge-runner.
Loopback never does, whatever the variables say (a proxy cannot reach this machine's loopback); other hosts
follow ``http_proxy``/``https_proxy``, then ``all_proxy``, and ``no_proxy`` as :mod:`urllib.request` reads them."""

from __future__ import annotations

import ipaddress
import os
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit


@dataclass(frozen=True)
class Proxy:
    """A proxy: ``url`` as set (it may hold a password) and the ``variable`` that set it."""

    url: str
    variable: str

    @property
    def scheme(self) -> str:
        return urlsplit(self.url).scheme.lower()

    @property
    def shown(self) -> str:
        """For messages: the URL without user, password, path or query, and where it came from
        (``http://proxy.corp:3128 from https_proxy``)."""
        parts = urlsplit(self.url)
        host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return f"{urlunsplit((parts.scheme, host, '', '', ''))} from {self.variable}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or an address in ``127.0.0.0/8`` or ``::1``; other names are not
    resolved."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _variable(scheme: str, value: str) -> str:
    for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY"):
        if os.environ.get(name) == value:
            return name
    return "the system's proxy settings"


def proxy_for(url: str) -> Proxy | None:
    """The proxy a request to ``url`` goes through, or None. A proxy without a scheme is ``http://``."""
    parts = urlsplit(url)
    host, scheme = parts.hostname or "", parts.scheme.lower()
    if not host or is_loopback(host):
        return None
    proxies = urllib.request.getproxies()
    key = scheme if proxies.get(scheme) else "all"
    value = proxies.get(key)
    if not value or urllib.request.proxy_bypass(host):
        return None
    return Proxy(value if "://" in value else f"http://{value}", _variable(key, value))
