"""The built-in search's settings, apart so that ``config.py`` imports no search code."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SearchSettings(BaseModel):
    """How the built-in search ranks (defaults measured in docs/builtin-search.md).

    - ``rrf_k``: RRF's k (Cormack, Clarke & Büttcher 2009);
    - ``depth``: chunks each of full-text and vector search contributes before fusion;
    - ``fts_weight`` / ``vector_weight``: per-list RRF weights;
    - ``confidence_threshold``: the honesty gate's cosine, under which an answer without a lexical
      match is not confident;
    - ``snippet_chars``: snippet length in characters;
    - ``external``: the ``[search.external]`` table, never recorded as it is (headers may be secrets).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # every number finite, as in Settings

    rrf_k: float = Field(60.0, ge=0)
    depth: int = Field(30, ge=1, le=1000)
    fts_weight: float = Field(1.5, ge=0)
    vector_weight: float = Field(1.0, ge=0)
    confidence_threshold: float = Field(0.30, ge=-1, le=1)
    snippet_chars: int = Field(400, ge=40, le=2000)
    external: dict[str, Any] | None = None
