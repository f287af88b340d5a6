"""The fault-injection harness: phase two over a three-hit stub search with the real providers (fast retries)
against the loopback fake, one batched judge call per query (:class:`OneCallJudge`), brains that rewrite
replies (:class:`Script`) and :func:`check_run`, which checks what a run recorded against the requests the
fake received."""

from __future__ import annotations

import json
import re
import threading
import time

import jsonschema

from judge_runner.core.models import Query
from judge_runner.core.resources import load_schema
from judge_runner.evaluation.context import QUIET, RunContext
from judge_runner.evaluation.loop import run_evaluation
from judge_runner.evaluation.options import EvaluateOptions
from judge_runner.judging.llm_judge import LLMJudge
from judge_runner.judging.protocol import ListVerdict
from judge_runner.llm.anthropic_provider import AnthropicProvider
from judge_runner.llm.budget import Budget
from judge_runner.llm.openai_provider import OpenAIProvider
from judge_runner.llm.retry import RetryPolicy
from judge_runner.runs.write import RunWriter, read_run
from judge_runner.search.base import HitScores, SearchAnswer, SearchHit
from tests.support.fakes.fake_llm import DefaultBrain, FakeLLMServer, Text, ToolCall, first_user_text
from tests.support.fakes.honest_judge import honest_reply

MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}  # both priced in pricing.json


HITS = 3


MAX_RETRIES = 3


SCHEMAS = {t: load_schema(f"{t}.schema.json") for t in ("evaluation", "error", "summary")}


class StubSearch:
    """Three fixed hits for any query; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def search(self, query, mode="hybrid", limit=10, intent=""):
        self.calls += 1
        hits = [
            SearchHit(
                rank=i,
                source=f"doc{i}.md",
                anchor=None,
                lineStart=1,
                lineEnd=2,
                snippet=f"text {i}",
                score=1.0 / i,
                scores=HitScores(),
                matchedBy=["fts"],
            )
            for i in range(1, HITS + 1)
        ]
        return SearchAnswer(query=query, mode=mode, results=hits, confident=True, latencyMs=1.0)


def make_queries(n: int) -> list[Query]:
    """``n`` keyword queries ``query 1``.. expecting ``doc1.md``."""
    return [
        Query(id=f"q{i}", query=f"query {i}", queryIntent="find it", queryType="keyword", expectedSources=["doc1.md"])
        for i in range(1, n + 1)
    ]


def fast_retry(**overrides) -> RetryPolicy:
    """The retry policy of these tests: 3 retries from 10 ms, ``overrides`` applied."""
    return RetryPolicy(**{"max_retries": MAX_RETRIES, "base_s": 0.01, "cap_s": 1.0, "deadline_s": 30.0, **overrides})


def make_provider(
    server: FakeLLMServer,
    api: str,
    *,
    retry: RetryPolicy | None = None,
    budget: Budget | None = None,
    timeout_s: float = 5.0,
    api_key: str = "test-key",
):
    """The real provider class for ``api`` against the fake ``server``, with fast retries and its own budget."""
    cls, url = (AnthropicProvider, server.anthropic_base_url) if api == "anthropic" else (OpenAIProvider, server.openai_base_url)
    return cls(
        MODELS[api], retry or fast_retry(), budget if budget is not None else Budget(), timeout_s=timeout_s, api_key=api_key, base_url=url
    )


class OneCallJudge(LLMJudge):
    """The LLM judge with a fixed list-level verdict (holistic overall 0.7) that costs no call."""

    def list_verdict(self, query, intent, expected_sources, items, sampling, log=lambda m: None):
        return ListVerdict(
            coverage=0.6,
            snippet_quality=0.75,
            holistic={"relevance": 0.8, "ranking": 0.7, "overall": 0.7},
            analysis={"coverage": "fixed", "snippetQuality": "fixed"},
            suggestions=["Boost title matches for identifier queries"],
        )


def run(tmp_path, provider, n: int, concurrency: int = 1):
    """run_evaluation over ``n`` queries, batched, one call each; returns (outcome, lines, wall seconds).
    Lines are schema-checked."""
    writer = RunWriter(tmp_path / f"runs-{time.monotonic_ns()}")
    started = time.monotonic()
    options = EvaluateOptions(concurrency=concurrency, judge_mode="batched")
    ctx = RunContext(OneCallJudge(provider), options, budget=provider.budget, output=QUIET)
    outcome = run_evaluation(make_queries(n), StubSearch(), writer, {"config": {}}, ctx)
    elapsed = time.monotonic() - started
    lines = list(read_run(writer.path))
    for line in lines[1:]:
        jsonschema.validate(line, SCHEMAS[line["type"]])
    return outcome, lines, elapsed


def query_of(request) -> str:
    """The query id a judge request is about (the user message shows ``<query>query N</query>``)."""
    match = re.search(r"<query>query (\d+)</query>", json.dumps(request.body.get("messages")))
    assert match, request.body
    return f"q{match.group(1)}"


def check_run(lines, server, *, evaluated, errors=(), served_by_brain=True):
    """(a)+(b)+(c) for a run: the evaluated and failed query ids, each recorded once; the summary agrees;
    the run counted every HTTP request the fake received; and (with the default brain) every query whose
    last request was answered 200 without a fault has its evaluation line. Returns (errors by id, summary)."""
    assert lines[0]["type"] == "run_start" and lines[-1]["type"] == "summary"
    body = lines[1:-1]
    evals = [l["queryId"] for l in body if l["type"] == "evaluation"]
    errs = {l["queryId"]: l for l in body if l["type"] == "error"}
    recorded = [l["queryId"] for l in body]
    assert len(recorded) == len(set(recorded)), f"a query was recorded twice: {recorded}"
    assert sorted(evals) == sorted(evaluated)
    assert sorted(errs) == sorted(errors)
    summary = lines[-1]
    assert summary["evaluated"] == len(evals) and summary["failed"] == len(errs)
    assert summary["usage"]["calls"] == server.count(), "the run's request count disagrees with the server's"
    if served_by_brain:
        last = {}
        for request in server.requests:
            last[query_of(request)] = request
        answered = {
            q
            for q, r in last.items()
            if r.status == 200 and (r.fault is None or (r.fault.status is None and r.fault.body is None and r.fault.raw_text is None))
        }
        assert answered <= set(evals), f"finished judgments lost: {answered - set(evals)}"
    for line in body:
        if line["type"] == "evaluation":
            assert len(line["results"]) == HITS
    return errs, summary


class Script:
    """A brain that rewrites the default reply for the first judge requests, in arrival order:
    each step is ``f(default_reply) -> reply`` (None: the default reply); then the default brain."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.default = DefaultBrain()
        self.lock = threading.Lock()

    def __call__(self, api, body):
        with self.lock:
            step = self.steps.pop(0) if self.steps else None
        reply = self.default(api, body)
        return step(reply) if step else reply


class JsonModeBrain(DefaultBrain):
    """The default brain, plus JSON mode: a ``json_object`` request offers no tool, so the reply's schema
    is read from the system prompt (where the openai provider states it) and the labels sent as content."""

    def __call__(self, api, body):
        response_format = body.get("response_format") or {}
        if api == "openai" and response_format.get("type") == "json_object":
            system = body["messages"][0]["content"]
            schema = json.loads(system[system.index("JSON Schema:\n") + len("JSON Schema:\n") :])
            assert "labels" in schema["properties"]
            return ToolCall("record_labels", honest_reply("record_labels", first_user_text(body)))
        return super().__call__(api, body)


def with_score(value):
    """A step: the default labels with the first label's ``relevance = value``."""

    def step(reply):
        labels = json.loads(json.dumps(reply.input))
        labels["labels"][0]["relevance"] = value
        return ToolCall(reply.name, labels)

    return step


def truncated(reply):
    """A step: the reply cut at ``max_tokens``."""
    return ToolCall(reply.name, reply.input, stop="max_tokens")


def refused(reply):  # noqa: ARG001
    """A step: a refusal instead of the reply."""
    return Text("I can't help with that.", stop="refusal")


def verdict_text(relevance=0) -> str:
    """A ``record_labels`` reply for HITS results as JSON text, every label ``relevance`` (``NaN`` where it
    is float('nan'))."""
    return json.dumps(
        {"labels": [{"id": f"D{i}", "reason": "fake", "injectionSuspected": False, "relevance": relevance} for i in range(1, HITS + 1)]}
    )
