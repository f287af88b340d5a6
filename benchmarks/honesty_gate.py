"""Tune the honesty gate (``[search] confidence_threshold``) on a knowledge base, default ``fixtures/``.

An answer is confident when one chunk holds most of the query's terms or its best cosine similarity
reaches the threshold. This script runs two query sets through hybrid search: on-topic queries (the
offline generator's, plus hand-written ones) and off-topic questions nothing in the corpus answers. It
prints each set's best-cosine range and, per candidate threshold, the share of off-topic answers that
abstain and of on-topic answers that stay confident. Pick the lowest threshold that abstains on every
off-topic question. Writes nothing into the repository.

    .venv/bin/python benchmarks/honesty_gate.py [--fixtures fixtures] [--db /tmp/jr-gate.sqlite]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from judge_runner.querygen.heuristic import propose_queries
from judge_runner.search.indexer import index_tree
from judge_runner.search.sqlite import SQLiteIndex

OFF_TOPIC = [
    "how long should sourdough bread proof overnight",
    "best hiking trails in patagonia in march",
    "who won the 1998 world cup final",
    "recipe for a vegetarian lasagna with spinach",
    "what is the capital of australia",
    "how to train a puppy to sit",
    "tax deadline for freelancers in spain",
    "symptoms of vitamin d deficiency",
    "how do volcanoes form",
    "lyrics of a famous opera aria",
]
ON_TOPIC = [
    "drain a kubernetes node",
    "DEC-0054",
    "atomic_write_json",
    "how do we rotate logs",
    "Kündigung",
    "索引",
    "who is on call next week",
    "what happened in the stale search postmortem",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fixtures", type=Path, default=Path(__file__).resolve().parents[1] / "fixtures")
    parser.add_argument("--db", type=Path, default=Path("/tmp/jr-gate.sqlite"))
    args = parser.parse_args()
    index = SQLiteIndex(args.db)
    index_tree(index, args.fixtures)
    generated = [q["query"] for q in propose_queries(args.fixtures, 40)["queries"] if q["queryType"] != "off-topic"]
    rows = {}
    for label, queries in (("on-topic", generated + ON_TOPIC), ("off-topic", OFF_TOPIC)):
        rows[label] = []
        for query in queries:
            answer = index.search(query, mode="hybrid")
            best = max((h.scores.cosine or 0.0) for h in answer.results) if answer.results else 0.0
            lexical = index._lexical_match(query, [cid for cid, _ in index._fts(query, 10)])
            rows[label].append((best, lexical))
        cosines = sorted(b for b, _ in rows[label])
        print(
            f"{label:<9}: {len(cosines)} queries, best cosine {cosines[0]:.2f}..{cosines[-1]:.2f}, "
            f"lexical match on {sum(l for _, l in rows[label])}"
        )
    print("\nthreshold  off-topic abstain  on-topic confident")
    for threshold in (0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50):
        abstain = sum(1 for b, l in rows["off-topic"] if not (l or b >= threshold)) / len(rows["off-topic"])
        confident = sum(1 for b, l in rows["on-topic"] if l or b >= threshold) / len(rows["on-topic"])
        print(f"{threshold:>9.2f}  {abstain:>17.0%}  {confident:>18.0%}")


if __name__ == "__main__":
    main()
