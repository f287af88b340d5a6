"""Real local model servers and odd replies, through the REAL SDKs
against the loopback fake server with the quirks measured on llama-cpp-python 0.3.36's server.

Each example from the issues is a test here, followed by other members of its kind:
- requests every compatible server accepts (no ``content: null``, no empty turn, no NaN on the wire);
- capabilities learned from refusals (400, 422, or a 500 naming the field), remembered, one stderr line;
- the server's own message in errors, secrets removed, JSON decode positions kept;
- local servers: concurrency 1 unless set, timeouts include queue time and are not retried;
- usage missing or null: cost unknown (never 0), worst case kept against the budget, verdict kept;
- empty or malformed replies: typed errorType, true attempt counts.
"""

from __future__ import annotations

import json
import math

import pytest

from judge_runner.evaluation.loop import EXIT_INCOMPLETE, EXIT_OK
from judge_runner.judging.llm_judge import MAX_REASKS
from judge_runner.llm.anthropic_provider import AnthropicProvider
from judge_runner.llm.base import ToolResult, ToolUse, Turn
from judge_runner.llm.budget import Budget
from judge_runner.llm.local_server import (
    LOCAL_CONCURRENCY,
    local_server_setup,
    share_server,
)
from judge_runner.llm.openai_provider import STRUCTURED_ID, OpenAIProvider
from judge_runner.llm.pricing import Price, Usage
from judge_runner.llm.wire import dumps_safe, is_local_url, redact, server_message
from judge_runner.querygen.agent import TOOLS, submit_tool
from tests.support.clitools import invoke, run_lines
from tests.support.fakes.fake_llm import LLAMA_CPP_PYTHON, FakeLLMServer, Fault, Quirks
from tests.support.fault_runs import Script, check_run, make_provider, query_of, run, with_score

# these tests exercise the CLI, the pipeline and the judge, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder

APIS = ["anthropic", "openai"]


@pytest.fixture()
def server():
    with FakeLLMServer() as srv:
        yield srv


def notes_of(provider) -> list[str]:
    return provider.capabilities.notes


def completion_body(content, *, choices=True, usage="default") -> dict:
    """An OpenAI chat completion with one assistant message holding ``content``."""
    body = {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}] if choices else [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    if usage != "default":
        body["usage"] = usage
    return body


# -- requests every OpenAI-compatible server accepts -------------------------------------


def test_main_job_completes_against_a_llama_cpp_like_server(fixtures_root, db_copy, tmp_path):
    """The issue's example: generate-and-evaluate --provider openai against a server that refuses
    content null and json_schema (500), serves one request at a time: it completes, the downgrade is one
    stderr line, concurrency is 1, and no refused request is retried as transient."""
    out = tmp_path / "results"
    with FakeLLMServer(quirks=LLAMA_CPP_PYTHON) as server:
        env = {"OPENAI_BASE_URL": server.openai_base_url}  # no key: a local server needs none
        result = invoke(
            [
                "generate-and-evaluate",
                "--fixtures",
                str(fixtures_root),
                "--db",
                str(db_copy),
                "--out-dir",
                str(out),
                "--count",
                "5",
                "--provider",
                "openai",
                "--keep-unverified",
            ],
            env,
        )
        requests = list(server.requests)
    assert result.exit_code == 0, result.output
    lines = run_lines(out)
    summary = lines[-1]
    assert summary["evaluated"] == 5 and summary["failed"] == 0
    assert lines[0]["config"]["concurrency"] == LOCAL_CONCURRENCY
    refused = [r for r in requests if r.status != 200]
    # the only refusal: the first json_schema request (500), then JSON mode with the schema for every judge call
    # (pointwise: one per result plus one list-level call per query)
    assert len(refused) == 1 and refused[0].body["response_format"]["type"] == "json_schema"
    formats = [r.body.get("response_format", {}).get("type") for r in requests if "response_format" in r.body]
    judged = sum(ev["labelsJudged"] for ev in lines if ev["type"] == "evaluation")
    assert formats == ["json_schema"] + ["json_object"] * (len(formats) - 1) and len(formats) - 1 > judged
    assert all("schema" in r.body["response_format"] for r in requests if r.status == 200 and "response_format" in r.body)
    phase_one = len(requests) - len(formats)
    assert summary["usage"]["calls"] == len(requests) and phase_one == 4
    for r in requests:  # no message a strict server refuses
        for m in r.body["messages"]:
            assert m.get("content") is not None and (m["role"] != "assistant" or m["content"] or m.get("tool_calls"))
    assert result.output.count("does not accept response_format json_schema") == 1
    assert "Input should be 'text' or 'json_object'" in result.output  # the server's own reason, in the note
    assert "is a local server" in result.output and "queue" in result.output
    assert "concurrency 1 for a local server" in result.output


def test_main_job_with_concurrency_set_keeps_it_and_says_what_it_means(fixtures_root, db_copy, tmp_path):
    out = tmp_path / "results"
    with FakeLLMServer(quirks=LLAMA_CPP_PYTHON) as server:
        result = invoke(
            [
                "generate-and-evaluate",
                "--fixtures",
                str(fixtures_root),
                "--db",
                str(db_copy),
                "--out-dir",
                str(out),
                "--count",
                "3",
                "--provider",
                "openai",
                "--concurrency",
                "3",
            ],
            {"OPENAI_BASE_URL": server.openai_base_url},
        )
    assert result.exit_code == 0, result.output
    assert run_lines(out)[0]["config"]["concurrency"] == 3
    assert "--concurrency 3 against a local server" in result.output


@pytest.mark.parametrize("status", [500, 422])
def test_json_schema_refused_with_500_or_422_falls_back_once_for_the_run(status, tmp_path):
    """llama-cpp-python answers 500, FastAPI-validated servers 422 (``{"detail": [...]}``); both name the
    field, so both downgrade at once instead of being retried as transient."""
    with FakeLLMServer(quirks=Quirks(json_schema_status=status)) as server:
        provider = make_provider(server, "openai")
        outcome, lines, _ = run(tmp_path, provider, 3)
        check_run(lines, server, evaluated=["q1", "q2", "q3"])
        assert [r.status for r in server.requests] == [status, 200, 200, 200]
        assert [r.body["response_format"]["type"] for r in server.requests] == ["json_schema"] + ["json_object"] * 3
    assert outcome.exit_code == EXIT_OK
    assert len(notes_of(provider)) == 1 and "'text' or 'json_object'" in notes_of(provider)[0]
    assert "File" not in notes_of(provider)[0] and "app.py" not in notes_of(provider)[0]  # the traceback trailer is cut
    assert lines[1]["usage"]["costUsd"] is not None


def test_a_500_that_names_no_field_is_transient_not_a_downgrade(server, tmp_path):
    server.faults.append(Fault(status=500))
    provider = make_provider(server, "openai")
    _, lines, _ = run(tmp_path, provider, 1)
    check_run(lines, server, evaluated=["q1"])
    assert [r.body["response_format"]["type"] for r in server.requests] == ["json_schema", "json_schema"]
    assert provider.json_schema_supported and not notes_of(provider)


def test_json_object_refused_too_ends_with_the_schema_in_the_prompt_only(tmp_path):
    """Another member: a server that takes no response_format at all (400 naming it each time)."""
    with FakeLLMServer() as server:
        provider = make_provider(server, "openai")
        body = {"error": {"message": "response_format is not supported", "type": "invalid_request_error", "param": "response_format"}}
        server.faults.extend([Fault(status=400, body=body), Fault(status=400, body=body), Fault(status=400, body=body)])
        _, lines, _ = run(tmp_path, provider, 2)
        check_run(lines, server, evaluated=["q1", "q2"])
        kinds = [(r.body.get("response_format") or {}).get("type") for r in server.requests]
        assert kinds == ["json_schema", "json_object", "json_object", None, None]
        assert "schema" in server.requests[1].body["response_format"] and "schema" not in server.requests[2].body["response_format"]
    assert provider.capabilities.structured == "prompt" and len(notes_of(provider)) == 3
    assert lines[1]["type"] == "evaluation"


def test_forced_tool_ladder_named_then_required_then_auto(tmp_path):
    """A forced named tool refused (servers that take only string forms), then "required" refused
    (llama-cpp-python: 500 with an empty message): the same call ends with "auto" and only that tool
    offered; the next forced call goes straight there."""
    quirks = Quirks(named_tool_choice_status=500, required_tool_choice_status=500)
    with FakeLLMServer(quirks=quirks) as server:
        provider = make_provider(server, "openai")
        tools = TOOLS + [submit_tool(3)]
        turns = [Turn("user", text="write 3 queries")]
        reply = provider.complete("system", turns, tools, force_tool="submit_queries")
        assert reply.attempts == 3 and reply.tool_uses[0].name == "submit_queries"
        choices = [r.body.get("tool_choice") for r in server.requests]
        assert choices[0] == {"type": "function", "function": {"name": "submit_queries"}}
        assert choices[1:] == ["required", "auto"]
        assert [len(r.body["tools"]) for r in server.requests] == [5, 1, 1]
        assert "Call the submit_queries tool now." in server.requests[2].body["messages"][0]["content"]
        again = provider.complete("system", turns, tools, force_tool="submit_queries")
        assert again.attempts == 1 and server.requests[-1].body["tool_choice"] == "auto"
        unforced = provider.complete("system", turns, tools)  # an unforced call offers every tool, as before
        assert len(server.requests[-1].body["tools"]) == 5 and unforced.attempts == 1
    assert len(notes_of(provider)) == 2


def test_required_answered_by_an_empty_500_elsewhere_is_transient(server, tmp_path):
    """An empty 500 is a downgrade only for a request carrying "required" (measured on llama-cpp-python);
    on any other request it stays a transient error, retried."""
    server.faults.append(Fault(status=500, body={"error": {"message": "", "type": "internal_server_error"}}))
    provider = make_provider(server, "openai")
    _, lines, _ = run(tmp_path, provider, 1)
    check_run(lines, server, evaluated=["q1"])
    assert server.count() == 2 and not notes_of(provider)


def test_grammar_schema_bounds_free_text():
    from judge_runner.core.resources import pinned_schema
    from judge_runner.llm.openai_provider import GRAMMAR_STRING_CAP, grammar_schema

    schema = grammar_schema(pinned_schema("judge_labels.schema.json", "labels", 2))
    assert "$schema" not in schema and "$id" not in schema
    item = schema["properties"]["labels"]["items"]["properties"]
    assert item["id"]["maxLength"] == GRAMMAR_STRING_CAP  # a string without a bound gets the grammar's cap
    assert item["reason"]["maxLength"] == 400  # its own bound kept
    assert schema["properties"]["labels"]["minItems"] == schema["properties"]["labels"]["maxItems"] == 2
    verdict = grammar_schema(pinned_schema("judge_list_verdict.schema.json", "", None))
    assert verdict["properties"]["analysis"]["properties"]["coverage"]["maxLength"] == 1000  # its own bound kept
    assert verdict["properties"]["suggestions"]["items"]["maxLength"] == 300


@pytest.mark.parametrize("status", [400, 422, 500])
def test_seed_refused_is_dropped_for_the_run(status, server, tmp_path):
    server.quirks = Quirks(seed_status=status)
    provider = make_provider(server, "openai")
    _, lines, _ = run(tmp_path, provider, 2)
    check_run(lines, server, evaluated=["q1", "q2"])
    assert ["seed" in r.body for r in server.requests] == [True, False, False]
    assert len(notes_of(provider)) == 1 and "seed" in notes_of(provider)[0]


def test_generator_and_judge_of_one_server_learn_once(server, capsys):
    generator = make_provider(server, "openai")
    judge = make_provider(server, "openai")
    share_server(generator, judge)
    server.quirks = Quirks(json_schema_status=500)
    from judge_runner.llm.base import ToolSpec

    tool = ToolSpec("record_verdict", "v", {"type": "object", "properties": {"labels": {"type": "array", "minItems": 0, "maxItems": 0}}})
    for provider in (judge, generator):
        provider.complete("s", [Turn("user", text="judge")], [tool], force_tool="record_verdict")
    assert [r.status for r in server.requests] == [500, 200, 200]
    assert capsys.readouterr().err.count("does not accept response_format json_schema") == 1


def test_messages_never_hold_content_null_or_an_empty_assistant_turn():
    turns = [
        Turn("user", text="find the queries"),
        Turn("assistant", text=None, tool_uses=[ToolUse("c1", "list_dir", {"path": "."})]),
        Turn("user", tool_results=[ToolResult("c1", "")]),
        Turn("assistant", text=None),  # an empty reply
        Turn("user", text="Call submit_queries now."),
        Turn("assistant", text="   "),
        Turn("user", text="Now, please."),
    ]
    messages = OpenAIProvider._messages("sys", turns)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assert all(m["content"] is not None for m in messages)
    assert messages[2]["content"] == "" and messages[2]["tool_calls"][0]["function"]["name"] == "list_dir"
    assert messages[3]["content"] == "(empty)"
    assert messages[4]["content"] == "Call submit_queries now.\n\nNow, please."
    blocks = AnthropicProvider._messages(turns)
    assert [m["role"] for m in blocks] == ["user", "assistant", "user"]  # empty turns dropped, users merged
    assert all(m["content"] for m in blocks)
    assert [b["type"] for b in blocks[2]["content"]] == ["tool_result", "text", "text"]


def test_a_non_finite_number_is_echoed_as_a_string_never_nan_on_the_wire():
    verdict = {"scores": {"relevance": float("nan"), "ranking": float("inf"), "coverage": -math.inf}, "labels": [(1, 2)]}
    text = dumps_safe(verdict)
    assert json.loads(text)["scores"] == {"relevance": "NaN", "ranking": "Infinity", "coverage": "-Infinity"}
    turns = [
        Turn("user", text="judge"),
        Turn("assistant", tool_uses=[ToolUse("t1", "record_verdict", verdict)]),
        Turn("user", tool_results=[ToolResult("t1", "invalid", True)]),
    ]
    for body in (AnthropicProvider._messages(turns), OpenAIProvider._messages("s", turns)):
        json.dumps(body, allow_nan=False)  # a strict encoder accepts it
    structured = [Turn("user", text="judge"), Turn("assistant", tool_uses=[ToolUse(STRUCTURED_ID, "record_verdict", verdict)])]
    assert "NaN" in OpenAIProvider._messages("s", structured)[-1]["content"]


# -- empty or odd replies ------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_nan_verdict_is_reasked_and_the_reask_is_a_valid_request(api, server, tmp_path):
    """The issue's example (anthropic): a verdict holding NaN was never re-asked (the echoed NaN made the
    HTTP encoder fail: ValueError, attempts 0). Now it is re-asked and the second verdict kept."""
    server.brain = Script(with_score(float("nan")))
    outcome, lines, _ = run(tmp_path, make_provider(server, api), 1)
    check_run(lines, server, evaluated=["q1"], served_by_brain=False)
    assert [r.status for r in server.requests] == [200, 200]
    assert "NaN" in json.dumps(server.requests[1].body["messages"])  # echoed as a string
    assert "/relevance" in json.dumps(server.requests[1].body["messages"][-1])  # the re-ask names the bad field
    assert outcome.exit_code == EXIT_OK


@pytest.mark.parametrize("api", APIS)
def test_nan_verdict_persisting_is_invalid_output_with_true_attempts(api, server, tmp_path):
    server.brain = Script(*[with_score(float("nan"))] * (1 + MAX_REASKS))
    _, lines, _ = run(tmp_path, make_provider(server, api), 1)
    errors, _ = check_run(lines, server, evaluated=[], errors=["q1"], served_by_brain=False)
    assert errors["q1"]["errorType"] == "invalid_output" and errors["q1"]["attempts"] == 3 == server.count()


def test_anthropic_empty_content_is_reasked_without_an_empty_assistant_turn(server, tmp_path):
    """The issue's example: ``content: []`` was echoed as an empty assistant turn (the real API answers
    400, as the fake now does). The re-ask leaves it out and the verdict is kept."""
    server.faults.append(
        Fault(
            body={
                "id": "msg_x",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": [],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 1},
            }
        )
    )
    outcome, lines, _ = run(tmp_path, make_provider(server, "anthropic"), 1)
    check_run(lines, server, evaluated=["q1"], served_by_brain=False)
    assert [r.status for r in server.requests] == [200, 200]
    reask = server.requests[1].body["messages"]
    assert [m["role"] for m in reask] == ["user"] and "no JSON object" in json.dumps(reask)
    assert outcome.exit_code == EXIT_OK


@pytest.mark.parametrize("content", [None, "", "  "])
def test_openai_empty_reply_is_reasked_without_content_null(content, tmp_path):
    """Another member: an empty OpenAI reply (content null or blank, no tool calls) re-asked against a
    server that refuses content null: the re-ask must not carry ``{"role": "assistant", "content": null}``."""
    with FakeLLMServer(quirks=Quirks(null_content_status=500)) as server:
        server.faults.append(Fault(body=completion_body(content)))
        outcome, lines, _ = run(tmp_path, make_provider(server, "openai"), 1)
        check_run(lines, server, evaluated=["q1"], served_by_brain=False)
        assert [r.status for r in server.requests] == [200, 200]
        assert [m["role"] for m in server.requests[1].body["messages"]] == ["system", "user"]
    assert outcome.exit_code == EXIT_OK


def test_openai_choices_empty_is_a_typed_error_with_true_attempts(server, tmp_path):
    """The issue's example: ``choices: []`` became errorType IndexError, attempts 0, no retry."""
    server.faults.extend(Fault(body=completion_body("x", choices=False)) for _ in range(4))
    _, lines, _ = run(tmp_path, make_provider(server, "openai"), 2)
    errors, _ = check_run(lines, server, evaluated=["q2"], errors=["q1"], served_by_brain=False)
    assert errors["q1"]["errorType"] == "malformed_reply" and errors["q1"]["attempts"] == 4
    assert "choices: []" in errors["q1"]["message"]
    assert [query_of(r) for r in server.requests] == ["q1"] * 4 + ["q2"]


def test_openai_choices_empty_once_is_retried(server, tmp_path):
    server.faults.append(Fault(body=completion_body("x", choices=False)))
    _, lines, _ = run(tmp_path, make_provider(server, "openai"), 1)
    check_run(lines, server, evaluated=["q1"])
    assert server.count() == 2


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(("raw", "where"), [('{"id": "x", "choices": [', "line 1 column 25 (char 24)"), ("", "line 1 column 1 (char 0)")])
def test_a_body_that_is_not_json_is_typed_and_keeps_the_decode_position(api, raw, where, server, tmp_path):
    server.faults.extend(Fault(raw_body=raw) for _ in range(4))
    _, lines, _ = run(tmp_path, make_provider(server, api), 1)
    errors, _ = check_run(lines, server, evaluated=[], errors=["q1"], served_by_brain=False)
    assert errors["q1"]["errorType"] == "malformed_reply" and errors["q1"]["attempts"] == 4
    assert where in errors["q1"]["message"]


@pytest.mark.parametrize("api", APIS)
def test_an_html_page_instead_of_a_reply_is_typed(api, server, tmp_path):
    """Another member: a proxy's HTML page with status 200 (the SDKs hand back a plain string)."""
    server.faults.extend(Fault(raw_body="<html>502 Bad Gateway</html>", headers={"Content-Type": "text/html"}) for _ in range(4))
    _, lines, _ = run(tmp_path, make_provider(server, api), 1)
    errors, _ = check_run(lines, server, evaluated=[], errors=["q1"], served_by_brain=False)
    assert errors["q1"]["errorType"] == "malformed_reply" and errors["q1"]["attempts"] == 4
    assert "Bad Gateway" in errors["q1"]["message"]


@pytest.mark.parametrize("api", APIS)
def test_invalid_json_text_keeps_its_position_in_the_error(api, server, tmp_path):
    server.faults.extend(Fault(raw_text='{"labels": [oops') for _ in range(1 + MAX_REASKS))
    _, lines, _ = run(tmp_path, make_provider(server, api), 1)
    errors, _ = check_run(lines, server, evaluated=[], errors=["q1"], served_by_brain=False)
    assert "line 1 column 13 (char 12)" in errors["q1"]["message"]


# -- errors carry the server's own message, never a secret ------------------------------


@pytest.mark.parametrize("api", APIS)
def test_error_line_carries_the_servers_message_without_secrets(api, server, tmp_path):
    key = "sk-test-0123456789abcdef"
    said = f"This model's maximum context length is 8192 tokens; your key {key} is fine. Bearer abcdefghijklmnop"
    body = (
        {"type": "error", "error": {"type": "invalid_request_error", "message": said}}
        if api == "anthropic"
        else {"error": {"message": said, "type": "invalid_request_error", "param": "messages", "code": None}}
    )
    server.faults.append(Fault(status=400, body=body))
    _, lines, _ = run(tmp_path, make_provider(server, api, api_key=key), 2)
    errors, _ = check_run(lines, server, evaluated=["q2"], errors=["q1"], served_by_brain=False)
    message = errors["q1"]["message"]
    assert errors["q1"]["errorType"] == "request_error" and errors["q1"]["attempts"] == 1
    assert "maximum context length is 8192 tokens" in message
    assert key not in message and "abcdefghijklmnop" not in message and "[REDACTED]" in message


def test_transient_error_line_carries_the_servers_message(server, tmp_path):
    server.faults.extend(
        Fault(status=503, body={"error": {"message": "model is loading, try again", "type": "server_error"}}) for _ in range(4)
    )
    _, lines, _ = run(tmp_path, make_provider(server, "openai"), 1)
    errors, _ = check_run(lines, server, evaluated=[], errors=["q1"], served_by_brain=False)
    assert errors["q1"]["errorType"] == "transient_error" and "model is loading, try again" in errors["q1"]["message"]


def test_server_message_shapes_and_truncation():
    class E(Exception):
        def __init__(self, body):
            self.body, self.response = body, None

    assert server_message(E({"message": "bad", "param": "seed"})) == "seed: bad"
    assert (
        server_message(E({"detail": [{"loc": ["body", "response_format", "type"], "msg": "Input should be 'text'"}]}))
        == "response_format.type: Input should be 'text'"
    )
    assert server_message(E({"error": "model 'x' not found"})) == "model 'x' not found"  # Ollama
    assert server_message(E("plain\ntext  body")) == "plain text body"
    assert server_message(E(None)) is None
    long = server_message(E({"message": "x" * 1000}))
    assert len(long) == 300 and long.endswith("…")
    assert redact("api_key: hunter2hunter2 and sk-ant-api03-abcdefgh") == "api_key: [REDACTED] and [REDACTED]"


# -- local servers ----------------------------------------------------------------------


def test_timeout_on_a_local_server_is_not_retried_and_the_server_keeps_working(tmp_path):
    """A single-slot server keeps generating a request whose client timed out. The timeout is reported
    (errorType timeout, 1 attempt, saying why there is no retry); the next query queues behind the
    abandoned generation and is still served."""
    with FakeLLMServer(quirks=Quirks(serial=True)) as server:
        server.faults.append(Fault(delay_s=1.2))  # q1's generation outlives the client's 0.8 s timeout
        provider = make_provider(server, "openai", timeout_s=0.8)
        _, lines, elapsed = run(tmp_path, provider, 2)
        errors, _ = check_run(lines, server, evaluated=["q2"], errors=["q1"], served_by_brain=False)
        assert [query_of(r) for r in server.requests] == ["q1", "q2"]
        assert server.requests[0].status == 200  # the server finished q1 after its client left
        assert errors["q1"]["errorType"] == "timeout" and errors["q1"]["attempts"] == 1
        assert "queue" in errors["q1"]["message"] and "not retried" in errors["q1"]["message"]
        assert elapsed < 3


def test_timeout_on_a_remote_server_is_still_retried(server, tmp_path):
    server.faults.append(Fault(delay_s=1.0))
    provider = make_provider(server, "openai", timeout_s=0.4)
    provider.local = False  # as if the base URL were remote
    _, lines, _ = run(tmp_path, provider, 1)
    check_run(lines, server, evaluated=["q1"], served_by_brain=False)
    assert server.count() == 2


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://10.0.0.5/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://172.16.0.1/v1", True),
        ("http://gpu-box.local:8000/v1", True),
        ("http://[fd00::1]/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://8.8.8.8/v1", False),
        ("https://example.com/v1", False),
        (None, False),
        ("", False),
    ],
)
def test_is_local_url(url, local):
    assert is_local_url(url) is local


def test_local_server_setup():
    assert local_server_setup("https://api.openai.com/v1", 5, False, 60) == (5, [])
    concurrency, notes = local_server_setup("http://127.0.0.1:8080/v1", 5, False, 60)
    assert concurrency == 1 and len(notes) == 2 and "60 s counts the time a request waits in its queue" in notes[0]
    concurrency, notes = local_server_setup("http://127.0.0.1:8080/v1", 4, True, 60)
    assert concurrency == 4 and "--concurrency 4 against a local server" in notes[1]


# -- missing usage -------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_usage_null_is_unknown_cost_and_the_budget_still_holds(api, tmp_path):
    """The issue's example: ``"usage": null`` on a $0.05 budget ran 24 queries, reported $0.00 and never
    enforced the budget. Now each reply without usage keeps its worst case charged: the budget stops
    the run, the cost is unknown (null), never 0, and the verdicts that came back are kept."""
    with FakeLLMServer(quirks=Quirks(usage="null")) as server:
        max_usd = 0.05 if api == "openai" else 0.10  # claude-sonnet-4-6's worst case for one call is $0.06
        budget = Budget(max_usd=max_usd)
        provider = make_provider(server, api, budget=budget)
        assert provider.price is not None  # a priced model: only the missing usage makes the cost unknown
        outcome, lines, _ = run(tmp_path, provider, 24)
        evaluations = [l for l in lines if l["type"] == "evaluation"]
        summary = lines[-1]
        assert 1 <= len(evaluations) < 24 and server.count() == len(evaluations)
    assert all(e["usage"]["costUsd"] is None for e in evaluations)
    assert summary["costUsd"] is None and summary["budgetExhausted"] is True
    assert budget.charged_usd <= max_usd and budget.unreported_usd > 0
    assert outcome.exit_code == EXIT_INCOMPLETE


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", ["null-fields", "absent", "null"])
def test_missing_usage_keeps_a_valid_verdict(api, mode, tmp_path):
    """The issue's second example: ``{"prompt_tokens": null, ...}`` made every valid verdict fail with a
    TypeError. Other members: usage absent, usage null."""
    with FakeLLMServer(quirks=Quirks(usage=mode)) as server:
        outcome, lines, _ = run(tmp_path, make_provider(server, api), 2)
        check_run(lines, server, evaluated=["q1", "q2"])
    assert all(l["usage"]["costUsd"] is None for l in lines if l["type"] == "evaluation")
    assert lines[-1]["costUsd"] is None
    assert outcome.exit_code == EXIT_OK


def test_budget_settle_with_unreported_usage():
    price = Price(2.0, 8.0, 2.5, 0.5)
    budget = Budget(max_usd=1.0, max_tokens=100_000)
    reservation = budget.reserve(price, 1000, 1000)
    worst = (1000 * 2.0 + 1000 * 8.0) / 1e6
    cost = budget.settle(reservation, Usage(input_tokens=100, output_tokens=10, calls=2, unreported=1), price)
    assert cost is None and budget.total_cost_usd is None
    assert budget.unreported_usd == pytest.approx(worst)
    assert budget.charged_usd == pytest.approx(worst + (100 * 2.0 + 10 * 8.0) / 1e6)
    assert budget.tokens_used == 110 + 2000
    reported = budget.settle(budget.reserve(price, 10, 10), Usage(input_tokens=10, output_tokens=10, calls=1), price)
    assert reported == pytest.approx((10 * 2.0 + 10 * 8.0) / 1e6) and budget.total_cost_usd is None  # unknown stays unknown
