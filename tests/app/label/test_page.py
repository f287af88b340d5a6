"""``judge-runner label``, the labelling page.

In a real browser (headless Chromium driven by Selenium and chromium-driver, which .ci/run installs): 12
labels by keyboard with a reload mid-way and an undo; the qrels file holds exactly the labels given, in
order; the page and every answer of its server hold nothing of the judge's (label, reason, rank, score,
system); a document holding ``<script>`` and Markdown shows as its characters. Without a browser that test
skips, saying why; the rest run everywhere: the token and the loopback binding, the journal (fsynced,
resumable, torn last line), sampling, the width advice, the cache import, and Ctrl+C on the command.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from judge_runner.app.label.server import new_session
from judge_runner.app.label.web import LabelServer
from judge_runner.human.journal import LabelSession
from judge_runner.human.options import Sampling
from judge_runner.human.plan import plan_pairs, plan_queries, recommended_queries
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import human_labels, read_trec_qrels
from judge_runner.runs.read import read_run_file
from tests.support.label_client import QUIET, Forward, Job, act, chromium_driver, fetch, spawn_label, state, stop_process, wait_url
from tests.support.label_runs import HOSTILE, QUERIES, secrets_of_the_judge, write_run

ITEM_KEYS = {"id", "qid", "query", "intent", "source", "anchor", "text", "textFrom"}


@pytest.fixture
def run_file(tmp_path) -> Path:
    return write_run(tmp_path / "results")


def test_twelve_labels_by_keyboard_with_a_reload_and_an_undo_in_chromium(tmp_path, run_file):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium_driver()
    job = Job(tmp_path, run_file)
    server = job.server
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
            before = shown()[1]
            if before == "runbooks/key-2-part 1.md":
                check_hostile()
            driver.find_element(By.TAG_NAME, "body").send_keys(key)
            wait.until(lambda d: count().startswith(f"{expect} of 16"))
            if key == "s":  # a skip leaves the count as it is: wait for the next document
                wait.until(lambda d: shown()[1] != before)

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
        job.stop()

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
    with JudgmentCache(job.settings.cache_path) as cache:
        assert human_labels(cache, ["team"]) == {(q, s): g for q, s, g in given}
    # nothing of the judge's ever reached the browser
    for html in seen_pages:
        for secret in secrets_of_the_judge():
            assert secret not in html, secret


def test_the_server_answers_only_its_token_on_loopback_and_sends_nothing_of_the_judge(tmp_path, run_file):
    job = Job(tmp_path, run_file)
    server = job.server
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
        assert fetch(server.url + "api/label", {"item": "i999", "grade": 3, "tab": "tab-a-000001"})[0] == 409
        assert fetch(server.url + "api/label", {"item": item, "grade": 7, "tab": "tab-a-000001"})[0] == 400
        answers = [body, page]
        for grade in (3, 0):
            status, body, _ = fetch(server.url + "api/label", {"item": state["item"]["id"], "grade": grade, "tab": "tab-a-000001"})
            assert status == 200
            state = json.loads(body)["state"]
            answers.append(body)
        for answer in answers:
            for secret in secrets_of_the_judge():
                assert secret.encode() not in answer
    finally:
        job.stop()
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
    assert recommended_queries(runs, 0.9)[0] == 4  # at least the 10 a corrected estimate needs, here all 4


def test_ctrl_c_stops_the_command_with_everything_saved(tmp_path, run_file):
    proc = spawn_label(tmp_path, str(run_file), "--queries", "2")
    try:
        url = wait_url(proc)
        assert fetch(url + "api/label", {"item": state(url)["item"]["id"], "grade": 3, "tab": "tab-a-000001"})[0] == 200
        out, err = stop_process(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "stopped (Ctrl+C)" in err and "1 of 8 labelled" in out and "all 1 label" in out, out
    assert len(read_trec_qrels(tmp_path / "labels" / "team.qrels")) == 1


def test_a_bad_name_or_no_runs_is_a_usage_error(tmp_path):
    from tests.support.clitools import invoke

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


def open_page(driver, url: str, expect: str):
    """Load the page at ``url`` and wait for its count to read ``expect``; returns a ``press(key, expect)``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    wait = WebDriverWait(driver, 20)
    wait.until(lambda d: d.find_elements(By.ID, "count") and d.find_element(By.ID, "count").text.startswith(expect))

    def press(key: str, then: str) -> None:
        driver.find_element(By.TAG_NAME, "body").send_keys(key)
        wait.until(lambda d: d.find_element(By.ID, "count").text.startswith(then))

    return press


def hold_key(driver, key: str, repeats: int) -> None:
    """Hold ``key`` down as a keyboard does: one keydown, then ``repeats`` auto-repeat keydowns about 0.07 s
    apart (each sent once the page is idle, so none is dropped for a request in flight), then the keyup;
    through the DevTools protocol, so the events are trusted and carry ``repeat``."""
    code = f"Digit{key}" if key.isdigit() else f"Key{key.upper()}"
    event = {"key": key, "code": code, "windowsVirtualKeyCode": ord(key.upper()), "nativeVirtualKeyCode": ord(key.upper())}
    for n in range(repeats + 1):
        deadline = time.monotonic() + 10
        while driver.execute_script("return busy") and time.monotonic() < deadline:
            time.sleep(0.01)
        driver.execute_cdp_cmd("Input.dispatchKeyEvent", {"type": "keyDown", "text": key, "autoRepeat": n > 0, **event})
        time.sleep(0.07)
    driver.execute_cdp_cmd("Input.dispatchKeyEvent", {"type": "keyUp", **event})
    deadline = time.monotonic() + 10
    while driver.execute_script("return busy") and time.monotonic() < deadline:
        time.sleep(0.01)


def test_holding_a_key_down_gives_one_label_and_fast_labels_are_flagged_in_chromium(tmp_path, run_file):
    from selenium.webdriver.common.by import By

    driver = chromium_driver()
    job = Job(tmp_path, run_file)
    job.server.session.fast_floor_s = 3600.0  # every label of a test is "fast": the flag is what is looked at
    try:
        press = open_page(driver, job.url, "0 of 16")
        hold_key(driver, "2", 15)  # 16 keydowns in about a second
        assert state(job.url)["progress"]["labelled"] == 1
        assert driver.find_element(By.ID, "count").text.startswith("1 of 16")
        fast = driver.find_element(By.ID, "fast").text
        assert "1 label" in fast and "flagged" in fast, fast
        press("3", "2 of 16")
        hold_key(driver, "u", 10)  # holding undo takes back one label, not all of them
        assert state(job.url)["progress"]["labelled"] == 1
        driver.save_screenshot(str(tmp_path / "label-page-fast.png"))
    finally:
        driver.quit()
        job.stop()
    journal = [json.loads(line) for line in (tmp_path / "labels" / "team.journal.jsonl").read_text().splitlines()]
    assert [(line["grade"], line["fast"]) for line in journal if line["type"] == "label"] == [(2, True), (3, True)]
    assert [line["type"] for line in journal[1:]] == ["label", "label", "undo"]


def test_two_tabs_each_undo_only_their_own_labels_in_chromium(tmp_path, run_file):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium_driver()
    job = Job(tmp_path, run_file)
    try:
        press = open_page(driver, job.url, "0 of 16")
        first_tab = driver.current_window_handle
        press("2", "1 of 16")
        mine = driver.find_element(By.ID, "source").text  # the document tab A labels next
        press("1", "2 of 16")
        driver.switch_to.new_window("tab")
        press_b = open_page(driver, job.url, "2 of 16")
        theirs = driver.find_element(By.ID, "source").text
        press_b("3", "3 of 16")
        driver.switch_to.window(first_tab)  # tab A still shows the page as it was: stale
        assert driver.find_element(By.ID, "count").text.startswith("2 of 16")
        driver.find_element(By.TAG_NAME, "body").send_keys("u")  # the count stays 2 of 16: wait for the document instead
        WebDriverWait(driver, 20).until(lambda d: d.find_element(By.ID, "source").text == mine)  # tab A's own last label came back
        labels = {job.server.session.items[i].source: g for i, g in job.server.session.state.labels.items()}
        assert labels.get(theirs) == 3 and mine not in labels and len(labels) == 2
        press("u", "1 of 16")
        tab_a = driver.execute_script("return tab")
        status, answer = act(job.url, "undo", tab_a)  # nothing of tab A's left: tab B's label stays
        assert status == 409 and not answer["state"]["canUndo"]
        assert {job.server.session.items[i].source for i in job.server.session.state.labels} == {theirs}
    finally:
        driver.quit()
        job.stop()


def test_the_page_works_through_a_port_forward_to_another_local_port_in_chromium(tmp_path, run_file):
    driver = chromium_driver()
    job = Job(tmp_path, run_file)
    forward = Forward(job.server.port)  # what `ssh -L PORT2:127.0.0.1:PORT` or an editor's port forward makes
    try:
        press = open_page(driver, f"http://localhost:{forward.port}/{job.server.token}/", "0 of 16")
        press("2", "1 of 16")
        press("u", "0 of 16")
        press("0", "1 of 16")
    finally:
        driver.quit()
        forward.close()
        job.stop()
    assert [g for _, _, g in read_trec_qrels(tmp_path / "labels" / "team.qrels")] == [0]


def test_people_are_shown_the_scale_and_the_rules_the_judge_is_given_in_its_words_in_chromium(tmp_path, run_file):
    from selenium.webdriver.common.by import By

    from judge_runner.judging.requests import label_system_prompt
    from judge_runner.judging.rubric import load_rubric

    rubric = load_rubric()
    judge_prompt = label_system_prompt()
    driver = chromium_driver()
    job = Job(tmp_path, run_file)
    try:
        open_page(driver, job.url, "0 of 16")
        buttons = driver.find_elements(By.CSS_SELECTOR, "#scale button")
        shown = [(b.find_element(By.TAG_NAME, "b").text, b.find_element(By.TAG_NAME, "span").text) for b in buttons]
        assert shown == [(f"{g} · {name}", meaning) for g, (name, meaning) in rubric.scale().items()]
        assert all(meaning in judge_prompt for _, meaning in shown)  # the judge reads the same words
        driver.find_element(By.CSS_SELECTOR, "#rubric summary").click()
        panel = " ".join(driver.find_element(By.ID, "rubricbody").text.split())
        for section in rubric.sections:
            assert section.heading in panel and f"## {section.heading}" in judge_prompt
            for item in section.items:
                assert f"{item.title} {item.text}" in panel, item.title
                assert f"**{item.title}** {item.text}" in judge_prompt, item.title
        assert "Trust." in panel and "at most 1" not in panel.split("Trust.")[1].split("Grade.")[0]  # trust is weighed, not capped
        driver.save_screenshot(str(tmp_path / "label-page-rubric.png"))
    finally:
        driver.quit()
        job.stop()
