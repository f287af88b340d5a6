"""Every system's nDCG@10, R@10 and RR(rel=2) equal ir_measures' on the pooled qrels, for a run of one system and
a compare run, with the judge's labels alone, people's grades alone and both. The qrels are built here from the
run file's labels and the people's qrels file by the rules of docs/run-file.md (every system's judge labels,
their lower median; a person's grade wins; an expected source nobody graded at 3; a document nobody graded is
not relevant), and ir_measures is called directly."""

from __future__ import annotations

import json
import shlex
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import ir_measures
import pytest
from ir_measures import RR, R, nDCG

from judge_runner.analysis.trend import read_runs
from tests.support.clitools import invoke, run_lines

pytestmark = pytest.mark.hash_embedder

DOCS = {
    "failover.md": "Redis failover: promote the replica with sentinel, then repoint the clients.",
    "sentinel.md": "Redis sentinel watches the primary and starts a failover when it stops answering.",
    "backup.md": "Database backup: run pg_dump every night and copy the file to object storage.",
    "restore.md": "Restore a database backup with pg_restore into an empty database.",
    "rotate.md": "Key rotation: create the new key, deploy it, then revoke the old key.",
    "vault.md": "Vault stores the keys; rotate them with the vault rotate command.",
    "lunch.md": "The canteen serves lunch from noon; the menu changes every week.",
    "parking.md": "Parking permits are renewed each January at the front desk.",
}
QUERIES = {
    "q1": ("redis failover with sentinel", ["failover.md"]),
    "q2": ("restore a database backup", ["restore.md"]),
    "q3": ("rotate the vault keys", []),
}
LISTS = {
    "wide": {
        "q1": ["sentinel.md", "lunch.md", "failover.md", "parking.md"],
        "q2": ["backup.md", "restore.md", "vault.md"],
        "q3": ["rotate.md", "vault.md", "lunch.md", "backup.md", "failover.md"],
    },
    "narrow": {"q1": ["failover.md"], "q2": ["parking.md", "backup.md"], "q3": ["vault.md"]},
}
PEOPLE = {  # people graded documents some system returned and some no system returned
    "people": {("q1", d): g for d, g in [("failover.md", 3), ("sentinel.md", 2), ("lunch.md", 0), ("parking.md", 0)]}
    | {("q2", d): g for d, g in [("backup.md", 1), ("restore.md", 3), ("vault.md", 0), ("parking.md", 0)]}
    | {("q3", d): g for d, g in [("rotate.md", 2), ("vault.md", 3), ("lunch.md", 0), ("backup.md", 0), ("failover.md", 0)]},
    "mixed": {("q1", "sentinel.md"): 3, ("q2", "restore.md"): 1, ("q2", "vault.md"): 2, ("q3", "rotate.md"): 0},
}
SEARCH = "import json, sys\nLISTS = %r\nQ = %r\nq = next(k for k, (t, _) in Q.items() if t == sys.argv[1])\nprint(json.dumps({'results': [{'source': s, 'snippet': s} for s in LISTS[q]]}))\n"


def command(folder: Path, name: str) -> str:
    script = folder / f"{name}.py"
    script.write_text(SEARCH % (LISTS[name], QUERIES), encoding="utf-8")
    return shlex.join([sys.executable, str(script), "{query}"])


def pooled_qrels(evaluations: list[dict], people: dict[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    labels: dict[tuple[str, str], list[int]] = defaultdict(list)
    for line in evaluations:
        best: dict[str, int] = {}
        for r in line["results"]:
            judge = r["judgeLabel"] if r["labelOrigin"] == "human" else r["relevance"]
            best[r["source"]] = max(best.get(r["source"], 0), judge)
        for doc, grade in best.items():
            labels[(line["queryId"], doc)].append(grade)
    qrels: dict[str, dict[str, int]] = {q: {} for q in QUERIES}
    for (q, doc), grades in labels.items():
        qrels[q][doc] = statistics.median_low(grades)
    for q, (_, expected) in QUERIES.items():
        for doc in expected:
            qrels[q].setdefault(doc, 3)
    for (q, doc), grade in people.items():
        qrels[q][doc] = grade
    return qrels


@pytest.mark.parametrize("labels", ["judge", "people", "mixed"])
@pytest.mark.parametrize("systems", [("wide",), ("wide", "narrow")])
def test_every_systems_figures_equal_ir_measures_on_the_pooled_qrels(tmp_path, labels, systems):
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in DOCS.items():
        (kb / name).write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
    queries = [{"id": q, "query": t, "queryIntent": t, "queryType": "keyword", "expectedSources": e} for q, (t, e) in QUERIES.items()]
    (tmp_path / "q.json").write_text(json.dumps({"queries": queries}), encoding="utf-8")
    cache = str(tmp_path / "j.sqlite")
    people = PEOPLE.get(labels, {})
    args = ["evaluate", "--queries", str(tmp_path / "q.json"), "--provider", "offline", "--corpus", str(kb), "--cache", cache]
    if people:
        (tmp_path / "p.qrels").write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in people.items()), encoding="utf-8")
        assert invoke(["qrels", "import", str(tmp_path / "p.qrels"), "--name", "team", "--cache", cache, "--rescale", "1=1"]).exit_code == 0
        args += ["--human-qrels", "team"]
    for name in systems:
        args += ["--search-command", command(tmp_path, name)]
    result = invoke([*args, "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    lines = run_lines(tmp_path / "out")
    evaluations = [line for line in lines if line["type"] == "evaluation"]
    qrels = pooled_qrels(evaluations, people)
    summary = lines[-1]
    figures = {s["name"]: s["averageMetrics"] for s in summary["comparison"]["systems"]} if len(systems) > 1 else None
    (read,), _ = read_runs(tmp_path / "out")
    views = {view.shown_system: view for view in read.system_views()}
    for name in systems:
        system = f"command:{name}"
        run = [
            ir_measures.ScoredDoc(e["queryId"], r["source"], 100.0 - r["rank"])
            for e in evaluations
            if e["system"] == system
            for r in e["results"]
        ]
        wanted = {str(m): v for m, v in ir_measures.calc_aggregate([nDCG @ 10, R @ 10, RR(rel=2)], qrels, run).items()}
        ours = figures[system] if figures is not None else summary["averageMetrics"]
        view = views[system] if len(systems) > 1 else read
        for measure, value in wanted.items():
            assert ours[measure] == pytest.approx(value, abs=1e-6), (system, measure, "summary")
            assert view.mean(measure) == pytest.approx(value, abs=1e-6), (system, measure, "trend")
    assert summary["qrels"]["source"] == {"judge": "judge", "people": "people", "mixed": "judge and people"}[labels]
    assert summary["qrels"]["people"] == len(people)
