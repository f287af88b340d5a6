"""Which proxy an HTTP request goes through, read from the environment as the user set it, for every HTTP
client of judge-runner (the HTTP search, the provider SDKs).

- **Loopback never goes through a proxy**: ``127.0.0.0/8``, ``::1`` and ``localhost``, whatever the proxy
  variables and ``no_proxy`` say. A proxy cannot reach this machine's loopback (a company proxy with
  ``http_proxy`` set and no ``no_proxy`` answered 503 for a search on ``127.0.0.1``).
- **Other hosts**: the scheme's variable (``http_proxy``/``https_proxy``, lower case before upper case, as
  :func:`urllib.request.getproxies` reads them), else ``all_proxy``; ``no_proxy`` exempts hosts as
  :func:`urllib.request.proxy_bypass` reads it.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit


@dataclass(frozen=True)
class Proxy:
    """A proxy: ``url`` as set (it may hold a user and password), ``variable`` the environment variable
    that set it (or ``"the system's proxy settings"``)."""

    url: str
    variable: str

    @property
    def scheme(self) -> str:
        return urlsplit(self.url).scheme.lower()

    @property
    def shown(self) -> str:
        """For messages: the URL without user, password, path or query, and where it came from, e.g.
        ``http://proxy.corp:3128 from https_proxy``."""
        parts = urlsplit(self.url)
        host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return f"{urlunsplit((parts.scheme, host, '', '', ''))} from {self.variable}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine's loopback:
    ``localhost`` or an address in ``127.0.0.0/8`` or ``::1``. Names other than ``localhost`` are not resolved."""
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
    """The proxy a request to ``url`` goes through, or None (loopback, exempted by ``no_proxy``, or no
    proxy set). A proxy given without a scheme (``proxy:3128``) is an ``http://`` one."""
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
