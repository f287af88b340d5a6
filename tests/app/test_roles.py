"""The provider registry (judge_runner.llm.registry) and the roles built from it (judge_runner.app.roles)."""

from __future__ import annotations

import pytest

from judge_runner.app.roles import build_roles
from judge_runner.config import ConfigError, Settings, load_settings
from judge_runner.core.models import Query
from judge_runner.judging.heuristic import HeuristicJudge
from judge_runner.judging.labelling import judge_query
from judge_runner.judging.llm_judge import LLMJudge
from judge_runner.llm.base import ChatProvider
from judge_runner.llm.registry import PROVIDERS, detect, get_spec, missing_key
from judge_runner.querygen.agent import LLMQueryWriter
from judge_runner.querygen.heuristic import HeuristicQueryWriter
from judge_runner.querygen.protocol import generate_queries
from judge_runner.search.base import HitScores, SearchAnswer, SearchHit

ANTHROPIC = {"ANTHROPIC_API_KEY": "sk-ant-test"}
OPENAI = {"OPENAI_API_KEY": "sk-test"}
LOCAL = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize(
    ("environ", "name", "reason"),
    [
        ({}, "offline", "no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL is set"),
        (ANTHROPIC, "anthropic", "ANTHROPIC_API_KEY is set"),
        ({**ANTHROPIC, **OPENAI}, "anthropic", "ANTHROPIC_API_KEY is set"),  # the registry's order decides
        (OPENAI, "openai", "OPENAI_API_KEY or OPENAI_BASE_URL is set"),
        (LOCAL, "openai", "OPENAI_API_KEY or OPENAI_BASE_URL is set"),
        ({"ANTHROPIC_API_KEY": ""}, "offline", "no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL is set"),
        ({"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, "offline", "no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL is set"),
    ],
)
def test_auto_detection(environ, name, reason):
    spec, why = detect(environ)
    assert (spec.name, why) == (name, reason)


def test_missing_key_messages():
    assert missing_key(get_spec("anthropic"), {}) == "--provider anthropic needs ANTHROPIC_API_KEY in the environment"
    assert missing_key(get_spec("openai"), {}) == (
        "--provider openai needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server)"
    )
    assert missing_key(get_spec("openai"), LOCAL) is None
    assert missing_key(get_spec("offline"), {}) is None


def test_every_llm_entry_loads_its_class_named_like_the_entry():
    for name, spec in PROVIDERS.items():
        if spec.heuristic:
            with pytest.raises(ValueError):
                spec.load()
            continue
        cls = spec.load()
        assert issubclass(cls, ChatProvider) and cls.name == name and spec.default_model


def test_unknown_provider_names_the_known_ones():
    with pytest.raises(KeyError, match="anthropic, openai, offline"):
        get_spec("gemini")


def test_offline_roles_are_the_heuristics_with_the_injected_embedder(hash_embedder, tmp_path):
    said: list[str] = []
    settings = load_settings({"provider": "offline", "embedder": "hash"}, cwd=tmp_path, environ={})
    roles = build_roles(settings, need_generator=True, say=said.append, environ=ANTHROPIC)
    assert isinstance(roles.writer, HeuristicQueryWriter) and isinstance(roles.judge, HeuristicJudge)
    assert roles.judge.embedder is hash_embedder is roles.embedder  # the setting's, the process's one of its kind
    assert roles.judge.heuristic and roles.writer.heuristic
    assert (roles.judge.name, roles.judge.model) == ("offline", "offline-heuristic-v1")
    assert said == [roles.description] and "HEURISTIC" in roles.description and "(--provider)" in roles.description
    assert build_roles(Settings(provider="offline"), need_generator=False, environ={}).writer is None


def test_auto_without_keys_says_it_chose_the_heuristic(hash_embedder):
    said: list[str] = []
    roles = build_roles(Settings(), need_generator=False, say=said.append, environ={})
    assert roles.judge.heuristic
    assert said == [
        "provider: offline (no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL is set) - a deterministic "
        "HEURISTIC judge, not an LLM; set an API key for real judgments"
    ]


def test_llm_roles_wrap_one_provider_class_with_the_default_and_judge_models():
    said: list[str] = []
    roles = build_roles(Settings(judge_model="claude-haiku-4-5"), need_generator=True, say=said.append, environ=ANTHROPIC)
    assert isinstance(roles.writer, LLMQueryWriter) and isinstance(roles.judge, LLMJudge)
    assert not roles.judge.heuristic and not roles.writer.heuristic
    assert (roles.writer.name, roles.writer.model) == ("anthropic", "claude-sonnet-4-6")
    assert (roles.judge.name, roles.judge.model) == ("anthropic", "claude-haiku-4-5")
    assert roles.judge.provider.budget is roles.budget is roles.writer.provider.budget  # one budget for both phases
    assert said == ["provider: anthropic (ANTHROPIC_API_KEY is set); generator model claude-sonnet-4-6, judge model claude-haiku-4-5"]


def test_judge_only_run_builds_no_writer():
    said: list[str] = []
    settings = Settings(provider="openai")
    roles = build_roles(settings, need_generator=False, say=said.append, environ=LOCAL)
    assert roles.writer is None and roles.judge.model == "gpt-4.1"
    assert said[0] == "provider: openai (the provider setting); generator model -, judge model gpt-4.1"  # chosen in code
    # LOCAL points at a loopback server: one request at a time, and a note on what --timeout counts there
    assert roles.concurrency == 1 and settings.concurrency == 5, "the roles settle the concurrency; the settings stay as given"
    assert any("is a local server" in line for line in said[1:])


def test_missing_key_is_a_config_error():
    with pytest.raises(ConfigError, match="needs ANTHROPIC_API_KEY"):
        build_roles(Settings(provider="anthropic"), need_generator=False, environ=OPENAI)


def test_unknown_price_warns_or_refuses_a_usd_cap():
    said: list[str] = []
    roles = build_roles(Settings(provider="openai", model="my-local-model"), need_generator=True, say=said.append, environ=LOCAL)
    assert roles.budget.cost_known is False
    assert [s for s in said if s.startswith("warning: no price known for the generator model my-local-model")]
    assert [s for s in said if s.startswith("warning: no price known for the judge model my-local-model")]
    with pytest.raises(ConfigError, match="--max-budget-usd cannot be enforced"):
        build_roles(Settings(provider="openai", model="my-local-model", max_budget_usd=1.0), need_generator=False, environ=LOCAL)
    priced = build_roles(
        Settings(provider="openai", model="my-local-model", price_per_mtok="1,2", max_budget_usd=1.0), need_generator=False, environ=LOCAL
    )
    assert priced.judge.provider.price is not None and priced.budget.cost_known


def test_heuristic_judge_follows_the_protocol_and_is_free(hash_embedder):
    judge = HeuristicJudge(hash_embedder)
    hits = [
        SearchHit(
            rank=i,
            source=f"docs/log-rotation-{i}.md",
            anchor="Rotating logs",
            lineStart=1,
            lineEnd=5,
            snippet="We rotate the log files nightly with logrotate.",
            score=1.0 / i,
            scores=HitScores(),
            matchedBy=["fts"],
        )
        for i in (1, 2)
    ]
    query = Query(id="q1", query="rotate log files", queryIntent="i", queryType="keyword", expectedSources=["docs/log-rotation-1.md"])
    judged = judge_query(judge, query, SearchAnswer(query=query.query, mode="hybrid", results=hits, confident=True, latencyMs=1.0))
    assert len(judged.labels) == 2 and judged.labels[0].label == judged.labels[1].label  # same text, same label
    assert judged.scores is not None and set(judged.scores) >= {"relevance", "ranking", "coverage", "snippetQuality", "overall"}
    assert judged.tally.cost_usd == 0.0 and judged.tally.attempts == 0 and judged.tally.usage.calls == 0


def test_heuristic_writer_through_generate_queries(fixtures_root):
    result = generate_queries(HeuristicQueryWriter(), fixtures_root, 6)
    assert len(result.queries) == 6 and result.model == "offline-heuristic-v1" and result.cost_usd == 0.0
    with pytest.raises(ValueError, match="--count"):
        generate_queries(HeuristicQueryWriter(), fixtures_root, 0)


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("flag", "--provider"),
        ("environment", "JUDGE_RUNNER_PROVIDER"),
        ("config file", "provider in judge-runner.toml"),
        ("the Python API", "the provider argument"),
    ],
)
def test_the_provider_line_names_where_the_provider_was_chosen(tmp_path, source, named):
    environ = {"JUDGE_RUNNER_PROVIDER": "offline"} if source == "environment" else {}
    if source == "config file":
        (tmp_path / "judge-runner.toml").write_text('provider = "offline"\n')
    flags = {"provider": "offline"} if source in ("flag", "the Python API") else {}
    namer = (lambda name: f"the {name} argument") if source == "the Python API" else None
    said: list[str] = []
    build_roles(load_settings(flags, cwd=tmp_path, environ=environ, flag_name=namer), need_generator=False, say=said.append, environ={})
    assert said[0].startswith(f"provider: offline ({named}) - a deterministic HEURISTIC judge"), said
