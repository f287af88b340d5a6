"""Cold start of ``judge-runner search`` from the shell, per mode, and where the hybrid mode's time goes.

Each run is a fresh interpreter (``python -m judge_runner.cli search QUERY --mode MODE --db INDEX``), so
the figures include the interpreter, every import and the model load. The checkouts given with
``--code`` (e.g. an older commit's tree, then this one) are run in turn, round-robin, ``--runs`` times
each (median reported), so background load hits them alike. The breakdown times the hybrid path's
parts in one fresh interpreter: the command line's imports, opening the index, an fts search, importing
torch / transformers / sentence-transformers, loading the model, the first encode, and the search.

    .venv/bin/python benchmarks/search_cold_start.py --db INDEX.sqlite [--code OLD] [--code .] [--runs 5]

The index must exist (``judge-runner index fixtures/ --db INDEX.sqlite``, MiniLM). Writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
QUERY = "drain a kubernetes node"

BREAKDOWN = r"""
import json, sys, time
marks = [("start", time.perf_counter())]
assert "scipy" not in sys.modules
def mark(name):
    marks.append((name, time.perf_counter()))
import judge_runner.cli.app
mark("command-line imports")
from judge_runner.config import load_settings
from judge_runner.app.indexing import open_index
index = open_index(load_settings({"db": sys.argv[1]}), must_exist=True)
mark("open the index")
index.search(sys.argv[2], mode="fts")
mark("fts search")
import torch
mark("import torch")
import transformers
mark("import transformers")
import sentence_transformers
mark("import sentence_transformers")
embedder = index.embedder
embedder._model = embedder._load()
mark("load the model")
embedder.encode([sys.argv[2]])
mark("first encode")
index.search(sys.argv[2], mode="hybrid")
mark("hybrid search")
print("BREAKDOWN " + json.dumps([(name, t - marks[i][1]) for i, (name, t) in enumerate(marks[1:])]))
"""


def timed(command: list[str], env: dict, cwd: Path) -> float:
    """Wall seconds of one command (which must succeed), run in ``cwd`` (``python -m`` and ``-c`` put the
    working folder first on sys.path: it must be the checkout measured)."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    elapsed = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--code", action="append", type=Path, default=None, help="a checkout to measure (repeatable; default: this one)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--modes", default="fts,hybrid")
    args = parser.parse_args()
    codes = [c.resolve() for c in (args.code or [ROOT])]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.runs):
        for mode in modes:
            for code in codes:
                env = {**os.environ, **ENV, "PYTHONPATH": str(code)}
                command = [sys.executable, "-m", "judge_runner.cli", "search", QUERY, "--mode", mode, "--db", str(args.db.resolve())]
                times.setdefault((str(code), mode), []).append(timed(command, env, code))
    print(f"cold `judge-runner search` (fresh interpreter), median of {args.runs}, load {os.getloadavg()[0]:.1f} at the end")
    print(f"{'checkout':<40} " + " ".join(f"{m:>14}" for m in modes))
    for code in codes:
        cells = [times[(str(code), m)] for m in modes]
        print(f"{str(code):<40} " + " ".join(f"{statistics.median(c):>7.2f} s ({min(c):.2f})" for c in cells))
    for code in codes:
        env = {**os.environ, **ENV, "PYTHONPATH": str(code)}
        done = subprocess.run(
            [sys.executable, "-c", BREAKDOWN, str(args.db.resolve()), QUERY], capture_output=True, text=True, env=env, cwd=code
        )
        line = [x for x in done.stdout.splitlines() if x.startswith("BREAKDOWN ")]
        if not line:
            print(f"breakdown failed for {code}: {done.stderr[-1000:]}")
            continue
        parts = json.loads(line[0][len("BREAKDOWN ") :])
        print(f"hybrid breakdown, {code} (one run): " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in parts))


if __name__ == "__main__":
    main()
