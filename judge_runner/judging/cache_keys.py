"""What a cached judgment is found by: everything that could change it, and the query a label is about."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from judge_runner.core.models import JUDGE_MODES

CACHE_VERSION = 1
"""Bump when the meaning of a stored judgment changes: old entries stop matching, ``prune`` drops them."""

CACHE_MODES: tuple[str, ...] = (*JUDGE_MODES, "list")  # a cached judgment is a label of one mode, or a list verdict


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def topic_key(query: str, intent: str) -> str:
    """Hex sha256 of a query and its intent (NFC): the cache's ``topic``, whatever run asked it."""
    return hashlib.sha256(f"{_nfc(query)}\x00{_nfc(intent)}".encode()).hexdigest()


@dataclass(frozen=True)
class JudgmentKey:
    """Everything a cached judgment depends on. ``shown``: the delimiter-free text shown (a list-level
    call's whole input); ``model``: the model requested; ``context``: in batched mode the batch as shown
    (:func:`batch_context`), since a label can depend on its neighbours."""

    query: str
    intent: str
    shown: str
    provider: str
    model: str
    prompt_sha256: Mapping[str, str]
    schema_sha256: Mapping[str, str]
    render_version: str
    sampling: Mapping[str, Any]
    mode: str
    trial: int = 0
    context: str = ""

    def digest(self) -> str:
        """Hex sha256 of the canonical JSON of :data:`CACHE_VERSION` and every field. Raises ValueError on
        an unknown mode or a negative trial."""
        if self.mode not in CACHE_MODES:
            raise ValueError(f"mode must be one of {', '.join(CACHE_MODES)}, got {self.mode!r}")
        if self.trial < 0:
            raise ValueError("trial must be >= 0")
        material = {
            "cacheVersion": CACHE_VERSION,
            "query": _nfc(self.query),
            "intent": _nfc(self.intent),
            "shown": self.shown,
            "provider": self.provider,
            "model": self.model,
            "promptSha256": dict(self.prompt_sha256),
            "schemaSha256": dict(self.schema_sha256),
            "renderVersion": self.render_version,
            "sampling": dict(self.sampling),
            "mode": self.mode,
            "trial": self.trial,
            "context": self.context,
        }
        blob = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def batch_context(shown_texts: Iterable[str]) -> str:
    """Hex sha256 of the shown texts in the shown order."""
    h = hashlib.sha256()
    for text in shown_texts:
        data = text.encode("utf-8")
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()
