"""A sentence-transformers model run by ONNX Runtime, pooled and normalised with NumPy as
sentence-transformers does (``sum(h * mask) / max(sum(mask), 1e-9)``, then the L2 norm), its pipeline read
from the model folder. Imports only ``numpy``, ``onnxruntime`` and ``tokenizers``: never torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np


class OnnxModelError(RuntimeError):
    """A pipeline this runner does not reproduce, or a missing file."""


def pipeline_config(model_dir: Path) -> dict[str, Any]:
    """``{"max_seq_length", "normalize", "dimension"}`` from a sentence-transformers folder. Raises
    OnnxModelError unless it is Transformer, mean Pooling and (optionally) Normalize."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
        bert = json.loads((model_dir / "sentence_bert_config.json").read_text(encoding="utf-8"))
        pooling_path = next(model_dir / m["path"] for m in modules if m["type"].endswith(".Pooling"))
        pooling = json.loads((pooling_path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, StopIteration) as exc:
        raise OnnxModelError(f"{model_dir} is not a sentence-transformers folder this runner can reproduce: {exc}") from exc
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
    if kinds[:2] != ["Transformer", "Pooling"] or set(kinds[2:]) - {"Normalize"} or modes != ["pooling_mode_mean_tokens"]:
        raise OnnxModelError(f"{model_dir}: only Transformer + mean Pooling (+ Normalize) is supported, found {kinds} with {modes}")
    return {
        "max_seq_length": int(bert["max_seq_length"]),
        "normalize": "Normalize" in kinds,
        "dimension": int(pooling["word_embedding_dimension"]),
    }


class OnnxSession:
    """One ONNX Runtime session over ``model_path`` with the tokenizer and pooling of ``model_dir``.
    ``threads``: intra-op threads (None: one per core), which sleep rather than spin. Raises
    OnnxModelError when the files cannot be read or ``onnxruntime``/``tokenizers`` are missing.
    """

    def __init__(self, model_path: Path, model_dir: Path, threads: int | None = None):
        config = pipeline_config(model_dir)
        self.dimension, self.normalize = config["dimension"], config["normalize"]
        self._open(model_path, threads)
        self.tokenizer = self.tokenizer_of(model_dir)

    def _open(self, model_path: Path, threads: int | None) -> None:
        """Load the graph :meth:`_infer` runs; sets ``inputs``."""
        try:
            import onnxruntime
        except ImportError as exc:
            raise OnnxModelError(f"the ONNX embedder needs onnxruntime: {exc}") from exc
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or 0
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        try:
            self.session = onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own exception types (a corrupt or unreadable file)
            raise OnnxModelError(f"cannot load the ONNX model {model_path}: {exc}") from exc
        self.inputs = {i.name for i in self.session.get_inputs()}

    @staticmethod
    def tokenizer_of(model_dir: Path) -> Any:
        """The folder's fast tokenizer, truncated at ``max_seq_length`` tokens, not padded. Raises
        OnnxModelError when ``tokenizers`` is missing or the file cannot be read."""
        config = pipeline_config(model_dir)
        try:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        except ImportError as exc:
            raise OnnxModelError(f"the ONNX embedder needs tokenizers: {exc}") from exc
        except Exception as exc:  # tokenizers raises its own Exception for a bad file
            raise OnnxModelError(f"cannot read {model_dir / 'tokenizer.json'}: {exc}") from exc
        tokenizer.enable_truncation(max_length=config["max_seq_length"])
        tokenizer.no_padding()
        return tokenizer

    def _run(self, encodings: list) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = e.attention_mask
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._infer(feed)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        if self.normalize:
            pooled = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return cast(np.ndarray, pooled.astype(np.float32))

    def _infer(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        """``last_hidden_state`` of one padded batch, shape ``(batch, tokens, dimension)``."""
        return cast(np.ndarray, self.session.run(None, feed)[0])

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Shape ``(len(texts), dimension)``, float32, in order; run in batches of similar token length."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch([str(t) for t in texts]) if len(texts) > 1 else [self.tokenizer.encode(str(texts[0]))]
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        for start in range(0, len(order), max(1, batch_size)):
            part = order[start : start + batch_size]
            out[part] = self._run([encodings[i] for i in part])
        return out


def default_threads() -> int | None:
    """``OMP_NUM_THREADS`` when set, else None (one per core)."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None
