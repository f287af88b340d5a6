"""Query sets worth judging. A scripted fake agent (tests/support/fakes/fake_llm.py, phase one through the
real SDK) writes queries with known faults into a small knowledge base; phase one's checks must drop a
query whose expected source does not answer it (one judge call, cached for phase two), keep one of two
near-identical queries, flag a heading many files carry as non-specific, and show an exact heading copy
as full leakage; the card goes into the query-set file, run_start and the report (checked in Chromium).
On the shared fixtures-kb the offline writer's set is spread over both top-level folders."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from judge_runner.analysis.report import build_report
from judge_runner.core.query_card import QuerySetCard
from judge_runner.embed.registry import SETTING_ENV as EMBEDDER_ENV
from judge_runner.querygen.card import card_lines
from tests.support.clitools import invoke, run_lines
from tests.support.fakes.fake_llm import DefaultBrain, FakeLLMServer, first_user_text, offered_tools
from tests.support.fakes.honest_judge import fenced_documents, query_of

pytestmark = pytest.mark.hash_embedder
ROOT = Path(__file__).resolve().parents[2]
FIXTURES_KB = ROOT.parent / "shared" / "data" / "fixtures-kb"  # the shared corpus beside the work tree

ROTATE = "how do I rotate the backup key for postgres"
WRONG_SOURCE = "how often should the replica be restarted after a key rotation"
HEADING = "Deploy with docker compose"
COPY = "Promote the replica"
SCRIPT = [
    ("q01", ROTATE, "natural-language", ["runbooks/backup.md"]),
    ("q02", "How do I rotate the backup key for Postgres?", "natural-language", ["runbooks/backup.md"]),  # q01 again
    ("q03", "which ticket do i need to change dns records", "natural-language", ["dns.md"]),
    ("q04", WRONG_SOURCE, "natural-language", ["dns.md"]),  # dns.md does not answer it
    ("q05", HEADING, "natural-language", ["apps/app0/README.md"]),  # a heading of 8 READMEs
    ("q06", COPY, "conceptual", ["runbooks/failover.md"]),  # a heading of its source, word for word
    ("q07", "how do I bake sourdough bread", "off-topic", []),
]


class ScriptedBrain(DefaultBrain):
    """The default phase-one agent (list_dir, glob, read_file, submit) submitting a fixed query set."""

    def __init__(self, script=SCRIPT):
        self.script = script

    def queries(self, paths, n):
        assert n == len(self.script)
        return [
            {"id": i, "query": q, "queryIntent": f"Wants to know: {q}.", "queryType": t, "expectedSources": s} for i, q, t, s in self.script
        ]


def write_kb(root: Path, readmes: int = 8) -> Path:
    (root / "runbooks").mkdir(parents=True)
    (root / "runbooks" / "backup.md").write_text(
        "# Backup runbook\n\n## Rotate the backup key\n\nRotate the backup key for postgres every 90 days with the key tool.\n"
    )
    (root / "runbooks" / "failover.md").write_text(
        "# Failover\n\n## Promote the replica\n\nWhen the primary is down, promote the replica with pg_ctl promote and repoint the app.\n"
    )
    (root / "dns.md").write_text("# DNS\n\nChanging DNS records needs a ticket in the network queue.\n")
    for i in range(readmes):
        app = root / "apps" / f"app{i}"
        app.mkdir(parents=True)
        (app / "README.md").write_text(
            f"# App {i}\n\n## {HEADING}\n\nRun docker compose up -d in the app{i} folder to start service number {i}.\n"
        )
    return root


def label_requests(server) -> list[tuple[str, str]]:
    """``(query, source)`` of every pointwise label request the fake server received, in order."""
    out = []
    for r in server.requests:
        if "record_label" in offered_tools(r.api, r.body):
            user = first_user_text(r.body)
            out += [(query_of(user), d["source"]) for d in fenced_documents(user)]
    return out


def env_for(server) -> dict:
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.anthropic_base_url}


@pytest.fixture(scope="module")
def hashed():
    """The hash embedder for a module-scoped fixture (set up before the tests' own ``hash_embedder``)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMBEDDER_ENV, "hash")
        yield


@pytest.fixture(scope="module")
def generated(tmp_path_factory, hashed):
    """``generate`` with the scripted agent: ``(query-set file data, CLI output, label requests)``."""
    tmp = tmp_path_factory.mktemp("generated")
    kb = write_kb(tmp / "kb")
    out = tmp / "q.json"
    with FakeLLMServer(brain=ScriptedBrain()) as server:
        args = ["generate", "--fixtures", str(kb), "--count", str(len(SCRIPT)), "--out", str(out), "--cache", str(tmp / "j.sqlite")]
        result = invoke(args, env_for(server))
        labels = label_requests(server)
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text()), result.output, labels


def by_id(items: list[dict]) -> dict[str, dict]:
    return {item["id"]: item for item in items}


def test_a_query_whose_expected_source_does_not_answer_it_is_dropped_after_one_judge_call(generated):
    data, output, labels = generated
    card = data["card"]
    assert "q04" not in {q["id"] for q in data["queries"]}
    dropped = by_id(card["dropped"])["q04"]
    assert dropped["check"] == "answerability" and "dns.md labelled 0" in dropped["reason"]
    assert labels.count((WRONG_SOURCE, "dns.md")) == 1  # one judge call
    # the judge labelled every on-topic query left after the cheap checks, and nothing else
    assert sorted(q for q, _ in labels) == sorted([ROTATE, "which ticket do i need to change dns records", WRONG_SOURCE, COPY])
    a = card["answerability"]
    assert (a["checked"], a["verified"], a["dropped"], a["flagged"], a["calls"]) == (4, 3, 1, 0, 4)
    assert "dropped q04 (answerability)" in output


def test_two_near_identical_queries_keep_one(generated):
    data, _, _ = generated
    card = data["card"]
    assert "q01" in {q["id"] for q in data["queries"]} and "q02" not in {q["id"] for q in data["queries"]}
    assert card["duplicates"]["removed"] == 1 and card["duplicates"]["threshold"] == 0.9
    [pair] = card["duplicates"]["pairs"]
    assert (pair["kept"], pair["dropped"], pair["sameText"]) == ("q01", "q02", True)
    assert by_id(card["dropped"])["q02"]["check"] == "duplicate" and "near-duplicate of q01" in by_id(card["dropped"])["q02"]["reason"]


def test_a_heading_of_many_files_is_flagged_non_specific_and_dropped(generated):
    data, _, labels = generated
    card = data["card"]
    [entry] = card["nonSpecific"]["queries"]
    assert entry["id"] == "q05" and entry["action"] == "dropped" and "heading of 8 files" in entry["why"]
    assert card["nonSpecific"] == {**card["nonSpecific"], "flagged": 1, "widened": 0, "dropped": 1}
    assert by_id(card["dropped"])["q05"]["check"] == "non-specific"
    assert all(q != HEADING for q, _ in labels)  # never sent to the judge: the cheap checks run first


def test_an_exact_heading_copy_shows_full_leakage(generated):
    data, _, _ = generated
    facts = by_id(data["card"]["queries"])
    assert facts["q06"]["headingCopy"] is True and facts["q06"]["leakage"] == 1.0
    # a query in the user's own words ("need", "change" are not the document's) leaks less
    assert facts["q03"]["headingCopy"] is False and facts["q03"]["leakage"] < 0.9
    leakage = {t["queryType"]: t for t in data["card"]["leakage"]}
    assert leakage["conceptual"]["meanLeakage"] == 1.0 and leakage["conceptual"]["headingCopies"] == 1
    assert leakage["natural-language"]["queries"] == 2 and leakage["natural-language"]["headingCopies"] == 0
    assert "off-topic" not in leakage  # no expected source to leak from


def test_the_card_counts_every_written_query_and_prints_at_100_columns(generated):
    data, output, _ = generated
    card = data["card"]
    assert card["written"] == 7 and card["kept"] == len(data["queries"]) == 4
    assert sorted(d["id"] for d in card["dropped"]) == ["q02", "q04", "q05"]
    assert card["byType"] == {"natural-language": 2, "conceptual": 1, "off-topic": 1}
    assert {r["name"]: r["corpusFiles"] for r in card["spread"]["folders"]} == {"apps": 8, "runbooks": 2, "(root)": 1}
    printed = output[output.index("query-set card:") : output.index("phase one: 4 queries kept")].splitlines()
    assert printed and all(len(line) <= 100 for line in printed)
    assert any("by folder" in line for line in printed) and any(line.startswith("  answerability:") for line in printed)


def test_the_agent_gets_the_corpus_outline_in_its_first_turn(tmp_path):
    kb = write_kb(tmp_path / "kb")
    with FakeLLMServer(brain=ScriptedBrain()) as server:
        args = ["generate", "--fixtures", str(kb), "--count", str(len(SCRIPT)), "--out", str(tmp_path / "q.json"), "--no-cache"]
        assert invoke(args, env_for(server)).exit_code == 0
        first = first_user_text(server.requests[0].body)
    assert "<corpus_outline>" in first and "11 files in all." in first
    assert "- apps/: 8 files, 73%" in first and "- md: 11 files, 100%" in first and "Spread the queries over the corpus" in first


def test_keep_unverified_keeps_the_query_flagged_and_phase_two_reuses_every_label(tmp_path):
    """The same set through generate-and-evaluate --keep-unverified: q04 is kept and flagged, and phase two
    asks the judge for no label phase one already has (the answerability labels are in the cache)."""
    kb = write_kb(tmp_path / "kb")
    out = tmp_path / "runs"
    with FakeLLMServer(brain=ScriptedBrain()) as server:
        args = ["generate-and-evaluate", "--fixtures", str(kb), "--db", str(tmp_path / "i.sqlite"), "--out-dir", str(out)]
        result = invoke([*args, "--count", str(len(SCRIPT)), "--keep-unverified"], env_for(server))
        labels = label_requests(server)
    assert result.exit_code == 0, result.output
    lines = run_lines(out)
    card = lines[0]["querySetCard"]
    assert by_id(card["queries"])["q04"]["flags"] == ["unverified"] and by_id(card["queries"])["q04"]["answerLabel"] == 0
    assert card["answerability"]["flagged"] == 1 and card["answerability"]["dropped"] == 0
    assert labels.count((WRONG_SOURCE, "dns.md")) == 1  # phase one's call; phase two read it from the cache
    assert len(labels) == len(set(labels))  # no (query, document) labelled twice
    evaluations = {e["queryId"]: e for e in lines if e["type"] == "evaluation"}
    assert set(evaluations) == {"q01", "q03", "q04", "q06", "q07"}
    shown = next(r for r in evaluations["q04"]["results"] if r["source"] == "dns.md")
    assert shown["cached"] is True and shown["relevance"] == 0
    # the query set saved beside the run carries the same card
    saved = json.loads((out / lines[0]["config"]["querySetFile"]).read_text())
    assert saved["card"] == card


@pytest.fixture(scope="module")
def carded_run(tmp_path_factory, hashed):
    """An offline generate-and-evaluate (the card from phase one) and an evaluate of its saved set."""
    tmp = tmp_path_factory.mktemp("carded")
    kb = write_kb(tmp / "kb")
    db = tmp / "i.sqlite"
    first = invoke(["generate-and-evaluate", "--fixtures", str(kb), "--db", str(db), "--out-dir", str(tmp / "a"), "--count", "6"])
    assert first.exit_code == 0, first.output
    [start] = [json.loads(p.read_text().splitlines()[0]) for p in (tmp / "a").glob("*.jsonl")]
    saved = tmp / "a" / start["config"]["querySetFile"]
    again = invoke(["evaluate", "--queries", str(saved), "--db", str(db), "--out-dir", str(tmp / "b")])
    assert again.exit_code == 0, again.output
    return tmp, start, run_lines(tmp / "b")[0]


def test_the_card_is_in_run_start_and_a_file_carries_it_to_the_next_run(carded_run):
    _, start, evaluate_start = carded_run
    card = start["querySetCard"]
    assert card["written"] == 6 and card["answerability"]["judge"].startswith("offline/")
    assert evaluate_start["querySetCard"] == card  # evaluate --queries copies the file's card


def test_a_hand_written_set_has_no_card(tmp_path, carded_run):
    tmp, start, _ = carded_run
    data = json.loads((tmp / "a" / start["config"]["querySetFile"]).read_text())
    hand = tmp_path / "hand.json"
    hand.write_text(json.dumps({"queries": data["queries"]}))
    result = invoke(["evaluate", "--queries", str(hand), "--db", str(tmp / "i.sqlite"), "--out-dir", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert run_lines(tmp_path / "r")[0]["querySetCard"] is None
    assert "card" not in json.loads((tmp_path / "r" / next((tmp_path / "r").glob("*.queries.json")).name).read_text())


def test_the_report_shows_the_card_in_chromium(carded_run, tmp_path):
    tmp, start, _ = carded_run
    results = tmp_path / "results"
    shutil.copytree(tmp / "a", results)
    report = build_report(results, tmp_path / "reports", "7d")
    md = report.markdown.read_text()
    card = start["querySetCard"]
    assert "## Query set" in md and f"{card['kept']} of {card['written']} written queries kept" in md
    assert "| folder | on-topic queries | share | corpus files | corpus share |" in md and "| apps/ |" in md
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Chromium is not installed (Debian package `chromium`); cannot check the page in a real browser")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    flags += ["--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", report.html.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    # the browser parsed the card into a heading and table cells, not left it as Markdown text
    assert "<h2>Query set</h2>" in dom and "<td>apps/</td>" in dom and "<th>mean leakage</th>" in dom
    assert "<strong>Answerability</strong>" in dom and "| folder |" not in dom
    for dropped in card["dropped"]:
        assert f"<td>{dropped['id']}: " in dom


def test_the_dry_run_estimate_counts_the_answerability_labels(tmp_path):
    kb = write_kb(tmp_path / "kb")
    args = ["generate-and-evaluate", "--fixtures", str(kb), "--db", str(tmp_path / "i.sqlite"), "--count", "6", "--dry-run", "--json"]
    env = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}  # nothing may be sent
    for mode, trials, calls in (("pointwise", "1", 5), ("pointwise", "2", 10), ("batched", "1", 5)):
        result = invoke([*args, "--judge-mode", mode, "--trials", trials], env)
        assert result.exit_code == 0, result.output
        check = json.loads(result.stdout)["phaseOne"]["answerability"]
        # six queries: one off-topic (the prompt's rule), five on-topic, one passage each
        assert check["queries"] == 5 and check["judges"][0]["chosen"] and check["judges"][0]["calls"] == calls
        assert check["judges"][0]["costUsd"]["sync"]["expected"] > 0
    text = invoke([*args[:-1]], env).stdout
    assert "phase one's answerability check (rough: 5 on-topic queries, one passage each):" in text


def test_the_estimate_matches_what_the_check_sends(tmp_path):
    """The dry run's answerability calls are the calls the real check makes on a set of the same size."""
    kb = write_kb(tmp_path / "kb")
    texts = [
        ("rotate the backup key", "runbooks/backup.md"),
        ("promote the replica", "runbooks/failover.md"),
        ("dns records ticket", "dns.md"),
        ("network queue", "dns.md"),
        ("pg_ctl promote", "runbooks/failover.md"),
    ]
    script = [(f"q{i:02d}", text, "keyword", [source]) for i, (text, source) in enumerate(texts, start=1)]
    script.append(("q06", "how do I bake sourdough bread", "off-topic", []))
    args = ["generate", "--fixtures", str(kb), "--count", "6", "--out", str(tmp_path / "q.json"), "--no-cache"]
    with FakeLLMServer(brain=ScriptedBrain(script)) as server:
        assert invoke(args, env_for(server)).exit_code == 0
        sent = len(label_requests(server))
    estimate = json.loads(
        invoke(["generate-and-evaluate", "--fixtures", str(kb), "--count", "6", "--dry-run", "--json"], env_for(server)).stdout
    )
    assert sent == estimate["phaseOne"]["answerability"]["judges"][0]["calls"] == 5


def test_every_query_dropped_by_the_checks_is_exit_3_naming_the_reasons(tmp_path):
    kb = write_kb(tmp_path / "kb")
    script = [("q01", WRONG_SOURCE, "natural-language", ["dns.md"]), ("q02", HEADING, "keyword", ["apps/app1/README.md"])]
    with FakeLLMServer(brain=ScriptedBrain(script)) as server:
        args = ["generate", "--fixtures", str(kb), "--count", "2", "--out", str(tmp_path / "q.json"), "--no-cache"]
        result = invoke(args, env_for(server))
    assert result.exit_code == 3, result.output
    assert "all 2 written queries were dropped" in result.output and "heading of 8 files" in result.output
    assert not (tmp_path / "q.json").exists()


# -- the offline writer's spread -------------------------------------------------------------------------------
@pytest.mark.skipif(not FIXTURES_KB.is_dir(), reason=f"the shared fixtures-kb is not at {FIXTURES_KB}")
def test_an_offline_set_on_fixtures_kb_draws_from_both_folders_in_proportion(tmp_path):
    out = tmp_path / "q.json"
    result = invoke(["generate", "--provider", "offline", "--fixtures", str(FIXTURES_KB), "--count", "25", "--out", str(out), "--no-cache"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    on_topic = [q for q in data["queries"] if q["queryType"] != "off-topic"]
    from_til = [q for q in on_topic if q["expectedSources"][0].startswith("til/")]
    from_compose = [q for q in on_topic if q["expectedSources"][0].startswith("awesome-compose/")]
    assert len(from_til) >= len(on_topic) / 3 and from_compose  # til/ holds 510 of 653 files
    folders = {r["name"]: r for r in data["card"]["spread"]["folders"]}
    assert folders["til"]["corpusFiles"] == 510 and folders["til"]["queries"] == len(from_til)
    assert folders["til"]["queryShare"] >= 1 / 3 and folders["awesome-compose"]["queries"] == len(from_compose)
    assert not any(w.startswith(("til/", "awesome-compose/")) for w in data["card"]["spread"]["warnings"])
    assert len({q["expectedSources"][0].split("/")[1] for q in from_til}) >= 8  # spread inside til/ too: its subfolders
    assert all(len(line) <= 100 for line in card_lines(QuerySetCard(**data["card"])))
