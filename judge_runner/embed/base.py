"""What every embedder is and shares: :class:`TextEmbedder`, the model's constants, its error, and
:func:`encode_each`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from judge_runner.core.failures import UsageError

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
BATCH_SIZE = 32  # batch sizes measured in docs/builtin-search.md, "Embedders"
ONNX_BATCH_SIZE = 4  # texts sorted by length: smaller batches pad less
OPENVINO_BATCH_SIZE = 16
# An encode call of at most this many characters in all runs on ONE intra-op thread: small inputs lose
# much on shared cores when threads wait for each other (docs/builtin-search.md, "Query speed").
SMALL_INPUT_CHARS = 16_384


class EmbeddingModelError(UsageError, RuntimeError):
    """The model could not be loaded, or the ``embedder`` setting names no embedder: the user's setup,
    exit 2."""


class TextEmbedder(Protocol):
    """An embedder: ``encode(texts)`` gives shape ``(len(texts), dimension)``, float32, rows L2-normalised;
    ``name`` and ``describe()`` are recorded in an index."""

    kind: str
    name: str
    dimension: int

    def encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray: ...

    def describe(self) -> dict[str, Any]: ...


def encode_each(embedder: TextEmbedder, texts: Sequence[str]) -> np.ndarray:
    """``texts`` embedded one at a time, shape ``(len(texts), dimension)``: a padded batch's rows differ from
    lone vectors by float noise (about 3e-7 per component with AVX-512), enough to swap near ties."""
    if not texts:
        return np.zeros((0, int(embedder.dimension)), dtype=np.float32)
    return np.vstack([np.asarray(embedder.encode([text]), dtype=np.float32)[:1] for text in texts])
