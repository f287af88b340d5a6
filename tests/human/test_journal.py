"""A label session's acts each change one line of its qrels file and tell the sink the one pair they changed,
however many labels came before; the file always holds exactly the labels given, and the journal rebuilds it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from judge_runner.human.journal import LabelSession
from judge_runner.human.plan import Item
from judge_runner.judging.qrels import read_trec_qrels


class Recorder:
    """A sink that keeps what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, dict | None]] = []

    def changed(self, qrels: Path, count: int, pairs=None) -> None:
        self.calls.append((count, None if pairs is None else dict(pairs)))

    def status(self) -> dict:
        return {"state": "current", "message": "", "path": None}


def items(count: int) -> list[Item]:
    return [Item(f"i{n}", f"q{n // 3}", f"query {n // 3}", "need", f"docs/d{n}.md", None, "text", "shown") for n in range(1, count + 1)]


@pytest.fixture
def session(tmp_path) -> LabelSession:
    started = LabelSession(tmp_path / "labels", "team", Recorder())
    started.start(items(6), {"sampling": {"kind": "test"}})
    return started


def label(session: LabelSession, grade: int, tab: str = "tab-a") -> str:
    item = session.current()
    assert item is not None
    session.act("label", item.id, "ada", grade, tab=tab)
    return item.id


def pairs(session: LabelSession) -> list[tuple[str, str, int]]:
    return read_trec_qrels(session.qrels)


def test_each_act_changes_the_qrels_file_in_place_and_tells_the_sink_one_pair(session):
    inode = os.stat(session.qrels).st_ino
    sink = session.sink
    assert isinstance(sink, Recorder) and sink.calls == [(0, None)]  # the start writes it whole
    for grade in (2, 0, 3):
        label(session, grade)
    session.act("skip", session.current().id, "ada", tab="tab-a")  # a skip changes no label
    assert os.stat(session.qrels).st_ino == inode  # never rewritten: each label appended
    assert pairs(session) == [("q0", "docs/d1.md", 2), ("q0", "docs/d2.md", 0), ("q1", "docs/d3.md", 3)]
    assert sink.calls[1:] == [(1, {("q0", "docs/d1.md"): 2}), (2, {("q0", "docs/d2.md"): 0}), (3, {("q1", "docs/d3.md"): 3})]
    session.act("undo", None, "ada", tab="tab-a")  # the last line: cut away
    assert pairs(session) == [("q0", "docs/d1.md", 2), ("q0", "docs/d2.md", 0)]
    assert session.qrels.read_text(encoding="utf-8") == "q0 0 docs/d1.md 2\nq0 0 docs/d2.md 0\n"
    assert sink.calls[-1] == (2, {("q1", "docs/d3.md"): None})
    assert os.stat(session.qrels).st_ino == inode


def test_an_undo_under_another_tabs_label_blanks_its_line_and_the_close_writes_the_file_whole(session):
    first = label(session, 2, "tab-a")
    label(session, 1, "tab-b")
    session.act("undo", None, "ada", tab="tab-a")  # tab a's label is not the last line: blanked in place
    assert pairs(session) == [("q0", "docs/d2.md", 1)]
    assert session.qrels.read_text(encoding="utf-8").splitlines()[0].strip() == ""
    assert session.current().id == first  # the item undone comes back first
    label(session, 3, "tab-a")  # given again: where it was given again
    assert pairs(session) == [("q0", "docs/d2.md", 1), ("q0", "docs/d1.md", 3)]
    session.close()
    assert session.qrels.read_text(encoding="utf-8").splitlines() == ["q0 0 docs/d2.md 1", "q0 0 docs/d1.md 3"]


def test_after_every_item_the_skipped_ones_come_back_and_an_undo_goes_back_before_them(session):
    session.act("skip", session.current().id, "ada", tab="tab-a")
    done = [label(session, 1) for _ in range(5)]
    assert session.current().id == "i1"  # every item labelled or skipped: the skipped one again
    session.act("undo", None, "ada", tab="tab-a")
    assert session.current().id == done[-1]
    label(session, 2)
    assert session.current().id == "i1"
    assert session.view("tab-a")["place"] == {"query": 1, "queries": 3, "document": 1, "documents": 2}


def test_a_qrels_file_lost_mid_session_is_written_whole_at_the_next_act_and_a_torn_one_on_reopening(session, tmp_path):
    label(session, 2)
    session.qrels.unlink()
    label(session, 1)  # cannot be changed in place: written whole from the labels given
    assert session.sink.calls[-1] == (2, None)  # and the sink takes all of it
    label(session, 0)
    assert [g for _, _, g in pairs(session)] == [2, 1, 0]
    with open(session.qrels, "ab") as handle:
        handle.write(b"q9 0 docs%2Fd")  # a crash mid-append
    again = LabelSession(tmp_path / "labels", "team")
    again.open()  # the journal is the record: the file is written from it
    assert [g for _, _, g in pairs(again)] == [2, 1, 0]
