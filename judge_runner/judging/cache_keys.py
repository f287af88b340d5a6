"""What a cached judgment is found by: the key of everything that could change it (:class:`JudgmentKey`), the
context of a batched call (:func:`batch_context`), and the query a label is about (:func:`topic_key`).
:mod:`judge_runner.judging.cache` stores judgments under these keys."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from judge_runner.core.models import JUDGE_MODES

CACHE_VERSION = 1
"""Bump when the meaning of a stored judgment changes (a new label scale, a new key field): old entries
then simply stop matching, and ``prune`` can drop them."""

CACHE_MODES: tuple[str, ...] = (*JUDGE_MODES, "list")  # a cached judgment is a label of one mode, or a list verdict


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def topic_key(query: str, intent: str) -> str:
    """Hex sha256 of a query and its intent (NFC) as the judge was given them: what the cache's ``topic``
    column holds, so one query's labels can be found whatever run or query set asked it."""
    return hashlib.sha256(f"{_nfc(query)}\x00{_nfc(intent)}".encode()).hexdigest()


@dataclass(frozen=True)
class JudgmentKey:
    """Everything a cached judgment depends on.

    - ``query``, ``intent``: as given to the judge (NFC-normalised when hashed);
    - ``shown``: the exact text shown for the result, without the per-call delimiter
      (``fence.RenderedDocument.shown``); for a list-level call, the whole list-level input;
    - ``provider``, ``model``: the provider name and the model REQUESTED (the one returned is part of
      the value, since it is only known after the call);
    - ``prompt_sha256`` / ``schema_sha256``: ``{file name: sha256}`` of every prompt and schema sent;
    - ``render_version``: ``fence.RENDER_VERSION``;
    - ``sampling``: e.g. ``{"temperature": 0, "seed": 7}`` (values as sent; absent keys were not sent);
    - ``mode``: ``"pointwise"``, ``"batched"`` or ``"list"``; ``trial``: 0-based trial number;
    - ``context``: what else the judge saw that could change this label: in batched mode the sha256 of
      the batch as shown (every result's ``shown`` text in the shown order), since a label can depend on
      its neighbours; empty in pointwise mode.
    """

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
        """Hex sha256 of the canonical JSON of :data:`CACHE_VERSION` and every field (sorted keys, no
        whitespace, non-ASCII kept as UTF-8). Raises ValueError on an unknown mode or a negative trial."""
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
    """The ``context`` of a batched judgment: hex sha256 of the shown texts in the shown order."""
    h = hashlib.sha256()
    for text in shown_texts:
        data = text.encode("utf-8")
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()
