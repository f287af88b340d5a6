"""What every embedder is and shares: the :class:`TextEmbedder` protocol, the model's constants, the error
a user's setup raises, and :func:`encode_each` (texts embedded one at a time).

The embedders themselves are :mod:`judge_runner.embed.minilm` (torch, ONNX Runtime, OpenVINO) and
:mod:`judge_runner.embed.hashing` (tests); which kinds exist, and which one a command uses, is
:mod:`judge_runner.embed.registry`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from judge_runner.core.failures import UsageError

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
BATCH_SIZE = 32  # 47 passages/s on this 2-core machine; 64 was no faster (ENVIRONMENT.md)
# ONNX Runtime's batches: the texts are sorted by length first, so smaller batches pad less, and its int8
# kernels gain from that. SciFact chunks, the int8 model, side by side in three sittings on this 2-core
# machine: 4 per batch 76-77 chunks/s, 8 per batch 70-75, 16 per batch 63-65, 32 per batch 58.
ONNX_BATCH_SIZE = 4
# OpenVINO's bf16 kernels gain from larger batches: SciFact chunks side by side on this 2-core machine, 16 per
# batch 64.5 chunks/s, 4 per batch 56.8, 32 or 64 per batch 56 (the int8 ONNX Runtime model beside: 52-55).
OPENVINO_BATCH_SIZE = 16
# An encode call of at most this many characters in all (queries: a run's whole query set is a few
# thousand) runs on ONE intra-op thread. Small inputs gain nothing from torch's second thread and lose
# much when the cores are shared: its threads meet at a barrier after every operation, and a thread
# descheduled by another process holds the others there. Measured on this 2-core machine (load 5-7 from
# other work): 13 queries in one call 0.10 s on one thread vs 0.42-0.90 s on two; one query 0.025 s vs
# 0.10-0.14 s; beside 2 CPU-bound processes 0.29 s vs 1.43 s. Larger inputs (indexing: batches of 32
# passages) keep torch's default.
SMALL_INPUT_CHARS = 16_384


class EmbeddingModelError(UsageError, RuntimeError):
    """The embedding model could not be loaded (a missing package, a cache folder that cannot be written),
    or the ``embedder`` setting names no embedder: the user's setup, not a bug, so exit 2 with the
    message as is (:class:`judge_runner.core.failures.UsageError`)."""


class TextEmbedder(Protocol):
    """What the search, the heuristic judge and the query review need: a ``kind`` (the registry's name for
    it, :mod:`judge_runner.embed.registry`), a model ``name`` (recorded in an index), its ``dimension``
    (384 for MiniLM), ``encode(texts) -> np.ndarray`` of shape ``(len(texts), dimension)``, float32, rows
    L2-normalised, and ``describe()``: what an index records about it."""

    kind: str
    name: str
    dimension: int

    def encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray: ...

    def describe(self) -> dict[str, Any]: ...


def encode_each(embedder: TextEmbedder, texts: Sequence[str]) -> np.ndarray:
    """``texts`` embedded one at a time (each in a batch of one): shape ``(len(texts), dimension)``,
    float32. Each row is a function of its own text and the model, never of the other texts: rows of a
    padded batch differ from lone vectors by float noise (about 3e-7 per component on a CPU with
    AVX-512, whose kernels depend on the batch's shape), enough to swap near-tied documents or move a
    score across a grade threshold. Used wherever a result must not depend on what shares its call:
    query vectors (:mod:`judge_runner.search.hybrid`) and the heuristic judge. Raises what
    ``embedder.encode`` raises."""
    if not texts:
        return np.zeros((0, int(embedder.dimension)), dtype=np.float32)
    return np.vstack([np.asarray(embedder.encode([text]), dtype=np.float32)[:1] for text in texts])
