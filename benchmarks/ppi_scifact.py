"""Bias-corrected mean nDCG@10 on SciFact with the offline judge, the SciFact qrels playing the human labeller.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ppi_scifact.py [--data ../shared/data/scifact]
        [--queries 100] [--labelled 30] [--draws 200] [--workdir /tmp/jr-ppi]

1. Indexes the SciFact corpus (``judge-runner index --beir-corpus``) and judges ``--queries`` test queries (drawn
   with seed 13) with the offline heuristic judge (``judge-runner evaluate``): the run's per-query nDCG@10 is
   the judge's. Each query's expected sources are its qrels-relevant abstracts, so an abstract the search
   missed lowers the ideal DCG for the judge and the humans alike.
2. The human value: every returned abstract labelled by the SciFact qrels (relevant 1 -> 3, as ``qrels import
   --rescale 1=3``; unjudged 0, TREC pooling), per-query nDCG@10 by the run's own code
   (``judge_runner.measures.ir.query_metrics``), averaged over all the queries.
3. ``--draws`` times: ``--labelled`` queries drawn at random count as labelled; the prediction-powered
   estimate (``judge_runner.measures.ppi.ppi_mean``, what the summary's ``biasCorrected`` computes) and the
   labelled queries' own interval. Prints the coverage of the human value, the mean widths, and the
   judge-only estimate's bias.
4. Once, end to end: the SciFact labels of one draw's queries imported into the judgment cache
   (``qrels import``), the run judged again, and its summary's ``biasCorrected`` printed beside the offline
   computation of the same draw.

Writes only under --workdir. SciFact is non-commercial: it is read from the shared folder, never copied.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from judge_runner.measures.ir import NDCG10_NAME, query_metrics  # noqa: E402
from judge_runner.measures.ppi import ppi_mean  # noqa: E402
from judge_runner.search.trec import encode_id  # noqa: E402

CLI = [sys.executable, "-m", "judge_runner.cli"]


def cli(args: list[str], cwd: Path) -> float:
    started = time.monotonic()
    done = subprocess.run(CLI + args, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(args)}\n{done.stderr[-3000:]}")
    return time.monotonic() - started


def run_lines(folder: Path) -> list[dict]:
    path = max(folder.glob("*.jsonl"))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--labelled", type=int, default=30)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/jr-ppi"))
    args = parser.parse_args()
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    data = args.data.resolve()

    qrels: dict[str, dict[str, int]] = {}
    for line in (data / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, docid, grade = line.split("\t")
        qrels.setdefault(qid, {})[docid] = 3 if int(grade) >= 1 else 0
    texts = {}
    for line in (data / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["_id"] in qrels:
            texts[record["_id"]] = record["text"]
    chosen = sorted(random.Random(args.seed).sample(sorted(texts), args.queries))
    query_set = {
        "queries": [
            {
                "id": qid,
                "query": texts[qid],
                "queryIntent": "Find the abstracts that support or refute this scientific claim.",
                "queryType": "natural-language",
                "expectedSources": sorted(d for d, g in qrels[qid].items() if g > 0),
            }
            for qid in chosen
        ]
    }
    (work / "queries.json").write_text(json.dumps(query_set, indent=1), encoding="utf-8")
    db, cache = work / "index.sqlite", work / "judgments.sqlite"
    print(f"indexing SciFact into {db} ...", flush=True)
    seconds = cli(["index", "--beir-corpus", str(data / "corpus.jsonl"), "--db", str(db)], work)
    print(f"  {seconds:.0f} s", flush=True)
    judge_args = ["evaluate", "--queries", str(work / "queries.json"), "--db", str(db), "--provider", "offline", "--quiet"]
    print("judging with the offline judge ...", flush=True)
    seconds = cli([*judge_args, "--out-dir", str(work / "judge-only"), "--cache", str(cache)], work)
    lines = [line for line in run_lines(work / "judge-only") if line["type"] == "evaluation"]
    print(f"  {len(lines)} queries in {seconds:.0f} s", flush=True)

    judge = {ev["queryId"]: ev["metrics"][NDCG10_NAME] for ev in lines}
    human: dict[str, float] = {}
    for ev in lines:
        sources = [r["source"] for r in ev["results"]]
        grades = [qrels[ev["queryId"]].get(s, 0) for s in sources]
        human[ev["queryId"]] = float(query_metrics(sources, grades, ev["expectedSources"])[NDCG10_NAME])  # type: ignore[arg-type]
    truth = statistics.fmean(human.values())
    judge_mean = statistics.fmean(judge.values())
    print(f"\nhuman mean nDCG@10 over {len(human)} queries: {truth:.4f}")
    print(f"judge-only mean nDCG@10: {judge_mean:.4f} (bias {judge_mean - truth:+.4f})")
    corr = statistics.correlation([judge[q] for q in human], [human[q] for q in human])
    print(f"per-query correlation judge vs human nDCG@10: {corr:.3f}")

    rng = random.Random(args.seed + 1)
    covered = narrower = 0
    widths, human_widths, human_covered, estimates = [], [], 0, []
    first_draw: list[str] = []
    for draw in range(args.draws):
        sample = rng.sample(sorted(human), args.labelled)
        if draw == 0:
            first_draw = sample
        found = ppi_mean(judge, {q: human[q] for q in sample})
        assert found is not None
        low, high = found.ci95
        covered += low <= truth <= high
        human_covered += found.human_ci95[0] <= truth <= found.human_ci95[1]
        widths.append(high - low)
        human_widths.append(found.human_ci95[1] - found.human_ci95[0])
        narrower += (high - low) < (found.human_ci95[1] - found.human_ci95[0])
        estimates.append(found.estimate)
    print(f"\n{args.draws} draws of {args.labelled} labelled queries out of {len(human)}:")
    print(f"  prediction-powered 95% interval covers the human value in {covered / args.draws:.1%} of draws")
    print(
        f"  mean width {statistics.fmean(widths):.4f}; labelled queries alone {statistics.fmean(human_widths):.4f} "
        f"(covers {human_covered / args.draws:.1%}); narrower in {narrower / args.draws:.1%} of draws"
    )
    print(
        f"  estimate: mean {statistics.fmean(estimates):.4f} (bias {statistics.fmean(estimates) - truth:+.4f}), "
        f"sd {statistics.stdev(estimates):.4f}"
    )

    # once end to end: the first draw's labels imported, the run judged again, its summary read
    labels = work / "draw0.qrels"
    rows = [
        f"{encode_id(ev['queryId'])} 0 {encode_id(r['source'])} {qrels[ev['queryId']].get(r['source'], 0)}"
        for ev in lines
        if ev["queryId"] in first_draw
        for r in ev["results"]
    ]
    labels.write_text("\n".join(rows) + "\n", encoding="utf-8")
    cli(["qrels", "import", str(labels), "--name", "scifact-draw0", "--cache", str(cache)], work)
    cli([*judge_args, "--out-dir", str(work / "with-labels"), "--cache", str(cache), "--human-qrels", "scifact-draw0"], work)
    summary = run_lines(work / "with-labels")[-1]
    block = summary["biasCorrected"]
    offline = ppi_mean(judge, {q: human[q] for q in first_draw})
    print("\nend to end (draw 0 imported, run judged again):")
    print(
        f"  summary biasCorrected: {block['labelledQueries']} of {block['scoredQueries']} labelled; nDCG@10 {json.dumps(block['nDCG@10'])}"
    )
    print(f"  offline computation:   estimate {offline.estimate:.6f} ci95 [{offline.ci95[0]:.6f}, {offline.ci95[1]:.6f}]")


if __name__ == "__main__":
    main()
