"""Built-in hybrid search vs the bm25s library (as an external search command) on BEIR SciFact, judged side
by side in one compare run with the offline (heuristic) judge, beside the same difference computed from the
human qrels.

    .venv/bin/python benchmarks/compare_bm25s.py [--data ../shared/data/scifact] [--workdir /tmp/jr-cmp]
                                                 [--queries 50] [--skip-index]

Steps, all through the CLI: ``index --beir-corpus`` (skipped with --skip-index when the index in --workdir is
there), then ONE ``evaluate --search-mode hybrid --search-command 'python tests/support/engines/bm25s_search.py ...'
--corpus corpus.jsonl --provider offline`` run over the first N test queries (expected sources left empty,
so the judge's metrics come from the judge's labels alone). The summary's comparison block gives the paired
difference bm25s - hybrid with its 95% bootstrap interval; the script then scores each system's ranking
(read from the run file) with ir-measures against the human qrels and computes the same paired difference
with the same function (:func:`judge_runner.measures.paired.compare_values`). Writes nothing into the repository
(work files go to --workdir); the data are read where they are, never copied.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import ir_measures
from ir_measures import nDCG

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLI = [sys.executable, "-m", "judge_runner.cli"]
INTENT = "Find the scientific abstracts that support or refute this claim."


def default_data() -> Path:
    """``../shared/data/scifact`` beside the checkout (or beside the folder holding a worktree)."""
    for base in (ROOT.parent, ROOT.parent.parent):
        if (base / "shared" / "data" / "scifact").is_dir():
            return base / "shared" / "data" / "scifact"
    return ROOT.parent / "shared" / "data" / "scifact"


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(CLI + args, cwd=cwd, capture_output=True, text=True)
    if result.returncode not in (0, 1):
        sys.exit(f"command failed ({result.returncode}): {' '.join(args)}\n{result.stdout[-1500:]}\n{result.stderr[-2000:]}")
    return result


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR's qrels tsv (query-id, corpus-id, score with a header line)."""
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        qid, did, score = line.split("\t")
        qrels.setdefault(qid, {})[did] = int(score)
    return qrels


def main() -> None:
    from judge_runner.measures.paired import compare_values

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=default_data())
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/jr-cmp"))
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--skip-index", action="store_true", help="reuse the index in --workdir")
    parser.add_argument("--run-file", type=Path, default=None, help="score an existing compare run instead of running one")
    args = parser.parse_args()

    corpus, work = args.data / "corpus.jsonl", args.workdir
    work.mkdir(parents=True, exist_ok=True)
    (work / "judge-runner.toml").write_text("[search]\n", encoding="utf-8")
    db = work / "index.sqlite"
    if not args.skip_index or not db.is_file():
        started = time.perf_counter()
        run(["index", "--beir-corpus", str(corpus), "--db", str(db), "--json"], work)
        print(f"indexed {corpus} in {time.perf_counter() - started:.0f} s")

    qrels = read_qrels(args.data / "qrels" / "test.tsv")
    chosen = []
    with open(args.data / "queries.jsonl", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record["_id"] in qrels:
                chosen.append(record)
            if len(chosen) == args.queries:
                break
    query_set = work / "scifact-queries.json"
    query_set.write_text(
        json.dumps(
            {
                "queries": [
                    {"id": r["_id"], "query": r["text"], "queryIntent": INTENT, "queryType": "natural-language", "expectedSources": []}
                    for r in chosen
                ]
            }
        ),
        encoding="utf-8",
    )
    command = shlex.join(
        [
            sys.executable,
            str(ROOT / "tests" / "engines" / "bm25s_search.py"),
            "--corpus",
            str(corpus),
            "--index-dir",
            str(work / "bm25s-index"),
            "--limit",
            "{limit}",
            "{query}",
        ]
    )
    out = work / "results"
    before = set(out.glob("*.jsonl")) if out.is_dir() else set()
    started = time.perf_counter()
    if args.run_file is None:
        run(
            [
                "evaluate",
                "--queries",
                str(query_set),
                "--db",
                str(db),
                "--provider",
                "offline",
                "--search-mode",
                "hybrid",
                "--search-command",
                command,
                "--search-timeout",
                "300",
                "--corpus",
                str(corpus),
                "--out-dir",
                str(out),
                "--quiet",
            ],
            work,
        )
    elapsed = time.perf_counter() - started
    run_file = args.run_file or next(iter(set(out.glob("*.jsonl")) - before))
    lines = [json.loads(line) for line in run_file.read_text(encoding="utf-8").splitlines()]
    summary = lines[-1]
    block = summary["comparison"]
    reference, other = block["reference"], block["systems"][1]["name"]
    print(
        f"compare run {run_file.name}: {len(chosen)} SciFact test queries, {summary['evaluated']} evaluated, "
        f"{summary['failed']} failed, {elapsed:.0f} s (offline HEURISTIC judge)"
    )

    # the rankings each system showed, scored against the human qrels (queries both systems answered)
    rankings: dict[str, dict[str, list[str]]] = {}
    for line in lines:
        if line["type"] == "evaluation":
            rankings.setdefault(line["system"], {})[line["queryId"]] = [r["source"] for r in line["results"]]
    human: dict[str, dict[str, float]] = {}
    for system, ranked in rankings.items():
        run_rows = [ir_measures.ScoredDoc(qid, doc, float(len(docs) - i)) for qid, docs in ranked.items() for i, doc in enumerate(docs)]
        per_query = {m.query_id: m.value for m in ir_measures.iter_calc([nDCG @ 10], {q: qrels[q] for q in ranked}, run_rows)}
        human[system] = {q: float(per_query.get(q, 0.0)) for q in ranked}

    # the judge's labels pooled over both systems (one label per query and document: the run judges a
    # result shown by two systems once), so each system is also scored on what the other one found
    from judge_runner.judging.qrels import pooled_metrics

    pool: dict[str, dict[str, int]] = {}
    for line in lines:
        if line["type"] == "evaluation":
            for r in line["results"]:
                pool.setdefault(line["queryId"], {})[r["source"]] = r["relevance"]
    pooled = {system: {q: m["nDCG@10"] for q, m in pooled_metrics(pool, ranked).items()} for system, ranked in rankings.items()}
    pooled_diff = compare_values(pooled[reference], pooled[other], "nDCG@10", paired=True).as_dict()

    judge_diff = next(d for d in block["differences"] if d["column"] == "nDCG@10")
    human_diff = compare_values(human[reference], human[other], "nDCG@10", paired=True).as_dict()
    print(f"\n{'nDCG@10':<28} {reference:>10} {other:>22} {'difference (' + other + ' - ' + reference + ')':>40}")
    print(
        f"{'judge labels, own list':<28} {judge_diff['referenceMean']:>10.4f} {judge_diff['mean']:>22.4f} "
        f"{judge_diff['delta']:>+10.4f} [{judge_diff['ci95'][0]:+.4f}, {judge_diff['ci95'][1]:+.4f}] {judge_diff['verdict']} (n={judge_diff['n']})"
    )
    p_ref, p_oth = (sum(pooled[s].values()) / max(1, len(pooled[s])) for s in (reference, other))
    print(
        f"{'judge labels, pooled':<28} {p_ref:>10.4f} {p_oth:>22.4f} "
        f"{pooled_diff['delta']:>+10.4f} [{pooled_diff['ci95'][0]:+.4f}, {pooled_diff['ci95'][1]:+.4f}] {pooled_diff['verdict']} (n={pooled_diff['n']})"
    )
    h_ref = sum(human[reference].values()) / len(human[reference])
    h_oth = sum(human[other].values()) / len(human[other])
    print(
        f"{'human qrels (BEIR test)':<28} {h_ref:>10.4f} {h_oth:>22.4f} "
        f"{human_diff['delta']:>+10.4f} [{human_diff['ci95'][0]:+.4f}, {human_diff['ci95'][1]:+.4f}] {human_diff['verdict']} (n={human_diff['n']})"
    )
    print("\nother columns (judge, paired difference to the reference):")
    for diff in block["differences"]:
        if diff["column"] != "nDCG@10" and diff["delta"] is not None:
            low, high = diff["ci95"]
            interval = "" if low is None else f" [{low:+.4f}, {high:+.4f}]"
            print(
                f"  {diff['column']:<16} {diff['referenceMean']!s:>8} -> {diff['mean']!s:<8} {diff['delta']:+.4f}{interval} {diff['verdict']}"
            )
    print(f"\njudged once: {block.get('judgedOnce')}  (run file {run_file})")


if __name__ == "__main__":
    main()
