"""One compare run shows the judge the same text of a document whichever system returned it: beside the built-in
search, a command without --corpus is shown the index's passages, not its own snippet (a label belongs to the
query and the document). Systems with no store to share are warned about once, naming --corpus."""

from __future__ import annotations

import json
import shlex
import shutil
import sys

import pytest

from tests.support.clitools import invoke, run_lines

pytestmark = pytest.mark.hash_embedder

SEARCH = """import json, sys
sources = ["config/package.json", "runbooks/opensearch-reindex.md", "notes/architecture-overview.md", "config/docker-compose.yml"]
print(json.dumps([{"source": s, "snippet": "the command's own words about " + sys.argv[1], "score": 9 - i} for i, s in enumerate(sources)]))
"""
QUERIES = [
    {
        "id": "q01",
        "query": "devDependencies",
        "queryIntent": "Find it.",
        "queryType": "keyword",
        "expectedSources": ["config/package.json"],
    },
    {"id": "q02", "query": "reindex opensearch", "queryIntent": "Find it.", "queryType": "keyword", "expectedSources": []},
    {"id": "q03", "query": "volumes minio", "queryIntent": "Find it.", "queryType": "keyword", "expectedSources": []},
]


@pytest.fixture
def setup(tmp_path, hash_db):
    db = tmp_path / "index.sqlite"
    shutil.copy(hash_db, db)
    (tmp_path / "qs.json").write_text(json.dumps({"queries": QUERIES}), encoding="utf-8")
    (tmp_path / "search.py").write_text(SEARCH, encoding="utf-8")
    command = shlex.join([sys.executable, str(tmp_path / "search.py")]) + " {query}"
    base = ["evaluate", "--queries", str(tmp_path / "qs.json"), "--db", str(db), "--provider", "offline", "--no-cache"]
    return tmp_path, base, command


def test_builtin_and_command_are_shown_the_same_text_of_a_document(setup):
    tmp, base, command = setup
    result = invoke([*base, "--out-dir", str(tmp / "out"), "--search-mode", "fts", "--search-command", command])
    assert result.exit_code == 0, result.output
    assert "show the judge their own text" not in result.output
    lines = run_lines(tmp / "out")
    shown: dict[tuple[str, str], dict[str, tuple]] = {}
    for line in lines:
        if line["type"] == "evaluation":
            for r in line["results"]:
                shown.setdefault((line["queryId"], r["source"]), {})[line["system"]] = (r["shownFrom"], r["shownText"])
    shared = [texts for texts in shown.values() if len(texts) == 2]
    assert shared, "the two systems returned no document in common"
    assert all(texts["fts"] == texts["command:search"] for texts in shared)
    assert all(texts["command:search"][0] == "document" for texts in shown.values() if "command:search" in texts)
    assert lines[0]["provenance"]["searchSystems"][1]["documents"] == "index:" + str(tmp / "index.sqlite")


def test_systems_without_a_shared_store_are_warned_about_once(setup):
    tmp, base, command = setup
    result = invoke([*base, "--out-dir", str(tmp / "two"), "--search-command", command, "--search-command", command + " --again"])
    assert result.exit_code == 0, result.output
    assert result.output.count("show the judge their own text") == 1 and "--corpus" in result.output
