"""Every command on a console that cannot show every character: ``PYTHONIOENCODING=cp1252`` (a Windows
console, a cp1252 CI log), ``LANG=C``/``LC_ALL=C`` with ``PYTHONIOENCODING`` unset (Python's UTF-8 mode),
and ``LC_ALL=C`` with UTF-8 mode off (an ASCII stream, taken as UTF-8 as click takes it). Each command runs in a real process on real
streams; its output must be the UTF-8 console's, with the ASCII fallback (``Δ`` as ``d``, ``▲`` as ``^``,
box drawing as ``-|+``) for each character the stream cannot encode, and the same exit code.
``PYTHONIOENCODING=cp1252 judge-runner trend quality-results/`` used to exit 4 on the ``Δ`` of its header."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import click
import pytest

from judge_runner.cli.app import main
from judge_runner.core.printer import ascii_fallback
from tests.support.calibration_data import write_collection
from tests.support.clitools import NO_KEYS, invoke

pytestmark = pytest.mark.hash_embedder

ROOT = Path(__file__).resolve().parents[2]
CONSOLES = {
    "cp1252": ({"PYTHONIOENCODING": "cp1252"}, "cp1252"),
    "LANG=C": ({"LANG": "C", "LC_ALL": "C"}, "utf-8"),
    # an ASCII stream writes UTF-8, as click does there and Python's UTF-8 mode
    "LANG=C, UTF-8 mode off": ({"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0"}, "utf-8"),
}
MARKER = re.compile(r"\n@@ exit (\d+)\n")
DURATION = re.compile(r"\b\d+(?:\.\d+)? m?s\b")
# runs each command line of argv[1] (JSON) as the console script does, a marker line after each on both streams
DRIVER = """
import json, sys
from judge_runner.cli.app import main, run_handled
for argv in json.loads(sys.argv[1]):
    code = run_handled(lambda argv=argv: main.main(argv, prog_name="judge-runner", standalone_mode=False), argv)
    for stream in (sys.stdout, sys.stderr):
        stream.write(f"\\n@@ exit {code}\\n")
        stream.flush()
"""


def help_lines() -> list[list[str]]:
    """``--help`` of the program and of every command and subcommand."""
    lines = [["--help"]]
    for name, command in sorted(main.commands.items()):
        lines.append([name, "--help"])
        if isinstance(command, click.Group):
            lines += [[name, sub, "--help"] for sub in sorted(command.commands)]
    return lines


def environment(console: dict[str, str]) -> dict[str, str]:
    dropped = {"PYTHONIOENCODING", "PYTHONUTF8", "LANG", "LANGUAGE", *NO_KEYS}
    base = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("LC_")}
    return {**base, "PYTHONPATH": str(ROOT), "JUDGE_RUNNER_EMBEDDER": "hash", "COLUMNS": "100", **console}


def outputs(argvs: list[list[str]], console: dict[str, str], encoding: str, cwd: Path) -> list[tuple[int, str, str]]:
    """``(exit code, stdout, stderr)`` of each command line, run one after another in one process."""
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(argvs)], capture_output=True, env=environment(console), cwd=cwd, timeout=600
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    out, err = (MARKER.split(stream.decode(encoding)) for stream in (done.stdout, done.stderr))
    assert len(out) == len(err) == 2 * len(argvs) + 1, err
    return [(int(out[2 * i + 1]), out[2 * i], err[2 * i]) for i in range(len(argvs))]


def steady(text: str) -> str:
    """``text`` with durations (``8 ms``, ``1.0 s``) masked: they differ from one run to the next."""
    return DURATION.sub("<t>", text)


def fallback(text: str, encoding: str) -> str:
    """``text`` as a console of ``encoding`` should show it."""

    def shown(char: str) -> str:
        try:
            char.encode(encoding)
        except UnicodeError:
            return ascii_fallback(char, encoding)
        return char

    return "".join(shown(c) for c in text)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, hash_fixtures_db):
    """An index of fixtures/, two offline runs of one query set (so trend has a change to mark), their
    judgment cache, and a small BEIR collection for calibrate."""
    folder = tmp_path_factory.mktemp("consoles")
    db = folder / "index.sqlite"
    db.write_bytes(hash_fixtures_db.read_bytes())
    env = {"JUDGE_RUNNER_EMBEDDER": "hash"}
    first = ["generate-and-evaluate", "--fixtures", str(ROOT / "fixtures"), "--db", str(db), "--out-dir", str(folder / "results")]
    assert invoke([*first, "--quiet"], env).exit_code == 0
    queries = next((folder / "results").glob("*.queries.json"))
    assert (
        invoke(["evaluate", "--queries", str(queries), "--db", str(db), "--out-dir", str(folder / "results"), "--quiet"], env).exit_code
        == 0
    )
    write_collection(folder / "beir", queries=8)
    return folder


def run_lines(folder: Path, name: str) -> tuple[list[list[str]], list[list[str]]]:
    """``(lines whose output is the same at each run, lines whose output has times and run ids)``."""
    results, db = folder / "results", folder / "index.sqlite"
    run = sorted(results.glob("*.jsonl"))[0]
    same = [
        ["trend", str(results)],
        ["search", "reindex opensearch", "--db", str(db), "--limit", "5"],
        ["cache", "stats", "--db", str(db)],
        ["qrels", "export", str(run), "--out", str(folder / "qrels.txt")],
    ]
    varying = [
        ["report", str(results), "--out", str(folder / f"reports-{name}")],
        ["evaluate", "--queries", str(next(results.glob("*.queries.json"))), "--provider", "offline", "--db", str(db)]
        + ["--out-dir", str(folder / f"runs-{name}")],
        [
            "calibrate",
            "--beir",
            str(folder / "beir"),
            "--provider",
            "offline",
            "--systems",
            "fts,vector",
            "--probes",
            "none",
            "--bootstrap",
            "0",
        ]
        + ["--db", str(folder / f"beir-{name}.sqlite"), "--out", str(folder / f"calibration-{name}.json")],
    ]
    return same, varying


@pytest.mark.parametrize("console", list(CONSOLES))
def test_every_command_prints_on_the_console(workspace, console):
    settings, encoding = CONSOLES[console]
    same, varying = run_lines(workspace, "utf-8")
    reference = outputs(help_lines() + same, {"PYTHONIOENCODING": "utf-8"}, "utf-8", workspace)
    assert "Δ vs previous" in reference[len(help_lines())][1]  # the header that ended trend with exit 4
    same, varying = run_lines(workspace, re.sub(r"[^A-Za-z0-9]+", "-", console))
    got = outputs(help_lines() + same + varying, settings, encoding, workspace)
    for argv, expected, (code, out, err) in zip(help_lines() + same, reference, got, strict=False):
        assert (code, steady(out), err) == (expected[0], steady(fallback(expected[1], encoding)), fallback(expected[2], encoding)), argv
    for argv, (code, _, err) in zip(varying, got[-len(varying) :], strict=True):
        assert code == 0 and "error" not in err, (argv, err)
    if encoding != "utf-8":
        trend = got[len(help_lines())][1]
        assert "d vs previous" in trend and "\\u" not in trend and "?" not in trend


@pytest.mark.parametrize("console", list(CONSOLES))
def test_label_prints_its_start_lines(workspace, console):
    settings, encoding = CONSOLES[console]
    run = sorted((workspace / "results").glob("*.jsonl"))[0]
    tag = re.sub(r"[^A-Za-z0-9]+", "-", console).strip("-")
    command = [sys.executable, "-m", "judge_runner.cli", "label", str(run), "--name", f"team-{tag}", "--budget", "200"]
    command += ["--folder", str(workspace / f"labels-{tag}"), "--cache", str(workspace / f"labels-{tag}.sqlite")]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment(settings), cwd=workspace)
    lines: list[bytes] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(b"http://127.0.0.1:" in line for line in lines):
        line = proc.stdout.readline() if proc.stdout else b""
        if not line and proc.poll() is not None:
            break
        lines.append(line)
    url = next(line.decode(encoding).strip() for line in lines if b"http://127.0.0.1:" in line)
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=60) as page:  # serving now
        assert page.status == 200
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=60)
    text = b"".join(lines).decode(encoding) + rest.decode(encoding)
    assert proc.returncode == 0, err.decode(encoding, "replace")
    assert "labels (" in text and re.search(rf"labelling team-{tag}: 0 of \d+ labelled; open", text), text
    assert "error" not in err.decode(encoding)
