"""Issue 15's figures in one run: the judge's costs, then the judge loop's concurrency.

Runs ``benchmarks/judge_costs.py`` (the caching ratio; calls, tokens and USD of a 15-query run, pointwise
and batched, sync and batch prices, first run and weekly re-run, for a Sonnet- and a Haiku-class judge,
with a first run sent through the fake's Message Batches API) and then ``benchmarks/judge_concurrency.py``
(speed-up at concurrency 5 over 1 with a fake model answering in 1 s, and the overhead per query, quiet
and beside a CPU-bound load), each in its own interpreter, printing their output as it comes. Extra
arguments go to neither; run the two scripts alone to change their options. Writes nothing into the
repository.

    .venv/bin/python benchmarks/cost_and_scale.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    """Run both benchmarks in turn; the exit code is the first non-zero one of theirs (0 when both ran)."""
    worst = 0
    for script in ("judge_costs.py", "judge_concurrency.py"):
        print(f"== {script}", flush=True)
        code = subprocess.run([sys.executable, str(HERE / script)], check=False).returncode
        worst = worst or code
        print(flush=True)
    return worst


if __name__ == "__main__":
    sys.exit(main())
