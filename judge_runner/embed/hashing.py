"""The hashing embedder (kind ``hash``), for tests only: its vectors carry lexical overlap, no meaning."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from judge_runner.core.textproc import cjk_bigrams
from judge_runner.embed.base import BATCH_SIZE, DIMENSION


class HashEmbedder:
    """Feature hashing (Weinberger et al. 2009, "Feature Hashing for Large Scale Multitask Learning") of a
    text's words (weight 1.0) and their character trigrams (0.5) into ``dimension`` buckets by BLAKE2b, the
    same in every process. Rows have length 1; a text with no word gets the vector of ``"<empty>"``.
    """

    name = "hash-384-v1"
    kind = "hash"

    def __init__(self, dimension: int = DIMENSION) -> None:
        if dimension < 1:
            raise ValueError("dimension must be >= 1")
        self.dimension = dimension

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.name, "backend": "feature hashing", "dimension": self.dimension}

    def _features(self, text: str) -> list[tuple[str, float]]:
        words = [w.lower() for w in cjk_bigrams(text).split()]
        words = ["".join(c for c in w if c.isalnum()) for w in words]
        words = [w for w in words if w]
        if not words:
            return [("<empty>", 1.0)]
        features = [(f"w:{w}", 1.0) for w in words]
        for w in words:
            padded = f" {w} "
            features += [(f"c:{padded[i : i + 3]}", 0.5) for i in range(len(padded) - 2)]
        return features

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimension, dtype=np.float64)
        for feature, weight in self._features(text):
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=9).digest()
            bucket = int.from_bytes(digest[:8], "big") % self.dimension
            vector[bucket] += weight if digest[8] & 1 else -weight
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:  # features that cancelled out exactly: fall back to the empty text's vector
            return self._vector("")
        return vector / norm

    def encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray:  # noqa: ARG002 - same signature as MiniLM
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack([self._vector(t) for t in texts]).astype(np.float32)
