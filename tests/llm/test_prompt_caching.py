"""Prompt caching measured and priced: the judge's cacheable layout, cache
reads and writes read from both providers' usage and priced, and the summary's cachedInputShare,
cacheSavedUsd, judgedQueries and costPerJudgedQueryUsd."""

from __future__ import annotations

import json

import jsonschema
import pytest

from judge_runner.app.console import cost_line
from judge_runner.core.resources import load_schema
from judge_runner.estimate.costs import ModelEstimate, RecordingJudge, caching_note
from judge_runner.evaluation.context import QUIET, RunContext
from judge_runner.evaluation.loop import run_evaluation
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.fence import render_document
from judge_runner.judging.llm_judge import TOOL_DESCRIPTIONS, LLMJudge
from judge_runner.judging.requests import ListItem, batched_request, list_request, pointwise_request
from judge_runner.llm.anthropic_provider import AnthropicProvider
from judge_runner.llm.budget import Budget
from judge_runner.llm.openai_provider import OpenAIProvider
from judge_runner.llm.pricing import Price, Usage, cache_savings_usd, cost_usd, price_for, pricing_table
from judge_runner.llm.retry import RetryPolicy
from judge_runner.runs.write import RunWriter, SummaryInputs, build_summary, cost_per_judged_query, is_judged, read_run
from tests.support.fakes.fake_llm import FakeLLMServer, _estimate_tokens, anthropic_cache_minimum
from tests.support.loop_stubs import StubSearch, queries

SONNET = Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.3)


# -- pricing ----------------------------------------------------------------------------------------


def test_cache_savings_are_reads_at_the_discount_minus_the_write_premium():
    usage = Usage(input_tokens=500, output_tokens=100, cache_write_tokens=1000, cache_read_tokens=10_000)
    # reads: 10000 * (3 - 0.3); premium: 1000 * (3.75 - 3)
    assert cache_savings_usd(usage, SONNET) == pytest.approx((10_000 * 2.7 - 1000 * 0.75) / 1e6)
    assert cache_savings_usd(Usage(cache_write_tokens=1000), SONNET) == pytest.approx(-0.00075)  # a write never read back
    assert cache_savings_usd(Usage(input_tokens=10), SONNET) == 0.0
    assert cache_savings_usd(usage, None) is None and cache_savings_usd(Usage(unreported=1), SONNET) is None
    gpt5 = price_for("gpt-5")
    assert gpt5 is not None and cache_savings_usd(Usage(cache_read_tokens=1_000_000), gpt5) == pytest.approx(1.25 - 0.125)


def test_budget_sums_the_savings_of_each_call_at_its_price():
    budget = Budget()
    for price in (SONNET, price_for("claude-haiku-4-5")):
        budget.settle(budget.reserve(price, 10, 10), Usage(input_tokens=10, cache_read_tokens=1_000_000, calls=1), price)
    assert budget.total_saved_usd == pytest.approx(2.7 + 0.9)
    budget.settle(budget.reserve(None, 10, 10), Usage(input_tokens=10, calls=1), None)
    assert budget.total_saved_usd is None  # the cost is unknown, so is the saving


# -- the cacheable layout ---------------------------------------------------------------------------


def _prefix(request) -> tuple[str, dict]:
    """What Anthropic caches of a judge request: the tool (name, description, schema), then the system prompt."""
    return request.system, {"name": request.tool_name, "description": TOOL_DESCRIPTIONS[request.tool_name], "schema": request.schema}


def test_every_judge_prompt_keeps_its_variable_parts_out_of_the_cached_prefix():
    """The system prompt and the tool schema are the same for any query, document, fence delimiter and
    number of results (batched: the count and the ids are checked locally, not pinned in the schema sent);
    the query and the delimiter are only in the user message, which comes after the prefix on both APIs."""
    a = render_document("runbooks/backup.md", "Rotation", "Generate a new key and re-encrypt the backups.")
    b = render_document("notes/ssh.md", None, "Rotate SSH keys on the bastion host.")
    pairs = {
        "pointwise": (pointwise_request("rotate backup keys", "steps", a), pointwise_request("ssh bastion", "other intent", b)),
        "batched": (
            batched_request("rotate backup keys", "steps", [a, b], [1, 0]),
            batched_request("ssh bastion", "x", [b, a, b], [2, 1, 0]),
        ),
        "list": (
            list_request("rotate backup keys", "steps", ["runbooks/backup.md"], [ListItem(a, 3, "answers"), ListItem(b, 0, "other")]),
            list_request("ssh bastion", "x", [], [ListItem(b, 2, "partly")]),
        ),
    }
    for mode, (first, second) in pairs.items():
        assert _prefix(first) == _prefix(second), mode
        system, tool = _prefix(first)
        fixed = system + json.dumps(tool)
        for variable in ("rotate backup keys", "ssh bastion", first.delimiter, second.delimiter):
            assert variable not in fixed, (mode, variable)
            assert variable in first.user + second.user


def test_judge_prefixes_reach_sonnets_cache_minimum_but_not_haikus():
    """What the README says about each class of judge model: each call's stable prefix (tool + system
    prompt, counted as the fake counts) is above the 1024-token minimum of Sonnet 4.x and below the 4096
    of Haiku 4.5 and Opus 4.5+, which therefore cache nothing of it. If a prompt shrinks below 1024, Sonnet
    loses its caching: this test says so."""
    doc = render_document("a.md", None, "text")
    for request in (
        pointwise_request("q", "i", doc),
        batched_request("q", "i", [doc] * 10, list(range(10))),
        list_request("q", "i", [], [ListItem(doc, 1)]),
    ):
        system, tool = _prefix(request)
        size = _estimate_tokens(
            [{"name": tool["name"], "description": tool["description"], "input_schema": tool["schema"]}, {"type": "text", "text": system}]
        )
        assert anthropic_cache_minimum("claude-sonnet-4-6") <= size < anthropic_cache_minimum("claude-haiku-4-5"), (request.tool_name, size)


# -- usage read from both providers and priced -------------------------------------------------------


def _doc(i: int):
    return render_document(f"doc{i}.md", None, f"Document {i} explains step {i} of the backup key rotation.")


def test_anthropic_judge_reads_its_rubric_from_the_cache_and_pays_the_cache_read_price():
    with FakeLLMServer() as server:
        provider = AnthropicProvider("claude-sonnet-4-6", RetryPolicy(max_retries=0), Budget(), 30, "k", server.anthropic_base_url)
        judge = LLMJudge(provider)
        first = judge.label_one("rotate backup keys", "steps", _doc(1), {})
        second = judge.label_one("rotate backup keys", "steps", _doc(2), {})
        system = server.requests[0].body["system"]
    assert system[-1]["cache_control"] == {"type": "ephemeral"}
    assert first.usage.cache_write_tokens > 1024 and first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens and second.usage.cache_write_tokens == 0
    assert second.cost_usd == pytest.approx(cost_usd(second.usage, SONNET))
    uncached = Usage(input_tokens=second.usage.input_tokens + second.usage.cache_read_tokens, output_tokens=second.usage.output_tokens)
    assert second.cost_usd < 0.5 * cost_usd(uncached, SONNET)


def test_haiku_judge_gets_no_caching_below_its_minimum():
    with FakeLLMServer() as server:
        provider = AnthropicProvider("claude-haiku-4-5", RetryPolicy(max_retries=0), Budget(), 30, "k", server.anthropic_base_url)
        judge = LLMJudge(provider)
        replies = [judge.label_one("rotate backup keys", "steps", _doc(i), {}) for i in (1, 2)]
    assert all(r.usage.cache_read_tokens == 0 and r.usage.cache_write_tokens == 0 for r in replies)


def test_openai_cached_tokens_become_cache_reads_priced_as_such():
    """OpenAI reports cached tokens inside prompt_tokens: the provider moves them to cache reads, so input
    tokens are the uncached rest, and prices them at the cache-read rate."""
    with FakeLLMServer() as server:
        provider = OpenAIProvider("gpt-5", RetryPolicy(max_retries=0), Budget(), 30, "k", server.openai_base_url)
        judge = LLMJudge(provider)
        first = judge.label_one("rotate backup keys", "steps", _doc(1), {})
        second = judge.label_one("rotate backup keys", "steps", _doc(2), {})
        body = server.requests[1].body
    assert body["messages"][0]["role"] == "system" and body["messages"][-1]["role"] == "user"  # stable part first
    assert first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens >= 1024 and second.usage.cache_write_tokens == 0
    assert second.usage.input_tokens < first.usage.input_tokens
    assert second.cost_usd == pytest.approx(cost_usd(second.usage, price_for("gpt-5")))


# -- the summary --------------------------------------------------------------------------------------


def _line(labels_judged: int, list_cached: bool | None, cost: float | None) -> dict:
    return {
        "queryType": "off-topic",
        "labelsJudged": labels_judged,
        "listCached": list_cached,
        "usage": {"inputTokens": 1, "outputTokens": 1, "costUsd": cost},
    }


def test_a_judged_query_made_at_least_one_call():
    assert is_judged(_line(2, False, 0.01)) and is_judged(_line(0, False, 0.01)) and is_judged(_line(3, None, 0.01))
    assert not is_judged(_line(0, True, 0.0)) and not is_judged(_line(0, None, 0.0))
    assert is_judged(_line(0, None, 0.0), legacy=True)  # a format-1 judge had no cache
    lines = [_line(10, False, 0.02), _line(0, True, 0.0), _line(0, False, 0.01)]
    assert cost_per_judged_query(lines) == (2, 0.015)
    assert cost_per_judged_query([_line(0, True, 0.0)]) == (0, None)
    assert cost_per_judged_query([*lines, _line(1, None, None)]) == (3, None)
    assert cost_per_judged_query([{"labelsJudged": 1}]) == (1, None)  # no usage: unknown


def _summary(**kw) -> dict:
    args = {
        "interrupted": False,
        "budget_exhausted": False,
        "cost_usd": 0.03,
        "usage": {"inputTokens": 4000, "outputTokens": 100, "calls": 3, "cacheWriteTokens": 1000, "cacheReadTokens": 2000},
        "duration_s": 1.0,
        "heuristic": False,
        "cache_saved_usd": 0.0051,
    }
    return build_summary("r", [_line(10, False, 0.02), _line(0, True, 0.0), _line(0, False, 0.01)], [], 3, SummaryInputs(**{**args, **kw}))


def test_summary_carries_the_cache_and_per_query_cost_figures():
    summary = _summary()
    jsonschema.validate(summary, load_schema("summary.schema.json"))
    assert summary["usage"]["cacheReadTokens"] == 2000 and summary["usage"]["cacheWriteTokens"] == 1000
    assert summary["cachedInputShare"] == 0.5
    assert summary["cacheSavedUsd"] == 0.0051
    assert summary["judgedQueries"] == 2 and summary["costPerJudgedQueryUsd"] == 0.015
    unknown = _summary(cost_usd=None, cache_saved_usd=None, usage={"inputTokens": 0, "outputTokens": 0, "calls": 0})
    assert unknown["cachedInputShare"] is None and unknown["cacheSavedUsd"] is None
    assert "saved unknown" in cost_line(unknown) and "per judged query (2 judged): $0.0150" in cost_line(unknown)
    assert "50% of input tokens read from it, saved $0.0051" in cost_line(summary)


@pytest.mark.hash_embedder
def test_run_summary_measures_caching_and_cost_per_judged_query(tmp_path):
    """A real run on the fake with a Sonnet-class judge: the summary's figures follow from its own usage
    and lines; a re-run on a warm judgment cache makes no call, judges no query and has no cost per
    judged query."""
    cache = JudgmentCache(tmp_path / "cache.sqlite")

    def one_run(out):
        with FakeLLMServer() as server:
            provider = AnthropicProvider("claude-sonnet-4-6", RetryPolicy(max_retries=0), Budget(), 30, "k", server.anthropic_base_url)
            writer = RunWriter(out)
            ctx = RunContext(LLMJudge(provider), EvaluateOptions(), budget=provider.budget, cache=cache, output=QUIET)
            outcome = run_evaluation(queries(4), StubSearch(), writer, {"config": {}}, ctx)
            return outcome.summary, [line for line in read_run(writer.path) if line["type"] == "evaluation"], server.count()

    try:
        summary, evaluations, calls = one_run(tmp_path / "first")
        rerun, _, recalls = one_run(tmp_path / "second")
    finally:
        cache.close()
    jsonschema.validate(summary, load_schema("summary.schema.json"))
    u = summary["usage"]
    assert calls == 4 * 3 and u["cacheReadTokens"] > 0 and u["cacheWriteTokens"] > 0
    assert summary["cachedInputShare"] == pytest.approx(u["cacheReadTokens"] / u["inputTokens"], abs=1e-6)
    uncached = u["inputTokens"] - u["cacheReadTokens"] - u["cacheWriteTokens"]
    assert summary["cacheSavedUsd"] == pytest.approx((u["cacheReadTokens"] * 2.7 - u["cacheWriteTokens"] * 0.75) / 1e6, abs=1e-6)
    assert summary["costUsd"] == pytest.approx(
        (uncached * 3 + u["cacheWriteTokens"] * 3.75 + u["cacheReadTokens"] * 0.3 + u["outputTokens"] * 15) / 1e6, abs=1e-6
    )
    assert summary["judgedQueries"] == 4
    assert summary["costPerJudgedQueryUsd"] == pytest.approx(sum(e["usage"]["costUsd"] for e in evaluations) / 4, abs=1e-6)
    assert recalls == 0 and rerun["judgedQueries"] == 0 and rerun["costPerJudgedQueryUsd"] is None and rerun["costUsd"] == 0
    assert rerun["cachedInputShare"] is None and rerun["cacheSavedUsd"] == 0


# -- what the estimate says of caching, for every priced model ----------------------------------------


def _planned(provider: str, model: str) -> ModelEstimate:
    """Two of each judge call (a label, a batch of 10 and one of 3, a list verdict), laid out for ``model``."""
    judge = RecordingJudge(provider, model)
    docs = [render_document(f"doc{i}.md", None, f"Document {i} on the backup key rotation.") for i in range(10)]
    for _ in range(2):
        judge.label_one("rotate backup keys", "steps", docs[0], {})
        judge.label_batch("rotate backup keys", "steps", docs, list(range(10)), {})
        judge.label_batch("rotate backup keys", "steps", docs[:3], [2, 0, 1], {})
        judge.list_verdict("rotate backup keys", "steps", [], [ListItem(docs[0], 2)], {})
    return ModelEstimate(provider, model, price_for(model), calls=list(judge.calls), chosen=True)


@pytest.mark.parametrize("model", sorted(pricing_table()["models"]))
def test_each_priced_models_prefix_reaches_its_minimum_or_the_estimate_says_no_caching(model):
    provider = "anthropic" if model.startswith("claude") else "openai"
    estimate = _planned(provider, model)
    figures = estimate.figures()
    plan, minimum = figures["promptCache"], price_for(model).cache_min_tokens
    assert plan["minimumTokens"] == minimum and set(plan["prefixTokens"]) == {"label", "labels", "list"}
    for kind, tokens in plan["prefixTokens"].items():
        assert (kind in plan["cached"]) == (tokens >= minimum) and (kind in plan["notCached"]) == (tokens < minimum), kind
    # a batch of 10 and one of 3 share one cached prefix: the count is not in it
    assert len({c.prefix_id for c in estimate.calls if c.kind == "labels"}) == 1
    note = caching_note(figures)
    if plan["cached"]:
        assert "read from the cache" in note and figures["costUsd"]["cached"]["expected"] < figures["costUsd"]["sync"]["expected"]
        assert estimate.summary_block()["cacheReadTokens"] > 0
    else:
        assert "no caching" in note and f"{minimum:,} tokens" in note
        assert figures["costUsd"]["cached"]["expected"] == pytest.approx(figures["costUsd"]["sync"]["expected"])
        assert estimate.summary_block()["cacheReadTokens"] == 0


@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "claude-haiku-4-5"])
def test_the_estimates_caching_matches_what_the_provider_does(model):
    """On the fake, which caches as each model's documentation says: a model the estimate expects to read
    its prefix from the cache reads it on the second call, one it expects not to cache reads nothing."""
    expected = _planned("anthropic", model).figures()["promptCache"]
    with FakeLLMServer() as server:
        provider = AnthropicProvider(model, RetryPolicy(max_retries=0), Budget(), 30, "k", server.anthropic_base_url)
        judge = LLMJudge(provider)
        docs = [_doc(i) for i in range(4)]
        judge.label_batch("rotate backup keys", "steps", docs, [3, 1, 0, 2], {})
        second = judge.label_batch("rotate backup keys", "steps", docs[:2], [1, 0], {})  # another count, the same prefix
    assert ("labels" in expected["cached"]) == (second[0].usage.cache_read_tokens > 0)


@pytest.mark.hash_embedder
@pytest.mark.parametrize(("model", "warned"), [("claude-sonnet-4-6", False), ("claude-haiku-4-5", True)])
def test_the_summary_warns_when_the_estimated_cache_reads_did_not_happen(tmp_path, model, warned):
    """The run is handed the estimate of a Sonnet-class judge, which expects its prefix read from the cache
    (as if pricing.json had the model's minimum wrong). Sonnet does read it; Haiku, whose minimum the
    prefix is under, reads nothing: only that run's summary warns."""
    estimate = _planned("anthropic", "claude-sonnet-4-6").summary_block()
    assert estimate["cacheReadTokens"] > 0
    with FakeLLMServer() as server:
        provider = AnthropicProvider(model, RetryPolicy(max_retries=0), Budget(), 30, "k", server.anthropic_base_url)
        ctx = RunContext(LLMJudge(provider), EvaluateOptions(), budget=provider.budget, output=QUIET)
        outcome = run_evaluation(queries(3), StubSearch(), RunWriter(tmp_path), {"config": {}}, ctx, estimate=estimate)
    jsonschema.validate(outcome.summary, load_schema("summary.schema.json"))
    assert (outcome.summary["cacheWarning"] is not None) == warned
    if warned:
        assert (
            f"{estimate['cacheReadTokens']:,} input tokens read from the prompt cache, the provider reported none"
            in outcome.summary["cacheWarning"]
        )


def test_the_end_of_a_run_prints_the_cache_warning_on_stderr():
    from judge_runner.app.console import print_cache
    from judge_runner.core.printer import Printer

    out, err = [], []
    print_cache({**_summary(), "cacheWarning": "the estimate expected about 8,000 input tokens read"}, Printer(out.append, err.append))
    assert out and out[0].startswith("  prompt cache:") and err == ["warning: the estimate expected about 8,000 input tokens read"]
    print_cache(_summary(), Printer(out.append, err.append))
    assert len(err) == 1
