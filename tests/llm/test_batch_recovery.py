"""Paid judgments are never lost in a ``--batch`` run, whatever the batch API does to the results,
and money spent on a query that then failed is on that query's line.

- a result file whose last line is cut in half (Anthropic and OpenAI): the intact results are taken, the
  cut one is asked again, the ended batch is not "in flight", ``--resume`` recovers the same way, the
  cost counts what was read; a download cut only once is simply fetched again;
- a result under a custom id the run never sent: warned about and ignored; the request it lacks is asked again;
- a batch the server forgets (HTTP 404) right after creating it: its requests are submitted again in the
  run itself (as ``--resume`` does), a bounded number of times;
- error lines carry their usage: the lines' costs add up to the summary's.

Through the REAL SDKs against the loopback fake's batch APIs, on the 15-query set of the ``query_set`` fixture (tests/conftest.py).
"""

from __future__ import annotations

import json

import pytest

from tests.support.batch_runs import comparable, cut_run, env_for, evaluate, lines_of, resume
from tests.support.clitools import invoke
from tests.support.fakes.fake_llm import DefaultBrain, FakeLLMServer, Fault, Text, first_user_text, offered_tools
from tests.support.fakes.honest_judge import query_of

pytestmark = pytest.mark.hash_embedder

APIS = ["anthropic", "openai"]


def sync_evaluations(api: str, query_set, db, out) -> dict[str, dict]:
    with FakeLLMServer() as server:
        result = evaluate(server, api, query_set, db, out)
    assert result.exit_code == 0, result.output
    return {e["queryId"]: comparable(e) for e in lines_of(out) if e["type"] == "evaluation"}


def assert_complete(lines: list[dict], expected: dict[str, dict]) -> dict:
    """Every query evaluated, as a synchronous run judges it; no error line; the summary agrees."""
    summary = lines[-1]
    assert summary["type"] == "summary" and summary["evaluated"] == 15 and summary["failed"] == 0, summary
    assert not [line for line in lines if line["type"] == "error"]
    assert {e["queryId"]: comparable(e) for e in lines if e["type"] == "evaluation"} == expected
    assert summary["batch"]["inFlight"] == []
    return summary


def line_costs(lines: list[dict]) -> float:
    return sum(float((line.get("usage") or {}).get("costUsd") or 0.0) for line in lines if line["type"] in ("evaluation", "error"))


# -- a result file cut short -----------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_result_file_cut_in_its_last_line_keeps_the_intact_results_and_asks_the_cut_one_again(api, query_set, db_copy, tmp_path):
    expected = sync_evaluations(api, query_set, db_copy, tmp_path / "sync")
    with FakeLLMServer() as server:
        server.batches.cut_results = 2  # the label batch's file is cut: its first download and the one more
        result = evaluate(server, api, query_set, db_copy, tmp_path / "runs", "--batch")
        first = server.batches.submitted[0]["custom_ids"]
        later = [cid for b in server.batches.submitted[1:] for cid in b["custom_ids"]]
    assert result.exit_code == 0, result.output
    lines = lines_of(tmp_path / "runs")
    summary = assert_complete(lines, expected)
    # only the cut line's request was asked again: every other result of the first batch was taken
    assert [cid for cid in first if cid in later] == [first[-1]]
    assert summary["batch"]["unreadResults"] == 1
    assert summary["batch"]["requests"] == sum(
        summary["batch"][k] for k in ("succeeded", "errored", "expired", "canceled", "unreadResults")
    )
    assert "1 result line(s) could not be read" in result.output and "asked again" in result.output
    # the cost counts every result read: the lines add up to the summary (the cut one's bill is unknown, and said)
    assert summary["costUsd"] > 0 and summary["costUsd"] == pytest.approx(line_costs(lines), abs=1e-5)
    assert summary["usage"]["calls"] == summary["batch"]["requests"]


@pytest.mark.parametrize("api", APIS)
def test_a_result_download_cut_once_is_fetched_again(api, query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        server.batches.cut_results = 1  # a dropped connection: the next download is whole
        result = evaluate(server, api, query_set, db_copy, tmp_path / "runs", "--batch")
        assert server.batches.count() == 2  # labels, list verdicts: nothing asked again
    assert result.exit_code == 0, result.output
    summary = lines_of(tmp_path / "runs")[-1]
    assert summary["evaluated"] == 15 and summary["batch"]["unreadResults"] == 0 and summary["batch"]["inFlight"] == []
    assert "could not be read" not in result.output


@pytest.mark.parametrize("api", APIS)
def test_a_resumed_run_recovers_from_a_cut_result_file(api, query_set, run_folder):
    db = run_folder.parent / "db.sqlite"
    with FakeLLMServer() as server:
        first = evaluate(server, api, query_set, db, run_folder, "--batch")
        assert first.exit_code == 0, first.output
        run = cut_run(run_folder)  # as a SIGKILL would leave it: run_start and the batch lines
        server.batches.cut_results = 2  # the file of the batch picked up is cut
        again = resume(server, api, run, run_folder / "again", "--batch")
    assert again.exit_code == 0, again.output
    summary = lines_of(run_folder / "again")[-1]
    assert summary["evaluated"] == 15 and summary["failed"] == 0 and summary["batch"]["inFlight"] == []
    assert summary["batch"]["unreadResults"] == 1 and summary["batch"]["batches"] == 1  # only the cut one submitted again


# -- a result under an id the run never sent ----------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_result_under_an_unknown_custom_id_is_ignored_and_its_request_asked_again(api, query_set, db_copy, tmp_path):
    expected = sync_evaluations(api, query_set, db_copy, tmp_path / "sync")
    with FakeLLMServer() as server:
        server.batches.foreign_ids = 1  # the first request's result comes back under another id
        result = evaluate(server, api, query_set, db_copy, tmp_path / "runs", "--batch")
        first = server.batches.submitted[0]["custom_ids"]
        later = [cid for b in server.batches.submitted[1:] for cid in b["custom_ids"]]
    assert result.exit_code == 0, result.output
    summary = assert_complete(lines_of(tmp_path / "runs"), expected)
    assert first[0] in later and summary["batch"]["unreadResults"] >= 1
    assert "under custom ids this run never sent (jr-foreign" in result.output


# -- a batch the server forgets ------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_batch_forgotten_right_after_its_creation_is_submitted_again_in_the_run(api, query_set, db_copy, tmp_path):
    expected = sync_evaluations(api, query_set, db_copy, tmp_path / "sync")
    with FakeLLMServer() as server:
        server.batches.forget_created = 1  # the label batch: 404 from its first status check on
        result = evaluate(server, api, query_set, db_copy, tmp_path / "runs", "--batch")
        submitted = list(server.batches.submitted)
    assert result.exit_code == 0, result.output
    lines = lines_of(tmp_path / "runs")
    summary = assert_complete(lines, expected)
    assert len(submitted) == 3 and submitted[1]["custom_ids"] == submitted[0]["custom_ids"]  # the same requests, once more
    assert summary["batch"]["unreadResults"] == len(submitted[0]["custom_ids"]) and summary["batch"]["batches"] == 3
    assert f"batch {submitted[0]['id']} is unknown to the server (HTTP 404) though this run created it" in result.output
    assert summary["costUsd"] > 0 and summary["costUsd"] == pytest.approx(line_costs(lines), abs=1e-5)
    assert [line["batchId"] for line in lines if line["type"] == "batch"] == [b["id"] for b in submitted]


def test_a_server_that_forgets_every_batch_fails_the_queries_after_a_few_submissions(query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        server.batches.forget_created = 10**9
        result = evaluate(server, "anthropic", query_set, db_copy, tmp_path / "runs", "--batch")
        batches = server.batches.count()
    assert result.exit_code == 3, result.output  # more than a quarter failed
    lines = lines_of(tmp_path / "runs")
    errors = [line for line in lines if line["type"] == "error"]
    assert batches == 3 and lines[-1]["failed"] == len(errors) >= 14  # one submission and two more, then it gives up
    assert all("forgot batch" in e["message"] for e in errors)


# -- error lines carry their usage ---------------------------------------------------------------------------


def failing_list_verdicts(query: str):
    """The default brain, except that every list-level verdict about ``query`` fails validation (a text
    reply that is no JSON): its labels are paid for, then the query fails after the re-asks."""
    default = DefaultBrain()

    def brain(api: str, body: dict):
        if "record_list_verdict" in offered_tools(api, body) and query_of(first_user_text(body)) == query:
            return Text("I cannot judge this list.")
        return default(api, body)

    return brain


def requests_about(server, query: str) -> int:
    """Judge requests the fake received about ``query``: synchronous ones and batch items."""
    sync = [r.body for r in server.requests]
    batched = [body for b in server.batches.submitted for body in b["bodies"]]
    return sum(1 for body in sync + batched if query_of(first_user_text(body)) == query)


@pytest.mark.parametrize("batch", [False, True])
def test_a_query_that_fails_after_paid_calls_says_what_it_cost_on_its_error_line(batch, query_set, db_copy, tmp_path):
    # the longest query: its text is in no other query's requests
    query = max((q["query"] for q in json.loads(query_set.read_text())["queries"] if q["queryType"] != "off-topic"), key=len)
    with FakeLLMServer(brain=failing_list_verdicts(query)) as server:
        result = evaluate(server, "anthropic", query_set, db_copy, tmp_path / "runs", *(["--batch"] if batch else []))
        paid = requests_about(server, query)
    assert result.exit_code == 0, result.output  # one failure in 15
    lines = lines_of(tmp_path / "runs")
    [error] = [line for line in lines if line["type"] == "error"]
    assert error["query"] == query and error["errorType"] == "invalid_output"
    # its labels and its three list-level attempts were paid for
    assert paid > 3 and error["usage"]["calls"] == paid and error["usage"]["costUsd"] > 0 and error["usage"]["inputTokens"] > 0
    summary = lines[-1]
    assert summary["costUsd"] == pytest.approx(line_costs(lines), abs=1e-5)
    assert summary["usage"]["calls"] == sum(line["usage"]["calls"] for line in lines if line["type"] in ("evaluation", "error"))


def test_a_query_whose_calls_fail_for_good_carries_their_requests(query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        server.faults = [Fault(status=500) for _ in range(2)]  # the first call: both its attempts answer 500
        args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--out-dir", str(tmp_path / "runs"), "--provider", "openai"]
        result = invoke([*args, "--no-cache", "--concurrency", "1"], {**env_for(server, "openai"), "JUDGE_RUNNER_MAX_RETRIES": "1"})
    lines = lines_of(tmp_path / "runs")
    [error] = [line for line in lines if line["type"] == "error"]
    assert error["errorType"] == "transient_error" and error["usage"]["calls"] == 2, error
    assert error["usage"]["costUsd"] == 0  # refused requests bill nothing
    assert lines[-1]["usage"]["calls"] == sum(line["usage"]["calls"] for line in lines if line["type"] in ("evaluation", "error"))
    assert result.exit_code == 0, result.output
