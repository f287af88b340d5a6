"""The judge fingerprint: everything that makes two runs' judgments comparable (issue 14, item 4), the
sampling settings sent, and the circularity check (item 8).

A run records its fingerprint in ``run_start.provenance.judgeFingerprint`` (format version 2); the
model id the API actually returned is known only after the first call, so the run adds it to the
summary (``judgeReturnedModels``) and :func:`comparability_key` reads both. ``trend`` compares two runs
only when their keys are equal. A format-version-1 run has no fingerprint: :func:`legacy_key` rebuilds
the old key (provider, judge model, judge_system.md and judge_user.md hashes), which never equals a
version-2 key, so versions 1 and 2 are never compared with each other.
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
"""Base seed sent where the API takes one (the OpenAI chat API's ``seed``). Any fixed number does; it
is recorded, and the seed of trial t is ``base + t``."""

# which providers accept which sampling fields (llm/ providers; a new provider adds its line)
# (anthropic 2.x's messages.create has no temperature parameter: Claude samples at its own setting, so
# nothing is sent and nothing is recorded)
_ACCEPTS = {"openai": ("temperature", "seed"), "anthropic": (), "offline": ()}


def sampling_settings(provider: str, trial: int = 0, base_seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """The sampling fields to send for ``trial`` (0-based): temperature 0 always, where the API takes it,
    and ``seed = base_seed + trial`` where the API takes a seed. The offline heuristic takes neither
    (``{}``). An unknown provider gets temperature 0 only.

    With no seed (Anthropic, which in SDK 2.x takes no temperature either), repeated trials of a
    pointwise label differ only by the model's own sampling, so there trials measure stability, not a
    seeded spread; batched trials still differ by their shuffles."""
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
"""Trials ``calibrate`` runs by default for a judge whose API takes no temperature (Claude through anthropic
2.x): its labels are draws, and three show how far they move (Krippendorff's alpha across them); UMBRELA
and the DNA prompt were validated at temperature 0."""


def default_trials(provider: str) -> int:
    """``calibrate``'s trials when none are asked for: :data:`UNPINNED_TRIALS` for a model whose sampling
    cannot be pinned (no temperature accepted, :data:`_ACCEPTS`), else 1 (temperature 0, or the offline
    judge, which is deterministic)."""
    accepts = _ACCEPTS.get(provider, ("temperature",))
    return 1 if provider == "offline" or "temperature" in accepts else UNPINNED_TRIALS


@dataclass(frozen=True)
class JudgeFingerprint:
    """What the run's judge was: ``provider``, ``requestedModel``, ``mode`` (pointwise|batched),
    ``trials``, ``sampling`` (trial 0's settings and the base seed, as sent), ``promptSha256`` and
    ``schemaSha256`` of every file sent, ``renderVersion`` (``fence.RENDER_VERSION``), ``heuristic``
    (the offline judge), ``passageRule`` (``search.passages.PASSAGE_RULE``: which text of a document the
    judge is shown; absent in runs before it, which showed the chunk the system matched),
    ``passageEmbedder`` (the model name of the embedder the passages were chosen under; empty before
    ``passages-2``, which chose by words only), ``cacheVersion`` left to the cache. Serialises with :meth:`as_dict` into ``run_start.provenance.judgeFingerprint``."""

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
    """The fingerprint of a run about to start, with the shipped prompts' and schemas' hashes
    (``passage_embedder``: the model name of the command's embedder, which chooses passages;
    ``reasoning_effort``: a reasoning model's, recorded with the sampling as ``reasoningEffort``). Raises
    ValueError on an unknown mode (:func:`~judge_runner.judging.requests.protocol_hashes`) or fewer than 1
    trial."""
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
    """Hex sha256 of a fingerprint dict (as written by :meth:`JudgeFingerprint.as_dict`) plus the model
    ids the API returned during the run (``summary.judgeReturnedModels``; order and repeats ignored).
    ``trials`` is left out: more trials make a label more stable, not different. Two runs are
    comparable only when their keys are equal."""
    data = {k: v for k, v in dict(fingerprint).items() if k not in ("trials", "returnedModels")}
    models = sorted(set(returned_models) | set(fingerprint.get("returnedModels") or ()))
    blob = json.dumps({"formatVersion": 2, **data, "returnedModels": models}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def fingerprint_key(fingerprint: Mapping[str, Any]) -> str:
    """:func:`comparability_key` of a fingerprint without the model ids returned: what the judgment cache keeps
    beside each label (``judge_key``), known before the first call. Two runs whose comparability keys are equal
    have equal fingerprint keys."""
    return comparability_key({k: v for k, v in dict(fingerprint).items() if k != "returnedModels"})


def legacy_key(provenance: Mapping[str, Any]) -> str:
    """The comparability key of a format-version-1 run, from its provenance: provider, judge model and
    the two old judge prompt hashes (what ``trend`` compared before). Prefixed so it can never equal a
    version-2 key."""
    prompts = provenance.get("promptSha256") or {}
    parts = [provenance.get("provider"), provenance.get("judgeModel"), prompts.get("judge_system.md"), prompts.get("judge_user.md")]
    return "v1:" + hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


def judge_is_generator(generator_provider: str | None, generator_model: str | None, judge_provider: str, judge_model: str) -> bool:
    """True when the queries were written by the same model that judges them (same provider and model
    id, case-insensitive): the run must say so, since a judge may favour what its own model expects
    (issue 14, item 8). False when the generator is unknown (a query set from a file)."""
    if not generator_provider or not generator_model:
        return False
    return (generator_provider.lower(), generator_model.lower()) == (judge_provider.lower(), judge_model.lower())
