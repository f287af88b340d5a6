"""A search command that answers from a plan and fails on chosen queries, for comparison tests.

    python tests/support/chosen_search.py PLAN QUERY

PLAN is a JSON file ``{query text: [source, ...] best first, or null}``: a list is printed as the results
(scores falling from 10), null (or a query not in the plan) exits 1 with a message on stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    sources = plan.get(sys.argv[2])
    if sources is None:
        sys.exit("search backend unavailable for this query")
    print(json.dumps([{"source": source, "score": 10 - rank} for rank, source in enumerate(sources)]))


if __name__ == "__main__":
    main()
