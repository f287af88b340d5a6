"""The judge fingerprint (what makes two runs' judgments comparable), the sampling settings sent, and the
check that the judge did not write the queries. ``trend`` compares two runs only when their
:func:`comparability_key` is equal; format-1 runs get a :func:`legacy_key` that never equals a later one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from judge_runner.core.models import JudgeMode
from judge_runner.judging.fence import RENDER_VERSION
from judge_runner.judging.requests import protocol_hashes
from judge_runner.search.passages import PASSAGE_RULE

DEFAULT_SEED = 20240701
"""Base seed sent where the API takes one; trial t sends ``base + t``."""

# which providers accept which sampling fields (llm/ providers; a new provider adds its line)
# (anthropic 2.x's messages.create has no temperature parameter: Claude samples at its own setting, so
# nothing is sent and nothing is recorded)
_ACCEPTS = {"openai": ("temperature", "seed"), "anthropic": (), "offline": ()}


def sampling_settings(provider: str, trial: int = 0, base_seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The sampling fields for ``trial`` (0-based): temperature 0 and ``seed = base_seed + trial`` where
    the API takes them; an unknown provider gets temperature 0 only."""
    if trial < 0:
        raise ValueError("trial must be >= 0")
    accepts = _ACCEPTS.get(provider, ("temperature",))
    out: dict[str, Any] = {}
    if "temperature" in accepts:
        out["temperature"] = 0
    if "seed" in accepts:
        out["seed"] = base_seed + trial
    return out


UNPINNED_TRIALS = 3
"""``calibrate``'s default trials for a judge that takes no temperature: its labels are draws."""


def default_trials(provider: str) -> int:
    """:data:`UNPINNED_TRIALS` for a provider that takes no temperature, else 1."""
    accepts = _ACCEPTS.get(provider, ("temperature",))
    return 1 if provider == "offline" or "temperature" in accepts else UNPINNED_TRIALS


@dataclass(frozen=True)
class JudgeFingerprint:
    """What the run's judge was, as ``run_start.provenance.judgeFingerprint`` (:meth:`as_dict`).
    ``sampling``: trial 0's settings as sent; ``passageEmbedder``: the embedder passages were chosen under."""

    provider: str
    requestedModel: str
    mode: JudgeMode
    trials: int
    sampling: Mapping[str, Any]
    promptSha256: Mapping[str, str]
    schemaSha256: Mapping[str, str]
    renderVersion: str = RENDER_VERSION
    heuristic: bool = False
    returnedModels: tuple[str, ...] = field(default=())
    passageRule: str = PASSAGE_RULE
    passageEmbedder: str = ""

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["sampling"], data["promptSha256"], data["schemaSha256"] = dict(self.sampling), dict(self.promptSha256), dict(self.schemaSha256)
        data["returnedModels"] = sorted(set(self.returnedModels))
        return data


def build_fingerprint(
    provider: str,
    requested_model: str,
    mode: JudgeMode = "pointwise",
    trials: int = 1,
    base_seed: int = DEFAULT_SEED,
    heuristic: bool = False,
    passage_embedder: str = "",
    reasoning_effort: str | None = None,
) -> JudgeFingerprint:
    """The fingerprint of a run about to start. Raises ValueError on an unknown mode or fewer than 1 trial."""
    if trials < 1:
        raise ValueError("trials must be >= 1")
    prompts, schemas = protocol_hashes(mode)
    sampling = sampling_settings(provider, 0, base_seed)
    if "seed" in sampling:
        sampling = {**sampling, "baseSeed": base_seed}
    if reasoning_effort:
        sampling = {**sampling, "reasoningEffort": reasoning_effort}
    return JudgeFingerprint(
        provider, requested_model, mode, trials, sampling, prompts, schemas, RENDER_VERSION, heuristic, passageEmbedder=passage_embedder
    )


def comparability_key(fingerprint: Mapping[str, Any], returned_models: Iterable[str] = ()) -> str:
    """Hex sha256 of a fingerprint dict without ``trials``, plus the set of model ids the API returned."""
    data = {k: v for k, v in dict(fingerprint).items() if k not in ("trials", "returnedModels")}
    models = sorted(set(returned_models) | set(fingerprint.get("returnedModels") or ()))
    blob = json.dumps({"formatVersion": 2, **data, "returnedModels": models}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def fingerprint_key(fingerprint: Mapping[str, Any]) -> str:
    """:func:`comparability_key` without the returned model ids: the cache's ``judge_key``, known before the
    first call."""
    return comparability_key({k: v for k, v in dict(fingerprint).items() if k != "returnedModels"})


def legacy_key(provenance: Mapping[str, Any]) -> str:
    """The comparability key of a format-1 run, prefixed so it never equals a later key."""
    prompts = provenance.get("promptSha256") or {}
    parts = [provenance.get("provider"), provenance.get("judgeModel"), prompts.get("judge_system.md"), prompts.get("judge_user.md")]
    return "v1:" + hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


def judge_is_generator(generator_provider: str | None, generator_model: str | None, judge_provider: str, judge_model: str) -> bool:
    """True when the same provider and model (case-insensitive) wrote and judge the queries; False when the
    generator is unknown."""
    if not generator_provider or not generator_model:
        return False
    return (generator_provider.lower(), generator_model.lower()) == (judge_provider.lower(), judge_model.lower())
