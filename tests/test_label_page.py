"""Issue 20, item 1: ``judge-runner label``, the labelling page.

In a real browser (headless Chromium driven by Selenium and chromium-driver, which .ci/run installs): 12
labels by keyboard with a reload mid-way and an undo; the qrels file holds exactly the labels given, in
order; the page and every answer of its server hold nothing of the judge's (label, reason, rank, score,
system); a document holding ``<script>`` and Markdown shows as its characters. Without a browser that test
skips, saying why; the rest run everywhere: the token and the loopback binding, the journal (fsynced,
resumable, torn last line), sampling, the width advice, the cache import, and Ctrl+C on the command.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from judge_runner.app.label_server import LabelServer, Sampling, label_job, new_session
from judge_runner.app.label_session import LabelSession
from judge_runner.config import load_settings
from judge_runner.core.printer import Printer
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.label_plan import plan_pairs, plan_queries, recommended_queries
from judge_runner.judging.qrels import human_labels, read_trec_qrels
from judge_runner.runs.read import read_run_file
from tests.label_runs import HOSTILE, QUERIES, secrets_of_the_judge, write_run

ROOT = Path(__file__).resolve().parents[1]
ITEM_KEYS = {"id", "qid", "query", "intent", "source", "anchor", "text", "textFrom"}
QUIET = Printer(lambda m: None, lambda m: None, quiet=True)


@pytest.fixture
def run_file(tmp_path) -> Path:
    return write_run(tmp_path / "results")


def start_job(tmp_path, run_file, name="team", labeller="ada", **sampling):
    """``label_job`` in a thread; returns ``(server, thread, settings)`` once it listens."""
    settings = load_settings({"cache": tmp_path / "judgments.sqlite"}, cwd=tmp_path, environ={})
    ready: dict = {}
    got = threading.Event()

    def on_ready(server):
        ready["server"] = server
        got.set()

    args = (settings, name, [run_file], Sampling(**{"queries": 4, **sampling}), labeller, tmp_path / "labels", 0, QUIET, on_ready)
    thread = threading.Thread(target=label_job, args=args, daemon=True)
    thread.start()
    assert got.wait(20), "the labelling server did not start"
    return ready["server"], thread, settings


def stop_job(server, thread):
    server.shutdown()
    thread.join(10)
    assert not thread.is_alive()


def fetch(url: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, bytes, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})} if data else (headers or {})
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def chromium_driver():
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Chromium is not installed (Debian package `chromium`); cannot drive the labelling page in a real browser")
    driver_path = shutil.which("chromedriver")
    if driver_path is None:
        pytest.skip("chromedriver is not installed (Debian package `chromium-driver`); cannot drive the labelling page")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (the test extra pins it); cannot drive the labelling page")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1366,900"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver_path), options=options)


def test_twelve_labels_by_keyboard_with_a_reload_and_an_undo_in_chromium(tmp_path, run_file):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium_driver()
    server, thread, settings = start_job(tmp_path, run_file)
    sources = {(text, f"runbooks/key-{q}-part {r}.md"): qid for q, (qid, (text, _)) in enumerate(QUERIES.items(), 1) for r in range(4)}
    given: list[tuple[str, str, int]] = []
    seen_pages: list[str] = []
    try:
        driver.get(server.url)
        wait = WebDriverWait(driver, 15)

        def count() -> str:
            return driver.find_element(By.ID, "count").text

        wait.until(lambda d: count().startswith("0 of 16"))

        def shown() -> tuple[str, str]:
            query, source = driver.find_element(By.ID, "query").text, driver.find_element(By.ID, "source").text
            return sources[(query, source)], source

        hostile_seen = []

        def check_hostile() -> None:
            """The hostile document as its characters: nothing run, nothing rendered."""
            text = driver.find_element(By.ID, "text")
            assert text.text.replace("\n", " ").split() == HOSTILE.replace("\n", " ").split()
            assert driver.execute_script("return window.__pwned === undefined")
            assert driver.execute_script("return document.scripts.length") == 1
            assert not driver.find_element(By.ID, "doc").find_elements(By.CSS_SELECTOR, "script, img, a, strong, em, h1, li")
            driver.save_screenshot(str(tmp_path / "label-page.png"))  # a person's view of it
            hostile_seen.append(True)

        def press(key: str, expect: int) -> None:
            seen_pages.append(driver.page_source)
            if shown()[1] == "runbooks/key-2-part 1.md":
                check_hostile()
            driver.find_element(By.TAG_NAME, "body").send_keys(key)
            wait.until(lambda d: count().startswith(f"{expect} of 16"))

        grades = [2, 0, 3, 1, 1, 2, 0, 3, 2, 1, 0, 3, 2]
        for n, grade in enumerate(grades[:6], start=1):
            given.append((*shown(), grade))
            press(str(grade), n)
        driver.refresh()  # a reload mid-way: the page picks up where the server is
        wait.until(lambda d: count().startswith("6 of 16"))
        for n, grade in enumerate(grades[6:8], start=7):
            given.append((*shown(), grade))
            press(str(grade), n)
        undone = given.pop()
        press("u", 7)  # undo: the last label is gone and its document is shown again
        assert shown() == undone[:2]
        for n, grade in enumerate(grades[8:], start=8):
            given.append((*shown(), grade))
            press(str(grade), n)
        assert count().startswith("12 of 16")

        for _ in range(4):  # the hostile document not labelled yet: skip until it comes up (at most the 4 left)
            if hostile_seen:
                break
            press("s", 12)
        assert hostile_seen, "the document holding <script> was never shown"
        seen_pages.append(driver.page_source)
    finally:
        driver.quit()
        stop_job(server, thread)

    # the qrels file: exactly the labels given, in the order given, none lost
    qrels = (tmp_path / "labels" / "team.qrels").read_text(encoding="utf-8").splitlines()
    from judge_runner.search.trec import encode_id

    assert qrels == [f"{qid} 0 {encode_id(source)} {grade}" for qid, source, grade in given]
    assert len(qrels) == 12
    # the journal keeps the labeller and the times; the cache holds the set as `qrels import` stores it
    journal = [json.loads(line) for line in (tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()]
    acts = [line for line in journal if line["type"] == "label"]
    assert len(acts) == 13 and all(a["labeller"] == "ada" and a["at"].endswith("Z") for a in acts)
    assert [line["type"] for line in journal].count("undo") == 1
    with JudgmentCache(settings.cache_path) as cache:
        assert human_labels(cache, ["team"]) == {(q, s): g for q, s, g in given}
    # nothing of the judge's ever reached the browser
    for html in seen_pages:
        for secret in secrets_of_the_judge():
            assert secret not in html, secret


def test_the_server_answers_only_its_token_on_loopback_and_sends_nothing_of_the_judge(tmp_path, run_file):
    server, thread, _ = start_job(tmp_path, run_file)
    try:
        assert server.server_address[0] == "127.0.0.1"
        base = f"http://127.0.0.1:{server.port}"
        assert fetch(base + "/")[0] == 404
        assert fetch(base + "/not-the-token/api/state")[0] == 403
        wrong = server.token[:-1] + ("A" if server.token[-1] != "A" else "B")
        assert fetch(f"{base}/{wrong}/api/state")[0] == 403
        status, _, _ = fetch(server.url + "api/state", headers={"Host": "evil.example:80"})
        assert status == 403  # DNS rebinding: another host name pointing at 127.0.0.1
        status, page, headers = fetch(server.url)
        assert status == 200 and "script-src 'nonce-" in headers["Content-Security-Policy"] and headers["Referrer-Policy"] == "no-referrer"
        assert "http" not in page.decode().replace("http://example", "")  # no asset from anywhere
        status, body, _ = fetch(server.url + "api/state")
        state = json.loads(body)
        assert set(state["item"]) == ITEM_KEYS
        item = state["item"]["id"]
        # a form post from another page (not JSON) is refused; a stale item is refused with the state
        request = urllib.request.Request(
            server.url + "api/label", data=b"item=i1&grade=3", headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 415
        assert fetch(server.url + "api/label", {"item": "i999", "grade": 3})[0] == 409
        assert fetch(server.url + "api/label", {"item": item, "grade": 7})[0] == 409
        answers = [body, page]
        for grade in (3, 0):
            status, body, _ = fetch(server.url + "api/label", {"item": state["item"]["id"], "grade": grade})
            assert status == 200
            state = json.loads(body)["state"]
            answers.append(body)
        for answer in answers:
            for secret in secrets_of_the_judge():
                assert secret.encode() not in answer
    finally:
        stop_job(server, thread)
    assert len(read_trec_qrels(tmp_path / "labels" / "team.qrels")) == 2


def test_a_session_resumes_from_its_journal_and_a_torn_line_is_ignored(tmp_path, run_file):
    runs = [read_run_file(run_file)]
    session = LabelSession(tmp_path / "labels", "team")
    new_session(session, runs, Sampling(queries=2, seed=3), "ada", QUIET)
    first = session.current()
    session.act("label", first.id, "ada", 2)
    session.act("skip", session.current().id, "ada")
    third = session.current()
    session.act("label", third.id, "ada", 1)
    with open(session.journal, "a", encoding="utf-8") as handle:
        handle.write('{"type":"label","item":"i7","gra')  # a crash mid-write
    again = LabelSession(tmp_path / "labels", "team")
    again.open()
    assert again.state.labels == {first.id: 2, third.id: 1}
    assert [i.id for i in again.items.values()] == [i.id for i in session.items.values()]  # the same sample
    with pytest.raises(Exception, match="already holds a session"):
        new_session(LabelSession(tmp_path / "labels", "team"), runs, Sampling(), "ada", QUIET)
    again.act("undo", None, "bo")
    assert again.current().id == third.id and list(again.state.labels) == [first.id]
    with pytest.raises(ValueError, match="stale"):
        again.act("label", first.id, "bo", 3)


def test_sampling_whole_queries_pairs_and_the_width_advice(run_file):
    runs = [read_run_file(run_file)]
    items = plan_queries(runs, 2, seed=5)
    assert len({i.qid for i in items}) == 2 and len(items) == 8  # whole queries: every document of each
    for qid in {i.qid for i in items}:
        ranks = [int(i.source.rsplit("part ", 1)[1][0]) for i in items if i.qid == qid]
        assert sorted(ranks) == [0, 1, 2, 3]
    assert plan_queries(runs, 2, seed=5) == items  # seeded
    assert all(set(i.shown()) == ITEM_KEYS and i.textFrom == "shown" for i in items)
    pairs = plan_pairs(runs, 2, seed=5)
    assert len(pairs) == 8  # two per judge label 0-3
    n, sd, scored = recommended_queries(runs, 0.1)
    assert scored == 4 and sd == pytest.approx(0.2582, abs=1e-3) and n == 4
    assert recommended_queries(runs, 0.9)[0] == 4  # at least the 10 a corrected estimate needs (issue 29), here all 4


def test_ctrl_c_stops_the_command_with_everything_saved(tmp_path, run_file):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "judge_runner.cli", "label", str(run_file), "--name", "team", "--queries", "2"]
    command += ["--folder", str(tmp_path / "labels"), "--cache", str(tmp_path / "judgments.sqlite")]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.strip().startswith("http://127.0.0.1:"):
                url = line.strip()
        assert url, "no URL printed"
        state = json.loads(fetch(url + "api/state")[1])
        assert fetch(url + "api/label", {"item": state["item"]["id"], "grade": 3})[0] == 200
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped (Ctrl+C)" in err and "1 of 8 labelled" in out
    assert len(read_trec_qrels(tmp_path / "labels" / "team.qrels")) == 1


def test_a_bad_name_or_no_runs_is_a_usage_error(tmp_path):
    from tests.clitools import invoke

    result = invoke(["label", "--name", "bad name", "--folder", str(tmp_path)])
    assert result.exit_code == 2 and "label set name" in result.output
    result = invoke(["label", "--name", "team", "--folder", str(tmp_path), "--no-cache"])
    assert result.exit_code == 2 and "give the run files" in result.output


def test_server_class_binds_loopback_only(tmp_path, run_file):
    session = LabelSession(tmp_path / "labels", "t")
    new_session(session, [read_run_file(run_file)], Sampling(queries=2), "ada", QUIET)
    server = LabelServer(session, "ada")
    try:
        assert server.server_address[0] == "127.0.0.1" and server.url.startswith("http://127.0.0.1:")
        assert len(server.token) >= 32
    finally:
        server.server_close()
