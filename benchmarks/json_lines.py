"""How long chunking a large minified JSON file takes (issue 10, item 7), before and after the linear
line mapping.

Builds the issue's input, a one-line JSON array of 50,000 small objects (about 1.8 MB), and times
``chunk_document`` on it with the current code and, with ``--baseline REV`` (default: the commit before
the fix), with ``judge_runner/corpus/formats.py`` as it was at REV (read with ``git show``; the rest of
the package is the current one). Also times a pretty-printed copy (one member per few lines), where
the old mapping counted newlines over the whole prefix once per member too. Run by hand:

    python benchmarks/json_lines.py [--members 50000] [--baseline 0b42cea] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from judge_runner.corpus import formats  # noqa: E402


def sample(members: int, pretty: bool) -> str:
    """The issue's file: ``members`` small objects in one array, minified or indented."""
    data = [{"id": i, "name": f"item {i}", "ok": i % 2 == 0} for i in range(members)]
    return json.dumps(data, indent=1 if pretty else None, separators=None if pretty else (",", ":"))


def old_module(rev: str) -> types.ModuleType | None:
    """``judge_runner.corpus.formats`` as it was at ``rev``, or None when git cannot show it."""
    try:
        source = subprocess.run(
            ["git", "show", f"{rev}:judge_runner/corpus/formats.py"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    module = types.ModuleType("formats_at_" + rev)
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:formats.py", "exec"), module.__dict__)
    return module


def best_of(fn, repeat: int) -> float:
    """Fastest of ``repeat`` wall-clock runs of ``fn()``, in seconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=50_000)
    parser.add_argument("--baseline", default="0b42cea", help="git revision of the code before the fix")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (the fastest is reported)")
    args = parser.parse_args()
    old = old_module(args.baseline)
    print(f"{'input':<28} {'MB':>5} {'chunks':>7} {'now s':>8} {'before s':>9}")
    for pretty in (False, True):
        text = sample(args.members, pretty)
        now = best_of(lambda text=text: formats.chunk_document(text, "json"), args.repeat)
        chunks = len(formats.chunk_document(text, "json").chunks)
        before = best_of(lambda text=text: old.chunk_document(text, "json"), 1) if old is not None else float("nan")
        label = f"{args.members:,} members, {'pretty' if pretty else 'minified'}"
        print(f"{label:<28} {len(text.encode()) / 1e6:>5.2f} {chunks:>7,} {now:>8.2f} {before:>9.2f}")


if __name__ == "__main__":
    main()
