"""The shipped prompt templates and JSON Schemas: inside the package in a wheel (``judge_runner/_data/``), else
the checkout's top-level ``prompts/`` and ``schemas/``."""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, cast


class ResourceNotFound(FileNotFoundError):
    """A prompt or schema file is missing from both the package and the checkout."""


def _resource_dir(kind: str) -> Path:
    packaged = resources.files("judge_runner").joinpath("_data", kind)
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[2] / kind  # judge_runner/core/resources.py -> the checkout
    if checkout.is_dir():
        return checkout
    raise ResourceNotFound(f"cannot find the {kind}/ folder inside the package or beside it; reinstall judge-runner")


def resource_dir(kind: str) -> Path:
    """Folder holding ``kind`` ("prompts" or "schemas"). Raises ResourceNotFound."""
    return _resource_dir(kind)


@cache
def load_prompt(name: str) -> str:
    """Text of ``prompts/<name>`` (e.g. ``"judge_label_system.md"``). Raises ResourceNotFound."""
    path = _resource_dir("prompts") / name
    if not path.is_file():
        raise ResourceNotFound(f"prompt template {name!r} is missing from {path.parent}")
    return path.read_text(encoding="utf-8")


def prompt_sha256(name: str) -> str:
    """Hex sha256 of a prompt template's UTF-8 bytes, recorded in each run's provenance."""
    return hashlib.sha256(load_prompt(name).encode("utf-8")).hexdigest()


@cache
def _load_schema_text(name: str) -> str:
    path = _resource_dir("schemas") / name
    if not path.is_file():
        raise ResourceNotFound(f"schema {name!r} is missing from {path.parent}")
    return path.read_text(encoding="utf-8")


def load_schema(name: str) -> dict[str, Any]:
    """A fresh copy of ``schemas/<name>`` as a dict (callers may pin counts in it). Raises ResourceNotFound."""
    return cast(dict[str, Any], json.loads(_load_schema_text(name)))


def pinned_schema(name: str, array_property: str, count: int | None) -> dict[str, Any]:
    """``schemas/<name>`` ready to send to a model: no ``$schema``/``$id``/``title``, and the array
    ``array_property`` pinned to exactly ``count`` items unless ``count`` is None. Raises ResourceNotFound."""
    schema = load_schema(name)
    for key in ("$schema", "$id", "title"):
        schema.pop(key, None)
    if count is not None:
        schema["properties"][array_property]["minItems"] = count
        schema["properties"][array_property]["maxItems"] = count
    return schema
