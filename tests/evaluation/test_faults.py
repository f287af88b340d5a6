"""Fault injection: the judge and the run loop against the loopback fake server, through the REAL
anthropic and openai SDKs (no mocks between our code and the wire).

Every test injects one fault and asserts three things:

(a) what was recorded: the ``evaluation`` or ``error`` line, its ``errorType`` and ``attempts``;
(b) exactly how many HTTP requests the fake received (``max_retries=3`` -> at most 4 requests), and that
    the run's own count (``summary.usage.calls``) agrees with it;
(c) that no finished judgment was lost: every query the judge answered has its evaluation line, and
    nothing is recorded twice.

Searches come from a stub backend (three fixed hits, no index, no embedding model); providers are the
real ones with a fast RetryPolicy (base 10 ms), so no test sleeps for real more than about two seconds.
The judge labels in batched mode and gives a fixed list-level verdict without a call
(:class:`OneCallJudge`), so each query is exactly ONE judge call (``record_labels``) and the counts below
are per query; the protocol's own call pattern is tests/judging/test_protocol.py's.
Ctrl+C and SIGTERM are covered by tests/evaluation/test_loop.py, resuming by tests/e2e/test_main_job.py.
"""

from __future__ import annotations

import json

import anthropic  # noqa: F401  - imported here so no test's timing includes the SDK's import
import openai  # noqa: F401
import pytest

from judge_runner.evaluation.loop import EXIT_CONFIG, EXIT_INCOMPLETE, EXIT_OK
from judge_runner.judging.llm_judge import JUDGE_MAX_TOKENS, MAX_REASKS
from judge_runner.llm.budget import Budget
from judge_runner.llm.pricing import price_for
from tests.support.fakes.fake_llm import FakeLLMServer, Fault
from tests.support.fault_runs import (
    HITS,
    MAX_RETRIES,
    MODELS,
    JsonModeBrain,
    Script,
    check_run,
    fast_retry,
    make_provider,
    query_of,
    refused,
    run,
    truncated,
    verdict_text,
    with_score,
)

# these tests exercise the CLI, the pipeline and the judge, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder

APIS = ["anthropic", "openai"]


# -- the harness is tests/support/fault_runs.py ------------------------------------------------------


@pytest.fixture()
def server():
    with FakeLLMServer() as srv:
        yield srv


# -- 1-5: retried HTTP and transport failures -------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_429_with_retry_after_is_retried_after_the_wait(api, server, tmp_path):
    # both header forms are read: retry-after (seconds) and retry-after-ms
    headers = {"retry-after": "0.2"} if api == "anthropic" else {"retry-after-ms": "200"}
    server.faults.append(Fault(status=429, headers=headers))
    outcome, lines, elapsed = run(tmp_path, make_provider(server, api), 1)
    check_run(lines, server, evaluated=["q1"])
    assert server.count() == 2
    assert [r.status for r in server.requests] == [429, 200]
    gap = server.requests[1].time - server.requests[0].time
    assert gap >= 0.2, f"Retry-After 0.2 s not honoured: the retry came {gap:.3f} s later"
    assert elapsed >= 0.2 and elapsed < 1.5
    assert outcome.exit_code == EXIT_OK


@pytest.mark.parametrize(("api", "status"), [("anthropic", 529), ("anthropic", 500), ("openai", 500), ("anthropic", 503), ("openai", 503)])
def test_overload_and_server_error_then_success(api, status, server, tmp_path):
    server.faults.append(Fault(status=status))
    outcome, lines, _ = run(tmp_path, make_provider(server, api), 1)
    check_run(lines, server, evaluated=["q1"])
    assert [r.status for r in server.requests] == [status, 200]
    assert outcome.exit_code == EXIT_OK


@pytest.mark.parametrize("api", APIS)
def test_503_on_every_attempt_is_an_error_line_and_the_run_goes_on(api, server, tmp_path):
    server.faults.extend(Fault(status=503) for _ in range(MAX_RETRIES + 1))
    outcome, lines, elapsed = run(tmp_path, make_provider(server, api), 4)
    errors, summary = check_run(lines, server, evaluated=["q2", "q3", "q4"], errors=["q1"])
    assert server.count() == MAX_RETRIES + 1 + 3  # 4 for q1 (1 + 3 retries), then one each for q2..q4
    assert [query_of(r) for r in server.requests[:4]] == ["q1"] * 4
    assert errors["q1"]["errorType"] == "transient_error" and errors["q1"]["stage"] == "judge"
    assert errors["q1"]["attempts"] == 4 and "503" in errors["q1"]["message"]
    assert summary["stopReason"] is None
    assert outcome.exit_code == EXIT_OK  # 1 failure in 4 is not more than a quarter
    assert elapsed < 2


@pytest.mark.parametrize("api", APIS)
def test_connection_reset_is_retried(api, server, tmp_path):
    server.faults.append(Fault(reset=True))
    outcome, lines, _ = run(tmp_path, make_provider(server, api), 2)
    check_run(lines, server, evaluated=["q1", "q2"])
    assert server.count() == 3
    assert [query_of(r) for r in server.requests] == ["q1", "q1", "q2"]
    assert server.requests[0].status == 0 and server.requests[1].status == 200
    assert outcome.exit_code == EXIT_OK


# -- 6: a server that never answers ----------------------------------------------------------------


def test_hung_server_times_out_every_attempt_then_error_line(server, tmp_path):
    server.faults.extend(Fault(hang=True) for _ in range(MAX_RETRIES + 1))
    provider = make_provider(server, "anthropic", timeout_s=0.5)
    outcome, lines, elapsed = run(tmp_path, provider, 2)
    errors, _ = check_run(lines, server, evaluated=["q2"], errors=["q1"])
    assert server.count() == MAX_RETRIES + 1 + 1
    assert errors["q1"]["errorType"] == "transient_error" and errors["q1"]["attempts"] == 4
    assert "APITimeoutError" in errors["q1"]["message"]
    assert 4 * 0.5 <= elapsed < 4 * 0.5 + 1.0  # four timeouts, tiny backoffs, no hang
    assert outcome.exit_code == EXIT_INCOMPLETE  # 1 failure in 2 is more than a quarter


def test_hung_server_call_deadline_stops_before_four_attempts(server, tmp_path):
    server.faults.extend(Fault(hang=True) for _ in range(MAX_RETRIES + 1))
    timeout_s, deadline_s = 1.0, 1.2
    provider = make_provider(server, "anthropic", timeout_s=timeout_s, retry=fast_retry(deadline_s=deadline_s))
    outcome, lines, elapsed = run(tmp_path, provider, 1)
    errors, _ = check_run(lines, server, evaluated=[], errors=["q1"])
    # attempt 1 times out at 1.0 s; attempt 2 gets only what is left of the deadline (0.2 s)
    assert server.count() == 2
    assert errors["q1"]["errorType"] == "transient_error" and errors["q1"]["attempts"] == 2
    # the deadline bounds the whole call, the attempt in flight included: a second attempt with its own full
    # timeout would end at 2.0 s or later; the margin (0.7 s) is for a loaded two-core machine
    assert elapsed < deadline_s + 0.7 < 2 * timeout_s
    assert outcome.exit_code == EXIT_INCOMPLETE


# -- 7-10: malformed or invalid verdicts ------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("raw", "recovery"),
    [
        ("```json\n{verdict}\n```", "stripped code fence"),
        ("Here is my verdict:\n{verdict}\nI hope this helps.", "removed prose around the JSON object"),
    ],
)
def test_recoverable_reply_is_recorded_with_its_recovery(api, raw, recovery, server, tmp_path):
    # openai: the structured-output path (json_schema) gets text content it cannot parse as one object;
    # anthropic: the model answers text instead of calling record_verdict
    server.faults.append(Fault(raw_text=raw.replace("{verdict}", verdict_text())))
    outcome, lines, _ = run(tmp_path, make_provider(server, api), 2)
    check_run(lines, server, evaluated=["q1", "q2"], served_by_brain=False)
    assert server.count() == 2  # recovered without a re-ask
    if api == "openai":
        assert server.requests[0].body["response_format"]["type"] == "json_schema"
    by_id = {l["queryId"]: l for l in lines if l["type"] == "evaluation"}
    assert by_id["q1"]["judgeRecoveries"] == [recovery]
    assert "judgeRecoveries" not in by_id["q2"]
    assert by_id["q1"]["scores"]["judgeOverall"] == 0.7
    assert outcome.exit_code == EXIT_OK


@pytest.mark.parametrize("api", APIS)
def test_invalid_json_every_time_is_reasked_twice_then_invalid_output(api, server, tmp_path):
    server.faults.extend(Fault(raw_text='{"labels": [oops') for _ in range(1 + MAX_REASKS))
    outcome, lines, _ = run(tmp_path, make_provider(server, api), 2)
    errors, _ = check_run(lines, server, evaluated=["q2"], errors=["q1"], served_by_brain=False)
    assert server.count() == 1 + MAX_REASKS + 1
    assert [query_of(r) for r in server.requests] == ["q1", "q1", "q1", "q2"]
    assert errors["q1"]["errorType"] == "invalid_output" and errors["q1"]["attempts"] == 3
    # each re-ask carries the invalid reply and what was wrong with it
    assert "Your reply was invalid" in json.dumps(server.requests[1].body["messages"][-1])
    assert len(server.requests[2].body["messages"]) == len(server.requests[1].body["messages"]) + 2
    assert outcome.exit_code == EXIT_INCOMPLETE  # 1 of 2 failed


BAD_SCORES = [("anthropic", 1.7), ("anthropic", "0.8"), ("openai", 1.7), ("openai", "0.8"), ("openai", float("nan"))]


def queue_bad_verdicts(server, api, value, times):
    """``times`` judge replies with a label = value: raw text through openai (so NaN survives:
    json.loads accepts it), a record_labels tool call through anthropic."""
    if api == "openai":
        server.faults.extend(Fault(raw_text=verdict_text(relevance=value)) for _ in range(times))
    else:
        server.brain = Script(*[with_score(value)] * times)


@pytest.mark.parametrize(("api", "value"), BAD_SCORES, ids=[f"{a}-{v!r}" for a, v in BAD_SCORES])
def test_invalid_score_persisting_is_an_error_line(api, value, server, tmp_path):
    queue_bad_verdicts(server, api, value, 1 + MAX_REASKS)
    outcome, lines, _ = run(tmp_path, make_provider(server, api), 1)
    errors, _ = check_run(lines, server, evaluated=[], errors=["q1"], served_by_brain=False)
    assert server.count() == 1 + MAX_REASKS
    assert errors["q1"]["errorType"] == "invalid_output" and errors["q1"]["attempts"] == 3
    assert "labels/0/relevance" in errors["q1"]["message"]
    assert outcome.exit_code == EXIT_INCOMPLETE


@pytest.mark.parametrize(("api", "value"), BAD_SCORES, ids=[f"{a}-{v!r}" for a, v in BAD_SCORES])
def test_invalid_score_once_then_valid_is_recorded(api, value, server, tmp_path):
    queue_bad_verdicts(server, api, value, 1)
    outcome, lines, _ = run(tmp_path, make_provider(server, api), 1)
    check_run(lines, server, evaluated=["q1"], served_by_brain=False)
    assert server.count() == 2
    evaluation = lines[1]
    assert [r["relevance"] for r in evaluation["results"]] == [0] * HITS  # the re-asked labels, not the invalid one
    assert "judgeRecoveries" not in evaluation
    assert "labels/0/relevance" in json.dumps(server.requests[1].body["messages"][-1])
    assert outcome.exit_code == EXIT_OK


# -- 11-12: truncation and refusal ------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_max_tokens_truncation_is_retried_once_with_double_the_limit(api, server, tmp_path):
    server.brain = Script(truncated)
    outcome, lines, _ = run(tmp_path, make_provider(server, api), 1)
    check_run(lines, server, evaluated=["q1"])
    assert server.count() == 2
    # with a base_url, the openai provider sends max_tokens (what compatible servers accept)
    assert [r.body["max_tokens"] for r in server.requests] == [JUDGE_MAX_TOKENS, 2 * JUDGE_MAX_TOKENS]
    assert outcome.exit_code == EXIT_OK


@pytest.mark.parametrize("api", APIS)
def test_truncated_twice_is_an_error_line(api, server, tmp_path):
    server.brain = Script(truncated, truncated)
    outcome, lines, _ = run(tmp_path, make_provider(server, api), 1)
    errors, _ = check_run(lines, server, evaluated=[], errors=["q1"], served_by_brain=False)
    assert server.count() == 2
    assert errors["q1"]["errorType"] == "truncated" and errors["q1"]["attempts"] == 2
    assert outcome.exit_code == EXIT_INCOMPLETE


@pytest.mark.parametrize("api", APIS)
def test_refusal_is_an_error_line_never_retried(api, server, tmp_path):
    server.brain = Script(refused)
    outcome, lines, _ = run(tmp_path, make_provider(server, api), 4)
    errors, summary = check_run(lines, server, evaluated=["q2", "q3", "q4"], errors=["q1"], served_by_brain=False)
    assert server.count() == 4  # one request for the refused query, then one per other query
    assert errors["q1"]["errorType"] == "refusal" and errors["q1"]["attempts"] == 1
    assert summary["stopReason"] is None and outcome.exit_code == EXIT_OK


# -- 13-15: failures that stop the run --------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_refused_api_key_stops_the_run_with_exit_2(api, server, tmp_path):
    outcome, lines, _ = run(tmp_path, make_provider(server, api, api_key="invalid-key"), 3)
    errors, summary = check_run(lines, server, evaluated=[], errors=["q1"])
    assert server.count() == 1  # 401 is never retried, and no later query is sent
    assert [l["type"] for l in lines] == ["run_start", "error", "summary"]
    assert errors["q1"]["errorType"] == "auth_error" and errors["q1"]["attempts"] == 1
    assert "invalid-key" not in json.dumps(lines)
    assert summary["stopReason"] == "auth_error" and outcome.exit_code == EXIT_CONFIG


def spend_limit_fault(api: str) -> Fault:
    if api == "anthropic":
        body = {
            "type": "error",
            "error": {
                "type": "rate_limit_error",
                "message": "Your organization has reached its spend limit.",
                "details": {"error_code": "enforced_spend_limit_reached"},
            },
        }
    else:
        body = {
            "error": {
                "message": "You exceeded your current quota.",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
        }
    return Fault(status=429, body=body, headers={"retry-after": "0"})


@pytest.mark.parametrize("api", APIS)
def test_spend_limit_429_is_not_retried_and_stops_the_run_with_exit_3(api, server, tmp_path):
    server.faults.append(spend_limit_fault(api))
    outcome, lines, _ = run(tmp_path, make_provider(server, api), 3)
    errors, summary = check_run(lines, server, evaluated=[], errors=["q1"], served_by_brain=False)
    assert server.count() == 1
    assert errors["q1"]["errorType"] == "spend_limit" and errors["q1"]["attempts"] == 1
    assert summary["stopReason"] == "spend_limit" and summary["budgetExhausted"] is False
    assert outcome.exit_code == EXIT_INCOMPLETE


def test_billing_error_402_stops_the_run_like_a_spend_limit(server, tmp_path):
    server.faults.append(Fault(status=402, body={"type": "error", "error": {"type": "billing_error", "message": "no credit"}}))
    outcome, lines, _ = run(tmp_path, make_provider(server, "anthropic"), 3)
    errors, summary = check_run(lines, server, evaluated=[], errors=["q1"], served_by_brain=False)
    assert server.count() == 1  # never retried, and no later query is sent
    assert errors["q1"]["errorType"] == "spend_limit" and summary["stopReason"] == "spend_limit"
    assert outcome.exit_code == EXIT_INCOMPLETE


@pytest.mark.parametrize("fault", ["auth", "spend_limit"])
def test_run_stopping_failure_keeps_the_judgments_in_flight(fault, server, tmp_path):
    """At concurrency 3 the first reply to arrive stops the run; the two calls already in flight still
    finish and are recorded, and no further query is sent. Every reply waits until all three requests have
    arrived, the stopping one first: on a loaded machine the third query could otherwise start after the
    stop (then it rightly never starts), or a reply timed from its own arrival come back before the stop and
    let a fourth query start; either way the premise of three calls in flight at the stop would not hold."""
    stop = Fault(status=401) if fault == "auth" else spend_limit_fault("anthropic")
    stop.wait_for_requests = 3
    server.faults.extend([stop, Fault(wait_for_requests=3, delay_s=0.3), Fault(wait_for_requests=3, delay_s=0.3)])
    outcome, lines, _ = run(tmp_path, make_provider(server, "anthropic"), 6, concurrency=3)
    stopped = query_of(next(r for r in server.requests if r.status in (401, 429)))
    others = sorted({"q1", "q2", "q3"} - {stopped})
    errors, summary = check_run(lines, server, evaluated=others, errors=[stopped])
    assert server.count() == 3
    assert errors[stopped]["attempts"] == 1
    assert summary["evaluated"] == 2 and summary["totalQueries"] == 6
    assert outcome.exit_code == (EXIT_CONFIG if fault == "auth" else EXIT_INCOMPLETE)


class RecordingBudget(Budget):
    """A Budget that remembers each call's worst case (reserved) and the spend after each call (settled)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.worst: list[float] = []
        self.spent_after: list[float] = []

    def reserve(self, price, input_tokens, max_tokens):
        reservation = super().reserve(price, input_tokens, max_tokens)
        self.worst.append(reservation.usd)
        return reservation

    def settle(self, reservation, usage, price):
        cost = super().settle(reservation, usage, price)
        self.spent_after.append(self.spent_usd)
        return cost


def test_budget_exhausted_mid_run_keeps_what_was_judged_and_sends_nothing_after(tmp_path):
    model = MODELS["anthropic"]
    price = price_for(model)
    # a probe run on its own server (the fake's cache accounting starts afresh, as it will below): what
    # each call reserves (its worst case) and what it really costs
    with FakeLLMServer() as probe_server:
        probe = RecordingBudget()
        run(tmp_path, make_provider(probe_server, "anthropic", budget=probe), 5)
    worst = probe.worst[0]
    assert probe.worst == [worst] * 5  # same prompt length for every query
    assert worst >= JUDGE_MAX_TOKENS * price.output / 1_000_000  # max_tokens of output at the output price
    assert worst < 0.1
    spent = [0.0, *probe.spent_after]  # spent[k]: USD after k calls
    assert all(b > a for a, b in zip(spent, spent[1:]))
    # room for exactly three calls: before call 3, spent[2] + worst fits; before call 4, spent[3] + worst does not
    max_usd = worst + (spent[2] + spent[3]) / 2

    with FakeLLMServer() as server:
        budget = Budget(max_usd=max_usd)
        outcome, lines, _ = run(tmp_path, make_provider(server, "anthropic", budget=budget), 5)
        errors, summary = check_run(lines, server, evaluated=["q1", "q2", "q3"], errors=["q4"])
        assert server.count() == 3
        assert [query_of(r) for r in server.requests] == ["q1", "q2", "q3"]
    assert errors["q4"]["errorType"] == "budget_exhausted" and errors["q4"]["attempts"] == 0
    assert summary["budgetExhausted"] is True and summary["stopReason"] == "budget_exhausted"
    assert summary["costUsd"] == pytest.approx(spent[3], abs=1e-6) and summary["costUsd"] <= max_usd
    assert outcome.exit_code == EXIT_INCOMPLETE


# -- 16: OpenAI-compatible server without structured outputs ----------------------------------------


def test_json_schema_rejected_falls_back_to_json_object_for_the_rest_of_the_run(server, tmp_path):
    server.faults.append(
        Fault(
            status=400,
            body={
                "error": {
                    "message": "response_format json_schema is not supported",
                    "type": "invalid_request_error",
                    "param": "response_format",
                    "code": None,
                }
            },
        )
    )
    server.brain = JsonModeBrain()
    provider = make_provider(server, "openai")
    outcome, lines, _ = run(tmp_path, provider, 3)
    check_run(lines, server, evaluated=["q1", "q2", "q3"])
    assert server.count() == 4  # q1: the refused json_schema request + json_object; q2, q3: json_object only
    assert [r.body["response_format"]["type"] for r in server.requests] == ["json_schema", "json_object", "json_object", "json_object"]
    assert [r.status for r in server.requests] == [400, 200, 200, 200]
    assert provider.json_schema_supported is False
    assert "JSON Schema" in server.requests[1].body["messages"][0]["content"]  # the schema is stated in the system prompt
    assert outcome.exit_code == EXIT_OK


def test_json_schema_fallback_then_transient_error_counts_every_request(server, tmp_path):
    """The refused json_schema request, a 500 on the json_object request, then success: 3 requests, and
    the run's usage must count all three."""
    server.faults.extend([Fault(status=400), Fault(status=500)])
    server.brain = JsonModeBrain()
    provider = make_provider(server, "openai")
    outcome, lines, _ = run(tmp_path, provider, 1)
    check_run(lines, server, evaluated=["q1"], served_by_brain=False)  # asserts summary.usage.calls == 3
    assert [r.body["response_format"]["type"] for r in server.requests] == ["json_schema", "json_object", "json_object"]
    assert outcome.exit_code == EXIT_OK


def test_json_schema_fallback_then_invalid_output_counts_every_request_in_attempts(server, tmp_path):
    """The fallback's refused request is an HTTP request of this judgment: the error line's attempts
    counts it (errors.LLMError: attempts counts the HTTP requests made)."""
    server.faults.extend([Fault(status=400)] + [Fault(raw_text="not json") for _ in range(1 + MAX_REASKS)])
    outcome, lines, _ = run(tmp_path, make_provider(server, "openai"), 1)
    errors, _ = check_run(lines, server, evaluated=[], errors=["q1"], served_by_brain=False)
    assert server.count() == 4
    assert errors["q1"]["errorType"] == "invalid_output" and errors["q1"]["attempts"] == 4


# -- 17: concurrency and the shared back-off --------------------------------------------------------


def test_concurrent_judging_overlaps_calls(server, tmp_path):
    """Concurrency 1 has one call in flight at a time; concurrency 5 has all five at once: each of its
    requests is held until the fifth has arrived, so the run can only finish if the five overlap (no
    wall-clock ratio, which a loaded machine need not meet)."""
    server.latency_s = 0.3
    _, lines_1, sequential = run(tmp_path, make_provider(server, "anthropic"), 5, concurrency=1)
    check_run(lines_1, server, evaluated=[f"q{i}" for i in range(1, 6)])
    assert server.max_in_flight == 1 and sequential >= 5 * 0.3
    server.requests.clear()
    server.latency_s, server.max_in_flight = 0.0, 0
    server.faults.extend(Fault(wait_for_requests=5) for _ in range(5))
    _, lines_5, _ = run(tmp_path, make_provider(server, "anthropic"), 5, concurrency=5)
    check_run(lines_5, server, evaluated=[f"q{i}" for i in range(1, 6)])
    assert server.count() == 5 and server.max_in_flight == 5


def test_retry_after_seen_by_one_call_pauses_the_others(server, tmp_path):
    """Three calls start together. The first two to arrive are answered after 0.3 s; the third gets a 429
    with retry-after 0.5 s at once. The queries started when the first two finish (q4, q5) never saw the
    429 themselves, yet must wait out the pause: no request reaches the fake during it."""
    pause = 0.5
    provider = make_provider(server, "anthropic")
    run(tmp_path, provider, 3, concurrency=3)  # warm the connection pool: three calls then leave together
    server.requests.clear()
    provider.budget = Budget()  # this run's own accounting
    server.faults.extend([Fault(delay_s=0.3), Fault(delay_s=0.3), Fault(status=429, headers={"retry-after": str(pause)})])
    outcome, lines, _ = run(tmp_path, provider, 6, concurrency=3)
    check_run(lines, server, evaluated=[f"q{i}" for i in range(1, 7)])
    assert server.count() == 7  # six queries plus the one retry
    limited = next(r for r in server.requests if r.status == 429)
    t0 = limited.time
    assert sorted(query_of(r) for r in server.requests if r.time <= t0) == ["q1", "q2", "q3"]
    later = [r for r in server.requests if r.time > t0]
    # 50 ms of grace for a request already on its way when the 429 came back
    in_pause = [f"{query_of(r)} at +{r.time - t0:.3f} s" for r in later if t0 + 0.05 < r.time < t0 + pause]
    assert not in_pause, f"requests arrived during the shared back-off: {in_pause}"
    # the calls that never saw the 429 waited as well (without the shared pause they come at about +0.3 s)
    assert {query_of(r) for r in later if r.time >= t0 + pause} >= {"q4", "q5"}
    assert outcome.exit_code == EXIT_OK
