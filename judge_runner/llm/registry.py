"""The provider registry: every provider judge-runner knows, by name, with what it needs.

Adding a provider is one new file in this package (a :class:`~judge_runner.llm.base.ChatProvider`
subclass with ``_send`` and ``classify``, constructed as ``cls(model, retry, budget, timeout_s,
api_key=None, base_url=None)``) plus one :class:`ProviderSpec` in :data:`PROVIDERS`. Everything
else is derived from here: the ``--provider`` click choice (:data:`PROVIDER_CHOICES`), the settings type
(:data:`ProviderChoice` in ``config.py``), the ``provider`` enum of ``schemas/run_start.schema.json``
(a test proves it equals :data:`PROVIDER_NAMES`), ``auto`` detection (:func:`detect`, in the order of
:data:`PROVIDERS`) and the key check (:func:`missing_key`). Roles are built from it by
:func:`judge_runner.app.roles.build_roles`.

This module imports no SDK: a provider's class is imported only when :meth:`ProviderSpec.load` is called.
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
    """One provider.

    ``name``: what ``--provider`` and the run file's ``provenance.provider`` say; ``target``:
    ``"module:Class"`` of its ChatProvider, None for the heuristic (no LLM); ``key_env``: environment
    variables holding its API key; ``base_url_env``: the variable pointing it at another server;
    ``base_url_is_enough``: a server at ``base_url_env`` needs no key (local OpenAI-compatible servers);
    ``default_model``: the model used without ``--model``; ``heuristic``: its roles are the offline
    heuristics, labelled as such wherever their results appear; ``batch_target``: ``"module:Class"`` of
    its batch API backend (:class:`judge_runner.llm.batch_api.BatchBackend`, for ``--batch``), None when it
    has none.
    """

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
        """Variables any one of which, set and non-empty, makes ``auto`` choose this provider."""
        return self.key_env + ((self.base_url_env,) if self.base_url_is_enough and self.base_url_env else ())

    def configured(self, environ: Mapping[str, str]) -> bool:
        """Whether the environment holds what this provider needs (always true for the heuristic)."""
        return self.heuristic or any(environ.get(name) for name in self.detect_env)

    def load(self) -> type[ChatProvider]:
        """The ChatProvider class (imports its module). Raises ValueError for the heuristic provider."""
        if self.target is None:
            raise ValueError(f"the {self.name} provider has no ChatProvider class")
        module, _, attr = self.target.partition(":")
        return cast(type[ChatProvider], getattr(importlib.import_module(module), attr))

    def load_batches(self) -> type:
        """The batch API backend class (imports its module). Raises ValueError when the provider has none."""
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
"""Every provider, in ``auto``'s order of preference (the heuristic last)."""

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
    """``auto``: the first provider whose variables are set, else the heuristic; returns ``(spec,
    reason)``, the reason fit for the stderr line that says loudly what was chosen (e.g.
    ``"ANTHROPIC_API_KEY is set"``)."""
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
    """None when ``spec`` can be used with this environment, else the message saying what to set (e.g.
    ``"--provider anthropic needs ANTHROPIC_API_KEY in the environment"``)."""
    environ = os.environ if environ is None else environ
    if spec.configured(environ):
        return None
    keys = " or ".join(spec.key_env)
    if spec.base_url_is_enough and spec.base_url_env:
        return f"--provider {spec.name} needs {keys} (or {spec.base_url_env} for a local OpenAI-compatible server)"
    return f"--provider {spec.name} needs {keys} in the environment"
