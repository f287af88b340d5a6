"""One label per (query, document), whoever returned it (issue 28, item 1; issue 29, item 5): run by hand.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/one_label.py [--workdir /tmp/jr-one-label] [--count 15]
                                                             [--kb ../shared/data/fixtures-kb]

Three figures, all through the CLI or the library, with the offline judge (the embedder is the default one
unless ``JUDGE_RUNNER_EMBEDDER`` says otherwise):

1. **Two paths, one search.** ``fixtures/`` indexed, ``--count`` queries written by the offline writer, the
   built-in hybrid search judged directly and through its own ``search --trec-run`` output
   (``evaluate --run --corpus fixtures``), each with its own judgment cache: per query nDCG@10 on both paths
   and how many results were labelled differently.
2. **A compare run.** The built-in search in hybrid and fts mode, the bm25s engine as a command (its text
   read from ``--corpus``) and the built-in's TREC run, judged in one run: label calls made and read from
   the cache.
3. **Phase one on fixtures-kb.** Every awesome-compose sample's README with the query that names the sample
   (``flask-redis`` -> "flask redis"), plus the issue's three queries, checked for answerability by the
   honest fake judge (tests/support/fakes/honest_judge.py: the share of the query's words in what it is shown)
   and the offline judge: how many are kept.

Run it on two checkouts (``PYTHONPATH=<other checkout>``) to put a before beside an after. Writes only
under --workdir.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = Path(os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or ROOT)
sys.path.insert(0, str(CODE))
sys.path.insert(1, str(ROOT))
CLI = [sys.executable, "-m", "judge_runner.cli"]
FIXTURES = ROOT / "fixtures"


def cli(args: list[str], cwd: Path) -> None:
    done = subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(CODE)})
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args[:2])} exited {done.returncode}: {done.stderr[-800:]}")


def lines_of(folder: Path) -> list[dict]:
    (path,) = sorted(folder.glob("*.jsonl"))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def two_paths(work: Path, count: int) -> None:
    cli(["index", str(FIXTURES), "--db", str(work / "index.sqlite")], work)
    cli(
        ["generate", "--fixtures", str(FIXTURES), "--count", str(count), "--out", str(work / "qs.json"), "--provider", "offline"]
        + ["--keep-unverified", "--no-cache"],
        work,
    )
    queries = json.loads((work / "qs.json").read_text(encoding="utf-8"))["queries"]
    (work / "queries.jsonl").write_text("".join(json.dumps({"_id": q["id"], "text": q["query"]}) + "\n" for q in queries), encoding="utf-8")
    cli(
        [
            "search",
            "--queries",
            str(work / "queries.jsonl"),
            "--trec-run",
            str(work / "run.trec"),
            "--db",
            str(work / "index.sqlite"),
            "--limit",
            "10",
        ],
        work,
    )
    common = ["evaluate", "--queries", str(work / "qs.json"), "--provider", "offline"]
    cli(
        [
            *common,
            "--db",
            str(work / "index.sqlite"),
            "--search-mode",
            "hybrid",
            "--out-dir",
            str(work / "direct"),
            "--cache",
            str(work / "a.sqlite"),
        ],
        work,
    )
    cli(
        [*common, "--run", str(work / "run.trec"), "--corpus", str(FIXTURES), "--db", str(work / "none.sqlite")]
        + ["--out-dir", str(work / "replay"), "--cache", str(work / "b.sqlite")],
        work,
    )
    direct = {e["queryId"]: e for e in lines_of(work / "direct") if e["type"] == "evaluation"}
    replay = {e["queryId"]: e for e in lines_of(work / "replay") if e["type"] == "evaluation"}
    differ = 0
    print("1. the built-in search judged directly and through its own TREC run (nDCG@10)")
    for qid, a in direct.items():
        b = replay[qid]
        x, y = ((e["metrics"] or {}).get("nDCG@10") for e in (a, b))
        labels = sum(1 for r, s in zip(a["results"], b["results"]) if r["relevance"] != s["relevance"])
        differ += x != y
        print(f"   {qid:5} {a['query'][:40]:40} direct {x}  run {y}  labels differing {labels}")
    on_topic = sum(1 for e in direct.values() if e["metrics"])
    print(f"   nDCG@10 differs on {differ} of {on_topic} on-topic queries")


def compare_run(work: Path) -> None:
    bm25s = shlex.join(
        [sys.executable, str(ROOT / "tests" / "engines" / "bm25s_search.py"), "--corpus", str(FIXTURES), "--limit", "{limit}", "{query}"]
    )
    cli(
        [
            "evaluate",
            "--queries",
            str(work / "qs.json"),
            "--provider",
            "offline",
            "--db",
            str(work / "index.sqlite"),
            "--search-mode",
            "hybrid,fts",
        ]
        + ["--search-command", bm25s, "--run", str(work / "run.trec"), "--corpus", str(FIXTURES)]
        + ["--out-dir", str(work / "compare"), "--cache", str(work / "c.sqlite")],
        work,
    )
    lines = lines_of(work / "compare")
    summary, systems = lines[-1], [s["name"] for s in lines[0]["provenance"]["searchSystems"]]
    results = sum(len(e["results"]) for e in lines if e["type"] == "evaluation")
    print(
        f"2. compare run of {', '.join(systems)}: {results} results, {summary['labelsJudged']} label calls, {summary['labelsCached']} from the cache"
    )


def phase_one(kb: Path) -> None:
    from judge_runner.config import load_settings
    from judge_runner.core.models import Query
    from judge_runner.embed.registry import choose
    from judge_runner.judging.heuristic import HeuristicJudge
    from judge_runner.judging.protocol import LabelReply
    from judge_runner.querygen.answerability import check_answerability
    from tests.support.fakes.honest_judge import honest_label

    class Honest:
        name, model, heuristic = "honest", "m", True

        def label_one(self, query, intent, document, sampling, log=lambda m: None):
            reply = honest_label(query, {"source": document.source, "anchor": document.anchor, "text": document.body})
            return LabelReply(reply["relevance"], reply["reason"])

    def query(qid: str, text: str, source: str) -> Query:
        return Query(
            id=qid, query=text, queryIntent=f"Find the Docker Compose sample: {text}.", queryType="keyword", expectedSources=[source]
        )

    readmes = sorted(kb.glob("awesome-compose/*/README.md"))
    samples = [query(f"q{i}", p.parent.name.replace("-", " "), str(p.relative_to(kb))) for i, p in enumerate(readmes)]
    issue = [
        query("x1", "Flask redis", "awesome-compose/flask-redis/README.md"),
        query("x2", "traefik golang", "awesome-compose/traefik-golang/README.md"),
        query("x3", "PHP application with Apache2", "awesome-compose/apache-php/README.md"),
    ]
    print(f"3. answerability of the query naming the sample, {len(samples)} awesome-compose READMEs")
    for name, judge in (("honest fake judge", Honest()), ("offline judge", HeuristicJudge(choose(load_settings().embedder)))):
        checks, _ = check_answerability(samples + issue, kb, judge)
        kept = sum(c.verified for c in checks[: len(samples)])
        print(
            f"   {name}: kept {kept} of {len(samples)}; the issue's: "
            + ", ".join(f"{c.query.query!r} {c.best}" for c in checks[len(samples) :])
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/jr-one-label"))
    parser.add_argument("--count", type=int, default=15)
    parser.add_argument("--kb", type=Path, default=ROOT.parent / "shared" / "data" / "fixtures-kb")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=args.workdir))  # fresh caches: every label is asked once
    print(f"code: {CODE}; work files in {work}")
    two_paths(work, args.count)
    compare_run(work)
    if (args.kb / "awesome-compose").is_dir():
        phase_one(args.kb)
    else:
        print(f"3. skipped: {args.kb} is not there")


if __name__ == "__main__":
    main()
