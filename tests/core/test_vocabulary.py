"""One vocabulary: query types, search modes and provider names are defined once (models.py and the
provider registry); the click choices, the settings types and the JSON Schemas' enums agree with them."""

from __future__ import annotations

import typing

import click
import pytest

from judge_runner import cli
from judge_runner.config import Settings
from judge_runner.core.models import QUERY_TYPES, SEARCH_MODES, Query
from judge_runner.core.resources import load_schema
from judge_runner.llm.registry import PROVIDER_CHOICES, PROVIDER_NAMES, PROVIDERS
from judge_runner.search.base import SearchAnswer


def _choices(command: click.Command, option: str) -> tuple[str, ...]:
    """The values an option offers: a click Choice's, or (a settings option, validated by Settings) the
    values its shell completion offers, which must also be the ones its help shows."""
    param = next(p for p in command.params if p.name == option)
    if isinstance(param.type, click.Choice):
        return tuple(param.type.choices)
    offered = tuple(item.value for item in param.shell_complete(click.Context(command), ""))
    assert param.metavar == f"[{'|'.join(offered)}]"
    return offered


def test_query_type_enums_in_the_schemas_equal_models():
    item = load_schema("query_set.schema.json")["properties"]["queries"]["items"]
    assert tuple(item["properties"]["queryType"]["enum"]) == QUERY_TYPES
    assert tuple(load_schema("evaluation.schema.json")["properties"]["queryType"]["enum"]) == QUERY_TYPES
    assert typing.get_args(Query.model_fields["queryType"].annotation) == QUERY_TYPES


def test_search_mode_enum_in_the_schema_equals_models():
    assert tuple(load_schema("evaluation.schema.json")["properties"]["searchMode"]["enum"]) == SEARCH_MODES
    assert typing.get_args(SearchAnswer.model_fields["mode"].annotation) == SEARCH_MODES
    assert typing.get_args(Settings.model_fields["search_mode"].annotation) == SEARCH_MODES


def test_provider_enum_in_the_schema_equals_the_registry():
    schema = load_schema("run_start.schema.json")
    provenance = schema["properties"]["provenance"]
    # generated from the pydantic models: the block is a $defs entry, possibly behind anyOf [ref, null]
    ref = next((b["$ref"] for b in [provenance, *provenance.get("anyOf", [])] if "$ref" in b), None)
    if ref is not None:
        provenance = schema["$defs"][ref.rsplit("/", 1)[-1]]
    provenance = provenance["properties"]
    assert tuple(provenance["provider"]["enum"]) == PROVIDER_NAMES
    assert PROVIDER_CHOICES == ("auto", *PROVIDER_NAMES)
    assert typing.get_args(Settings.model_fields["provider"].annotation) == PROVIDER_CHOICES


@pytest.mark.parametrize("command", ["generate", "evaluate", "generate-and-evaluate", "weekly"])
def test_cli_provider_choice_is_the_registry(command):
    cmd = cli.main.commands[command]
    assert _choices(cmd, "provider") == PROVIDER_CHOICES


def test_cli_search_mode_choices_are_models():
    assert _choices(cli.main.commands["search"], "mode") == SEARCH_MODES
    assert _choices(cli.main.commands["evaluate"], "search_mode") == SEARCH_MODES


def test_cli_model_help_names_the_registry_defaults():
    help_text = next(p for p in cli.main.commands["generate"].params if p.name == "model").help
    for spec in PROVIDERS.values():
        if not spec.heuristic:
            assert spec.default_model in help_text
