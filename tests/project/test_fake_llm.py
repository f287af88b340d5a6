"""Tests for tests/support/fakes/fake_llm.py, driven through the real anthropic and openai SDKs."""

from __future__ import annotations

import copy
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import anthropic
import jsonschema
import openai
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.fakes import fake_llm  # noqa: E402
from tests.support.fakes.fake_llm import DefaultBrain, FakeLLMServer, Fault, Text, ToolCall  # noqa: E402

KEY = "test-key"
MODEL_A = "claude-fake-1"
MODEL_O = "gpt-fake-1"

GLOB_RESULT = "docs/getting-started.md\ndocs/api_reference.md\nREADME.md\n(3 files; note: results truncated)"
FAKE_RESULTS = {
    "list_dir": "docs/\nREADME.md\nsrc/",
    "glob": GLOB_RESULT,
    "read_file": "# Getting started\n\nInstall the tool and run it.",
    "grep": "docs/getting-started.md:1: Getting started",
}


def _schema(name: str) -> dict:
    return json.loads((ROOT / "schemas" / name).read_text())


def verdict_schema(n: int) -> dict:
    # the single-call verdict of format version 1, retired from schemas/ by the label-first judge;
    # the fake still answers record_verdict, and these tests keep that honest
    schema = json.loads((ROOT / "tests" / "data" / "judge_verdict_v1.schema.json").read_text())
    schema["properties"]["labels"]["minItems"] = n
    schema["properties"]["labels"]["maxItems"] = n
    return schema


def query_set_schema(n: int) -> dict:
    schema = copy.deepcopy(_schema("query_set.schema.json"))
    schema["properties"]["queries"]["minItems"] = n
    schema["properties"]["queries"]["maxItems"] = n
    return schema


def phase_one_tools(n: int) -> list[tuple[str, dict]]:
    obj = lambda props, req: {"type": "object", "properties": props, "required": req}  # noqa: E731
    s = {"type": "string"}
    return [
        ("list_dir", obj({"path": s}, ["path"])),
        ("glob", obj({"pattern": s}, ["pattern"])),
        ("read_file", obj({"path": s}, ["path"])),
        ("grep", obj({"pattern": s, "path": s}, ["pattern"])),
        ("submit_queries", query_set_schema(n)),
    ]


def a_client(srv: FakeLLMServer, **kw) -> anthropic.Anthropic:
    kw.setdefault("api_key", KEY)
    return anthropic.Anthropic(base_url=srv.anthropic_base_url, max_retries=0, **kw)


def o_client(srv: FakeLLMServer, **kw) -> openai.OpenAI:
    kw.setdefault("api_key", KEY)
    return openai.OpenAI(base_url=srv.openai_base_url, max_retries=0, **kw)


def a_hello(client: anthropic.Anthropic, **kw):
    return client.messages.create(model=MODEL_A, max_tokens=256, messages=[{"role": "user", "content": "hello"}], **kw)


def o_hello(client: openai.OpenAI, **kw):
    return client.chat.completions.create(model=MODEL_O, messages=[{"role": "user", "content": "hello"}], **kw)


@pytest.fixture
def srv():
    with FakeLLMServer() as server:
        yield server


# ---------------------------------------------------------------- phase one


def test_anthropic_phase_one_conversation(srv):
    n = 4
    client = a_client(srv)
    tools = [{"name": name, "description": name, "input_schema": schema} for name, schema in phase_one_tools(n)]
    messages: list[dict] = [{"role": "user", "content": "Explore the corpus and write queries."}]
    called, submitted = [], None
    for _ in range(8):
        msg = client.messages.create(model=MODEL_A, max_tokens=1024, tools=tools, messages=messages)
        assert isinstance(msg, anthropic.types.Message)
        assert msg.model == MODEL_A and msg.stop_reason == "tool_use"
        block = msg.content[0]
        assert isinstance(block, anthropic.types.ToolUseBlock) and block.id.startswith("toolu_")
        called.append((block.name, block.input))
        if block.name == "submit_queries":
            submitted = block.input["queries"]
            break
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": block.id,
                        # exercise both content forms: str and list of text blocks
                        "content": FAKE_RESULTS[block.name] if block.name != "glob" else [{"type": "text", "text": FAKE_RESULTS["glob"]}],
                    }
                ],
            }
        )
    assert [c[0] for c in called] == ["list_dir", "glob", "read_file", "submit_queries"]
    assert called[0][1] == {"path": "."}
    assert called[1][1] == {"pattern": "**/*.md"}
    assert called[2][1] == {"path": "docs/getting-started.md"}
    assert submitted is not None and len(submitted) == n
    jsonschema.validate({"queries": submitted}, query_set_schema(n))
    assert [q["id"] for q in submitted] == ["q01", "q02", "q03", "q04"]
    assert submitted[-1]["queryType"] == "off-topic" and submitted[-1]["expectedSources"] == []
    assert submitted[-1]["query"] == "how do I bake sourdough bread"
    assert submitted[0]["expectedSources"] == ["docs/getting-started.md"]
    assert submitted[1]["expectedSources"] == ["docs/api_reference.md"]
    assert [q["queryType"] for q in submitted[:3]] == ["keyword", "natural-language", "identifier"]
    assert srv.count("anthropic") == 4 and srv.count("openai") == 0


def test_openai_phase_one_conversation(srv):
    n = 7
    client = o_client(srv)
    tools = [
        {"type": "function", "function": {"name": name, "description": name, "parameters": schema}} for name, schema in phase_one_tools(n)
    ]
    messages: list[dict] = [{"role": "user", "content": "Explore the corpus and write queries."}]
    called, submitted = [], None
    for _ in range(8):
        resp = client.chat.completions.create(model=MODEL_O, tools=tools, messages=messages)
        choice = resp.choices[0]
        assert resp.model == MODEL_O and choice.finish_reason == "tool_calls"
        call = choice.message.tool_calls[0]
        assert call.id.startswith("call_") and call.type == "function"
        args = json.loads(call.function.arguments)
        called.append(call.function.name)
        if call.function.name == "submit_queries":
            submitted = args["queries"]
            break
        messages.append(choice.message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": FAKE_RESULTS[call.function.name]})
    assert called == ["list_dir", "glob", "read_file", "submit_queries"]
    assert submitted is not None and len(submitted) == n
    jsonschema.validate({"queries": submitted}, query_set_schema(n))
    assert submitted[-1]["queryType"] == "off-topic" and submitted[-1]["expectedSources"] == []
    # round robin over the three globbed paths
    assert [q["expectedSources"][0] for q in submitted[:6]] == [
        "docs/getting-started.md",
        "docs/api_reference.md",
        "README.md",
    ] * 2


def test_phase_one_without_glob_paths_is_all_off_topic():
    brain = DefaultBrain()
    body = {
        "tools": [{"name": n, "input_schema": s} for n, s in phase_one_tools(3)],
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "list_dir", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "empty"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "glob", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "(no matches)"}]},
        ],
    }
    reply = brain("anthropic", body)
    assert isinstance(reply, ToolCall) and reply.name == "submit_queries"
    queries = reply.input["queries"]
    assert len(queries) == 3 and all(q["queryType"] == "off-topic" for q in queries)
    jsonschema.validate(reply.input, query_set_schema(3))


# ---------------------------------------------------------------- phase two


@pytest.mark.parametrize("n", [3, 0])
def test_record_verdict_anthropic_forced_tool(srv, n):
    schema = verdict_schema(n)
    msg = a_client(srv).messages.create(
        model=MODEL_A,
        max_tokens=1024,
        tools=[{"name": "record_verdict", "description": "Record the verdict", "input_schema": schema}],
        tool_choice={"type": "tool", "name": "record_verdict"},
        messages=[{"role": "user", "content": "Judge these results."}],
    )
    block = msg.content[0]
    assert block.type == "tool_use" and block.name == "record_verdict"
    assert len(block.input["labels"]) == n
    jsonschema.validate(block.input, schema)
    if n:
        assert [label["relevance"] for label in block.input["labels"]] == [3, 2, 1]
    else:
        assert block.input["scores"]["overall"] == 0.0


def test_record_verdict_openai_function_calling(srv):
    schema = verdict_schema(5)
    resp = o_client(srv).chat.completions.create(
        model=MODEL_O,
        tools=[{"type": "function", "function": {"name": "record_verdict", "parameters": schema}}],
        tool_choice={"type": "function", "function": {"name": "record_verdict"}},
        messages=[{"role": "user", "content": "Judge these results."}],
    )
    call = resp.choices[0].message.tool_calls[0]
    assert call.function.name == "record_verdict"
    verdict = json.loads(call.function.arguments)
    assert len(verdict["labels"]) == 5
    assert [label["relevance"] for label in verdict["labels"]] == [3, 2, 1, 0, 0]
    jsonschema.validate(verdict, schema)


def test_record_verdict_openai_response_format(srv):
    schema = verdict_schema(2)
    resp = o_client(srv).chat.completions.create(
        model=MODEL_O,
        response_format={"type": "json_schema", "json_schema": {"name": "record_verdict", "schema": schema, "strict": True}},
        messages=[{"role": "user", "content": "Judge these results."}],
    )
    choice = resp.choices[0]
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    verdict = json.loads(choice.message.content)
    assert len(verdict["labels"]) == 2
    jsonschema.validate(verdict, schema)


def test_unrecognised_request_gets_ok_text(srv):
    msg = a_hello(a_client(srv))
    assert msg.content[0].type == "text" and msg.content[0].text == "ok" and msg.stop_reason == "end_turn"
    resp = o_hello(o_client(srv))
    assert resp.choices[0].message.content == "ok" and resp.choices[0].finish_reason == "stop"


# ---------------------------------------------------------------- usage


def test_usage_and_prompt_caching(srv):
    client = a_client(srv)
    # 1024 tokens is the minimum of a model not in the table; the fake counts a quarter of the JSON length
    system = [{"type": "text", "text": "You are a judge. " * 300, "cache_control": {"type": "ephemeral"}}]
    first = a_hello(client, system=system)
    second = a_hello(client, system=system)
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    assert first.usage.cache_creation_input_tokens > 1024 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens == first.usage.input_tokens  # the uncached rest
    plain = a_hello(client, system="no caching here")
    assert plain.usage.cache_creation_input_tokens == 0 and plain.usage.cache_read_input_tokens == 0

    usage = o_hello(o_client(srv)).usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


TOOL = {"name": "note_it", "description": "Record.", "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}}


def _cached_call(client, model: str, system_text: str, tools: list | None = None):
    system = [{"type": "text", "text": system_text, "cache_control": {"type": "ephemeral"}}]
    return client.messages.create(
        model=model, max_tokens=64, system=system, messages=[{"role": "user", "content": "hello"}], **({"tools": tools} if tools else {})
    ).usage


def test_anthropic_cache_honours_each_models_minimum(srv):
    """A ~1500-token prefix caches on Sonnet 4.6 (minimum 1024) but not on Haiku 4.5 (minimum 4096): both
    counters stay 0 and the whole prompt is billed as input."""
    client = a_client(srv)
    text = "Grade the document on the 0-3 scale. " * 160  # ~1600 fake tokens
    sonnet = [_cached_call(client, "claude-sonnet-4-6", text) for _ in range(2)]
    assert sonnet[0].cache_creation_input_tokens > 1024 and sonnet[1].cache_read_input_tokens == sonnet[0].cache_creation_input_tokens
    haiku = [_cached_call(client, "claude-haiku-4-5-20251001", text) for _ in range(2)]
    for usage in haiku:
        assert usage.cache_creation_input_tokens == 0 and usage.cache_read_input_tokens == 0
    assert haiku[1].input_tokens == sonnet[0].input_tokens + sonnet[0].cache_creation_input_tokens
    assert fake_llm.anthropic_cache_minimum("claude-opus-4-5") == 4096 and fake_llm.anthropic_cache_minimum("claude-new") == 1024


def test_anthropic_cache_prefix_includes_the_tools(srv):
    """Tools come before the system prompt in Anthropic's prefix: a changed tool schema is a new prefix
    (a write, not a read) even when the marked system block is the same."""
    client = a_client(srv)
    text = "Grade the document on the 0-3 scale. " * 160
    first = _cached_call(client, "claude-sonnet-4-6", text, [TOOL])
    same = _cached_call(client, "claude-sonnet-4-6", text, [TOOL])
    other_tool = {**TOOL, "input_schema": {**TOOL["input_schema"], "required": ["x"]}}
    changed = _cached_call(client, "claude-sonnet-4-6", text, [other_tool])
    assert first.cache_creation_input_tokens > 0 and same.cache_read_input_tokens == first.cache_creation_input_tokens
    assert changed.cache_read_input_tokens == 0 and changed.cache_creation_input_tokens > 0
    # the tool is in the cached part, not the uncached rest
    bare = _cached_call(client, "claude-sonnet-4-6", text + " ")
    assert first.cache_creation_input_tokens > bare.cache_creation_input_tokens


def test_anthropic_cache_expires_after_its_ttl():
    with FakeLLMServer(cache_ttl_s=0.2) as server:
        client = a_client(server)
        text = "Grade the document on the 0-3 scale. " * 160
        assert _cached_call(client, "claude-sonnet-4-6", text).cache_creation_input_tokens > 0
        assert _cached_call(client, "claude-sonnet-4-6", text).cache_read_input_tokens > 0
        time.sleep(0.3)
        assert _cached_call(client, "claude-sonnet-4-6", text).cache_creation_input_tokens > 0
        server.prompt_cache.clear()
        assert _cached_call(client, "claude-sonnet-4-6", text).cache_read_input_tokens == 0


def test_concurrent_first_requests_each_write_the_cache():
    """A cache entry serves only requests that arrive after the response that wrote it began: two requests
    in flight together both write; one sent after them reads."""
    import concurrent.futures

    with FakeLLMServer(latency_s=0.3) as server:
        client = a_client(server)
        text = "Grade the document on the 0-3 scale. " * 160
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            together = list(pool.map(lambda _: _cached_call(client, "claude-sonnet-4-6", text), range(2)))
        after = _cached_call(client, "claude-sonnet-4-6", text)
    assert all(u.cache_creation_input_tokens > 0 and u.cache_read_input_tokens == 0 for u in together)
    assert after.cache_read_input_tokens > 0 and after.cache_creation_input_tokens == 0


def test_openai_cached_tokens_for_a_shared_prefix(srv):
    """OpenAI caches automatically: a request sharing a long prefix with an earlier one of the same model
    reports cached_tokens, 1024 + k*128, never more than the shared part; a short or new prompt none."""
    client = o_client(srv)
    system = {"role": "system", "content": "Grade the document on the 0-3 scale. " * 160}

    def call(user: str, model: str = MODEL_O):
        return client.chat.completions.create(model=model, messages=[system, {"role": "user", "content": user}]).usage

    first = call("query one")
    second = call("query two, another document")
    other_model = call("query one", model="gpt-fake-2")
    short = client.chat.completions.create(model=MODEL_O, messages=[{"role": "user", "content": "hi"}]).usage
    short_again = client.chat.completions.create(model=MODEL_O, messages=[{"role": "user", "content": "hi"}]).usage
    assert first.prompt_tokens_details.cached_tokens == 0
    cached = second.prompt_tokens_details.cached_tokens
    assert cached >= 1024 and (cached - 1024) % 128 == 0 and cached <= second.prompt_tokens
    assert second.prompt_tokens - cached < 128 + 40  # all of the shared system prompt but the last partial step
    assert other_model.prompt_tokens_details.cached_tokens == 0
    assert short.prompt_tokens_details.cached_tokens == 0 and short_again.prompt_tokens_details.cached_tokens == 0


@pytest.mark.parametrize(
    ("shared_chars", "prompt", "expected"),
    [(4000, 2000, 0), (4096, 2000, 1024), (4 * 1151, 2000, 1024), (4 * 1152, 2000, 1152), (40000, 1300, 1280)],
)
def test_openai_cached_token_steps(shared_chars, prompt, expected):
    assert fake_llm.openai_cached_tokens(shared_chars, prompt) == expected


# ---------------------------------------------------------------- faults


def test_rate_limit_with_retry_after_then_recovers(srv):
    client = a_client(srv)
    srv.faults.append(Fault(status=429, headers={"retry-after": "1"}))
    with pytest.raises(anthropic.RateLimitError) as ei:
        a_hello(client)
    assert ei.value.status_code == 429
    assert ei.value.response.headers["retry-after"] == "1"
    assert ei.value.type == "rate_limit_error"
    assert a_hello(client).content[0].text == "ok"  # the fault was used up
    assert [r.status for r in srv.requests] == [429, 200]


def test_openai_rate_limit_retry_after_ms(srv):
    srv.faults.append(Fault(status=429, headers={"retry-after-ms": "200"}))
    with pytest.raises(openai.RateLimitError) as ei:
        o_hello(o_client(srv))
    assert ei.value.response.headers["retry-after-ms"] == "200"
    assert ei.value.body["code"] == "rate_limit_exceeded"


def test_overloaded_529(srv):
    assert hasattr(anthropic, "OverloadedError")
    srv.faults.append(Fault(status=529))
    with pytest.raises(anthropic.OverloadedError) as ei:
        a_hello(a_client(srv))
    assert ei.value.type == "overloaded_error"


def test_openai_503(srv):
    srv.faults.append(Fault(status=503))
    with pytest.raises(openai.InternalServerError) as ei:
        o_hello(o_client(srv))
    assert ei.value.status_code == 503


def test_faults_are_fifo_across_apis(srv):
    srv.faults.extend([Fault(status=500), Fault(status=400, body={"error": {"message": "custom", "type": "x"}})])
    with pytest.raises(openai.InternalServerError):
        o_hello(o_client(srv))
    with pytest.raises(anthropic.BadRequestError) as ei:
        a_hello(a_client(srv))
    assert "custom" in str(ei.value)
    assert srv.faults == []
    assert srv.count() == 2 and srv.count("openai") == 1 and srv.count("anthropic") == 1


def test_connection_reset(srv):
    srv.faults.extend([Fault(reset=True), Fault(reset=True)])
    with pytest.raises(anthropic.APIConnectionError) as ea:
        a_hello(a_client(srv))
    assert not isinstance(ea.value, anthropic.APITimeoutError)
    with pytest.raises(openai.APIConnectionError) as eo:
        o_hello(o_client(srv))
    assert not isinstance(eo.value, openai.APITimeoutError)
    assert a_hello(a_client(srv)).content[0].text == "ok"  # server still healthy


def test_hang_times_out_and_server_stops_promptly():
    server = FakeLLMServer().start()
    try:
        server.faults.extend([Fault(hang=True), Fault(hang=True)])
        t0 = time.monotonic()
        with pytest.raises(anthropic.APITimeoutError):
            a_hello(a_client(server, timeout=0.5))
        with pytest.raises(openai.APITimeoutError):
            o_hello(o_client(server, timeout=0.5))
        assert time.monotonic() - t0 < 2.5
    finally:
        t1 = time.monotonic()
        server.stop()
        assert time.monotonic() - t1 < 1.0
    assert not server._thread  # serving thread joined


def test_delay_and_latency():
    with FakeLLMServer(latency_s=0.05) as server:
        server.faults.append(Fault(delay_s=0.2))
        t0 = time.monotonic()
        assert a_hello(a_client(server)).content[0].text == "ok"
        assert time.monotonic() - t0 >= 0.25


def test_invalid_key(srv):
    with pytest.raises(anthropic.AuthenticationError) as ea:
        a_hello(a_client(srv, api_key="invalid-key"))
    assert ea.value.type == "authentication_error"
    with pytest.raises(openai.AuthenticationError) as eo:
        o_hello(o_client(srv, api_key="invalid-key"))
    assert eo.value.body["code"] == "invalid_api_key"


def test_x_api_key_header_is_accepted(srv):
    def post(key: str) -> tuple[int, dict]:
        req = urllib.request.Request(
            srv.url + "/v1/messages",
            data=json.dumps({"model": MODEL_A, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}).encode(),
            headers={"x-api-key": key, "anthropic-version": "2023-06-01", "content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    status, body = post("some-key")
    assert status == 200 and body["content"][0]["text"] == "ok"
    status, body = post("invalid-key")
    assert status == 401 and body["error"]["type"] == "authentication_error"
    assert srv.requests[0].headers["x-api-key"] == "REDACTED"


def test_raw_text_is_returned_verbatim(srv):
    raw = 'Here is my verdict:\n```json\n{"labels": [}\n```\nThanks!'
    srv.faults.extend([Fault(raw_text=raw), Fault(raw_text=raw)])
    schema = verdict_schema(1)
    msg = a_client(srv).messages.create(
        model=MODEL_A,
        max_tokens=256,
        tools=[{"name": "record_verdict", "input_schema": schema}],
        tool_choice={"type": "tool", "name": "record_verdict"},
        messages=[{"role": "user", "content": "judge"}],
    )
    assert msg.content[0].text == raw and msg.stop_reason == "end_turn"
    resp = o_client(srv).chat.completions.create(
        model=MODEL_O,
        response_format={"type": "json_schema", "json_schema": {"name": "record_verdict", "schema": schema}},
        messages=[{"role": "user", "content": "judge"}],
    )
    assert resp.choices[0].message.content == raw


def test_stop_reasons():
    replies = iter(
        [Text("partial", stop="max_tokens"), Text("partial", stop="max_tokens"), Text("no", stop="refusal"), Text("no", stop="refusal")]
    )
    with FakeLLMServer(brain=lambda api, body: next(replies)) as server:
        a, o = a_client(server), o_client(server)
        assert a_hello(a).stop_reason == "max_tokens"
        assert o_hello(o).choices[0].finish_reason == "length"
        assert a_hello(a).stop_reason == "refusal"
        choice = o_hello(o).choices[0]
        assert choice.finish_reason == "content_filter" and choice.message.refusal == "no"


def test_streaming_is_refused(srv):
    with pytest.raises(anthropic.BadRequestError) as ei:
        a_client(srv).messages.create(model=MODEL_A, max_tokens=10, messages=[{"role": "user", "content": "hi"}], stream=True)
    assert "stream" in str(ei.value)


def test_brain_error_becomes_500():
    def brain(api, body):
        raise RuntimeError("boom in brain")

    with FakeLLMServer(brain=brain) as server:
        with pytest.raises(anthropic.InternalServerError) as ei:
            a_hello(a_client(server))
        assert "boom in brain" in str(ei.value)


def test_parallel_tool_calls_list_reply():
    brain = lambda api, body: [Text("Let me look."), ToolCall("glob", {"pattern": "*.md"}), ToolCall("list_dir", {"path": "."})]  # noqa: E731
    with FakeLLMServer(brain=brain) as server:
        msg = a_hello(a_client(server))
        assert [b.type for b in msg.content] == ["text", "tool_use", "tool_use"] and msg.stop_reason == "tool_use"
        resp = o_hello(o_client(server))
        assert [c.function.name for c in resp.choices[0].message.tool_calls] == ["glob", "list_dir"]
        assert resp.choices[0].message.content == "Let me look."


# ---------------------------------------------------------------- recording


def test_requests_recorded_with_auth_redacted():
    secret = "sk-very-secret-123"
    with FakeLLMServer() as server:
        a_hello(a_client(server, api_key=secret))
        o_hello(o_client(server, api_key=secret))
        with pytest.raises(anthropic.AuthenticationError):
            a_hello(a_client(server, api_key="invalid-key"))
    assert [r.api for r in server.requests] == ["anthropic", "openai", "anthropic"]
    assert server.requests[0].path.startswith("/v1/messages")
    assert server.requests[1].path == "/v1/chat/completions"
    assert server.requests[0].body["model"] == MODEL_A and server.requests[1].body["model"] == MODEL_O
    assert "anthropic-version" in server.requests[0].headers
    for rec in server.requests:
        dumped = json.dumps(rec.headers)
        assert secret not in dumped and "invalid-key" not in dumped
        assert rec.headers["authorization"] == "REDACTED"
        assert rec.time > 0


# -- quirks of real OpenAI-compatible servers ---------------------------------------------

from tests.support.fakes.fake_llm import LLAMA_CPP_PYTHON, Quirks  # noqa: E402


def _openai(srv, timeout=10.0):
    return openai.OpenAI(base_url=srv.openai_base_url, api_key=KEY, max_retries=0, timeout=timeout)


def test_llama_cpp_quirks_refuse_null_content_json_schema_and_required():
    with FakeLLMServer(quirks=LLAMA_CPP_PYTHON) as srv:
        client = _openai(srv)
        null_turn = [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "r"},
        ]
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model=MODEL_O, messages=null_turn)
        assert "'messages', 1, 'content'" in info.value.body["message"]
        null_turn[1]["content"] = ""  # "" works
        client.chat.completions.create(model=MODEL_O, messages=null_turn)
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(
                model=MODEL_O,
                messages=[{"role": "user", "content": "x"}],
                response_format={"type": "json_schema", "json_schema": {"name": "v", "schema": {}}},
            )
        assert "Input should be 'text' or 'json_object'" in info.value.body["message"]
        tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model=MODEL_O, messages=[{"role": "user", "content": "x"}], tools=tools, tool_choice="required")
        assert info.value.body["message"] == ""  # as llama-cpp-python answers it
        named = client.chat.completions.create(
            model=MODEL_O,
            messages=[{"role": "user", "content": "x"}],
            tools=tools,
            tool_choice={"type": "function", "function": {"name": "f"}},
        )
        assert named.choices[0].finish_reason in ("tool_calls", "stop")


def test_json_schema_refused_with_422_in_fastapi_shape():
    with FakeLLMServer(quirks=Quirks(json_schema_status=422)) as srv:
        with pytest.raises(openai.UnprocessableEntityError) as info:
            _openai(srv).chat.completions.create(
                model=MODEL_O,
                messages=[{"role": "user", "content": "x"}],
                response_format={"type": "json_schema", "json_schema": {"name": "v", "schema": {}}},
            )
        assert info.value.body["detail"][0]["loc"] == ["body", "response_format", "type"]


def test_serial_server_queues_and_finishes_a_request_whose_client_timed_out():
    # timed from the server's own arrival times, not from when the client's timeout fired: on a loaded machine that
    # fired late, and "waited at least 0.75 s" failed at 0.72 s (a clean-clone run beside a CPU-spinning process)
    service = 1.0
    with FakeLLMServer(quirks=Quirks(serial=True), latency_s=service) as srv:
        with pytest.raises(openai.APITimeoutError):
            _openai(srv, timeout=0.2).chat.completions.create(model=MODEL_O, messages=[{"role": "user", "content": "first"}])
        _openai(srv).chat.completions.create(model=MODEL_O, messages=[{"role": "user", "content": "second"}])
        finished = time.monotonic()
        first, second = srv.requests
        assert [first.status, second.status] == [200, 200]  # the abandoned request was still served
        assert second.time < first.time + service, "the second request came after the first was done: nothing to queue behind"
        assert finished >= first.time + 2 * service, f"the second request did not queue behind the first ({finished - first.time:.2f} s)"


@pytest.mark.parametrize("mode", ["null", "null-fields", "absent"])
def test_usage_quirk_on_both_apis(mode):
    with FakeLLMServer(quirks=Quirks(usage=mode)) as srv:
        completion = _openai(srv).chat.completions.create(model=MODEL_O, messages=[{"role": "user", "content": "x"}])
        message = anthropic.Anthropic(base_url=srv.anthropic_base_url, api_key=KEY, max_retries=0).messages.create(
            model=MODEL_A, max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    for usage in (completion.usage, message.usage):
        assert usage is None or all(v is None for k, v in usage.model_dump().items() if k.endswith("tokens"))


def test_anthropic_empty_turn_and_blank_text_are_refused_like_the_real_api():
    with FakeLLMServer() as srv:
        client = anthropic.Anthropic(base_url=srv.anthropic_base_url, api_key=KEY, max_retries=0)
        for messages in (
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": []}, {"role": "user", "content": "y"}],
            [{"role": "user", "content": [{"type": "text", "text": "  "}]}],
        ):
            with pytest.raises(anthropic.BadRequestError):
                client.messages.create(model=MODEL_A, max_tokens=10, messages=messages)
        # a final empty assistant message (a prefill) is allowed
        client.messages.create(
            model=MODEL_A, max_tokens=10, messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": ""}]
        )


def test_raw_body_fault_sends_the_bytes_as_they_are():
    with FakeLLMServer() as srv:
        srv.faults.append(Fault(raw_body='{"id": "x", "choices": ['))
        with pytest.raises(json.JSONDecodeError):
            _openai(srv).chat.completions.create(model=MODEL_O, messages=[{"role": "user", "content": "x"}])


def test_default_brain_answers_json_mode_from_the_schema_extension_or_the_system_prompt():
    schema = verdict_schema(2)
    with FakeLLMServer() as srv:
        client = _openai(srv)
        by_extension = client.chat.completions.create(
            model=MODEL_O, messages=[{"role": "user", "content": "judge"}], response_format={"type": "json_object", "schema": schema}
        )
        by_prompt = client.chat.completions.create(
            model=MODEL_O,
            messages=[{"role": "system", "content": "Judge.\n\nJSON Schema:\n" + json.dumps(schema)}, {"role": "user", "content": "judge"}],
            response_format={"type": "json_object"},
        )
    for completion in (by_extension, by_prompt):
        jsonschema.validate(json.loads(completion.choices[0].message.content), schema)
