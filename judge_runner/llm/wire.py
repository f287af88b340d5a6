"""What crosses the wire to a model server: JSON-safe values, the server's error text without secrets,
whether a server is local, and loopback past any proxy. Pure functions, no SDK.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
from typing import Any
from urllib.parse import urlsplit

from judge_runner.core.proxies import is_loopback

SERVER_MESSAGE_CHARS = 300  # enough for a validation error, short enough for one stderr line
_KEY_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
# bearer tokens and the usual key shapes (sk-..., sk-ant-..., key-...), whatever the environment holds
_SECRET_PATTERNS = (
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1[REDACTED]"),
    (
        re.compile(r"(?i)((?:api[_-]?key|x-api-key|authorization|token|secret|password)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{4,}"),
        r"\1[REDACTED]",
    ),
    (re.compile(r"\b(?:sk|rk|key)-[A-Za-z0-9_-]{8,}"), "[REDACTED]"),
)


_TRACEBACK = re.compile(r'\n\s*(?:Traceback \(most recent call last\)|File ")')


def json_safe(value: Any) -> Any:
    """``value`` as strict JSON accepts it: NaN and ±Infinity as strings, tuples as lists, so a re-ask
    echoing a model's invalid value stays a valid request."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dumps_safe(value: Any) -> str:
    return json.dumps(json_safe(value), ensure_ascii=False, allow_nan=False)


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` without the environment's API keys, ``secrets`` of 4+ characters, bearer tokens,
    ``api_key=...`` pairs and ``sk-...`` keys."""
    for secret in (*secrets, *(os.environ.get(name) or "" for name in _KEY_ENV)):
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[REDACTED]")
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _detail_text(detail: Any) -> str:
    """FastAPI validation details as ``loc: msg`` lines."""
    if isinstance(detail, list):
        parts = []
        for item in detail[:5]:
            if isinstance(item, dict):
                loc = ".".join(str(p) for p in item.get("loc") or [] if p != "body")
                parts.append(f"{loc}: {item.get('msg', '')}".strip(": "))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    return str(detail)


def server_message(exc: BaseException, limit: int = SERVER_MESSAGE_CHARS, secrets: tuple[str, ...] = ()) -> str | None:
    """The server's own explanation of an HTTP error in at most ``limit`` characters, secrets removed; None
    when it sent none. Reads OpenAI's, Anthropic's, FastAPI's and Ollama's error bodies, or plain text."""
    body = getattr(exc, "body", None)
    text = None
    if isinstance(body, dict):
        error = body.get("error")
        inner: dict = error if isinstance(error, dict) else body
        if isinstance(inner.get("message"), str):
            text = inner["message"]  # possibly empty: the server chose to say nothing
            if isinstance(inner.get("param"), str) and inner["param"] not in text:
                text = f"{inner['param']}: {text}"
        elif "detail" in body:
            text = _detail_text(body["detail"])
        elif isinstance(body.get("error"), str):
            text = body["error"]
    elif isinstance(body, str) and body.strip():
        text = body
    if text is None and not isinstance(body, dict):
        response = getattr(exc, "response", None)
        try:
            raw = response.text if response is not None else ""
        except Exception:  # noqa: BLE001 - a stream already closed: no text to show
            raw = ""
        text = raw or None
    if not text:
        return None
    # a server that appends its traceback (llama-cpp-python: '\n\n  File "/.../app.py", line 376, ...'):
    # the reason comes first, the file paths are noise
    text = _TRACEBACK.split(text, maxsplit=1)[0]
    text = " ".join(redact(text, secrets).split())  # one line
    return text if len(text) <= limit else text[: limit - 1] + "…"


def decode_error_text(exc: json.JSONDecodeError, context: int = 40) -> str:
    """A JSON decode error with its position and the text around it, secrets removed."""
    doc = exc.doc or ""
    near = doc[max(0, exc.pos - context) : exc.pos + context]
    return f"{exc}" + (f" near {redact(near)!r}" if near else " (empty body)")


def is_local_url(url: str | None) -> bool:
    """True for a loopback, private (RFC 1918, RFC 4193), link-local or unspecified address,
    ``localhost``, ``*.localhost`` or ``*.local``. No DNS lookup."""
    if not url:
        return False
    host = (urlsplit(url if "//" in url else f"//{url}").hostname or "").rstrip(".").lower()
    if not host:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local or address.is_unspecified


def direct_mounts(base_url: str | None) -> dict[str, None]:
    """httpx ``mounts`` that send requests to a loopback ``base_url`` past any proxy; ``{}`` otherwise."""
    host = urlsplit(base_url or "").hostname or ""
    if not is_loopback(host):
        return {}
    return {f"all://[{host}]" if ":" in host else f"all://{host}": None}
