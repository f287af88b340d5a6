"""A search command that misbehaves on purpose, by call number, for run-goes-on tests.

    python tests/support/flaky_search.py STATE_FILE PLAN QUERY

PLAN is a comma-separated list, one entry per call (the last repeats): ``ok`` (delegate to the bm25s
engine on fixtures/), ``hang`` (sleep for a minute), ``exit`` (status 2 with a message on stderr),
``junk`` (not JSON), ``ghost`` (results for files that do not exist), ``empty`` (print nothing).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    state, plan, query = Path(sys.argv[1]), sys.argv[2].split(","), sys.argv[3]
    calls = int(state.read_text()) if state.is_file() else 0
    state.write_text(str(calls + 1))
    action = plan[min(calls, len(plan) - 1)]
    if action == "hang":
        time.sleep(60)
    elif action == "exit":
        sys.stderr.write("search backend unavailable: index locked\n")
        sys.exit(2)
    elif action == "junk":
        print("Traceback (most recent call last): oops")
    elif action == "ghost":
        print(json.dumps([{"id": "notes/does-not-exist.md", "score": 2.0}, {"id": "../outside.md", "score": 1.0}]))
    elif action == "empty":
        pass
    else:
        from tests.support.engines.bm25s_search import Engine

        hits = Engine(ROOT / "fixtures").search(query, 10)
        print(json.dumps([{"id": i, "score": s} for i, s, _ in hits]))


if __name__ == "__main__":
    main()
