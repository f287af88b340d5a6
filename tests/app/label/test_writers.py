"""The labelling page can no longer lose or fake labels on their way to disk and the cache.

- One writer per label set: a second (and a third) ``judge-runner label --name team`` is refused, naming the
  process that holds the set (pid, host, since when), in the same folder and in another folder that imports
  into the same judgment cache; the lock of a killed process is taken over, saying whose it was.
- A judgment cache whose write lock another process holds never holds up the page: the label is answered at
  once, saved in the journal and the qrels file, and goes into the cache when the lock frees; the closing
  line says exactly where the labels went, and how to import what the cache missed (exit 3).
- A label of 1 stays 1 in the cache (a set of 0s and 1s is not binary qrels to rescale 1 -> 3).
- A label given faster than the floor is flagged in its journal line and counted in the progress.
- A journal whose last line a crash tore keeps the acts appended after it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from judge_runner.app.label.server import new_session
from judge_runner.core.failures import UsageError
from judge_runner.human.journal import FAST_LABEL_S, LabelSession
from judge_runner.human.options import Sampling
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import human_labels, read_trec_qrels
from judge_runner.runs.read import read_run_file
from tests.support.clitools import invoke
from tests.support.label_client import QUIET, Job, act, spawn_label, state, stop_process, wait_url
from tests.support.label_runs import write_run


@pytest.fixture
def run_file(tmp_path) -> Path:
    return write_run(tmp_path / "results")


def refused(proc, seconds: float = 60) -> str:
    """The stderr of a label process that must end at once (it must not serve a page)."""
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"a second label process on the same set started serving: {out}")
    assert proc.returncode == 2, (proc.returncode, out, err)
    return err


def test_a_second_and_a_third_label_process_on_one_set_are_refused_naming_the_first(tmp_path, run_file):
    first = spawn_label(tmp_path, str(run_file), "--queries", "2")
    others = []
    try:
        url = wait_url(first)
        assert act(url, "label", "tab-first-0001", item=state(url)["item"]["id"], grade=2)[0] == 200
        others = [spawn_label(tmp_path, str(run_file)), spawn_label(tmp_path)]  # a new sample and a resume
        for proc in others:
            err = refused(proc)
            assert f"pid {first.pid}" in err and socket.gethostname() in err and "since 20" in err, err
            assert "label set 'team'" in err and "another --name" in err, err
        # the first is untouched and goes on
        assert act(url, "label", "tab-first-0001", item=state(url)["item"]["id"], grade=0)[0] == 200
        out, err = stop_process(first, signal.SIGINT)
    finally:
        for proc in [first, *others]:  # none is left running, whatever failed
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
    assert first.returncode == 0, err
    assert [g for _, _, g in read_trec_qrels(tmp_path / "labels" / "team.qrels")] == [2, 0]


def test_the_lock_of_a_killed_process_is_taken_over_and_says_whose_it_was(tmp_path, run_file):
    killed = spawn_label(tmp_path, str(run_file), "--queries", "2")
    try:
        url = wait_url(killed)
        assert act(url, "label", "tab-first-0001", item=state(url)["item"]["id"], grade=3)[0] == 200
    finally:
        killed.kill()  # SIGKILL: no clean-up, the lock file is left behind with its holder's record
        killed.wait(30)
    assert (tmp_path / "labels" / "team.lock").read_text(encoding="utf-8").strip()
    again = spawn_label(tmp_path)
    try:
        url = wait_url(again)
        assert act(url, "label", "tab-again-0001", item=state(url)["item"]["id"], grade=1)[0] == 200
        out, err = stop_process(again, signal.SIGINT)
    finally:
        if again.poll() is None:
            again.kill()
    assert again.returncode == 0, err
    assert f"took over the lock of pid {killed.pid}" in err and "no longer runs" in err, err
    assert [g for _, _, g in read_trec_qrels(tmp_path / "labels" / "team.qrels")] == [3, 1]


def test_the_later_labeller_cannot_overwrite_the_earlier_ones_labels_in_process(tmp_path, run_file):
    first = Job(tmp_path, run_file)
    try:
        item = state(first.url)["item"]["id"]
        assert act(first.url, "label", "tab-first-0001", item=item, grade=2)[0] == 200
        with pytest.raises(UsageError, match=r"label set 'team' .* pid \d+ on host"):
            Job(tmp_path, run_file)
        # the same set name imported into the same cache from another folder would replace it there too
        with pytest.raises(UsageError, match=r"human qrels set 'team' of the judgment cache .* pid \d+"):
            Job(tmp_path, run_file, folder=tmp_path / "elsewhere")
        assert act(first.url, "label", "tab-first-0001", item=state(first.url)["item"]["id"], grade=1)[0] == 200
    finally:
        first.stop()
    assert [g for _, _, g in read_trec_qrels(tmp_path / "labels" / "team.qrels")] == [2, 1]
    second = Job(tmp_path, None)  # released at the end: the next one resumes
    try:
        assert state(second.url)["progress"]["labelled"] == 2
    finally:
        second.stop()


def test_qrels_import_into_a_set_label_is_writing_is_refused_naming_it(tmp_path, run_file):
    other = tmp_path / "other.qrels"
    other.write_text("q1 0 doc 2\n", encoding="utf-8")
    job = Job(tmp_path, run_file)
    try:
        assert act(job.url, "label", "tab-a-000001", item=state(job.url)["item"]["id"], grade=2)[0] == 200
        cache = ["--cache", str(tmp_path / "judgments.sqlite")]
        result = invoke(["qrels", "import", str(other), "--name", "team", *cache])
        assert result.exit_code == 2 and "judge-runner label" in result.output and f"pid {os.getpid()}" in result.output, result.output
        assert invoke(["qrels", "import", str(other), "--name", "team-b", *cache]).exit_code == 0  # another set: fine
    finally:
        job.stop()
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache_file:
        assert list(human_labels(cache_file, ["team"]).values()) == [2] and len(human_labels(cache_file, ["team-b"])) == 1
        [(_, qid, _, _, text)] = cache_file.human_rows(["team"])  # the session's grade keeps the text it was given to
        assert text == next(line["query"] for line in map(json.loads, run_file.read_text().splitlines()) if line.get("queryId") == qid)
    assert invoke(["qrels", "import", str(other), "--name", "team", "--cache", str(tmp_path / "judgments.sqlite")]).exit_code == 0


def wait_for(predicate, seconds: float = 60, what: str = "the condition"):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"{what} never came")


def test_a_locked_cache_never_holds_up_the_page_and_the_closing_line_says_where_each_label_went(tmp_path, run_file):
    cache_path = tmp_path / "judgments.sqlite"
    JudgmentCache(cache_path).close()
    holder = sqlite3.connect(cache_path, timeout=1, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing the cache holds its write lock
    job = Job(tmp_path, run_file)  # starts, although the cache is locked
    try:
        url = job.url
        status, answer = act(url, "label", "tab-a-000001", item=state(url)["item"]["id"], grade=1)
        assert status == 200, answer  # answered while the lock is held, not after 30 s
        assert answer["state"]["cache"]["state"] == "locked" and answer["state"]["progress"]["labelled"] == 1
        holder.execute("ROLLBACK")  # the lock frees: the label goes in
        wait_for(lambda: state(url)["cache"]["state"] == "current", what="the import once the cache freed")
        with JudgmentCache(cache_path) as cache:
            first = human_labels(cache, ["team"])
        assert list(first.values()) == [1]  # a 1 stays a 1
        holder.execute("BEGIN IMMEDIATE")  # locked again; two more labels, one of them undone
        for grade in (0, 2):
            assert act(url, "label", "tab-a-000001", item=state(url)["item"]["id"], grade=grade)[0] == 200
        assert act(url, "undo", "tab-a-000001")[0] == 200
        result = job.stop()
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
    text = job.lines.text()
    assert result.exit_code == 3
    assert "2 of 16 labelled" in text and "team.journal.jsonl" in text and "team.qrels (2 labels)" in text, text
    assert "1 of the 2 labels" in text and "1 NOT imported" in text and "locked by another process" in text, text
    command = next(line.strip() for line in text.splitlines() if line.strip().startswith("judge-runner qrels import"))
    assert "--rescale 1=1" in command and str(cache_path) in command
    assert "the judgment cache is locked by another process" in "\n".join(job.lines.err)
    imported = invoke(shlex.split(command)[1:])
    assert imported.exit_code == 0, imported.output  # the command it prints imports what was missing
    with JudgmentCache(cache_path) as cache:
        assert sorted(human_labels(cache, ["team"]).values()) == [0, 1]


def test_with_no_cache_the_closing_line_says_the_labels_are_not_imported_and_how_to(tmp_path, run_file):
    job = Job(tmp_path, run_file, cache=None)
    assert act(job.url, "label", "tab-a-000001", item=state(job.url)["item"]["id"], grade=1)[0] == 200
    assert state(job.url)["cache"]["state"] == "off"
    result = job.stop()
    text = job.lines.text()
    assert result.exit_code == 0
    assert "not imported into a judgment cache (--no-cache)" in text, text
    assert "judge-runner qrels import" in text and "--name team --rescale 1=1" in text, text


def test_a_set_of_zeros_and_ones_is_imported_as_given(tmp_path, run_file):
    job = Job(tmp_path, run_file)
    try:
        for grade in (1, 0, 1):
            assert act(job.url, "label", "tab-a-000001", item=state(job.url)["item"]["id"], grade=grade)[0] == 200
    finally:
        result = job.stop()
    assert result.exit_code == 0 and "all 3 labels" in job.lines.text()
    with JudgmentCache(tmp_path / "judgments.sqlite") as cache:
        assert sorted(human_labels(cache, ["team"]).values()) == [0, 1, 1]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_labels_faster_than_the_floor_are_flagged_in_the_journal_and_the_progress(tmp_path, run_file):
    clock = Clock()
    session = LabelSession(tmp_path / "labels", "team", clock=clock)
    new_session(session, [read_run_file(run_file)], Sampling(queries=2), "ada", QUIET)
    session.view("tab-a")  # the page shows the first item
    for seconds, grade in ((12.0, 2), (0.07, 2), (FAST_LABEL_S - 0.01, 1), (FAST_LABEL_S, 0), (0.03, 3)):
        clock.now += seconds
        session.act("label", session.current().id, "ada", grade, tab="tab-a")
        session.view("tab-a")
    lines = [json.loads(line) for line in session.journal.read_text(encoding="utf-8").splitlines()]
    labels = [line for line in lines if line["type"] == "label"]
    assert [line["fast"] for line in labels] == [False, True, True, False, True]
    assert [line["seconds"] for line in labels][:2] == [12.0, 0.07]
    progress = session.view()["progress"]
    assert progress["fast"] == 3 and progress["fastFloorSeconds"] == FAST_LABEL_S
    session.act("undo", None, "ada", tab="tab-a")  # a fast label undone is no longer counted
    assert session.view()["progress"]["fast"] == 2
    replayed = LabelSession(tmp_path / "labels", "team")
    replayed.open()
    assert replayed.view()["progress"]["fast"] == 2
    assert 0.5 <= FAST_LABEL_S <= 2.0  # about the least time to read a heading and pick one of four keys


def test_an_act_after_a_torn_last_line_survives_the_next_replay(tmp_path, run_file):
    session = LabelSession(tmp_path / "labels", "team")
    new_session(session, [read_run_file(run_file)], Sampling(queries=2), "ada", QUIET)
    session.act("label", session.current().id, "ada", 2)
    with open(session.journal, "a", encoding="utf-8") as handle:
        handle.write('{"type":"label","item":"i2","gra')  # a crash mid-write: no newline
    again = LabelSession(tmp_path / "labels", "team")
    again.open()
    again.act("label", again.current().id, "bo", 3)
    third = LabelSession(tmp_path / "labels", "team")
    third.open()
    assert list(third.state.labels.values()) == [2, 3]
