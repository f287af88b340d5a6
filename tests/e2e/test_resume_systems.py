"""Resuming a run cut short searches with exactly the systems the run started with: a `--search-command` run and
a compare run (built-in hybrid and a command) are continued from their provenance or with the same flags given
again, through the real CLI with the offline judge; other systems, systems that cannot be rebuilt, and a file that
mixes two runs are refused (exit 2) before anything is written."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from judge_runner import api
from judge_runner.core.failures import UsageError
from tests.support.clitools import invoke

pytestmark = pytest.mark.hash_embedder

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["config/package.json", "runbooks/opensearch-reindex.md", "notes/architecture-overview.md", "config/docker-compose.yml"]
SEARCH = f"""import json, sys
with open(sys.argv[1], "a", encoding="utf-8") as log:
    log.write(sys.argv[2] + "\\n")
sources = {SOURCES!r}
start = sum(map(ord, sys.argv[2])) % len(sources)
print(json.dumps([{{"source": sources[(start + i) % 4], "snippet": "about " + sys.argv[2], "score": 9 - i}} for i in range(3)]))
"""


def query(qid: str, text: str, *expected: str) -> dict:
    return {"id": qid, "query": text, "queryIntent": f"Find {text}.", "queryType": "keyword", "expectedSources": list(expected)}


QUERIES = [
    query("q01", "devDependencies", "config/package.json"),
    query("q02", "reindex opensearch", "runbooks/opensearch-reindex.md"),
    query("q03", "lantern-ingest", "notes/architecture-overview.md"),
    query("q04", "volumes minio", "config/docker-compose.yml"),
    query("q05", "alert labels", "config/package.json"),
    query("q06", "pgbouncer pooling", "config/docker-compose.yml"),
]


@pytest.fixture
def place(tmp_path, hash_db):
    """(folder, base evaluate arguments, the command, its call log)."""
    db = tmp_path / "index.sqlite"
    shutil.copy(hash_db, db)
    (tmp_path / "qs.json").write_text(json.dumps({"queries": QUERIES}), encoding="utf-8")
    (tmp_path / "search.py").write_text(SEARCH, encoding="utf-8")
    log = tmp_path / "calls.log"
    command = shlex.join([sys.executable, str(tmp_path / "search.py"), str(log)]) + " {query}"
    base = ["evaluate", "--db", str(db), "--provider", "offline", "--no-cache"]
    return tmp_path, base, command, log


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def cut_run(place, extra: list[str], keep: int) -> Path:
    """Run evaluate with ``extra``, then keep its run_start and first ``keep`` evaluation lines in a new folder, as a
    kill leaves a run; the query set is saved beside it. Returns the cut file."""
    tmp, base, _, log = place
    full = tmp / "full"
    result = invoke([*base, "--queries", str(tmp / "qs.json"), "--out-dir", str(full), *extra])
    assert result.exit_code == 0, result.output
    original = next(full.glob("*.jsonl"))
    cut_dir = tmp / "cut"
    cut_dir.mkdir()
    cut = cut_dir / original.name
    cut.write_text("\n".join(original.read_text(encoding="utf-8").splitlines()[: 1 + keep]) + "\n", encoding="utf-8")
    for saved in full.glob("*.queries.json"):
        shutil.copy(saved, cut_dir / saved.name)
    log.write_text("", encoding="utf-8")
    return cut


def resumed(cut: Path) -> list[dict]:
    files = [p for p in cut.parent.glob("*.jsonl") if p != cut]
    assert len(files) == 1, files
    return lines_of(files[0])


def test_command_run_resumed_from_its_provenance(place):
    tmp, base, command, log = place
    cut = cut_run(place, ["--search-command", command], keep=2)
    result = invoke([*base, "--resume", str(cut), "--out-dir", str(cut.parent)])
    assert result.exit_code == 0, result.output
    lines = resumed(cut)
    evaluations = [line for line in lines if line["type"] == "evaluation"]
    assert {line["system"] for line in evaluations} == {"command:search"}  # never the built-in search
    assert sorted(line["queryId"] for line in evaluations) == [q["id"] for q in QUERIES]
    assert log.read_text(encoding="utf-8").splitlines() == [q["query"] for q in QUERIES[2:]]  # only what was missing
    summary = lines[-1]
    assert summary["type"] == "summary" and summary["evaluated"] == 6 and summary["totalQueries"] == 6
    assert lines[0]["provenance"]["searchSystems"][0]["name"] == "command:search"


def test_command_run_resumed_with_the_same_flag_and_refused_with_another(place):
    tmp, base, command, log = place
    cut = cut_run(place, ["--search-command", command], keep=3)
    other = invoke(
        [*base, "--resume", str(cut), "--out-dir", str(cut.parent), "--search-command", command.replace("search.py", "other.py")]
    )
    assert other.exit_code == 2 and "must search with the same ones" in other.output and "other.py" in other.output
    assert list(cut.parent.glob("*.jsonl")) == [cut]  # nothing written
    same = invoke([*base, "--resume", str(cut), "--out-dir", str(cut.parent), "--search-command", command])
    assert same.exit_code == 0, same.output
    assert len(log.read_text(encoding="utf-8").splitlines()) == 3


def test_compare_run_resumes_each_system_where_it_stopped(place):
    tmp, base, command, log = place
    # hybrid's six lines, then two of the command's
    cut = cut_run(place, ["--search-mode", "hybrid", "--search-command", command], keep=8)
    result = invoke([*base, "--resume", str(cut), "--out-dir", str(cut.parent)])
    assert result.exit_code == 0, result.output
    lines = resumed(cut)
    evaluations = [line for line in lines if line["type"] == "evaluation"]
    by_system = {name: sorted(e["queryId"] for e in evaluations if e["system"] == name) for name in ("hybrid", "command:search")}
    assert by_system == {"hybrid": [q["id"] for q in QUERIES], "command:search": [q["id"] for q in QUERIES]}
    assert len(evaluations) == 12 and log.read_text(encoding="utf-8").splitlines() == [q["query"] for q in QUERIES[2:]]
    summary = lines[-1]
    assert [s["name"] for s in summary["comparison"]["systems"]] == ["hybrid", "command:search"]


def test_systems_named_for_a_builtin_run_and_a_mixed_file_are_refused(place):
    tmp, base, command, _ = place
    cut = cut_run(place, [], keep=2)
    refused = invoke([*base, "--resume", str(cut), "--out-dir", str(cut.parent), "--search-command", command])
    assert refused.exit_code == 2 and "judged the built-in search alone" in refused.output
    # a file an older resume wrote: the command's lines, then the built-in search's, under one run_start
    mixed = cut.read_text(encoding="utf-8").splitlines()
    mixed[1] = json.dumps({**json.loads(mixed[1]), "system": "command:search"})
    cut.write_text("\n".join(mixed) + "\n", encoding="utf-8")
    refused = invoke([*base, "--resume", str(cut), "--out-dir", str(cut.parent)])
    assert refused.exit_code == 2 and "mixes two runs" in refused.output
    assert list(cut.parent.glob("*.jsonl")) == [cut]


def test_http_run_cannot_be_rebuilt_without_its_flags(place):
    tmp, base, _, _ = place
    cut = cut_run(place, [], keep=2)
    lines = cut.read_text(encoding="utf-8").splitlines()
    start = json.loads(lines[0])
    start["provenance"]["searchSystems"] = [
        {"name": "url:search", "kind": "http", "url": "http://127.0.0.1:9/search", "headers": ["Authorization"]}
    ]
    lines[0] = json.dumps(start)
    lines[1:] = [json.dumps({**json.loads(line), "system": "url:search"}) for line in lines[1:]]
    cut.write_text("\n".join(lines) + "\n", encoding="utf-8")
    refused = invoke([*base, "--resume", str(cut), "--out-dir", str(cut.parent)])
    assert refused.exit_code == 2 and "url:search cannot be rebuilt" in refused.output and "--search-header" in refused.output
    assert list(cut.parent.glob("*.jsonl")) == [cut]


def hits(query: str, k: int) -> list[dict]:
    return [{"source": source, "text": f"{source} about {query}"} for source in SOURCES[:k]]


def test_python_function_run_resumes_only_with_the_same_function(place):
    tmp, _, _, _ = place
    out = tmp / "api"
    first = api.evaluate(tmp / "qs.json", search=hits, out_dir=out, provider="offline", no_cache=True)
    assert first is not None and first.exit_code == 0
    original = next(out.glob("*.jsonl"))
    original.write_text("\n".join(original.read_text(encoding="utf-8").splitlines()[:3]) + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match="the same search function"):
        api.evaluate(resume=original, out_dir=out, provider="offline", no_cache=True)
    done = api.evaluate(resume=original, search=hits, out_dir=out, provider="offline", no_cache=True)
    assert done is not None and done.exit_code == 0
    again = lines_of(Path(done.path))
    assert {line["system"] for line in again if line["type"] == "evaluation"} == {"python:hits"}
    assert again[-1]["type"] == "summary" and again[-1]["evaluated"] == 6


def test_named_commands_are_printed_with_what_they_run_and_resumed_under_their_names(place):
    tmp, base, command, log = place
    slow = command + " --slow"
    cut = cut_run(place, ["--search-command", f"fast={command}", "--search-command", slow], keep=8)
    start = lines_of(cut)[0]
    assert [(s["name"], s["command"].endswith("'{query}'")) for s in start["provenance"]["searchSystems"]] == [
        ("fast", True),
        ("command:search", False),
    ]
    result = invoke([*base, "--resume", str(cut), "--out-dir", str(cut.parent)])
    assert result.exit_code == 0, result.output
    assert "  fast: command " in result.output and "'{query}' --slow" in result.output  # each name beside its command
    evaluations = [line for line in resumed(cut) if line["type"] == "evaluation"]
    assert sorted({line["system"] for line in evaluations}) == ["command:search", "fast"] and len(evaluations) == 12
    twice = invoke([*base, "--queries", str(tmp / "qs.json"), "--search-command", f"a={command}", "--search-command", f"a={slow}"])
    assert twice.exit_code == 2 and "two systems are named 'a'" in twice.output


def test_the_dry_run_of_a_resume_searches_what_the_resume_would(place):
    tmp, base, command, log = place
    cut = cut_run(place, ["--search-mode", "hybrid", "--search-command", command], keep=8)
    result = invoke([*base, "--resume", str(cut), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["phaseTwo"]["searches"] == 4  # the command's four left, hybrid none
    assert log.read_text(encoding="utf-8").splitlines() == [q["query"] for q in QUERIES[2:]]
    other = invoke([*base, "--resume", str(cut), "--dry-run", "--search-command", command + " --other"])
    assert other.exit_code == 2 and "must search with the same ones" in other.output


@pytest.mark.parametrize("extra", [[], ["--search-mode", "fts,hybrid"]], ids=["built-in", "compare"])
def test_another_search_mode_or_limit_is_refused_on_resume_and_the_same_accepted(place, extra):
    tmp, base, _, _ = place
    cut = cut_run(place, extra, keep=2)
    for flag in (["--search-mode", "vector"], ["--search-limit", "3"]):
        refused = invoke([*base, "--resume", str(cut), "--out-dir", str(cut.parent), *flag])
        assert refused.exit_code == 2 and f"{flag[0]} {flag[1]} differs from run" in refused.output, refused.output
        assert list(cut.parent.glob("*.jsonl")) == [cut]  # nothing written
    same = invoke([*base, "--resume", str(cut), "--out-dir", str(cut.parent), *extra])
    assert same.exit_code == 0, same.output


def test_resume_messages_name_the_systems_as_the_run_records_them(place):
    tmp, base, command, _ = place
    cut = cut_run(place, ["--search-command", command], keep=5)
    noted = invoke([*base, "--resume", str(cut), "--out-dir", str(cut.parent)])
    assert noted.exit_code == 0 and "search limit 10" in noted.output and "search mode" not in noted.output, noted.output
    refused = invoke([*base, "--resume", str(cut), "--out-dir", str(cut.parent), "--search-mode", "vector"])
    assert refused.exit_code == 2 and "--search-mode vector names a built-in search, which run" in refused.output
    modes = cut_run_again(place, ["--search-mode", "fts,vector"])
    noted = invoke([*base, "--resume", str(modes), "--out-dir", str(modes.parent)])
    assert noted.exit_code == 0 and "search mode fts,vector" in noted.output, noted.output
    refused = invoke([*base, "--resume", str(modes), "--out-dir", str(modes.parent), "--search-mode", "vector"])
    assert refused.exit_code == 2 and "differs from run" in refused.output and "'s fts,vector" in refused.output
    both = cut_run_again(place, ["--search-mode", "hybrid", "--search-command", command])
    left_out = invoke([*base, "--resume", str(both), "--out-dir", str(both.parent), "--search-command", command])
    assert left_out.exit_code == 2 and "(hybrid not searched here)" in left_out.output and "None" not in left_out.output
    corpus = cut_run_again(place, ["--search-command", command, "--corpus", str(ROOT / "fixtures")])
    no_corpus = invoke([*base, "--resume", str(corpus), "--out-dir", str(corpus.parent), "--search-command", command])
    assert no_corpus.exit_code == 2 and "None" not in no_corpus.output, no_corpus.output
    assert f"command:search: documents {ROOT / 'fixtures'} in the run, not set here" in no_corpus.output


def cut_run_again(place, extra: list[str]) -> Path:
    """:func:`cut_run` once more in the same folder: the earlier cut and full runs moved aside first."""
    tmp = place[0]
    aside = tmp / f"aside{len(list(tmp.glob('aside*')))}"
    aside.mkdir()
    for name in ("full", "cut"):
        if (tmp / name).exists():
            shutil.move(tmp / name, aside / name)
    return cut_run(place, extra, keep=2)


def test_a_resumed_run_is_written_beside_its_file_unless_out_dir_says_otherwise(place, monkeypatch):
    tmp, base, command, _ = place
    cut = cut_run(place, ["--search-command", command], keep=2)
    monkeypatch.chdir(tmp)
    result = invoke([*base, "--resume", str(cut)])
    assert result.exit_code == 0, result.output
    assert len(resumed(cut)) == 8 and not (tmp / "quality-results").exists()
    elsewhere = invoke([*base, "--resume", str(cut), "--out-dir", str(tmp / "other")])
    assert elsewhere.exit_code == 0 and len(list((tmp / "other").glob("*.jsonl"))) == 1
    assert "with --resume, the run file's folder" in " ".join(invoke(["evaluate", "--help"]).output.split())
