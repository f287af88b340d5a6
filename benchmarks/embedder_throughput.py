"""Embedding throughput of each embedder side by side, on a fixed sample of a BEIR corpus's chunks (issue 23).

The chunks are made as ``judge-runner index --beir-corpus`` makes them (the indexer's chunker, each chunk's
title as its anchor, the text the model sees); the sample is the first ``--chunks`` of them, fixed. Each
embedder (``--kinds``, default torch, onnx, onnx-int8 and openvino) is loaded and warmed up, then the rounds
alternate between them (``--rounds``), each embedding the whole sample in batches of 256 as the indexer
does, so background load falls on all of them alike. Prints chunks per second (median over rounds), the
speed-up over the first kind, and how far each kind's vectors are from the first's (mean and least
cosine).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/embedder_throughput.py [--data ../shared/data/scifact]
                                                                        [--chunks 2000] [--rounds 3]

The ONNX kinds export their model into the cache on first use (``JUDGE_RUNNER_CACHE_DIR`` to put it
elsewhere). Writes nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from judge_runner.corpus.chunk import Chunk, chunk_text  # noqa: E402
from judge_runner.corpus.read import clean_text  # noqa: E402
from judge_runner.embed.registry import instance  # noqa: E402
from judge_runner.search.indexer import _embedding_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def sample_chunks(corpus: Path, count: int) -> list[str]:
    """The first ``count`` chunks of a BEIR corpus, as the indexer embeds them."""
    texts: list[str] = []
    with open(corpus, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            title = clean_text(str(record.get("title") or "").strip())
            text = clean_text(str(record.get("text") or "").strip())
            for c in chunk_text(text or title, "txt"):
                texts.append(_embedding_text(str(record["_id"]), Chunk(c.text, title or None, c.line_start, c.line_end)))
            if len(texts) >= count:
                return texts[:count]
    return texts


def embed(embedder, texts: list[str], batch: int = 256) -> np.ndarray:
    """``texts`` embedded in the indexer's calls of 256 chunks (each embedder batches them its own way)."""
    return np.vstack([embedder.encode(texts[i : i + batch]) for i in range(0, len(texts), batch)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", default="torch,onnx,onnx-int8,openvino")
    args = parser.parse_args()
    texts = sample_chunks(args.data / "corpus.jsonl", args.chunks)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    embedders = {k: instance(k) for k in kinds}
    for embedder in embedders.values():
        embed(embedder, texts[:256])  # load (and export, once) and warm up
    seconds: dict[str, list[float]] = {k: [] for k in kinds}
    vectors: dict[str, np.ndarray] = {}
    loads = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for kind, embedder in embedders.items():
            started = time.perf_counter()
            vectors[kind] = embed(embedder, texts)
            seconds[kind].append(time.perf_counter() - started)
            loads.append(os.getloadavg()[0])
    print(f"{len(texts)} chunks of {args.data.name}, {args.rounds} rounds alternating, load {min(loads):.1f}-{max(loads):.1f}")
    base = kinds[0]
    for kind in kinds:
        rate = len(texts) / statistics.median(seconds[kind])
        speedup = statistics.median(seconds[base]) / statistics.median(seconds[kind])
        cos = (vectors[kind] * vectors[base]).sum(axis=1)
        print(
            f"{kind:<10} {rate:7.1f} chunks/s (rounds: {', '.join(f'{len(texts) / s:.1f}' for s in seconds[kind])})  "
            f"x{speedup:.2f} vs {base}  cosine to {base}: mean {cos.mean():.5f}, least {cos.min():.5f}"
        )


if __name__ == "__main__":
    main()
