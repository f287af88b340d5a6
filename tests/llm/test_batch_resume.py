"""``--batch`` follow-up: what a new-user trial of ``--batch`` found (budget, resume, weekly, refused keys,
lost batches, summary scopes, cost), each through the REAL SDKs against the loopback fake's batch APIs
(tests/support/fakes/fake_batches.py) on the 15-query set of the ``query_set`` fixture (tests/conftest.py) (hash embedder)."""

from __future__ import annotations

import json

import pytest

from tests.support.batch_runs import cut_run, evaluate, lines_of, resume
from tests.support.fakes.fake_llm import FakeLLMServer, first_user_text, offered_tools
from tests.support.fakes.honest_judge import query_of

pytestmark = pytest.mark.hash_embedder


def submitted_bodies(server) -> list[dict]:
    return [body for b in server.batches.submitted for body in b["bodies"]]


# -- 1. a budget below the batch's worst case ----------------------------------------------------------------


def test_a_budget_below_the_worst_case_waits_for_the_next_batch_instead_of_failing(query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        result = evaluate(server, "anthropic", query_set, db_copy, tmp_path / "runs", "--batch", "--max-budget-usd", "1.0")
        batches = server.batches.count()
    lines = lines_of(tmp_path / "runs")
    summary = lines[-1]
    assert result.exit_code == 0, result.output
    assert summary["evaluated"] == 15 and summary["failed"] == 0 and summary["budgetExhausted"] is False
    assert summary["costUsd"] <= 1.0 and batches > 2  # what did not fit waited for a later batch
    # the start warning compares the budget with the worst case at batch prices, and says what happens
    assert "at batch prices is above --max-budget-usd 1.00: requests that do not fit wait for a later batch" in result.output


def test_a_query_whose_labels_were_paid_gets_its_list_verdict_first(query_set, db_copy, tmp_path):
    with FakeLLMServer() as server:
        result = evaluate(server, "anthropic", query_set, db_copy, tmp_path / "runs", "--batch", "--max-budget-usd", "0.2")
        bodies = submitted_bodies(server)
    lines = lines_of(tmp_path / "runs")
    summary = lines[-1]
    assert result.exit_code == 3 and summary["budgetExhausted"] is True and summary["costUsd"] <= 0.2
    assert summary["evaluated"] > 0 and summary["evaluated"] + summary["failed"] == 15
    # a request's query is its <query> tag: a document shown in it may name another query's file
    labelled = {query_of(first_user_text(b)) for b in bodies if "record_label" in offered_tools("anthropic", b)}
    verdicts = {query_of(first_user_text(b)) for b in bodies if "record_list_verdict" in offered_tools("anthropic", b)}
    queries = [" ".join(q["query"].split()) for q in json.loads(query_set.read_text())["queries"]]
    assert labelled <= set(queries) and verdicts <= set(queries), "every request names one of the set's queries"
    paid = [q for q in queries if q in labelled]
    without_verdict = [q for q in paid if q not in verdicts]
    # at most the one query whose verdict was tried last, with nothing else in flight, and did not fit in
    # what was left (README "Batch mode": a verdict's worst case can exceed every one before it)
    assert paid and len(without_verdict) <= 1, f"labels paid for, list verdict never asked: {without_verdict}"
    errors = [line for line in lines if line["type"] == "error"]
    assert {e["errorType"] for e in errors} == {"budget_exhausted"}
    assert any("in flight $0.0000" in e["message"] for e in errors), "the run gave up only when nothing else was in flight"


# -- 2. a resumed run keeps its own protocol --------------------------------------------------------------


def test_a_resumed_batch_run_keeps_its_judge_mode_and_picks_up_its_batches(query_set, run_folder):
    protocol = ("--judge-mode", "batched", "--trials", "2", "--seed", "7", "--search-limit", "8")
    with FakeLLMServer() as server:
        first = evaluate(server, "anthropic", query_set, run_folder.parent / "db.sqlite", run_folder, "--batch", *protocol)
        assert first.exit_code == 0, first.output
        before = server.batches.count()
        expected = {e["queryId"]: e for e in lines_of(run_folder) if e["type"] == "evaluation"}
        run = cut_run(run_folder)
        again = resume(server, "anthropic", run, run_folder, "--batch")
        assert again.exit_code == 0, again.output
        assert server.batches.count() == before, "no request submitted again"
    new = [json.loads(t) for p in sorted(run_folder.glob("*.jsonl")) if p != run for t in p.read_text().splitlines()]
    config = new[0]["config"]
    assert (config["judgeMode"], config["trials"], config["seed"], config["searchLimit"]) == ("batched", 2, 7, 8)
    assert {e["queryId"]: e["scores"] for e in new if e["type"] == "evaluation"} == {k: e["scores"] for k, e in expected.items()}
    assert "judge mode batched, 2 trials, seed 7, search limit 8" in again.output


def test_a_resumed_sync_run_keeps_its_protocol_and_a_different_flag_is_warned(query_set, run_folder):
    with FakeLLMServer() as server:
        first = evaluate(server, "openai", query_set, run_folder.parent / "db.sqlite", run_folder, "--judge-mode", "batched")
        assert first.exit_code == 0, first.output
        run = cut_run(run_folder, keep_evaluations=5)
        again = resume(server, "openai", run, run_folder / "a")
        other = resume(server, "openai", run, run_folder / "b", "--judge-mode", "pointwise")
    assert again.exit_code == 0 and other.exit_code == 0, other.output
    assert lines_of(run_folder / "a")[0]["config"]["judgeMode"] == "batched"
    assert lines_of(run_folder / "b")[0]["config"]["judgeMode"] == "pointwise"
    assert "warning: --judge-mode pointwise differs from the run's batched" in other.output
    assert "warning" not in again.output.lower()


# -- 6. resuming with another provider ----------------------------------------------------------------------


def test_resuming_a_batch_run_with_another_provider_warns_that_its_batches_are_abandoned(query_set, run_folder):
    with FakeLLMServer() as server:
        first = evaluate(server, "anthropic", query_set, run_folder.parent / "db.sqlite", run_folder, "--batch")
        assert first.exit_code == 0, first.output
        run = cut_run(run_folder)
        again = resume(server, "openai", run, run_folder / "other", "--batch")
    assert again.exit_code == 0, again.output
    assert "warning: run" in again.output and "was judged by anthropic" in again.output
    assert "its 2 anthropic batch(es) cannot be picked up by openai" in again.output
    assert lines_of(run_folder / "other")[-1]["evaluated"] == 15  # the other provider's batch ids were never asked for


# -- 4. a refused key, a dead server, a server without the batch API ------------------------------------------


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_refused_key_with_batch_is_the_auth_error_a_sync_run_gives(api, query_set, db_copy, tmp_path):
    from tests.support.batch_runs import env_for
    from tests.support.clitools import invoke

    with FakeLLMServer() as server:
        env = env_for(server, api)
        env["ANTHROPIC_API_KEY" if api == "anthropic" else "OPENAI_API_KEY"] = "invalid-key"
        args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--provider", api, "--no-cache"]
        sync = invoke([*args, "--out-dir", str(tmp_path / "sync")], env)
        batch = invoke([*args, "--out-dir", str(tmp_path / "batch"), "--batch"], env)
        assert server.batches.submitted == []
    assert batch.exit_code == sync.exit_code == 2
    assert "the API key was refused" in batch.output and "check the API key" in batch.output
    assert "run without --batch" not in batch.output and "no Batch API" not in batch.output


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_dead_server_with_batch_says_it_cannot_be_reached(api, query_set, db_copy, tmp_path):
    import socket

    from tests.support.clitools import invoke

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}" + ("" if api == "anthropic" else "/v1")
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": url} if api == "anthropic" else {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": url}
    args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--provider", api, "--no-cache", "--batch"]
    result = invoke([*args, "--out-dir", str(tmp_path)], {**env, "JUDGE_RUNNER_MAX_RETRIES": "0"})
    assert result.exit_code == 2 and "cannot reach" in result.output, result.output
    assert "run without --batch" not in result.output and "no Batch API" not in result.output


# -- 5. a batch the server no longer knows ------------------------------------------------------------------


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_a_prior_batch_the_server_no_longer_knows_is_dropped_and_its_requests_sent_again(api, query_set, run_folder):
    with FakeLLMServer() as server:
        first = evaluate(server, api, query_set, run_folder.parent / "db.sqlite", run_folder, "--batch")
        assert first.exit_code == 0, first.output
        run = cut_run(run_folder)
        gone = [b["id"] for b in server.batches.submitted]
        server.batches._batches.clear()  # expired from the provider's records: retrieve answers 404
        again = resume(server, api, run, run_folder / "again", "--batch")
        assert len(server.batches.submitted) == 4  # the two dropped ones, submitted anew
    assert again.exit_code == 0, again.output
    summary = lines_of(run_folder / "again")[-1]
    assert summary["evaluated"] == 15 and summary["failed"] == 0 and summary["batch"]["inFlight"] == []
    for batch_id in gone:
        assert again.output.count(f"warning: batch {batch_id} is unknown to the server") == 1


# -- 11. damaged batch lines ------------------------------------------------------------------------------------


def test_damaged_batch_lines_are_warned_about_with_file_and_line_on_resume(query_set, run_folder):
    with FakeLLMServer() as server:
        first = evaluate(server, "anthropic", query_set, run_folder.parent / "db.sqlite", run_folder, "--batch")
        assert first.exit_code == 0, first.output
        run = cut_run(run_folder)
        texts = run.read_text().splitlines()
        numbers = [k for k, t in enumerate(texts) if '"type":"batch"' in t]
        a, b = json.loads(texts[numbers[0]]), json.loads(texts[numbers[1]])
        a["customIds"] = "not a list"
        del b["batchId"]
        texts[numbers[0]], texts[numbers[1]] = json.dumps(a), json.dumps(b)
        run.write_text("\n".join(texts) + "\n")
        again = resume(server, "anthropic", run, run_folder / "again", "--batch")
    assert again.exit_code == 0, again.output
    assert f"{run.name}:{numbers[0] + 1}: field customIds" in again.output
    assert f"{run.name}:{numbers[1] + 1}: batch line without batchId" in again.output


# -- 10. the progress line ----------------------------------------------------------------------------------------


def test_the_progress_line_says_the_time_waited_so_far():
    from judge_runner.llm.batch import BatchCoordinator
    from judge_runner.llm.batch_api import BatchResults, BatchStatus, ItemResult

    class Slow:
        provider = type("P", (), {"classify": staticmethod(lambda exc: None)})()
        polls = 0

        def submit(self, requests):
            self.ids = [cid for cid, _ in requests]
            return "b1"

        def status(self, batch_id):
            self.polls += 1
            return BatchStatus(self.polls > 2, 0 if self.polls <= 2 else 1, 1, "in_progress" if self.polls <= 2 else "ended")

        def results(self, batch_id):
            return BatchResults({cid: ItemResult("succeeded", 1) for cid in self.ids})

    coordinator = BatchCoordinator(Slow(), "anthropic", max_poll_s=0.01)  # type: ignore[arg-type]
    notes: list[str] = []
    coordinator.note = notes.append
    assert coordinator.call("c", {"n": 1}) == 1
    progress = [n for n in notes if "0/1 done" in n]
    assert progress == ["batch b1: 0/1 done, waited 0s so far"]


# -- 9. generate-and-evaluate's cost line ---------------------------------------------------------------------------


def test_generate_and_evaluate_with_batch_says_which_part_was_at_batch_prices(db_copy, tmp_path):
    from tests.support.batch_runs import ROOT, env_for
    from tests.support.clitools import invoke

    with FakeLLMServer() as server:
        args = [
            "generate-and-evaluate",
            "--fixtures",
            str(ROOT / "fixtures"),
            "--db",
            str(db_copy),
            "--out-dir",
            str(tmp_path),
            "--count",
            "3",
        ]
        result = invoke([*args, "--provider", "anthropic", "--batch"], env_for(server, "anthropic"))
    assert result.exit_code == 0, result.output
    assert "(judge at batch prices, phase one at sync prices)" in result.output


# -- 7 and 8. a resumed run's batch block and cost ---------------------------------------------------------------


@pytest.mark.parametrize("batch", [True, False])
def test_a_resumed_file_carries_the_whole_runs_cost_once_and_its_batch_block_one_scope(batch, query_set, run_folder):
    extra = ("--batch",) if batch else ()
    with FakeLLMServer() as server:
        first = evaluate(server, "anthropic", query_set, run_folder.parent / "db.sqlite", run_folder, *extra)
        assert first.exit_code == 0, first.output
        whole = lines_of(run_folder)[-1]
        run = cut_run(run_folder, keep_evaluations=5)
        again = resume(server, "anthropic", run, run_folder / "again", *extra)
        assert server.batches.count() == (2 if batch else 0), "nothing submitted again"
    assert again.exit_code == 0, again.output
    lines = lines_of(run_folder / "again")
    summary = lines[-1]
    evaluations = [e for e in lines if e["type"] == "evaluation"]
    # the summary agrees with its own evaluation lines, and with what the provider billed (each request once)
    assert summary["costUsd"] == pytest.approx(sum(e["usage"]["costUsd"] for e in evaluations), abs=1e-5)
    assert summary["costUsd"] == pytest.approx(whole["costUsd"], abs=1e-5)
    assert summary["usage"]["calls"] == whole["usage"]["calls"]
    assert summary["usage"]["outputTokens"] == whole["usage"]["outputTokens"]
    if batch:
        block = summary["batch"]
        assert block["batches"] == 0 and block["resumedBatches"] == 2 and block["submittedRequests"] == 0
        picked = block["pickedUpRequests"]
        assert block["requests"] == picked == block["succeeded"] + block["errored"] + block["expired"] + block["canceled"] > 0
        assert f"{picked} requests ({picked} picked up): {picked} succeeded" in again.output


# -- 3. weekly --batch killed while polling -----------------------------------------------------------------------


def test_weekly_killed_while_polling_picks_up_its_batches_next_time(query_set, db_copy, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.support.batch_runs import ROOT, env_for, judge_requests
    from tests.support.clitools import invoke

    results, reports = tmp_path / "quality-results", tmp_path / "reports"
    args = ["weekly", "--fixtures", str(ROOT / "fixtures"), "--db", str(db_copy), "--results", str(results), "--reports", str(reports)]
    args += ["--queries", str(query_set), "--provider", "anthropic", "--batch", "--no-cache"]
    with FakeLLMServer() as server:
        server.batches.polls_before_done = 10**9
        env = {**os.environ, **env_for(server, "anthropic"), "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "judge_runner.cli", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and server.batches.count() < 1:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.1)
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert "judge-runner weekly" in stderr and "evaluate --resume" not in stderr, stderr
        server.batches.polls_before_done = 1
        again = invoke(args, env_for(server, "anthropic"))
        assert judge_requests(server, "anthropic") == []
        submitted = [cid for b in server.batches.submitted for cid in b["custom_ids"]]
    assert again.exit_code == 0, again.output
    assert server.batches.count() == 2 and len(submitted) == len(set(submitted)), "the label batch was picked up, not sent again"
    assert "picking up" in (results / "weekly.log").read_text()
    latest = sorted(results.glob("*.jsonl"))[-1]
    summary = json.loads(latest.read_text().splitlines()[-1])
    assert summary["evaluated"] == 15 and summary["batch"]["resumedBatches"] == 1
