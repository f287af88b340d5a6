"""How the built-in search ranks: its settings, a neutral module so that ``config.py`` (which holds
them as ``Settings.search``) imports no search code. Re-exported by :mod:`judge_runner.search.base`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SearchSettings(BaseModel):
    """How the built-in search ranks.

    - ``rrf_k``: RRF's k (Cormack et al. 2009; 60 in the paper and the seed);
    - ``depth``: how many chunks each of full-text and vector search contributes before fusion;
    - ``fts_weight`` / ``vector_weight``: per-list RRF weights. The full-text list weighs 1.5 by
      default (the seed had 1.0): on BEIR SciFact (benchmarks/beir.py, k=60) hybrid nDCG@10 went
      0.719 / 0.722 / 0.728 / 0.733 for weights 1.0 / 1.2 / 1.5 / 2.0, and on the sample fixtures the
      heavier lexical list keeps exact identifiers such as ``DEC-0054`` first; 1.5 takes most of the
      gain without letting BM25 drown the vectors;
    - ``confidence_threshold``: cosine similarity under which an answer with no lexical match (no chunk
      holding most of the query's terms) is not confident: the honesty gate. Tuned on the sample
      fixtures by running the offline generator's on-topic queries and eight off-topic questions
      through hybrid search and recording each answer's best cosine: off-topic answers peaked at 0.24,
      on-topic answers without a lexical match sat at 0.18-0.26, so 0.30 abstains on every off-topic
      question while lexical matches keep the on-topic ones confident;
    - ``snippet_chars``: snippet length in characters;
    - ``external``: the ``[search.external]`` table, a search judge-runner does not run itself
      (``command`` or ``url``, ``headers``, ``fields``, ``timeout``, ``corpus``, ``name``); checked by
      :class:`judge_runner.search.systems.ExternalConfig` and never recorded as it is (header values
      could be secrets): provenance records the adapter's own description.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # every number finite, as in Settings

    rrf_k: float = Field(60.0, ge=0)
    depth: int = Field(30, ge=1, le=1000)
    fts_weight: float = Field(1.5, ge=0)
    vector_weight: float = Field(1.0, ge=0)
    confidence_threshold: float = Field(0.30, ge=-1, le=1)
    snippet_chars: int = Field(400, ge=40, le=2000)
    external: dict[str, Any] | None = None
