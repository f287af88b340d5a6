"""Reasoning models (gpt-5, the o-series): the judge sends their reasoning effort explicitly (low by default), gives
their reasoning room in each call's token limit, and the dry run prices the reasoning they are assumed to do; a
model whose price or reasoning the product cannot know is named before the run."""

from __future__ import annotations

import json

import pytest

from judge_runner.app.roles import build_roles
from judge_runner.config import load_settings
from judge_runner.estimate.costs import ModelEstimate, RecordingJudge
from judge_runner.judging.fence import render_document
from judge_runner.judging.fingerprint import build_fingerprint
from judge_runner.judging.llm_judge import JUDGE_MAX_TOKENS, LABEL_MAX_TOKENS, LLMJudge
from judge_runner.judging.requests import ListItem
from judge_runner.llm.budget import Budget
from judge_runner.llm.openai_provider import OpenAIProvider
from judge_runner.llm.pricing import price_for, reasoning_tokens, reasons, unsized
from judge_runner.llm.retry import RetryPolicy
from tests.support.clitools import invoke
from tests.support.fakes.fake_llm import FakeLLMServer

DOC = render_document("runbooks/backup.md", "Rotation", "Generate a new key, re-encrypt the backups, update the secret.")


def judge_on(server: FakeLLMServer, model: str, effort: str | None = None) -> LLMJudge:
    provider = OpenAIProvider(model, RetryPolicy(max_retries=0), Budget(), 30, "k", server.openai_base_url)
    if effort is not None:
        provider.reasoning_effort = effort
    return LLMJudge(provider)


def limit(body: dict) -> int:
    return body.get("max_completion_tokens") or body["max_tokens"]


@pytest.mark.parametrize("effort", [None, "medium"])
def test_a_reasoning_judge_is_sent_its_effort_and_a_limit_with_room_to_reason(effort):
    with FakeLLMServer() as server:
        judge = judge_on(server, "gpt-5", effort)
        judge.label_one("rotate backup keys", "the steps", DOC, {})
        judge.list_verdict("rotate backup keys", "the steps", [], [ListItem(DOC, 3, "answers")], {})
        label, verdict = (r.body for r in server.requests)
    sent = effort or "low"
    allowance = reasoning_tokens(sent)[1]
    for body in (label, verdict):
        assert body["reasoning_effort"] == sent and "temperature" not in body
    assert limit(label) == LABEL_MAX_TOKENS + allowance and limit(verdict) == JUDGE_MAX_TOKENS + allowance
    assert judge.cache_model == f"gpt-5+effort-{sent}"  # another effort is another judgment-cache entry
    assert build_fingerprint("openai", "gpt-5", reasoning_effort=judge.reasoning_effort).sampling["reasoningEffort"] == sent


def test_a_model_that_does_not_reason_keeps_temperature_zero_and_its_limits():
    with FakeLLMServer() as server:
        judge = judge_on(server, "gpt-4.1")
        judge.label_one("rotate backup keys", "the steps", DOC, {})
        (body,) = (r.body for r in server.requests)
    assert body["temperature"] == 0 and "reasoning_effort" not in body and limit(body) == LABEL_MAX_TOKENS
    assert judge.reasoning_effort is None and judge.cache_model == "gpt-4.1"


def test_the_estimate_prices_the_reasoning_of_a_reasoning_model():
    def planned(model: str, effort: str = "low") -> dict:
        judge = RecordingJudge("openai", model, effort=effort)
        for n in range(3):
            judge.label_one(f"query {n}", "the steps", DOC, {})
        return ModelEstimate("openai", model, price_for(model), calls=list(judge.calls)).figures()

    plain, thinking, harder = planned("gpt-4.1"), planned("gpt-5"), planned("gpt-5", "high")
    assert plain["reasoningTokens"] == 0 and thinking["reasoningTokens"] == 3 * reasoning_tokens("low")[0]
    assert thinking["outputTokens"] == plain["outputTokens"] + thinking["reasoningTokens"]
    assert thinking["worstOutputTokens"] == 3 * (LABEL_MAX_TOKENS + reasoning_tokens("low")[1])
    assert harder["outputTokens"] > thinking["outputTokens"] and harder["worstOutputTokens"] > thinking["worstOutputTokens"]
    gpt5 = price_for("gpt-5")
    assert thinking["costUsd"]["sync"]["expected"] == pytest.approx(
        (thinking["inputTokens"] * gpt5.input + thinking["outputTokens"] * gpt5.output) / 1e6, abs=1e-6
    )


def test_which_models_reason_and_which_cannot_be_sized():
    assert reasons("gpt-5") and reasons("gpt-5-mini") and reasons("o4-mini") and reasons("o3-2025-04-16")
    assert reasons("gpt-4.1") is False and reasons("claude-sonnet-4-6") is False and reasons("gpt-4o-2024-08-06") is False
    assert reasons("qwen3:8b") is None
    assert unsized("gpt-5") is None
    assert "no price" in unsized("o3") and "reasons" not in unsized("o3")
    said = unsized("qwen3:8b")
    assert "no price" in said and "unknown whether it reasons" in said


@pytest.mark.hash_embedder
def test_a_model_the_product_cannot_price_or_size_is_named_before_the_run(tmp_path, hash_fixtures_db):
    said: list[str] = []
    settings = load_settings({"provider": "openai", "judge_model": "qwen3:8b"}, cwd=tmp_path, environ={})
    build_roles(settings, False, said.append, environ={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    named = [line for line in said if line.startswith("warning:") and "qwen3:8b" in line]
    assert any("no price known" in line for line in named) and any("unknown whether it reasons" in line for line in named)
    # and by the dry run, before anything is sent
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps({"queries": [{"id": "q1", "query": "rotate keys", "queryIntent": "steps", "queryType": "keyword"}]}))
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "JUDGE_RUNNER_EMBEDDER": "hash"}
    args = ["evaluate", "--queries", str(queries), "--db", str(hash_fixtures_db), "--provider", "openai", "--judge-model", "qwen3:8b"]
    result = invoke([*args, "--dry-run"], env)
    assert result.exit_code == 0, result.output
    assert "warning: openai/qwen3:8b: no price is known" in result.output and "unknown whether it reasons" in result.output
