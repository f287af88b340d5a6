"""Run ids unique across folders and machines, old ids still read.

Two runs started in the same second (or millisecond) in two folders, or on two machines whose results are
later copied together, used to get the same run id (the UTC second, unique only within a folder): trend
kept one of them, ``calibrate --results`` saw one system instead of two, and two calibrations of the same
second shared a file name. Now an id is the UTC millisecond plus a random suffix, readers tell two runs
apart by more than a possibly shared old id, and ids written before (``20261201T090000Z``) still read,
sort, resume and can be pinned as the baseline.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

import judge_runner.core.ids as ids_mod
import judge_runner.runs.write as write_mod
from judge_runner.analysis.trend import read_runs, set_baseline
from judge_runner.app.calibrate_job import trec_run_names
from judge_runner.app.weekly import prune_runs
from judge_runner.calibrate import output
from judge_runner.calibrate.from_runs import system_lists
from judge_runner.core.ids import sort_key, time_id
from judge_runner.judging.qrels import QrelsError, export_qrels
from judge_runner.runs.read import read_run_file, read_run_folder, run_names
from judge_runner.runs.write import RunWriter
from tests.support.batch_runs import env_for
from tests.support.clitools import invoke
from tests.support.fakes.fake_llm import FakeLLMServer
from tests.support.trend_runs import write_run

pytestmark = pytest.mark.hash_embedder  # the CLI and the run files, not search quality: no MiniLM

ID = re.compile(r"^\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{6}$")
FIXED = datetime(2026, 12, 1, 9, 0, 0, 123456, tzinfo=UTC)


class FrozenDateTime(datetime):
    @classmethod
    def now(cls, tz=None):  # noqa: D102 - every writer starts in the same millisecond
        return FIXED


@pytest.fixture
def same_millisecond(monkeypatch):
    monkeypatch.setattr(write_mod, "datetime", FrozenDateTime)


# -- the writer ----------------------------------------------------------------------------------------


def test_two_runs_started_in_the_same_millisecond_in_two_folders_get_different_ids(tmp_path, same_millisecond):
    a, b = RunWriter(tmp_path / "runs-a"), RunWriter(tmp_path / "runs-b")
    a.close(), b.close()
    assert a.run_id != b.run_id
    assert ID.match(a.run_id) and ID.match(b.run_id), (a.run_id, b.run_id)
    assert a.run_id.startswith("20261201T090000.123Z-")  # the UTC millisecond, readable
    assert a.path.name == f"{a.run_id}.jsonl"


def test_a_name_taken_in_the_folder_draws_another_suffix_and_never_reuses_the_file(tmp_path, same_millisecond, monkeypatch):
    suffixes = itertools.chain(["aaaaaa", "aaaaaa", "bbbbbb"])
    monkeypatch.setattr(ids_mod.secrets, "token_hex", lambda n: next(suffixes))
    first = RunWriter(tmp_path)
    first.write({"type": "run_start", "runId": first.run_id})
    first.close()
    second = RunWriter(tmp_path)  # "aaaaaa" is taken: the next suffix
    second.close()
    assert first.run_id == "20261201T090000.123Z-aaaaaa" and second.run_id == "20261201T090000.123Z-bbbbbb"
    assert json.loads(first.path.read_text())["runId"] == first.run_id


def test_a_folder_whose_every_name_is_taken_is_an_error_not_a_reused_file(tmp_path, same_millisecond, monkeypatch):
    monkeypatch.setattr(ids_mod.secrets, "token_hex", lambda n: "aaaaaa")
    RunWriter(tmp_path).close()
    with pytest.raises(FileExistsError, match="cannot find a free run file name"):
        RunWriter(tmp_path)


def test_ids_sort_by_time_old_formats_among_new_ones():
    names = [
        "20261201T090001Z",
        "20261201T090000.125Z-0000ff",
        "20261201T090000Z",
        "20261201T090000.123-1Z",
        "20261201T090000.122Z",
        time_id(datetime(2026, 12, 1, 8, 59, 59, 999000, tzinfo=UTC)),
    ]
    assert sorted(names, key=sort_key) == [names[5], names[2], names[4], names[3], names[1], names[0]]


# -- readers keep two runs apart ---------------------------------------------------------------------------


def copied_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Two different runs with the same old-format id, written on two machines in the same second
    (different start times) and copied into one folder."""
    folder = tmp_path / "results"
    for machine in ("machine-a", "machine-b"):
        (tmp_path / machine).mkdir()
    a = write_run(tmp_path / "machine-a", "20261201T090000Z", [0.5] * 5)
    b = write_run(tmp_path / "machine-b", "20261201T090000Z", [0.9] * 5, day=2)
    folder.mkdir()
    first, second = folder / "20261201T090000Z.jsonl", folder / "20261201T090000.500Z.jsonl"
    first.write_bytes(a.read_bytes())
    second.write_bytes(b.read_bytes())
    return first, second


def test_two_runs_with_one_old_id_in_one_folder_are_two_runs_in_trend(tmp_path):
    first, second = copied_runs(tmp_path)
    runs, _ = read_runs(first.parent)
    assert [r.file.path for r in runs] == [first, second]
    assert [r.mean("overall") for r in runs] == [0.5, 0.9]


def test_a_resumed_runs_second_file_is_still_one_run(tmp_path):
    folder, later = tmp_path / "results", tmp_path / "later"
    folder.mkdir(), later.mkdir()
    write_run(folder, "20261201T090000Z", [0.5] * 3)
    original = folder / "20261201T090000Z.jsonl"
    resumed = folder / "20261201T090512.250Z-3f9a0c.jsonl"  # same id and start time, all five queries
    resumed.write_bytes(write_run(later, "20261201T090000Z", [0.5] * 5).read_bytes())
    runs, _ = read_run_folder(folder)
    assert [(r.path, len(r.evaluations)) for r in runs] == [(resumed, 5)]
    assert original.exists()


def test_calibrate_sees_two_systems_in_two_runs_that_share_an_old_id(tmp_path):
    first, second = copied_runs(tmp_path)
    runs = [read_run_file(first), read_run_file(second)]
    assert run_names(runs) == ["20261201T090000Z", "20261201T090000Z#2"]
    assert sorted(system_lists(runs)) == ["run:20261201T090000Z", "run:20261201T090000Z#2"]
    # the same run given twice (a resumed run's two files) is one system
    assert run_names([runs[0], read_run_file(first)]) == ["20261201T090000Z", "20261201T090000Z"]


def test_qrels_export_sees_two_judges_in_two_runs_that_share_an_old_id(tmp_path):
    (tmp_path / "machine-a").mkdir(), (tmp_path / "machine-b").mkdir()
    a = write_run(tmp_path / "machine-a", "20261201T090000Z", [0.5] * 3, judge_model="claude-sonnet-4-6")
    b = write_run(tmp_path / "machine-b", "20261201T090000Z", [0.5] * 3, judge_model="gpt-5", day=2)
    with pytest.raises(QrelsError, match="different judge fingerprints"):
        export_qrels([a, b], io.StringIO())


def test_two_trec_runs_named_alike_in_two_folders_are_two_systems(tmp_path):
    paths = [tmp_path / "a" / "bm25.txt", tmp_path / "b" / "bm25.txt", tmp_path / "c" / "dense.txt"]
    assert trec_run_names(paths) == ["run:bm25", "run:bm25#2", "run:dense"]


# -- calibration files --------------------------------------------------------------------------------------


def test_two_calibrations_in_the_same_second_get_two_files_and_the_later_is_the_latest(tmp_path):
    first = output.default_path(tmp_path, FIXED)
    second = output.default_path(tmp_path, FIXED)
    assert first != second and ID.match(first.stem) and ID.match(second.stem)
    judge = {"fingerprintKey": "k"}
    for path, created, value in ((first, "2026-12-01T09:00:00Z", "old"), (second, "2026-12-01T09:00:00.500Z", "new")):
        path.write_text(json.dumps({"type": "calibration", "createdAt": created, "judge": judge, "value": value}))
    latest = output.latest_calibration(tmp_path, "k")
    assert latest is not None and latest["value"] == "new"  # ".500Z" is later than "Z" of the same second


# -- an old-format id still reads, sorts, resumes and is pinned ----------------------------------------------------


def test_an_old_format_run_id_resumes_sorts_and_is_pinned(query_set, db_copy, tmp_path):
    out = tmp_path / "runs"
    old = tmp_path / "old"
    with FakeLLMServer() as server:
        args = ["evaluate", "--queries", str(query_set), "--db", str(db_copy), "--provider", "openai", "--no-cache"]
        first = invoke([*args, "--out-dir", str(out)], env_for(server, "openai"))
        assert first.exit_code == 0, first.output
        [path] = sorted(out.glob("*.jsonl"))
        new_id = path.stem
        assert ID.match(new_id)
        # the same run as an older version wrote it: named by the second, cut after five evaluations
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()][:6]
        old.mkdir()
        cut = old / "20261201T090000Z.jsonl"
        cut.write_text("".join(json.dumps({**line, "runId": "20261201T090000Z"}) + "\n" for line in lines), encoding="utf-8")
        again = invoke([*args, "--resume", str(cut), "--out-dir", str(old)], env_for(server, "openai"))
    assert again.exit_code == 0, again.output
    [resumed] = [p for p in old.glob("*.jsonl") if p != cut]
    assert ID.match(resumed.stem)  # a new file name; the run keeps its old id
    assert {json.loads(line)["runId"] for line in resumed.read_text(encoding="utf-8").splitlines()} == {"20261201T090000Z"}
    runs, _ = read_runs(old)
    assert [(r.run_id, r.file.path) for r in runs] == [("20261201T090000Z", resumed)]  # one run, its fuller file
    assert invoke(["baseline", "set", "20261201T090000Z", "--results", str(old)]).exit_code == 0
    assert set_baseline(old, "20261201T090000Z").run_id == "20261201T090000Z"
    # among newer names the old one sorts first: pruning to one keeps the newest and the pinned baseline
    copy = old / f"{new_id}.jsonl"
    copy.write_bytes(path.read_bytes())
    assert sorted((p.stem for p in old.glob("*.jsonl")), key=sort_key) == ["20261201T090000Z", new_id, resumed.stem]
    assert prune_runs(old, keep=1) == [copy] and cut.exists() and resumed.exists()
