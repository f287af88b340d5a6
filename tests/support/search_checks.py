"""Small checks the search tests share: the queries and answers compared across backends and preparations, the
modules a command imported, and an index that holds a document."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from judge_runner.search.sqlite import SQLiteIndex
from tests.support.builtin_search_cases import FIRST, HOSTILE

ROOT = Path(__file__).resolve().parents[2]

# on-topic, off-topic, identifiers, other scripts, hostile syntax, blank: every kind of query text
QUERIES = [
    *FIRST,
    *HOSTILE,
    "how do I drain a kubernetes node before maintenance",
    "what is the capital of Australia",
    "best hiking trails near Lisbon",
    "rotate the postgres credentials",
    "lone surrogate \ud800 in a query",
]


def answers(index, queries, mode, **kwargs):
    """Each query's answer as a dict, latency left out (the only field that may differ)."""
    return [index.search(q, mode=mode, limit=10, **kwargs).model_dump(exclude={"latencyMs"}) for q in queries]


def imported_after(args: list[str], env_extra: dict[str, str] | None = None) -> dict:
    """Run ``judge-runner ARGS`` in a fresh interpreter and return its exit code and whether torch,
    sentence_transformers or transformers were imported by the end."""
    probe = (
        "import sys, json\n"
        "from judge_runner.cli.app import main\n"
        "try:\n"
        "    main.main(args=sys.argv[1:], standalone_mode=False)\n"
        "    code = 0\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "except Exception as exc:\n"
        "    code = type(exc).__name__\n"
        "heavy = ('torch', 'sentence_transformers', 'transformers', 'scipy', 'sklearn')\n"
        "sys.stderr.write('\\nMODULES ' + json.dumps({'code': code, **{m: m in sys.modules for m in heavy}}) + '\\n')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env_extra or {})}
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    line = [x for x in done.stderr.splitlines() if x.startswith("MODULES ")]
    assert line, done.stderr[-2000:]
    return json.loads(line[-1][len("MODULES ") :])


def holds_a_document(index: SQLiteIndex) -> None:
    """Give ``index`` one document row (no chunk, no vector), so it is no longer empty."""
    with index.conn:
        index.conn.execute("INSERT INTO documents (source, sha256, fmt, size) VALUES ('a.md', '0', 'md', 1)")
