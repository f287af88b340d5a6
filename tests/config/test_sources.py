"""Every setting is validated the same way whatever its source. A value refused from a
flag is refused from ``JUDGE_RUNNER_<NAME>``, ``judge-runner.toml`` and ``[tool.judge-runner]`` of
pyproject.toml, with the same message apart from the name of its source; a value accepted from one is
accepted from all. The bad values are derived from each field of Settings (its type, bounds and choices),
so a setting added later is covered too."""

from __future__ import annotations

import json
import math
import re
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
import click
import pytest

from judge_runner.cli import main
from judge_runner.config import ConfigError, Settings, load_settings
from tests.support.clitools import invoke

NO_FLAG_ONLY = {"weights", "search"}  # tables: config file only


def _kind(name: str) -> Any:
    annotation = Settings.model_fields[name].annotation
    if get_origin(annotation) in (Union, types.UnionType):
        annotation = next(a for a in get_args(annotation) if a is not type(None))
    return annotation


def _bounds(name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for b in Settings.model_fields[name].metadata:
        for key in ("gt", "ge", "lt", "le"):
            if isinstance(b, getattr(annotated_types, key.capitalize())):
                out[key] = getattr(b, key)
    return out


def bad_values(name: str) -> list[Any]:
    """Values (as Python/TOML values) a setting must refuse, from its type, bounds and choices."""
    kind, bounds = _kind(name), _bounds(name)
    if get_origin(kind) is Literal:
        return ["bogus", "", 1, True]
    if kind in (int, float):
        values: list[Any] = ["abc", "", True]
        if kind is int:
            values += [1.5, "1.5", "1e3"]
        else:
            values += [math.nan, math.inf, -math.inf, "nan", "inf", "1e400"]
        if "gt" in bounds:
            values += [bounds["gt"], bounds["gt"] - 1]
        if "ge" in bounds:
            values += [bounds["ge"] - 1]
        if "lt" in bounds:
            values += [bounds["lt"]]
        if "le" in bounds:
            values += [bounds["le"] + 1]
        return values
    if name == "price_per_mtok":
        return ["1", "a,b", "-1,2", "nan,1", "1,inf", "1,2,3"]
    if name == "pg_schema":
        return ["Bad-Schema", "1abc", "x" * 70]
    if name == "db":
        return ["<a folder>"]
    return []


def good_values(name: str) -> list[Any]:
    kind, bounds = _kind(name), _bounds(name)
    if get_origin(kind) is Literal:
        return list(get_args(kind))
    if kind in (int, float):
        low = bounds.get("ge", bounds.get("gt", 0) + (1 if kind is int else 0.5))
        high = bounds.get("le", bounds.get("lt", low + 10) - 1)
        return [kind(low), kind(high)]
    return []


CASES = [(name, value) for name in Settings.model_fields if name not in NO_FLAG_ONLY for value in bad_values(name)]
GOOD = [(name, value) for name in Settings.model_fields if name not in NO_FLAG_ONLY for value in good_values(name)]


def as_flag_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def toml_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value == math.inf else "-inf" if value == -math.inf else repr(value))
    if isinstance(value, int):
        return str(value)
    return json.dumps(value)


def _resolve(value: Any, tmp_path: Path) -> Any:
    if value == "<a folder>":
        folder = tmp_path / "a-folder"
        folder.mkdir(exist_ok=True)
        return str(folder)
    return value


def from_env(name: str, value: Any, tmp_path: Path) -> str:
    env = {f"JUDGE_RUNNER_{name.upper()}": as_flag_text(value)}
    with pytest.raises(ConfigError) as info:
        load_settings(cwd=tmp_path, environ=env)
    return str(info.value)


def from_file(name: str, value: Any, tmp_path: Path, file: str, key_style: str = "-") -> str:
    folder = tmp_path / f"cfg-{file}-{key_style}"
    folder.mkdir(exist_ok=True)
    key = name.replace("_", key_style)
    line = f"{key} = {toml_literal(value)}\n"
    if file == "pyproject.toml":
        (folder / file).write_text('[project]\nname = "x"\n[tool.judge-runner]\n' + line)
    else:
        (folder / file).write_text(line)
    with pytest.raises(ConfigError) as info:
        load_settings(cwd=folder, environ={})
    return str(info.value)


def flag_commands() -> dict[str, list[str]]:
    """For each setting with a flag, a command line that reaches the settings before anything else."""
    preferred = ["evaluate", "generate-and-evaluate", "generate", "search", "index"]
    found: dict[str, list[str]] = {}
    for command in preferred:
        for param in main.commands[command].params:
            if param.name in Settings.model_fields and param.name not in found:
                found[param.name] = [command] + (["x"] if command == "search" else [])
    return found


FLAGS = flag_commands()


def from_flag(name: str, value: Any, tmp_path: Path, monkeypatch) -> str | None:
    if name not in FLAGS:
        return None
    monkeypatch.chdir(tmp_path)  # no config file around
    args = FLAGS[name] + [f"--{name.replace('_', '-')}", as_flag_text(value)]
    if FLAGS[name][0] == "index":
        args.insert(1, str(tmp_path))
    result = invoke(args, env={f"JUDGE_RUNNER_{n.upper()}": None for n in Settings.model_fields})
    assert result.exit_code == 2, (args, result.output)
    return result.output


def _same(message: str, source: str) -> str:
    """The message with the source's name replaced by <source>."""
    assert source in message, (source, message)
    return message.replace(source, "<source>").strip().removeprefix("error: ")


@pytest.mark.parametrize(("name", "value"), CASES, ids=[f"{n}={v!r}" for n, v in CASES])
def test_a_value_refused_from_one_source_is_refused_from_all_with_the_same_message(name, value, tmp_path, monkeypatch):
    value = _resolve(value, tmp_path)
    key = name.replace("_", "-")
    messages = {
        "judge-runner.toml": _same(from_file(name, value, tmp_path, "judge-runner.toml"), f"{key} in judge-runner.toml"),
        "judge-runner.toml (underscores)": _same(
            from_file(name, value, tmp_path, "judge-runner.toml", "_"), f"{name} in judge-runner.toml"
        ),
        "pyproject.toml": _same(from_file(name, value, tmp_path, "pyproject.toml"), f"tool.judge-runner.{key} in pyproject.toml"),
    }
    if value != "":  # an empty environment variable counts as unset (test_empty_environment_variable_is_unset)
        messages["env"] = _same(from_env(name, value, tmp_path), f"JUDGE_RUNNER_{name.upper()}")
    flag = from_flag(name, value, tmp_path, monkeypatch)
    if flag is not None:
        messages["flag"] = _same(flag, f"--{key}")
    assert len(set(messages.values())) == 1, messages
    assert next(iter(messages.values())).startswith("invalid settings: <source>: ")


@pytest.mark.parametrize(("name", "value"), GOOD, ids=[f"{n}={v!r}" for n, v in GOOD])
def test_a_value_accepted_from_one_source_is_accepted_from_all(name, value, tmp_path, monkeypatch):
    from_env_value = getattr(load_settings(cwd=tmp_path, environ={f"JUDGE_RUNNER_{name.upper()}": as_flag_text(value)}), name)
    (tmp_path / "judge-runner.toml").write_text(f"{name} = {toml_literal(value)}\n")
    from_file_value = getattr(load_settings(cwd=tmp_path, environ={}), name)
    from_flags_value = getattr(load_settings({name: as_flag_text(value)}, cwd=tmp_path / "nowhere", environ={}), name)
    assert from_env_value == from_file_value == from_flags_value == value


def test_every_bounded_or_literal_setting_with_a_flag_is_covered():
    assert {
        "timeout",
        "call_deadline",
        "concurrency",
        "count",
        "search_limit",
        "search_mode",
        "provider",
        "backend",
        "min_overall",
        "max_budget_usd",
        "max_budget_tokens",
        "max_file_bytes",
    } <= set(FLAGS)
    assert {n for n, _ in CASES} >= {n for n in FLAGS if _bounds(n) or get_origin(_kind(n)) is Literal}


def test_no_flag_of_a_setting_converts_or_checks_on_its_own():
    """One source of truth: a settings flag is plain text with no callback that could refuse a value."""

    def walk(command: click.Command):
        if isinstance(command, click.Group):
            for sub in command.commands.values():
                yield from walk(sub)
            return
        for param in command.params:
            if param.name in Settings.model_fields:
                yield command.name, param

    for command, param in walk(main):
        if isinstance(param, click.Option) and param.is_flag:
            continue  # an on/off switch carries no value that could be refused
        assert param.type is click.STRING, (command, param.name, param.type)
        # _remember keeps a value for the settings; _repeated turns a repeated option's tuple into a list or None
        assert param.callback is None or param.callback.__name__ in ("_remember", "_repeated"), (command, param.name)


def test_help_shows_the_ranges_and_choices_of_the_settings():
    text = " ".join(invoke(["evaluate", "--help"]).output.split())
    assert "--concurrency INTEGER" in text and "[1<=x<=64]" in text
    assert "--search-mode [hybrid|fts|vector]" in text and "--backend [sqlite|postgres]" in text
    assert "--min-overall FLOAT" in text and "[0<=x<=1]" in text and re.search(r"--timeout FLOAT .*\[x>0\]", text)


def test_issue_examples(tmp_path, monkeypatch):
    """The kind's first members, spelled out: a flag refuses them, so do the variable and the file."""
    for name, value in (("timeout", "inf"), ("concurrency", "0"), ("min_overall", "nan"), ("search_limit", "101")):
        assert "JUDGE_RUNNER_" in from_env(name, value, tmp_path)
    assert "timeout in judge-runner.toml: input should be a finite number (got 'inf')" in from_file(
        "timeout", math.inf, tmp_path, "judge-runner.toml", "_"
    )
    flag = from_flag("timeout", "inf", tmp_path, monkeypatch)
    assert flag is not None and "--timeout: input should be a finite number (got 'inf')" in flag


def test_nested_search_table_is_held_to_the_same_rules(tmp_path):
    (tmp_path / "judge-runner.toml").write_text("[search]\nrrf-k = inf\n")
    with pytest.raises(ConfigError, match=r"search\.rrf-k in judge-runner\.toml: input should be a finite number"):
        load_settings(cwd=tmp_path, environ={})


def test_a_secret_setting_is_never_echoed(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_settings({"dsn": ["postgresql://u:s3cret@h/db"]}, cwd=tmp_path, environ={})
    assert "s3cret" not in str(info.value)


def test_empty_environment_variable_is_unset(tmp_path):
    """The one documented difference: ``JUDGE_RUNNER_X=`` (empty) means "not set", as in most tools."""
    assert load_settings(cwd=tmp_path, environ={"JUDGE_RUNNER_TIMEOUT": "", "JUDGE_RUNNER_BACKEND": ""}).timeout == 60.0


@pytest.mark.parametrize("name", sorted(NO_FLAG_ONLY))
def test_a_table_setting_in_the_environment_is_refused_not_ignored(name, tmp_path):
    with pytest.raises(ConfigError, match=f"JUDGE_RUNNER_{name.upper()}: {name} can be set only in the config file"):
        load_settings(cwd=tmp_path, environ={f"JUDGE_RUNNER_{name.upper()}": '{"relevance": 2}'})
