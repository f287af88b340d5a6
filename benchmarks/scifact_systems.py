"""SciFact's systems and labels, cached on disk for the decision benchmark (benchmarks/decide_scifact.py).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/scifact_systems.py [--data ../shared/data/scifact] [--workdir /tmp/jr-decide]

Builds, once, into ``--workdir/systems.json``:

- the systems' top 10 for every SciFact test query with qrels (300): the built-in configurations
  (``fts``, ``vector``, ``hybrid``, ``hybrid-rrf10``, ``hybrid-equal``; judge_runner.calibrate.pool) on the full
  corpus, and degraded controls built from hybrid's ranking: ``control-ranks11-20``, ``control-reversed``,
  ``control-shuffled`` (its top 10 in a seeded random order), ``control-top3`` (its top 3 only), and
  ``vector-hash`` (vector search with the feature-hashing embedder instead of MiniLM: a weaker embedder);
- the offline (heuristic) judge's 0-3 label of every pooled (query, document), each document shown as
  calibrate shows it (title as anchor, 400 characters around the query's words: calibrate.collect.shown_doc);
- the SciFact qrels on the judge's 0-3 scale (relevant 1 -> 3), which play the people.

Indexing SciFact with MiniLM and judging the pool takes several minutes on 2 cores; a second call reads the
file. Writes only under --workdir; SciFact is read from the shared folder, never copied.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SYSTEMS_FILE = "systems.json"
DEPTH = 10


def build(data: Path, work: Path) -> dict:
    """Compute the systems' runs and the judge's labels (module docstring); returns the document written."""
    from judge_runner.calibrate.collect import shown_doc
    from judge_runner.calibrate.data import load_beir, sample_queries
    from judge_runner.calibrate.labeling import ProtocolLabeler
    from judge_runner.calibrate.pool import builtin_runs, control_runs, prepare_index
    from judge_runner.embed.hashing import HashEmbedder
    from judge_runner.embed.registry import DEFAULT_KIND, instance
    from judge_runner.judging.heuristic import HeuristicJudge
    from judge_runner.search.base import SearchSettings
    from judge_runner.search.sqlite import SQLiteIndex

    collection = load_beir(data)
    queries = sample_queries(collection, None, 13)
    started = time.monotonic()
    runs: dict[str, dict[str, list[str]]] = {}
    for name, embedder in (("minilm", instance(DEFAULT_KIND)), ("hash", HashEmbedder())):
        index = SQLiteIndex(work / f"scifact-{name}.sqlite", SearchSettings(), embedder=embedder)
        try:
            info = prepare_index(index, collection, queries, "full", 0, work)
            print(
                f"index {name}: {info['documents']} documents ({info['indexed']} embedded) at {time.monotonic() - started:.0f} s",
                flush=True,
            )
            if name == "minilm":
                runs.update(builtin_runs(index, queries, depth=20))
            else:
                from judge_runner.calibrate.pool import SystemSpec

                runs.update(builtin_runs(index, queries, (SystemSpec("vector-hash", "vector"),), depth=DEPTH))
        finally:
            index.close()
    hybrid = runs["hybrid"]
    runs.update(control_runs(hybrid))
    rng = random.Random(29)
    runs["control-shuffled"] = {q: rng.sample(d[:DEPTH], len(d[:DEPTH])) for q, d in sorted(hybrid.items())}
    runs["control-top3"] = {q: list(d[:3]) for q, d in hybrid.items()}
    runs = {s: {q: list(d[:DEPTH]) for q, d in r.items()} for s, r in runs.items()}
    labeler = ProtocolLabeler(HeuristicJudge(instance(DEFAULT_KIND)))
    labels: dict[str, dict[str, int]] = {}
    total = len(queries)
    for i, q in enumerate(queries, start=1):
        pooled = list(dict.fromkeys(d for r in runs.values() for d in r.get(q.id, [])))
        docs = [shown_doc(collection, q, d) for d in pooled]
        labels[q.id] = {d: result.label for d, result in zip(pooled, labeler(q, docs, "pointwise", 0))}
        if i % 25 == 0 or i == total:
            print(f"judged {i}/{total} queries ({sum(map(len, labels.values()))} pairs) at {time.monotonic() - started:.0f} s", flush=True)
    document = {
        "queries": {q.id: q.text for q in queries},
        "qrels": {q.id: collection.qrels.get(q.id, {}) for q in queries},
        "runs": runs,
        "judge": labels,
        "seconds": round(time.monotonic() - started, 1),
    }
    (work / SYSTEMS_FILE).write_text(json.dumps(document), encoding="utf-8")
    return document


def load(data: Path, work: Path) -> dict:
    """The cached document, built first when it is not there."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / SYSTEMS_FILE
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    return build(data, work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/jr-decide"))
    args = parser.parse_args()
    document = load(args.data.resolve(), args.workdir.resolve())
    print(f"{len(document['queries'])} queries, {len(document['runs'])} systems, {sum(map(len, document['judge'].values()))} judged pairs")


if __name__ == "__main__":
    main()
