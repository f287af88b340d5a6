"""Enforced output: the Anthropic tool a judge call forces is sent with ``strict: true`` (its schema in the
form strict tool use accepts), and every label records the order the model wrote its reply in, read from
the keys as written (``outputOrder`` in the run file), so a reply that put the grade first is known."""

from __future__ import annotations

import pytest

from judge_runner.evaluation.context import QUIET, RunContext
from judge_runner.evaluation.loop import run_evaluation
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.judging.llm_judge import LLMJudge
from judge_runner.judging.requests import LABEL_TOOL, LABELS_TOOL, LIST_TOOL
from judge_runner.llm.anthropic_provider import AnthropicProvider
from judge_runner.llm.base import ChatRequest, ToolSpec, Turn
from judge_runner.llm.budget import Budget
from judge_runner.llm.retry import RetryPolicy
from judge_runner.runs.write import RunWriter, read_run
from tests.support.fakes.fake_llm import DefaultBrain, FakeLLMServer, ToolCall
from tests.support.loop_stubs import StubSearch, queries


class GradeFirst(DefaultBrain):
    """The honest fake judge, writing each label's grade before its reason (what a fallback may do)."""

    def __call__(self, api, body):
        reply = super().__call__(api, body)
        if isinstance(reply, ToolCall) and reply.name == LABEL_TOOL:
            return ToolCall(reply.name, {"relevance": reply.input["relevance"], **reply.input})
        if isinstance(reply, ToolCall) and reply.name == LABELS_TOOL:
            labels = [{"id": item["id"], "relevance": item["relevance"], **item} for item in reply.input["labels"]]
            return ToolCall(reply.name, {"labels": labels})
        return reply


def keywords(schema) -> set[str]:
    """Every key of a JSON Schema, at any depth (property names included)."""
    if isinstance(schema, dict):
        return set(schema) | {k for v in schema.values() for k in keywords(v)}
    if isinstance(schema, list):
        return {k for v in schema for k in keywords(v)}
    return set()


def run(tmp_path, brain, mode="pointwise"):
    """A run of two queries (two results each) judged by Sonnet on the fake: ``(results, request bodies)``."""
    with FakeLLMServer(brain=brain) as server:
        provider = AnthropicProvider("claude-sonnet-4-6", RetryPolicy(max_retries=0), Budget(), 30, "k", server.anthropic_base_url)
        writer = RunWriter(tmp_path)
        ctx = RunContext(LLMJudge(provider), EvaluateOptions(judge_mode=mode), budget=provider.budget, output=QUIET)
        run_evaluation(queries(2), StubSearch(), writer, {"config": {}}, ctx)
        bodies = [r.body for r in server.requests]
    results = [r for line in read_run(writer.path) if line["type"] == "evaluation" for r in line["results"]]
    return results, bodies


@pytest.mark.parametrize("mode", ["pointwise", "batched"])
def test_every_forced_judge_tool_is_strict_and_each_label_says_it_was_written_reason_first(tmp_path, mode):
    results, bodies = run(tmp_path, DefaultBrain(), mode)
    assert len(results) == 4 and {r["outputOrder"] for r in results} == {"reason-first"}
    tools = [tool for body in bodies for tool in body["tools"]]
    assert {t["name"] for t in tools} == {LABEL_TOOL if mode == "pointwise" else LABELS_TOOL, LIST_TOOL}
    for tool in tools:
        assert tool["strict"] is True
        assert not {"minLength", "maxLength", "pattern"} & keywords(tool["input_schema"])  # moved into the descriptions
    label_tool = next(t for t in tools if t["name"] != LIST_TOOL)
    fields = label_tool["input_schema"]["properties"]
    if mode == "batched":
        fields = fields["labels"]["items"]["properties"]
    assert list(fields)[-3:] == ["reason", "injectionSuspected", "relevance"]  # strict output writes them in this order


def test_a_reply_written_grade_first_is_recorded_so(tmp_path):
    results, _ = run(tmp_path, GradeFirst())
    assert {r["outputOrder"] for r in results} == {"grade-first"}
    batched, _ = run(tmp_path / "batched", GradeFirst(), "batched")
    assert {r["outputOrder"] for r in batched} == {"grade-first"}


def test_a_call_that_offers_tools_to_choose_from_is_not_strict():
    provider = AnthropicProvider("claude-sonnet-4-6", RetryPolicy(max_retries=0), Budget(), 30, "k", "http://127.0.0.1:9")
    tools = [ToolSpec(name, "a tool", {"type": "object", "properties": {}, "required": []}) for name in ("read_file", "grep")]
    body = provider.request_body(
        ChatRequest(system="system", turns=[Turn("user", text="explore")], tools=tools, max_tokens=100, cache_system=True)
    )
    assert all("strict" not in tool for tool in body["tools"])
    forced = provider.request_body(
        ChatRequest(
            system="system", turns=[Turn("user", text="grade")], tools=tools[:1], force_tool="read_file", max_tokens=100, cache_system=True
        )
    )
    assert forced["tools"][0]["strict"] is True
