"""``--batch`` through the REAL anthropic and openai SDKs against the loopback fake's
batch APIs (tests/support/fakes/fake_batches.py), on a 15-query set over fixtures/ (hash embedder).

- the same evaluation lines (labels, scores, metrics) as the synchronous run, pointwise and batched, in
  two batches (labels, then list verdicts) and without one synchronous judge request; cost at batch prices;
- a run killed while polling (SIGINT or SIGKILL of a subprocess) and resumed finishes without
  submitting any request twice (the fake shows each custom_id in one batch);
- errored, expired and canceled items become error lines (never averaged as zero), and the summary says so;
- the offline judge and a server without a batch API are usage errors (exit 2) before anything is spent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from judge_runner.llm.batch import BatchCoordinator
from judge_runner.llm.batch_api import custom_id
from judge_runner.llm.pricing import Usage, cost_usd, price_for
from judge_runner.llm.registry import get_spec
from tests.support.batch_runs import ROOT, comparable, env_for, evaluate, judge_requests, lines_of
from tests.support.clitools import invoke
from tests.support.fakes.fake_llm import FakeLLMServer, offered_tools

pytestmark = pytest.mark.hash_embedder


# -- the same lines, at batch prices ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["pointwise", "batched"])
@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_batch_run_writes_the_same_evaluations_as_the_synchronous_run(api, mode, query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        sync = evaluate(server, api, query_set, db_copy, tmp_path / "sync", "--judge-mode", mode)
        sync_requests = len(judge_requests(server, api))
    with FakeLLMServer() as server:  # a fresh server: the same prompt-cache history as the synchronous run
        batch = evaluate(server, api, query_set, db_copy, tmp_path / "batch", "--judge-mode", mode, "--batch")
        assert judge_requests(server, api) == [], "no judge request went the synchronous way"
        assert server.batches.count(api) == 2  # labels, then the list-level verdicts
        submitted = [cid for b in server.batches.submitted for cid in b["custom_ids"]]
    assert sync.exit_code == 0 and batch.exit_code == 0, batch.output
    sync_lines, batch_lines = lines_of(tmp_path / "sync"), lines_of(tmp_path / "batch")
    by_id = {e["queryId"]: comparable(e) for e in sync_lines if e["type"] == "evaluation"}
    batch_evaluations = [e for e in batch_lines if e["type"] == "evaluation"]
    assert len(batch_evaluations) == 15 and {e["queryId"]: comparable(e) for e in batch_evaluations} == by_id
    # the batch lines: written before the results, one per batch, holding every request's custom_id
    batches = [line for line in batch_lines if line["type"] == "batch"]
    assert [b["batchId"] for b in batches] == [b["id"] for b in server.batches.submitted]
    assert all(b["provider"] == api for b in batches) and sum(b["requests"] for b in batches) == len(submitted) == sync_requests
    assert batch_lines.index(batches[0]) < min(batch_lines.index(e) for e in batch_evaluations)
    # the cost: the same tokens at half price
    sync_summary, batch_summary = sync_lines[-1], batch_lines[-1]
    assert batch_summary["usage"]["inputTokens"] == sync_summary["usage"]["inputTokens"]
    assert batch_summary["usage"]["outputTokens"] == sync_summary["usage"]["outputTokens"]
    assert batch_summary["usage"]["calls"] == sync_summary["usage"]["calls"] == sync_requests

    # (how many concurrent first calls write the prompt cache depends on thread timing, in the fake as at the
    # vendor: compare the bill of the same usage, not the two runs' cache-write counts)
    def bill(summary: dict, price) -> float:
        u = summary["usage"]
        uncached = u["inputTokens"] - u["cacheWriteTokens"] - u["cacheReadTokens"]  # inputTokens includes both
        usage = Usage(uncached, u["outputTokens"], u["cacheWriteTokens"], u["cacheReadTokens"])
        return cost_usd(usage, price) or 0.0

    standard = price_for(get_spec(api).default_model)  # the model both runs used
    assert standard is not None
    assert batch_summary["costUsd"] == pytest.approx(bill(batch_summary, standard.for_batch()), rel=1e-4)
    assert batch_summary["costUsd"] == pytest.approx(bill(batch_summary, standard) / 2, rel=1e-4)
    assert sync_summary["costUsd"] == pytest.approx(bill(sync_summary, standard), rel=1e-4)
    # the estimate in the run's own mode: halved once (a batching provider's price is already the batch
    # price; the estimate starts from the standard one), with the prompt cache as the run marks it
    estimate, sync_estimate = batch_summary["estimate"], sync_summary["estimate"]
    assert estimate["batch"] is True and sync_estimate["batch"] is False
    assert estimate["costUsd"] == pytest.approx(sync_estimate["costUsd"] / 2, rel=1e-3)
    assert estimate["batchCostUsd"] == pytest.approx(sync_estimate["batchCostUsd"], rel=1e-3)
    assert batch_summary["batch"] == {
        "batches": 2,
        "resumedBatches": 0,
        "requests": sync_requests,
        "submittedRequests": sync_requests,
        "pickedUpRequests": 0,
        "succeeded": sync_requests,
        "errored": 0,
        "expired": 0,
        "canceled": 0,
        "unreadResults": 0,
        "inFlight": [],
    }
    assert "batch API: 2 batch(es) submitted" in batch.output and "at batch prices" in batch.output
    assert batch_lines[0]["config"]["batch"] is True and sync_lines[0]["config"]["batch"] is False


# -- killed while polling, then resumed ------------------------------------------------------------------


@pytest.mark.parametrize(("api", "how"), [("anthropic", signal.SIGINT), ("openai", signal.SIGKILL)])
def test_a_run_killed_while_polling_resumes_without_resubmitting(api, how, query_set, db_copy, tmp_path):
    out = tmp_path / "runs"
    with FakeLLMServer() as server:
        server.batches.polls_before_done = 10**9  # the first batch never ends while the process lives
        env = {**os.environ, **env_for(server, api), "PYTHONPATH": str(ROOT)}
        args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--out-dir", str(out), "--provider", api, "--batch"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "judge_runner.cli", *args, "--no-cache"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not any(
                '"type":"batch"' in p.read_text(encoding="utf-8") for p in out.glob("*.jsonl") if p.is_file()
            ):
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.1)
            time.sleep(0.3)  # polling
            proc.send_signal(how)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        first = sorted(out.glob("*.jsonl"))[0]
        cut = [json.loads(line) for line in first.read_text(encoding="utf-8").splitlines() if line.endswith("}")]
        assert [line["type"] for line in cut if line["type"] == "batch"] == ["batch"]
        assert not [line for line in cut if line["type"] == "evaluation"]
        if how == signal.SIGINT:
            assert proc.returncode == 3 and cut[-1]["type"] == "summary" and cut[-1]["interrupted"] is True
            assert cut[-1]["failed"] == 0, "queries waiting on the batch are not failures"
            assert cut[-1]["batch"]["inFlight"] == [server.batches.submitted[0]["id"]]
            assert "NOT canceled" in stdout + stderr and "--resume" in stdout + stderr
        assert server.batches.count() == 1
        server.batches.polls_before_done = 1
        # the SIGKILL case resumes without --batch: a resumed --batch run stays in batch mode
        again = [a for a in args if how == signal.SIGINT or a != "--batch"]
        resumed = invoke([*again, "--resume", str(first), "--no-cache"], env_for(server, api))
        assert resumed.exit_code == 0, resumed.output
        submitted = [cid for b in server.batches.submitted for cid in b["custom_ids"]]
        assert judge_requests(server, api) == []
    # the label batch was picked up, not submitted again: one more batch (the list verdicts) only
    assert server.batches.count() == 2 and len(submitted) == len(set(submitted))
    assert "picking up" in resumed.output
    assert ("batch mode on" in resumed.output) is (how == signal.SIGKILL)
    new = [p for p in sorted(out.glob("*.jsonl")) if p != first]
    lines = [json.loads(line) for line in new[0].read_text(encoding="utf-8").splitlines()]
    assert lines[-1]["evaluated"] == 15 and lines[-1]["failed"] == 0 and lines[-1]["batch"]["resumedBatches"] == 1
    assert [b["batchId"] for b in lines if b["type"] == "batch"] == [b["id"] for b in server.batches.submitted]
    # and the judgments are those of an uninterrupted run
    with FakeLLMServer() as server:
        sync = evaluate(server, api, query_set, db_copy, tmp_path / "sync")
    assert sync.exit_code == 0
    expected = {e["queryId"]: comparable(e) for e in lines_of(tmp_path / "sync") if e["type"] == "evaluation"}
    assert {e["queryId"]: comparable(e) for e in lines if e["type"] == "evaluation"} == expected


# -- failed items ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["anthropic", "openai"])
@pytest.mark.parametrize("failure", ["fail_every", "expire_every", "cancel_every"])
def test_errored_expired_and_canceled_items_become_error_lines(api, failure, query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        setattr(server.batches, failure, 40)  # a few label requests of the first batch
        result = evaluate(server, api, query_set, db_copy, tmp_path / "runs", "--batch")
    lines = lines_of(tmp_path / "runs")
    errors = [line for line in lines if line["type"] == "error"]
    evaluations = [line for line in lines if line["type"] == "evaluation"]
    summary = lines[-1]
    outcome = {"fail_every": "errored", "expire_every": "expired", "cancel_every": "canceled"}[failure]
    assert summary["batch"][outcome] == 3 and summary["batch"]["succeeded"] == summary["batch"]["requests"] - 3
    assert 1 <= len(errors) <= 3 and summary["failed"] == len(errors) and summary["evaluated"] == len(evaluations) == 15 - len(errors)
    kind = {"fail_every": "request_error", "expire_every": "transient_error", "cancel_every": "transient_error"}[failure]
    assert {e["errorType"] for e in errors} == {kind} and all(e["stage"] == "judge" for e in errors)
    word = {"fail_every": "refused", "expire_every": "expired", "cancel_every": "canceled"}[failure]
    assert all(word in e["message"] for e in errors)
    # failures are never averaged as zero: the means are over the judged queries only
    on_topic = [e["scores"]["overall"] for e in evaluations if e["queryType"] != "off-topic"]
    assert summary["averageScores"]["overall"] == pytest.approx(sum(on_topic) / len(on_topic), abs=1e-6)
    assert f"{summary['batch'][outcome]} {outcome}" in result.output and f"{len(errors)} failed" in result.output


def test_a_batch_canceled_in_the_console_fails_its_queries(query_set, db_copy, tmp_path):
    import anthropic

    with FakeLLMServer() as server:
        server.batches.polls_before_done = 10**9
        client = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="test-key", max_retries=0)

        def cancel_when_submitted() -> None:
            while not server.batches.submitted:
                time.sleep(0.02)
            client.messages.batches.cancel(server.batches.submitted[0]["id"])

        canceller = threading.Thread(target=cancel_when_submitted, daemon=True)
        canceller.start()
        result = evaluate(server, "anthropic", query_set, db_copy, tmp_path / "runs", "--batch")
        canceller.join(5)
    lines = lines_of(tmp_path / "runs")
    summary = lines[-1]
    assert result.exit_code == 3  # more than a quarter of the queries failed
    assert summary["batch"]["canceled"] == summary["batch"]["requests"] and summary["batch"]["batches"] == 1
    assert summary["failed"] >= 14 and summary["failed"] + summary["evaluated"] == 15  # an off-topic query may need no call
    assert not [e for e in lines if e["type"] == "evaluation" and e["queryType"] != "off-topic"]


# -- refused before anything is spent --------------------------------------------------------------------


def test_batch_with_the_offline_judge_is_a_usage_error(query_set, db_copy, tmp_path):
    result = invoke(["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--out-dir", str(tmp_path), "--batch"])
    assert result.exit_code == 2 and "--batch" in result.output and "heuristic judge makes no API calls" in result.output
    assert not list(tmp_path.glob("*.jsonl"))


def test_a_server_without_a_batch_api_is_refused_before_anything_is_spent(query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        server.batches.available = False  # what a local OpenAI-compatible server answers
        result = evaluate(server, "openai", query_set, db_copy, tmp_path / "runs", "--batch")
        assert server.requests == [] and server.batches.http == [("GET", "/v1/batches")]
    assert result.exit_code == 2
    assert "has no Batch API (a local OpenAI-compatible server has no batch API)" in result.output and "HTTP 404" in result.output
    assert not list((tmp_path / "runs").glob("*.jsonl")) if (tmp_path / "runs").exists() else True


def test_batch_is_a_setting_on_every_judging_command():
    for command in ("evaluate", "generate-and-evaluate", "weekly", "calibrate"):
        help_text = invoke([command, "--help"]).output
        assert "--batch " in help_text and "--batch-poll" in help_text, command


# -- the coordinator --------------------------------------------------------------------------------------


def test_custom_ids_ignore_the_fence_delimiter_and_nothing_else():
    body = {"model": "m", "messages": [{"role": "user", "content": "<document-0123456789abcdef>\nx\n</document-0123456789abcdef>"}]}
    other = json.loads(json.dumps(body).replace("0123456789abcdef", "fedcba9876543210"))
    assert custom_id(body) == custom_id(other)
    assert custom_id(body) != custom_id({**body, "max_tokens": 5})
    assert len(custom_id(body)) <= 64 and custom_id(body).replace("-", "").isalnum()


class _Backend:
    """A backend answering every request with its body's ``n`` doubled, recording each batch."""

    def __init__(self):
        self.batches: list[list[str]] = []
        self.provider = type("P", (), {"classify": staticmethod(lambda exc: None)})()

    def submit(self, requests):
        self.batches.append([cid for cid, _ in requests])
        self.bodies = dict(requests)
        return f"b{len(self.batches)}"

    def status(self, batch_id):
        from judge_runner.llm.batch_api import BatchStatus

        return BatchStatus(True, 1, 1, "ended")

    def results(self, batch_id):
        from judge_runner.llm.batch_api import BatchResults, ItemResult

        return BatchResults({cid: ItemResult("succeeded", body["n"] * 2) for cid, body in self.bodies.items()})


def test_the_coordinator_waits_for_every_worker_then_sends_one_batch():
    backend = _Backend()
    coordinator = BatchCoordinator(backend, "anthropic", max_poll_s=0.01)  # type: ignore[arg-type]
    recorded: list[dict] = []
    coordinator.record = recorded.append
    coordinator.expect()  # the run loop's own place while it starts workers

    def worker(n: int) -> list[int]:
        first = coordinator.call(f"c{n}", {"n": n})
        # a worker's second round: its calls at once (map), in the same batch as the other workers'
        return [first, *coordinator.map(lambda k: coordinator.call(f"c{n}-{k}", {"n": k}), [10, 20])]

    results: dict[int, list] = {}
    threads = []
    for n in range(5):
        coordinator.expect()
        t = threading.Thread(target=lambda n=n: results.__setitem__(n, coordinator.as_unit(worker)(n)))
        threads.append(t)
        t.start()
    time.sleep(0.2)
    assert backend.batches == [], "no batch leaves while the run loop is still starting workers"
    coordinator.release()
    for t in threads:
        t.join(5)
    assert results == {n: [2 * n, 20, 40] for n in range(5)}
    assert [len(b) for b in backend.batches] == [5, 10]
    assert [r["requests"] for r in recorded] == [5, 10] and recorded[0]["batchId"] == "b1"


# -- calibrate --------------------------------------------------------------------------------------------


def test_calibrate_with_batch_labels_the_pool_in_few_batches_and_agrees_with_sync(tmp_path):
    from tests.support.calibration_data import judge_qrels, write_collection
    from tests.support.fakes.calibration_judges import QrelsJudge

    data = write_collection(tmp_path / "beir")
    documents = {}
    for name, extra in (("sync", []), ("batch", ["--batch"])):
        out = tmp_path / f"{name}.json"
        with FakeLLMServer(brain=QrelsJudge(judge_qrels(data))) as server:
            env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url, "JUDGE_RUNNER_BATCH_POLL": "0.02"}
            args = ["calibrate", "--beir", str(data), "--provider", "anthropic", "--db", str(tmp_path / f"{name}.sqlite")]
            result = invoke([*args, "--out", str(out), "--bootstrap", "20", "--quiet", "--probes", "none", "--trials", "1", *extra], env)
            assert result.exit_code == 0, result.output
            if name == "batch":
                assert server.count() == 0 and 1 <= server.batches.count() <= 3  # pool labels, list-level calls
        documents[name] = json.loads(out.read_text())
    sync, batch = documents["sync"], documents["batch"]
    assert batch["verdict"] == sync["verdict"] and batch["modes"] == sync["modes"] and batch["systems"] == sync["systems"]
    assert batch["spend"]["costUsd"] == pytest.approx(sync["spend"]["costUsd"] / 2, rel=1e-3)


# -- budget, and phase one staying synchronous ------------------------------------------------------------


def test_the_budget_is_reserved_for_every_request_before_its_batch_is_submitted(query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        result = evaluate(server, "anthropic", query_set, db_copy, tmp_path / "runs", "--batch", "--max-budget-usd", "0.2")
        submitted = sum(len(b["custom_ids"]) for b in server.batches.submitted)
    lines = lines_of(tmp_path / "runs")
    summary = lines[-1]
    assert result.exit_code == 3 and summary["budgetExhausted"] is True
    assert 0 < submitted < 150 and summary["costUsd"] <= 0.2  # only requests whose worst case was held went out
    errors = [line for line in lines if line["type"] == "error"]
    assert errors and {e["errorType"] for e in errors} == {"budget_exhausted"}


def test_generate_and_evaluate_writes_queries_synchronously_and_judges_in_batches(db_copy, tmp_path):
    out = tmp_path / "runs"
    with FakeLLMServer() as server:
        args = ["generate-and-evaluate", "--fixtures", str(ROOT / "fixtures"), "--db", str(db_copy), "--out-dir", str(out), "--count", "5"]
        result = invoke([*args, "--provider", "openai", "--batch"], env_for(server, "openai"))
        phase_one = server.count()
        # one batch for phase one's answerability labels, then phase two's two
        assert judge_requests(server, "openai") == [] and server.batches.count() == 3
        checked = len(server.batches.submitted[0]["custom_ids"])
    assert result.exit_code == 0, result.output
    assert phase_one == 4  # list_dir, glob, read_file, submit_queries: the agent loop stays synchronous
    from tests.support.clitools import run_lines

    lines = run_lines(out)
    card = lines[0]["querySetCard"]
    assert card["answerability"]["checked"] == 4 and card["answerability"]["calls"] == checked == 4
    # the summary counts the run's three batches; phase one's ended before the run file opened: no batch line
    assert lines[-1]["evaluated"] == card["kept"] and lines[-1]["batch"]["batches"] == 3
    assert sum(1 for l in lines if l["type"] == "batch") == 2


# -- re-asks and retries go into follow-up batches --------------------------------------------------------


def invalid_first_label(query: str):
    """A brain (the default one otherwise) whose first answer to each label request about ``query`` fails
    the label schema; the re-ask gets a valid label."""
    from tests.support.fakes.fake_llm import DefaultBrain, ToolCall, first_user_text
    from tests.support.fakes.honest_judge import query_of

    default = DefaultBrain()

    def brain(api: str, body: dict):
        first_ask = len(body.get("messages") or []) <= 2  # anthropic: [user]; openai: [system, user]
        if first_ask and "record_label" in offered_tools(api, body) and query_of(first_user_text(body)) == query:
            return ToolCall("record_label", {"relevance": 7})
        return default(api, body)

    return brain


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_reask_goes_into_a_follow_up_batch_and_the_lines_match_sync(api, query_set, db_copy, tmp_path):
    query = json.loads(query_set.read_text())["queries"][3]["query"]
    with FakeLLMServer(brain=invalid_first_label(query)) as server:
        sync = evaluate(server, api, query_set, db_copy, tmp_path / "sync")
    with FakeLLMServer(brain=invalid_first_label(query)) as server:
        batch = evaluate(server, api, query_set, db_copy, tmp_path / "batch", "--batch")
        submitted = list(server.batches.submitted)
    assert sync.exit_code == 0 and batch.exit_code == 0, batch.output
    # labels; the re-asks with the other queries' list verdicts; the re-asked query's list verdict
    assert len(submitted) == 3
    reasks = [b for b in submitted[1]["bodies"] if len(b["messages"]) > 2]
    assert reasks and all(query in json.dumps(b) for b in reasks)
    expected = {e["queryId"]: comparable(e) for e in lines_of(tmp_path / "sync") if e["type"] == "evaluation"}
    lines = lines_of(tmp_path / "batch")
    assert {e["queryId"]: comparable(e) for e in lines if e["type"] == "evaluation"} == expected
    assert lines[-1]["usage"]["calls"] == lines_of(tmp_path / "sync")[-1]["usage"]["calls"]


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_an_overloaded_item_is_retried_in_the_next_batch(api, query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        server.batches.fail_every, server.batches.fail_once = 40, True
        server.batches.fail_type, server.batches.fail_status = "overloaded_error", 529
        result = evaluate(server, api, query_set, db_copy, tmp_path / "runs", "--batch")
        submitted = list(server.batches.submitted)
    assert result.exit_code == 0, result.output
    summary = lines_of(tmp_path / "runs")[-1]
    assert summary["evaluated"] == 15 and summary["failed"] == 0
    failed_first = [cid for k, cid in enumerate(submitted[0]["custom_ids"], start=1) if k % 40 == 0]
    later = [cid for b in submitted[1:] for cid in b["custom_ids"]]
    assert failed_first and all(cid in later for cid in failed_first)  # sent again, in a later batch
    assert summary["batch"]["errored"] == len(failed_first) and summary["batch"]["requests"] == summary["usage"]["calls"]


def test_weekly_with_batch_logs_the_batches_and_trend_and_report_read_the_run(query_set, db_copy, tmp_path):
    results, reports = tmp_path / "quality-results", tmp_path / "reports"
    with FakeLLMServer() as server:
        args = ["weekly", "--fixtures", str(ROOT / "fixtures"), "--db", str(db_copy), "--results", str(results)]
        args += ["--reports", str(reports), "--queries", str(query_set), "--provider", "anthropic", "--batch"]
        result = invoke(args, env_for(server, "anthropic"))
        assert server.batches.count() == 2 and judge_requests(server, "anthropic") == []
    assert result.exit_code == 0, result.output
    log = (results / "weekly.log").read_text()
    assert "batch msgbatch_fake" in log and "done (ended)" in log and "batch API: 2 batch(es) submitted" in log
    assert list(reports.glob("report-*.html"))
    trend = invoke(["trend", str(results)])
    assert trend.exit_code == 0 and "warning" not in trend.output.lower(), trend.output


def test_the_fake_batch_payloads_validate_against_the_sdk_types():
    import anthropic
    import openai
    from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse
    from openai.types import Batch, FileObject
    from openai.types.chat import ChatCompletion

    request = {"model": "claude-sonnet-4-6", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    with FakeLLMServer() as server:
        server.batches.fail_every = 2
        a = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="test-key", max_retries=0)
        created = a.messages.batches.with_raw_response.create(requests=[{"custom_id": f"r{k}", "params": request} for k in range(3)])
        batch_id = MessageBatch.model_validate(created.http_response.json()).id
        for _ in range(2):
            view = MessageBatch.model_validate(a.messages.batches.with_raw_response.retrieve(batch_id).http_response.json())
        assert view.processing_status == "ended" and view.request_counts.errored == 1 and view.results_url
        lines = [MessageBatchIndividualResponse.model_validate(r.model_dump()) for r in a.messages.batches.results(batch_id)]
        assert [line.result.type for line in lines] == ["succeeded", "errored", "succeeded"]

        o = openai.OpenAI(base_url=server.openai_base_url, api_key="test-key", max_retries=0)
        body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}
        jsonl = "".join(
            json.dumps({"custom_id": f"r{k}", "method": "POST", "url": "/v1/chat/completions", "body": body}) + "\n" for k in range(3)
        )
        upload = o.files.with_raw_response.create(file=("in.jsonl", jsonl.encode()), purpose="batch")
        file_id = FileObject.model_validate(upload.http_response.json()).id
        created = o.batches.with_raw_response.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
        batch = Batch.model_validate(created.http_response.json())
        for _ in range(2):
            batch = Batch.model_validate(o.batches.with_raw_response.retrieve(batch.id).http_response.json())
        assert batch.status == "completed" and batch.request_counts is not None and batch.request_counts.failed == 1
        output = [json.loads(line) for line in o.files.content(batch.output_file_id).text.splitlines()]
        ChatCompletion.model_validate(output[0]["response"]["body"])
        assert [line["response"]["status_code"] for line in output] == [200, 400, 200]


def test_interrupted_during_the_list_batch_keeps_what_is_judged_and_resumes_that_batch(query_set, db_copy, tmp_path):
    out = tmp_path / "runs"
    with FakeLLMServer() as server:
        server.batches.polls_by_batch = {2: 10**9}  # the labels come back; the list-level verdicts never do
        env = {**os.environ, **env_for(server, "anthropic"), "PYTHONPATH": str(ROOT)}
        args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--out-dir", str(out), "--provider", "anthropic"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "judge_runner.cli", *args, "--batch"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and server.batches.count() < 2:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.1)
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        first = sorted(out.glob("*.jsonl"))[0]
        cut = [json.loads(line) for line in first.read_text(encoding="utf-8").splitlines()]
        judged = [line for line in cut if line["type"] == "evaluation"]
        # the off-topic query needs no list-level verdict: it was judged, and recorded before the stop
        assert [e["queryType"] for e in judged] == ["off-topic"] and cut[-1]["interrupted"] is True
        assert cut[-1]["batch"]["inFlight"] == [server.batches.submitted[1]["id"]]
        server.batches.polls_by_batch = {}
        resumed = invoke([*args, "--resume", str(first)], env_for(server, "anthropic"))  # the judgment cache holds the labels
        assert resumed.exit_code == 0, resumed.output
        assert server.batches.count() == 2 and judge_requests(server, "anthropic") == []
    new = [p for p in sorted(out.glob("*.jsonl")) if p != first]
    lines = [json.loads(line) for line in new[0].read_text(encoding="utf-8").splitlines()]
    assert lines[-1]["evaluated"] == 15 and lines[-1]["batch"] == {
        "batches": 0,
        "resumedBatches": 1,
        "requests": 14,  # one scope: the requests whose results this run took (all 14 picked up)
        "submittedRequests": 0,
        "pickedUpRequests": 14,
        "succeeded": 14,
        "errored": 0,
        "expired": 0,
        "canceled": 0,
        "unreadResults": 0,
        "inFlight": [],
    }
    assert sum(e["labelsCached"] for e in lines if e["type"] == "evaluation") > 0
