"""``weekly --keep N`` prunes old run files, but never one a label session still needs (a budget session
estimates from the run file it drew from) nor the baseline, and says what it deleted and what it kept, and why."""

from __future__ import annotations

import pytest

from judge_runner.app.weekly import prune_runs
from judge_runner.human.sessions import needed_runs, session_journals
from tests.support.budget_runs import truth_grades, write_compare_run
from tests.support.clitools import invoke
from tests.support.label_client import Job, act, state

# the CLI and the pruning, not search quality: no MiniLM
pytestmark = pytest.mark.hash_embedder


def _session(tmp_path, run_file, name="ab", labels=3):
    """A budget session drawn from ``run_file`` (labels folder ``tmp_path/labels``), ``labels`` labels given."""
    job = Job(tmp_path, run_file, name=name, sampling={"budget": 50, "question": "difference"})
    truths = truth_grades(40)
    for _ in range(labels):
        item = state(job.url, "tab-weekly")["item"]
        act(job.url, "label", "tab-weekly", item=item["id"], grade=truths[(item["qid"], item["source"])])
    job.stop()


def test_weekly_keep_1_keeps_the_run_file_a_label_session_was_drawn_from_and_names_what_it_deletes(
    fixtures_root, db_copy, tmp_path, monkeypatch
):
    # a new user's trial: `weekly --keep 1` deleted the run file a label session was drawn from, with no note; resuming
    # the session then said "no corrected estimate: the run file ... cannot be read"
    monkeypatch.chdir(tmp_path)  # weekly looks for label sessions in ./labels, as `label` keeps them by default
    results = tmp_path / "quality-results"
    drawn = write_compare_run(results, 40, name="20261101T100000Z")
    unneeded = write_compare_run(results, 40, name="20261108T100000Z")
    _session(tmp_path, drawn)
    args = ["weekly", "--fixtures", str(fixtures_root), "--db", str(db_copy), "--results", str(results)]
    args += ["--reports", str(tmp_path / "reports"), "--count", "4", "--keep", "1", "--keep-unverified", "--no-cache"]
    result = invoke(args)
    assert result.exit_code == 0, result.output
    assert drawn.exists() and not unneeded.exists()
    said = " ".join((results / "weekly.log").read_text().split())
    assert "weekly --keep 1: kept 20261101T100000Z.jsonl: label session 'ab'" in said and "estimates from it" in said
    assert "weekly --keep 1: deleted 20261108T100000Z.jsonl" in said
    resumed = Job(tmp_path, None, name="ab")  # the session's estimate still has its run file
    resumed.stop()
    assert "cannot be read" not in resumed.lines.text() and "drawn queries labelled" in resumed.lines.out[-1]


def test_sessions_are_found_through_the_judgment_cache_and_a_session_without_a_budget_needs_no_run_file(tmp_path):
    results = tmp_path / "results"
    drawn = write_compare_run(results, 40, name="20261101T100000Z")
    plain = write_compare_run(results, 40, name="20261102T100000Z")
    newest = write_compare_run(results, 40, name="20261201T100000Z")
    _session(tmp_path, drawn)
    Job(tmp_path, plain, name="plain").stop()  # drawn without a budget: its items are in its journal
    journals = session_journals(None, tmp_path / "judgments.sqlite")  # only what the cache names
    assert [j.name for j in journals] == ["ab.journal.jsonl"]
    needed = needed_runs(session_journals(tmp_path / "labels", None))
    assert set(needed) == {drawn.name}
    said: list[str] = []
    assert prune_runs(results, 1, needed, said.append) == [plain]
    assert drawn.exists() and newest.exists()
    assert said == [
        f"weekly --keep 1: kept {drawn.name}: {needed[drawn.name]}",
        f"weekly --keep 1: deleted {plain.name} (older than the newest 1; no label session or baseline needs it)",
    ]


def test_weekly_keep_1_never_deletes_the_query_set_it_was_given(fixtures_root, db_copy, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "quality-results"
    common = ["--db", str(db_copy), "--keep-unverified", "--no-cache"]
    first = invoke(["generate-and-evaluate", "--fixtures", str(fixtures_root), "--count", "4", "--out-dir", str(results), *common])
    assert first.exit_code == 0, first.output
    (given,) = results.glob("*.queries.json")
    assert f"query set: {given}" in first.output  # where the set went, to judge it again
    (results / "notes.jsonl").write_text('{"not": "a run"}\n', encoding="utf-8")  # no run file: never pruned
    args = ["weekly", "--fixtures", str(fixtures_root), "--queries", str(given), "--results", str(results)]
    args += ["--reports", str(tmp_path / "reports"), "--keep", "1", *common]
    for _ in range(2):  # the identical weekly again: its query set is still there
        result = invoke(args)
        assert result.exit_code == 0, result.output
        assert given.is_file() and (results / "notes.jsonl").is_file()
    said = " ".join((results / "weekly.log").read_text().split())
    assert f"weekly --keep 1: kept {given.name}: the query set this command judges" in said
    assert len(list(results.glob("*.jsonl"))) == 2  # the newest run and the file that is no run
