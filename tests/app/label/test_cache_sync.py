"""The judgment cache follows a label session pair by pair: an act puts in, or takes out, the one label it
changed and leaves every other row as it was; acts made while another process locked the cache go in together
once it frees, the later act on a pair winning."""

from __future__ import annotations

import sqlite3
import time

from judge_runner.app.label.cache import CacheSync
from judge_runner.human.journal import LabelSession
from judge_runner.human.plan import Item
from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import human_labels


def wait_current(sync: CacheSync) -> None:
    deadline = time.monotonic() + 30
    while sync.status()["state"] != "current":
        assert time.monotonic() < deadline, sync.status()
        time.sleep(0.01)


def rows(path) -> dict[tuple[str, str], tuple[int, float]]:
    with sqlite3.connect(path) as conn:
        found = conn.execute("SELECT qid, docid, grade, imported_at FROM human_qrels WHERE name = 'team'").fetchall()
    return {(q, d): (g, t) for q, d, g, t in found}


def test_an_act_changes_only_its_own_pair_in_the_cache(tmp_path):
    cache = tmp_path / "judgments.sqlite"
    sync = CacheSync(cache, "team")
    sync.open()
    session = LabelSession(tmp_path / "labels", "team", sync)
    session.start([Item(f"i{n}", "q1", "query", "need", f"d{n}.md", None, "text", "shown") for n in range(1, 6)], {})
    for grade in (2, 1, 3):
        session.act("label", session.current().id, "ada", grade, tab="a")
    wait_current(sync)
    before = rows(cache)
    assert {pair: grade for pair, (grade, _) in before.items()} == {("q1", "d1.md"): 2, ("q1", "d2.md"): 1, ("q1", "d3.md"): 3}
    session.act("label", session.current().id, "ada", 0, tab="a")
    wait_current(sync)
    after = rows(cache)
    assert after[("q1", "d4.md")][0] == 0
    assert {pair: after[pair] for pair in before} == before  # not one other row written again
    session.act("undo", None, "ada", tab="a")
    wait_current(sync)
    assert set(rows(cache)) == set(before)
    assert sync.close().complete


def test_acts_made_while_the_cache_is_locked_go_in_together_once_it_frees(tmp_path):
    cache = tmp_path / "judgments.sqlite"
    JudgmentCache(cache).close()
    sync = CacheSync(cache, "team", wait_s=0.05, retry_s=0.05)
    sync.open()
    session = LabelSession(tmp_path / "labels", "team", sync)
    session.start([Item(f"i{n}", "q1", "query", "need", f"d{n}.md", None, "text", "shown") for n in range(1, 6)], {})
    wait_current(sync)
    holder = sqlite3.connect(cache, timeout=1, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        for grade in (2, 1):
            session.act("label", session.current().id, "ada", grade, tab="a")
        session.act("undo", None, "ada", tab="a")
        session.act("label", session.current().id, "ada", 3, tab="a")  # the same pair again, another grade
        deadline = time.monotonic() + 30
        while sync.status()["state"] != "locked":
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    wait_current(sync)
    with JudgmentCache(cache) as opened:
        assert human_labels(opened, ["team"]) == {("q1", "d1.md"): 2, ("q1", "d2.md"): 3}
    assert sync.close().complete
