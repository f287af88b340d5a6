"""judge_runner.config.load_settings: defaults < file < environment < flags, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge_runner.config import DEFAULT_DB, ConfigError, Settings, load_settings
from tests.support.clitools import invoke


def load(tmp_path: Path, flags=None, env=None) -> Settings:
    return load_settings(flags=flags, cwd=tmp_path, environ=env or {})


# -- defaults -------------------------------------------------------------------------------------


def test_defaults(tmp_path):
    s = load(tmp_path)
    assert s.db == DEFAULT_DB == Path(".judge-runner") / "index.sqlite"
    assert s.provider == "auto"
    assert s.timeout == 60.0
    assert s.call_deadline is None
    assert s.deadline == 240.0
    assert s.max_retries == 3
    assert s.concurrency == 5
    assert s.max_budget_usd is None
    assert s.search_mode == "hybrid"
    assert s.search_limit == 10
    assert s.count == 15
    assert s.weights == {"relevance": 1.0, "ranking": 1.0, "coverage": 1.0, "snippetQuality": 1.0}
    assert s.search.rrf_k == 60.0
    assert s.search.depth == 30


def test_deadline_defaults_to_four_times_timeout(tmp_path):
    assert load(tmp_path, flags={"timeout": 10}).deadline == 40.0
    assert load(tmp_path, env={"JUDGE_RUNNER_TIMEOUT": "2.5"}).deadline == 10.0
    assert load(tmp_path, flags={"timeout": 10, "call_deadline": 7}).deadline == 7.0


# -- the config file ------------------------------------------------------------------------------


def test_judge_runner_toml(tmp_path):
    (tmp_path / "judge-runner.toml").write_text(
        'timeout = 30\nprovider = "offline"\nsearch-limit = 20\ndb = "idx/x.sqlite"\n'
        "[search]\nrrf_k = 10\nfts_weight = 2.0\n"
        "[weights]\nrelevance = 2.0\nranking = 1.0\ncoverage = 1.0\nsnippetQuality = 0.0\n",
        encoding="utf-8",
    )
    s = load(tmp_path)
    assert s.timeout == 30.0
    assert s.deadline == 120.0
    assert s.provider == "offline"
    assert s.search_limit == 20  # hyphenated keys are accepted
    assert s.db == Path("idx/x.sqlite")
    assert s.search.rrf_k == 10.0
    assert s.search.fts_weight == 2.0
    assert s.search.vector_weight == 1.0
    assert s.weights["relevance"] == 2.0 and s.weights["snippetQuality"] == 0.0


def test_pyproject_tool_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.judge-runner]\ntimeout = 20\nconcurrency = 2\n\n[tool.other]\ntimeout = 99\n',
        encoding="utf-8",
    )
    s = load(tmp_path)
    assert s.timeout == 20.0
    assert s.concurrency == 2


def test_pyproject_without_our_table_gives_defaults(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.ruff]\nline-length = 100\n', encoding="utf-8")
    assert load(tmp_path).timeout == 60.0


def test_judge_runner_toml_wins_over_pyproject(tmp_path):
    (tmp_path / "judge-runner.toml").write_text("timeout = 30\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("[tool.judge-runner]\ntimeout = 20\nconcurrency = 2\n", encoding="utf-8")
    s = load(tmp_path)
    assert s.timeout == 30.0
    assert s.concurrency == 5  # pyproject is not read at all when judge-runner.toml exists


def test_file_in_another_folder_is_not_read(tmp_path):
    (tmp_path / "judge-runner.toml").write_text("timeout = 30\n", encoding="utf-8")
    sub = tmp_path / "sub"
    sub.mkdir()
    assert load(sub).timeout == 60.0


# -- precedence -----------------------------------------------------------------------------------


def test_env_overrides_file(tmp_path):
    (tmp_path / "judge-runner.toml").write_text('timeout = 30\nprovider = "offline"\n', encoding="utf-8")
    s = load(tmp_path, env={"JUDGE_RUNNER_TIMEOUT": "15", "JUDGE_RUNNER_DB": "/tmp/env.sqlite"})
    assert s.timeout == 15.0
    assert s.deadline == 60.0
    assert s.db == Path("/tmp/env.sqlite")
    assert s.provider == "offline"  # not overridden


def test_empty_env_value_is_ignored(tmp_path):
    (tmp_path / "judge-runner.toml").write_text("timeout = 30\n", encoding="utf-8")
    assert load(tmp_path, env={"JUDGE_RUNNER_TIMEOUT": ""}).timeout == 30.0


def test_unrelated_env_is_ignored(tmp_path):
    s = load(tmp_path, env={"TIMEOUT": "1", "JUDGE_RUNNER_TIMEOUTS": "2", "judge_runner_timeout": "3"})
    assert s.timeout == 60.0


def test_flags_override_env_and_file(tmp_path):
    (tmp_path / "judge-runner.toml").write_text("timeout = 30\nconcurrency = 3\n", encoding="utf-8")
    env = {"JUDGE_RUNNER_TIMEOUT": "15", "JUDGE_RUNNER_CONCURRENCY": "4"}
    s = load(tmp_path, flags={"timeout": 5.0, "concurrency": None}, env=env)
    assert s.timeout == 5.0
    assert s.concurrency == 4  # a None flag means "not given"


def test_process_environment_is_used_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_RUNNER_TIMEOUT", "12")
    assert load_settings(cwd=tmp_path).timeout == 12.0


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fragments"),
    [
        ({"flags": {"timeout": -1}}, ["timeout", "greater than 0"]),
        ({"flags": {"timeout": 0}}, ["timeout"]),
        ({"env": {"JUDGE_RUNNER_TIMEOUT": "soon"}}, ["JUDGE_RUNNER_TIMEOUT", "soon"]),
        ({"flags": {"provider": "gemini"}}, ["provider"]),
        ({"flags": {"search_mode": "semantic"}}, ["--search-mode"]),
        ({"flags": {"concurrency": 0}}, ["concurrency"]),
        ({"env": {"JUDGE_RUNNER_MAX_RETRIES": "11"}}, ["JUDGE_RUNNER_MAX_RETRIES"]),
        ({"flags": {"count": 0}}, ["count"]),
        ({"flags": {"max_budget_usd": 0}}, ["--max-budget-usd"]),
        ({"flags": {"call_deadline": -5}}, ["--call-deadline"]),
        ({"flags": {"weights": {"relevance": 0, "ranking": 0, "coverage": 0, "snippetQuality": 0}}}, ["weights"]),
        ({"flags": {"weights": {"speed": 1.0}}}, ["speed"]),
    ],
)
def test_invalid_values_raise_config_error_naming_the_source(tmp_path, kwargs, fragments):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, **kwargs)
    message = str(info.value)
    assert message.startswith("invalid settings:")
    for fragment in fragments:
        assert fragment in message


def test_unknown_key_in_file_is_an_error(tmp_path):
    (tmp_path / "judge-runner.toml").write_text("timeuot = 30\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert "timeuot" in str(info.value)


def test_unknown_search_key_in_file_is_an_error(tmp_path):
    (tmp_path / "judge-runner.toml").write_text("[search]\nrrf = 30\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert "search.rrf" in str(info.value)


def test_wrong_type_in_file_is_an_error(tmp_path):
    (tmp_path / "judge-runner.toml").write_text('concurrency = "many"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert "concurrency" in str(info.value)


@pytest.mark.parametrize("name", ["judge-runner.toml", "pyproject.toml"])
def test_broken_toml_is_a_config_error(tmp_path, name):
    (tmp_path / name).write_text("timeout = = 3\n[unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load(tmp_path)
    assert "cannot read the config file" in str(info.value)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_hyphenated_keys_in_the_search_table(tmp_path):
    # top-level keys accept hyphens (search-limit); the [search] table must behave the same
    (tmp_path / "judge-runner.toml").write_text("[search]\nrrf-k = 30\nvector-weight = 0.5\n", encoding="utf-8")
    s = load(tmp_path)
    assert s.search.rrf_k == 30.0
    assert s.search.vector_weight == 0.5


def test_partial_weights_keep_the_other_dimensions_at_one(tmp_path):
    (tmp_path / "judge-runner.toml").write_text("weights = {relevance = 2}\n")
    settings = load_settings(cwd=tmp_path, environ={})
    assert settings.weights == {"relevance": 2.0, "ranking": 1.0, "coverage": 1.0, "snippetQuality": 1.0}


def test_min_overall_from_env_and_file(tmp_path):
    (tmp_path / "judge-runner.toml").write_text("min_overall = 0.6\n")
    assert load_settings(cwd=tmp_path, environ={}).min_overall == 0.6
    assert load_settings(cwd=tmp_path, environ={"JUDGE_RUNNER_MIN_OVERALL": "0.7"}).min_overall == 0.7
    with pytest.raises(ConfigError):
        load_settings(cwd=tmp_path, environ={"JUDGE_RUNNER_MIN_OVERALL": "nan"})


@pytest.mark.parametrize(
    "dsn,label",
    [
        ("postgresql://judge:s3cret@127.0.0.1:5432/kb", "postgresql://judge@127.0.0.1:5432/kb"),
        ("host=db.internal user=judge password=s3cret dbname=kb", "postgresql://judge@db.internal/kb"),
        ("postgresql://127.0.0.1/kb", "postgresql://127.0.0.1/kb"),
    ],
)
def test_postgres_dsn_never_shown_with_its_password(dsn, label):
    settings = load_settings({"backend": "postgres"}, environ={"DATABASE_URL": dsn})
    assert settings.dsn == dsn and settings.index_label == label and "s3cret" not in settings.index_label


# -- choice settings (flag, environment, config file): one spelling rule for all (a new user's trial: `--embedder HASH` was accepted, `--search-mode
# HYBRID` refused, and `hybrid,,fts` silently read as hybrid,fts) ----------------------------------------------


@pytest.mark.parametrize(
    ("flags", "field", "value"),
    [
        ({"search_mode": " HYBRID "}, "search_mode", "hybrid"),
        ({"search_mode": "Fts, VECTOR"}, "search_modes", ["fts", "vector"]),
        ({"provider": "OpenAI"}, "provider", "openai"),
        ({"backend": "SQLite"}, "backend", "sqlite"),
        ({"embedder": "HASH"}, "embedder", "hash"),
    ],
)
def test_every_choice_setting_accepts_any_case_and_surrounding_spaces(tmp_path, flags, field, value):
    assert getattr(load(tmp_path, flags=flags), field) == value


@pytest.mark.parametrize(
    ("source", "value"),
    [("flags", "hybrid,,fts"), ("flags", "fts,"), ("env", ",vector")],
)
def test_an_empty_mode_between_commas_is_refused_naming_the_source(tmp_path, source, value):
    kwargs = {"flags": {"search_mode": value}} if source == "flags" else {"env": {"JUDGE_RUNNER_SEARCH_MODE": value}}
    with pytest.raises(ConfigError) as info:
        load(tmp_path, **kwargs)
    message = str(info.value)
    assert "an empty mode between commas" in message and repr(value) in message, message
    assert ("--search-mode" if source == "flags" else "JUDGE_RUNNER_SEARCH_MODE") in message, message


def test_the_search_commands_own_mode_option_takes_any_case_too(tmp_path):
    # a new user's trial: `search "x" --mode FTS` was refused ("is not one of") while --search-mode FTS was taken
    result = invoke(["search", "x", "--mode", "FTS", "--db", str(tmp_path / "none.sqlite")])
    assert "is not one of" not in result.output and "Invalid value for '--mode'" not in result.output, result.output
