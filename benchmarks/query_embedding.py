"""What embedding each query alone costs against one padded batch (issue 24, item 1), run by hand.

Phase two embeds its query set ahead of the searches (``ChunkSearch.prepare_queries``): the first
``--concurrency`` queries before the first search, the rest while those are judged. Since a query's
vector must be a function of the query alone (rows of a padded batch differ by float noise on CPUs with
AVX-512, enough to swap near-tied documents), each query is encoded in a batch of one. This script
measures, side by side in one process with the real all-MiniLM-L6-v2 model: the whole set in one padded
batch (the old way), each query alone (the new way), and the part a run waits for before its first search
(the first 5 queries), plus how far the batched vectors are from the lone ones.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/query_embedding.py [--repeats 7]

Writes nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from judge_runner.embed.base import encode_each  # noqa: E402
from judge_runner.embed.registry import DEFAULT_KIND, instance  # noqa: E402

QUERIES = [
    "how do I drain a kubernetes node before maintenance",
    "rotate the postgres credentials",
    "pgbouncer connection pooling limits",
    "DEC-0054",
    "atomic_write_json",
    "why did we choose real-time indexing",
    "backup snapshots retention policy",
    "parseConfig throws on empty file",
    "multi-agent evaluation harness",
    "what is the capital of Australia",
    "Wie richte ich die Replikation ein",
    "索引の再構築",
    "incident review template",
    "rate limit on the public API",
    "best hiking trails near Lisbon",
]


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def line(name: str, seconds: list[float]) -> str:
    return f"{name:<34} min {min(seconds) * 1000:7.1f} ms  median {statistics.median(seconds) * 1000:7.1f} ms  max {max(seconds) * 1000:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    embedder = instance(DEFAULT_KIND)
    embedder.encode(["warm up the model"])
    batched = timed(lambda: embedder.encode(QUERIES), args.repeats)
    lone = timed(lambda: encode_each(embedder, QUERIES), args.repeats)
    first = timed(lambda: encode_each(embedder, QUERIES[:5]), args.repeats)
    difference = float(np.abs(embedder.encode(QUERIES) - encode_each(embedder, QUERIES)).max())
    same = bool((encode_each(embedder, QUERIES) == np.vstack([encode_each(embedder, [q]) for q in QUERIES])).all())
    print(f"{len(QUERIES)} queries, all-MiniLM-L6-v2, load {os.getloadavg()[0]:.2f}")
    print(line("one padded batch (before)", batched))
    print(line("each query alone (now)", lone))
    print(line("first 5 alone (before 1st search)", first))
    print(f"alone / batched (median): {statistics.median(lone) / statistics.median(batched):.2f}x")
    print(f"largest component difference batched vs alone: {difference:.2e}; alone is the same bit for bit on every call: {same}")


if __name__ == "__main__":
    main()
