"""The provider registry: every provider by name, with what it needs. The ``--provider`` choice, the
settings type, the run file's enum and ``auto`` detection derive from :data:`PROVIDERS`. Imports no SDK.
See docs/extending.md.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast

from judge_runner.llm.base import ChatProvider


@dataclass(frozen=True)
class ProviderSpec:
    """One provider. ``target`` and ``batch_target``: ``"module:Class"`` (None: none); ``base_url_is_enough``:
    a server at ``base_url_env`` needs no key."""

    name: str
    target: str | None
    key_env: tuple[str, ...] = ()
    base_url_env: str | None = None
    base_url_is_enough: bool = False
    default_model: str = ""
    heuristic: bool = False
    batch_target: str | None = None

    @property
    def detect_env(self) -> tuple[str, ...]:
        """Variables any one of which, set, makes ``auto`` choose this provider."""
        return self.key_env + ((self.base_url_env,) if self.base_url_is_enough and self.base_url_env else ())

    def configured(self, environ: Mapping[str, str]) -> bool:
        return self.heuristic or any(environ.get(name) for name in self.detect_env)

    def load(self) -> type[ChatProvider]:
        """The ChatProvider class. Raises ValueError for the heuristic provider."""
        if self.target is None:
            raise ValueError(f"the {self.name} provider has no ChatProvider class")
        module, _, attr = self.target.partition(":")
        return cast(type[ChatProvider], getattr(importlib.import_module(module), attr))

    def load_batches(self) -> type:
        """The batch API backend class. Raises ValueError when the provider has none."""
        if self.batch_target is None:
            raise ValueError(f"the {self.name} provider has no batch API")
        module, _, attr = self.batch_target.partition(":")
        return cast(type, getattr(importlib.import_module(module), attr))


PROVIDERS: dict[str, ProviderSpec] = {
    spec.name: spec
    for spec in (
        ProviderSpec(
            "anthropic",
            "judge_runner.llm.anthropic_provider:AnthropicProvider",
            key_env=("ANTHROPIC_API_KEY",),
            base_url_env="ANTHROPIC_BASE_URL",
            default_model="claude-sonnet-4-6",
            batch_target="judge_runner.llm.anthropic_batches:AnthropicBatches",
        ),
        ProviderSpec(
            "openai",
            "judge_runner.llm.openai_provider:OpenAIProvider",
            key_env=("OPENAI_API_KEY",),
            base_url_env="OPENAI_BASE_URL",
            base_url_is_enough=True,
            default_model="gpt-4.1",
            batch_target="judge_runner.llm.openai_batches:OpenAIBatches",
        ),
        ProviderSpec("offline", None, default_model="offline-heuristic-v1", heuristic=True),
    )
}
"""Every provider, in ``auto``'s order of preference."""

PROVIDER_NAMES: tuple[str, ...] = tuple(PROVIDERS)
HEURISTIC_MODEL: str = PROVIDERS[
    "offline"
].default_model  # "offline-heuristic-v1": the offline roles' model name, recorded as the judge model
PROVIDER_CHOICES: tuple[str, ...] = ("auto", *PROVIDER_NAMES)

if TYPE_CHECKING:
    ProviderChoice = str
else:
    ProviderChoice = Literal[PROVIDER_CHOICES]  # the settings type of ``provider``, derived from the registry


def get_spec(name: str) -> ProviderSpec:
    """The spec of provider ``name``. Raises KeyError naming the known providers."""
    try:
        return PROVIDERS[name]
    except KeyError:
        raise KeyError(f"unknown provider {name!r}; known: {', '.join(PROVIDER_NAMES)}") from None


def detect(environ: Mapping[str, str] | None = None) -> tuple[ProviderSpec, str]:
    """``(spec, reason)`` of the first provider whose variables are set, else the heuristic."""
    environ = os.environ if environ is None else environ
    fallback = None
    for spec in PROVIDERS.values():
        if spec.heuristic:
            fallback = fallback or spec
        elif spec.configured(environ):
            return spec, f"{' or '.join(spec.detect_env)} is set"
    if fallback is None:
        raise LookupError("no provider is configured and none is heuristic")
    every = [name for spec in PROVIDERS.values() for name in spec.detect_env]
    return fallback, f"no {', '.join(every[:-1])} or {every[-1]} is set" if len(every) > 1 else f"no {''.join(every)} is set"


def missing_key(spec: ProviderSpec, environ: Mapping[str, str] | None = None) -> str | None:
    """None when ``spec`` can be used with this environment, else the message saying what to set."""
    environ = os.environ if environ is None else environ
    if spec.configured(environ):
        return None
    keys = " or ".join(spec.key_env)
    if spec.base_url_is_enough and spec.base_url_env:
        return f"--provider {spec.name} needs {keys} (or {spec.base_url_env} for a local OpenAI-compatible server)"
    return f"--provider {spec.name} needs {keys} in the environment"
