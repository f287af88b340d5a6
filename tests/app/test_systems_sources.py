"""A cron job judges what it was configured to judge: every setting that selects the system
under test (the [search.external] table, the adapter flags, several search modes) means the same in
``evaluate``, ``generate-and-evaluate`` and ``weekly``, whether it comes from a flag, a
``JUDGE_RUNNER_*`` variable or judge-runner.toml."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from judge_runner.app.inputs import resolve_systems
from judge_runner.config import load_settings
from judge_runner.core.failures import UsageError
from judge_runner.search.systems import SystemsSpec, open_systems
from tests.support.clitools import invoke, run_lines
from tests.support.engines.bm25s_service import Bm25sService

pytestmark = pytest.mark.hash_embedder

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
BM25S = [
    sys.executable,
    str(ROOT / "tests" / "support" / "engines" / "bm25s_search.py"),
    "--corpus",
    str(FIXTURES),
    "--limit",
    "{limit}",
    "{query}",
]
HASH = {"JUDGE_RUNNER_EMBEDDER": "hash", "JUDGE_RUNNER_SEARCH_MODE": None}
QUERIES = [("q1", "opensearch reindex"), ("q2", "incident postmortem"), ("q3", "redis failover")]


@pytest.fixture
def here(hash_db, tmp_path, monkeypatch):
    """A folder to run in (for its judge-runner.toml), with a copy of the index and a query set."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(hash_db, tmp_path / "index.sqlite")
    (tmp_path / "q.json").write_text(
        json.dumps({"queries": [{"id": i, "query": q, "queryIntent": "find it", "queryType": "keyword"} for i, q in QUERIES]}),
        encoding="utf-8",
    )
    return tmp_path


def table(command: list[str], **extra: str) -> str:
    lines = ["[search.external]", f"command = {json.dumps(shlex.join(command))}", 'name = "bm25s"']
    return "\n".join(lines + [f"{k} = {v}" for k, v in extra.items()]) + "\n"


def systems_of(lines: list[dict]) -> list[str]:
    return [s["name"] for s in lines[0]["provenance"].get("searchSystems", [])] or ["builtin"]


def weekly(here: Path, *extra: str, env: dict | None = None):
    pinned = here / "results" / "pinned-queries.json"
    pinned.parent.mkdir(exist_ok=True)
    shutil.copy(here / "q.json", pinned)
    args = ["weekly", "--fixtures", str(FIXTURES), "--db", str(here / "index.sqlite"), "--results", str(here / "results")]
    args += ["--reports", str(here / "reports"), "--provider", "offline", *extra]
    return invoke(args, {**HASH, **(env or {})})


# -- the examples ----------------------------------------------------------------------------------
def test_weekly_judges_the_search_external_table_that_evaluate_judges(here):
    # regression: weekly ignored [search.external] (which evaluate in the same folder honours), judged the
    # built-in search and exited 0 with no warning
    (here / "judge-runner.toml").write_text(
        table(BM25S, fields='{id = "id", score = "score"}', corpus=json.dumps(str(FIXTURES))), encoding="utf-8"
    )
    result = weekly(here)
    assert result.exit_code == 0, result.output
    lines = run_lines(here / "results")
    assert systems_of(lines) == ["bm25s"]
    assert {l["system"] for l in lines if l["type"] == "evaluation"} == {"bm25s"}
    evaluate = invoke(["evaluate", "--queries", "q.json", "--db", "index.sqlite", "--provider", "offline", "--out-dir", "e"], HASH)
    assert evaluate.exit_code == 0, evaluate.output
    assert systems_of(run_lines(here / "e")) == ["bm25s"]


def test_weekly_takes_search_url_and_corpus_flags(here):
    # regression: weekly refused --search-url and --corpus as flags
    with Bm25sService(FIXTURES, with_text=False) as service:
        result = weekly(here, "--search-url", service.url, "--search-fields", "id=doc_id,score=_score", "--corpus", str(FIXTURES))
        assert result.exit_code == 0, result.output
        assert len(service.requests) == len(QUERIES)
    lines = run_lines(here / "results")
    assert systems_of(lines) == ["url:127.0.0.1"] and lines[-1]["failed"] == 0
    assert all(l["resultCount"] > 0 for l in lines if l["type"] == "evaluation")


# -- more members of the kind --------------------------------------------------------------------------------
SOURCES = ["flag", "env", "file"]


def mode_source(source: str, value: str, here: Path) -> tuple[list[str], dict]:
    if source == "flag":
        return ["--search-mode", value], {}
    if source == "env":
        return [], {"JUDGE_RUNNER_SEARCH_MODE": value}
    (here / "judge-runner.toml").write_text(f'search_mode = "{value}"\n', encoding="utf-8")
    return [], {}


@pytest.mark.parametrize("command", ["evaluate", "generate-and-evaluate", "weekly"])
@pytest.mark.parametrize("source", SOURCES)
def test_several_modes_mean_the_same_from_every_source_in_every_command(here, command, source):
    # before: "fts,hybrid" worked as a flag of evaluate only; the variable, the file and weekly refused it
    args, env = mode_source(source, "fts,hybrid", here)
    common = ["--db", "index.sqlite", "--provider", "offline", "--dry-run", "--json", *args]
    if command == "evaluate":
        result = invoke(["evaluate", "--queries", "q.json", *common], {**HASH, **env})
    elif command == "generate-and-evaluate":
        result = invoke(["generate-and-evaluate", "--fixtures", str(FIXTURES), "--count", "5", *common], {**HASH, **env})
    else:
        result = weekly(here, *common[4:], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])["phaseTwo"]
    assert report["searches"] == 2 * (5 if command == "generate-and-evaluate" else len(QUERIES))


@pytest.mark.parametrize("source", SOURCES)
def test_search_mode_set_anywhere_makes_the_builtin_search_the_reference_beside_a_command(here, source):
    # before: --search-mode hybrid --search-command X judged both, JUDGE_RUNNER_SEARCH_MODE=hybrid or the file judged X alone
    args, env = mode_source(source, "hybrid", here)
    result = invoke(
        [
            "evaluate",
            "--queries",
            "q.json",
            "--db",
            "index.sqlite",
            "--provider",
            "offline",
            "--out-dir",
            "r",
            "--search-command",
            shlex.join(BM25S),
            "--corpus",
            str(FIXTURES),
            *args,
        ],
        {**HASH, **env},
    )
    assert result.exit_code == 0, result.output
    assert systems_of(run_lines(here / "r")) == ["hybrid", "command:bm25s_search"]
    assert "search_mode is set, so the built-in search joins as the reference" in result.output


def test_evaluate_of_the_table_alone_needs_no_index(here):
    # before: a [search.external] table alone still demanded the built-in index (--search-command did not)
    (here / "judge-runner.toml").write_text(
        table(BM25S, fields='{id = "id", score = "score"}', corpus=json.dumps(str(FIXTURES))), encoding="utf-8"
    )
    result = invoke(["evaluate", "--queries", "q.json", "--db", "missing.sqlite", "--provider", "offline", "--out-dir", "r"], HASH)
    assert result.exit_code == 0, result.output
    assert systems_of(run_lines(here / "r")) == ["bm25s"] and not (here / "missing.sqlite").exists()


def test_adapter_flags_override_the_tables_values(here):
    # before: --search-timeout and --corpus lost silently to the table's timeout and corpus (flags beat the file everywhere else)
    other = here / "other-corpus"
    shutil.copytree(FIXTURES / "runbooks", other)
    (here / "judge-runner.toml").write_text(table(BM25S, timeout="60", corpus=json.dumps(str(FIXTURES))), encoding="utf-8")
    settings = load_settings({}, cwd=here)
    spec = resolve_systems(settings, SystemsSpec(timeout=5.0, corpus=other, fields="id=id")).spec
    assert spec is not None and spec.table
    (system,) = open_systems(spec, settings, None, corpus=None)
    assert system.search.timeout == 5.0 and system.search.documents.label == str(other)
    assert system.search.mapping.paths == {"id": "id"}
    # and a flag naming the systems replaces the table, saying so
    result = invoke(
        [
            "evaluate",
            "--queries",
            "q.json",
            "--provider",
            "offline",
            "--out-dir",
            "r",
            "--search-command",
            shlex.join(BM25S),
            "--corpus",
            str(FIXTURES),
        ],
        HASH,
    )
    assert result.exit_code == 0, result.output
    assert "[search.external] table of the config file is not judged" in result.output
    assert systems_of(run_lines(here / "r")) == ["command:bm25s_search"]


@pytest.mark.parametrize(
    "asked, message",
    [
        (SystemsSpec(fields="id=doc"), "--search-fields applies to an external search"),
        (SystemsSpec(timeout=3.0), "--search-timeout applies to an external search"),
        (SystemsSpec(headers=("A=b",)), "--search-header applies to --search-url"),
    ],
)
def test_an_adapter_flag_that_would_change_nothing_is_refused(here, asked, message):
    with pytest.raises(UsageError, match=message):
        resolve_systems(load_settings({}, cwd=here), asked)


def test_weekly_dry_run_estimates_the_tables_system(here):
    # before: weekly --dry-run searched the built-in index whatever the table said
    (here / "judge-runner.toml").write_text(
        table([sys.executable, "-c", "print('[]')"]),
        encoding="utf-8",
    )
    result = weekly(here, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])["phaseTwo"]
    assert report["searches"] == len(QUERIES) and "judging 1 search system(s) on the same queries: bm25s" in result.output


def test_command_output_note_reaches_the_run_file(here):
    # regression: a command's cp1252 output became U+FFFD with no note; the note is in the evaluation line
    text = '[{"id": "a.md", "text": "café naïve “quoted”"}]'
    command = shlex.join([sys.executable, "-c", f"import sys; sys.stdout.buffer.write({text.encode('cp1252')!r})"])
    result = invoke(["evaluate", "--queries", "q.json", "--provider", "offline", "--out-dir", "r", "--search-command", command], HASH)
    assert result.exit_code == 0, result.output
    evs = [line for line in run_lines(here / "r") if line["type"] == "evaluation"]
    assert evs[0]["searchNotes"] == ["search command 'python' did not return UTF-8: decoded as cp1252"]
    assert evs[0]["results"][0]["snippet"] == "café naïve “quoted”"


@pytest.mark.parametrize(
    "args",
    [
        ["evaluate", "--queries", "q.json", "--out-dir", "r"],
        ["evaluate", "--queries", "q.json", "--out-dir", "r", "--search-command", shlex.join(BM25S), "--corpus", str(FIXTURES)],
        ["evaluate", "--queries", "q.json", "--dry-run", "--search-mode", "fts,hybrid"],
    ],
    ids=["builtin", "command", "dry-run"],
)
def test_each_command_resolves_its_searches_once(here, monkeypatch, args):
    import judge_runner.app.inputs as inputs

    real, calls = inputs.resolve_systems, []

    def counting(*a, **kw):
        calls.append(a)
        return real(*a, **kw)

    for module in [m for name, m in sys.modules.items() if name.startswith("judge_runner.") and m is not None]:
        if getattr(module, "resolve_systems", None) is real:
            monkeypatch.setattr(module, "resolve_systems", counting)
    result = invoke([*args, "--db", "index.sqlite", "--provider", "offline"], HASH)
    assert result.exit_code == 0, result.output
    assert len(calls) == 1
