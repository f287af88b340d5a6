"""What one act of a label session costs, early and late: run by hand.

    .venv/bin/python benchmarks/label_act_cost.py [--labels 3000] [--window 50] [--workdir /tmp/jr-label-act]

A session of ``--labels`` items (``judge_runner.human.journal.LabelSession``) with its judgment cache import
(``judge_runner.app.label.cache.CacheSync``), each item labelled in turn, the way the page does it. Per act
two times: the act itself and the view it answers with (the journal line fsynced, the qrels file, the sink
told: what the page waits for), and the same until the cache holds the label (the import thread done). Printed: the median of the first and of the
last ``--window`` acts, and their ratio. Run it on two checkouts (``PYTHONPATH=<other checkout>``) to put a
before beside an after. Writes only under --workdir.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = Path(os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or ROOT)
sys.path.insert(0, str(CODE))


def items(count: int) -> list:
    from judge_runner.human.plan import Item

    return [
        Item(f"i{i + 1}", f"q{i // 10}", f"query {i // 10}", "intent", f"docs/d{i}.md", None, f"text of document {i} " * 20, "shown")
        for i in range(count)
    ]


def wait_current(sync, deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while sync.status()["state"] != "current":
        if time.monotonic() > end:
            raise SystemExit("the cache import did not catch up")
        time.sleep(0.0002)


def run(count: int, folder: Path) -> tuple[list[float], list[float]]:
    """``(act seconds, act-until-imported seconds)`` of each of ``count`` label acts."""
    from judge_runner.app.label.cache import CacheSync
    from judge_runner.human.journal import LabelSession

    sync = CacheSync(folder / "cache.sqlite", "bench")
    sync.open()
    session = LabelSession(folder / "labels", "bench", sync)
    session.start(items(count), {"sampling": {"kind": "bench"}})
    wait_current(sync)
    acts, imported = [], []
    for n in range(count):
        item = session.current()
        assert item is not None
        started = time.perf_counter()
        session.act("label", item.id, "bench", n % 4, tab="t1")
        session.view("t1")  # the page's answer to an act is the view
        acts.append(time.perf_counter() - started)
        wait_current(sync)
        imported.append(time.perf_counter() - started)
    report = sync.close()
    assert report.complete, report.lines()
    return acts, imported


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=int, default=3000)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    folder = Path(args.workdir or tempfile.mkdtemp(prefix="jr-label-act-"))
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    acts, imported = run(args.labels, folder)
    w = args.window
    print(f"code: {CODE}; {args.labels} label acts, medians of the first and the last {w}")
    for name, times in (("act and view (what the page waits for)", acts), ("act until the cache holds it", imported)):
        first, last = statistics.median(times[:w]), statistics.median(times[-w:])
        print(f"  {name}: first {first * 1000:.2f} ms, last {last * 1000:.2f} ms, last/first {last / first:.2f}")


if __name__ == "__main__":
    main()
