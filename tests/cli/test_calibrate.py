"""calibrate's command line: exit codes a CI job can read, ``--results``
finding the judgment cache beside the index of ``--db`` and refusing what does not apply to it, and tables that
keep every column whole through a pipe and at 100 columns in a terminal."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from judge_runner.judging.cache import JudgmentCache
from judge_runner.judging.qrels import import_human_qrels
from tests.support.calibration_runs import agreeing, human_of, write_qrels, write_run
from tests.support.clitools import NO_KEYS, invoke

ROOT = Path(__file__).resolve().parents[2]
LONG_ID = "20261201T090000.123Z-a1b2c3"


@pytest.fixture
def labelled(tmp_path):
    """A run of 30 queries whose judge agrees with the people on all but every 13th document, and its qrels."""
    ranked = agreeing(30, flip_every=13)
    run = write_run(tmp_path / "run.jsonl", LONG_ID, ranked)
    return run, write_qrels(tmp_path / "team.qrels", human_of(ranked))


def test_exit_codes_say_whether_the_judge_is_calibrated_when_asked(tmp_path, labelled):
    run, qrels = labelled
    out = tmp_path / "c.json"
    result = invoke(["calibrate", "--results", str(run), "--qrels", str(qrels), "--out", str(out), "--require-calibrated", "--quiet"])
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert document["verdict"]["status"] == "calibrated"
    assert document["verdict"]["checks"]["perPairAgreement"]["status"] == "pass"
    assert "not enough evidence for ranking" in result.output  # calibrated on what was measured; the rest is named
    few = write_run(tmp_path / "few.jsonl", "few", agreeing(3))
    fewq = write_qrels(tmp_path / "few.qrels", human_of(agreeing(3)))
    base = ["calibrate", "--results", str(few), "--qrels", str(fewq), "--out", str(tmp_path / "f.json"), "--quiet"]
    assert invoke(base).exit_code == 0  # written: the verdict is in the file and on stderr
    gated = invoke([*base, "--require-calibrated"])
    assert gated.exit_code == 1 and "insufficient" in gated.output and "--require-calibrated" in gated.output
    assert json.loads((tmp_path / "f.json").read_text())["verdict"]["status"] == "insufficient"  # written all the same


def test_results_finds_the_cache_beside_the_index_of_db(tmp_path, labelled, monkeypatch):
    """--results ignored --db when looking for the judgment cache, though --cache's help says
    "beside the index"."""
    run, qrels = labelled
    index = tmp_path / "kb" / "index.sqlite"
    index.parent.mkdir()
    with JudgmentCache(index.parent / "judgments.sqlite") as store:
        import_human_qrels(store, qrels, "team")
    monkeypatch.chdir(tmp_path)  # no cache under the current folder's default
    out = tmp_path / "c.json"
    result = invoke(["calibrate", "--results", str(run), "--human-qrels", "team", "--db", str(index), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["labels"]["cache"] == str(index.parent / "judgments.sqlite")
    missing = invoke(["calibrate", "--results", str(run), "--human-qrels", "team", "--db", str(tmp_path / "elsewhere" / "i.sqlite")])
    assert missing.exit_code == 2 and str(tmp_path / "elsewhere" / "judgments.sqlite") in missing.output


@pytest.mark.parametrize(
    "given",
    [
        ["--systems", "fts"],
        ["--probes", "position"],
        ["--trials", "3"],
        ["--judge-mode", "batched"],
        ["--queries-sample", "5"],
        ["--pool-depth", "20"],
    ],
)
def test_results_refuses_options_it_would_ignore(tmp_path, labelled, given, monkeypatch):
    run, qrels = labelled
    monkeypatch.chdir(tmp_path)  # were it not refused, the calibration would be written here, not in the checkout
    result = invoke(["calibrate", "--results", str(run), "--qrels", str(qrels), *given])
    assert result.exit_code == 2 and f"{given[0]} does not apply" in result.output


@pytest.mark.parametrize(
    ("given", "why"),
    [
        (["--human-qrels", "team", "--rescale", "4=3"], "--rescale does not apply (a --human-qrels set is on the judge's 0-3 scale"),
        (["--qrels", "QRELS", "--cache", "x.sqlite"], "--cache does not apply (the labels come from --qrels FILE"),
        (["--qrels", "QRELS", "--db", "x.sqlite"], "--db does not apply (with --results it finds the cache of --human-qrels"),
    ],
)
def test_results_refuses_what_its_human_labels_leave_without_effect(tmp_path, labelled, given, why, monkeypatch):
    """The kind of --db ignored: an option the command line leaves without effect is refused, not ignored."""
    run, qrels = labelled
    monkeypatch.chdir(tmp_path)
    result = invoke(["calibrate", "--results", str(run), *[str(qrels) if a == "QRELS" else a for a in given]])
    assert result.exit_code == 2 and why in result.output, result.output


@pytest.mark.parametrize(
    ("given", "why"),
    [
        (["--split", "dev"], "--split does not apply (it picks the qrels of a --beir folder)"),
        (["--candidates", "50"], "--candidates does not apply (it sets the depth of --corpus-scope candidates)"),
        (["--batch-size", "5"], "--batch-size does not apply (only --judge-mode batched or both sends batches)"),
        (["--probes", "none", "--probe-queries", "30"], "--probe-queries does not apply (no probe runs"),
        (["--systems", "none", "--db", "x.sqlite"], "--db does not apply (no built-in system searches an index"),
    ],
)
def test_a_judged_calibration_refuses_options_left_without_effect(tmp_path, given, why, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = [tmp_path / name for name in ("q.qrels", "q.jsonl", "c.jsonl")]
    for path in files:
        path.write_text("", encoding="utf-8")
    result = invoke(["calibrate", "--qrels", str(files[0]), "--queries", str(files[1]), "--corpus", str(files[2]), *given])
    assert result.exit_code == 2 and why in result.output, result.output


# -- tables a person reads: through a pipe, and in a 100-column terminal --------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def command(tmp_path, labelled) -> list[str]:
    run, qrels = labelled
    other = write_run(tmp_path / "other.jsonl", LONG_ID + "-second", agreeing(30, flip_every=7))
    return [sys.executable, "-m", "judge_runner.cli", "calibrate", "--results", str(run), "--results", str(other), "--bootstrap", "200"]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES") and k not in NO_KEYS}
    return {**env, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}


def expected_cells(document: dict) -> set[str]:
    """Every figure the tables show, as it is written: values with three decimals and their intervals, system names."""
    cells = set(document["systems"])
    for subset in document["modes"]["pointwise"]["agreement"].values():
        for name in ("kappaAt2", "kappaAt1", "overLabelling"):
            figure = subset[name]
            if figure["value"] is not None:
                cells.add(f"{figure['value']:.3f}")
            if figure["ci95"]:
                cells.add(f"[{figure['ci95'][0]:.2f}, {figure['ci95'][1]:.2f}]")
    return cells


def test_tables_keep_every_column_whole_through_a_pipe(tmp_path, labelled):
    """Calibrate's tables were cut to 80 columns when piped (``pointw…``)."""
    out = tmp_path / "c.json"
    done = subprocess.run(
        [*command(tmp_path, labelled), "--qrels", str(labelled[1]), "--out", str(out)],
        capture_output=True,
        text=True,
        env=environment(),
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout
    document = json.loads(out.read_text())
    assert "…" not in text and "\x1b[" not in text
    missing = {cell for cell in expected_cells(document) if cell not in text}
    assert not missing
    for check in document["verdict"]["checks"].values():  # a pipe folds nothing: each message on one line
        assert check["message"] in text, check["message"]


def test_tables_fit_a_100_column_terminal_without_cutting_a_figure(tmp_path, labelled):
    out = tmp_path / "c.json"
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 100, 0, 0))
    process = subprocess.Popen(
        [*command(tmp_path, labelled), "--qrels", str(labelled[1]), "--out", str(out)],
        stdout=follower,
        stderr=subprocess.PIPE,
        env=environment(),
        cwd=tmp_path,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    assert process.wait(timeout=300) == 0, process.stderr.read().decode() if process.stderr else ""
    os.close(leader)
    text = ANSI.sub("", b"".join(chunks).decode("utf-8")).replace("\r\n", "\n")
    document = json.loads(out.read_text())
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines), max(len(line) for line in lines)
    assert "…" not in text
    missing = {cell for cell in expected_cells(document) if cell not in text}
    assert not missing
    words = set(text.split())
    for check in document["verdict"]["checks"].values():  # a message may wrap in a terminal, never lose a word
        assert set(check["message"].split()) <= words, check["message"]


def test_calibrating_from_run_files_says_where_the_judge_labels_came_from_not_empty_calls(tmp_path, labelled):
    run, qrels = labelled
    result = invoke(["calibrate", "--results", str(run), "--qrels", str(qrels), "--out", str(tmp_path / "c.json")])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "judge calls: 0 (the judge's labels come from the run files);" in text and "()" not in text, text
