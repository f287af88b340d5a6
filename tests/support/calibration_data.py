"""A small synthetic BEIR collection for calibrate's tests (written to a temporary folder, never shipped)."""

from __future__ import annotations

import json
import random
from pathlib import Path

TOPICS = [
    "glacier melt",
    "coral bleaching",
    "insulin resistance",
    "neutron star",
    "wheat rust",
    "battery anode",
    "bird migration",
    "volcanic ash",
    "gut microbiome",
    "solar flare",
    "permafrost thaw",
    "tidal erosion",
    "malaria vaccine",
    "quantum dots",
    "honeybee decline",
    "kidney stones",
    "ozone depletion",
    "graphene membranes",
    "coffee rust",
    "asthma triggers",
    "lithium mining",
    "monsoon rainfall",
    "tuberculosis relapse",
    "dune migration",
    "zebrafish regeneration",
    "algal bloom",
    "migraine aura",
    "seismic swarms",
    "cassava mosaic",
    "hydrogen embrittlement",
]
"""Thirty topics, each with words of its own, so a query finds its documents by BM25 and by vector alike."""
FILLER = (
    "study",
    "results",
    "method",
    "sample",
    "analysis",
    "effect",
    "measured",
    "observed",
    "levels",
    "data",
    "patients",
    "model",
    "cells",
    "response",
    "increase",
    "control",
    "group",
    "significant",
    "reported",
)


def write_collection(folder: Path, queries: int = 8, relevant: int = 3, distractors: int = 6, seed: int = 1) -> Path:
    """Write ``queries.jsonl``, ``corpus.jsonl`` and ``qrels/test.tsv`` (binary) under ``folder``: per topic,
    ``relevant`` documents about it (judged 1) and ``distractors`` that mention one of its words (unjudged).
    Returns ``folder``."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    qlines, dlines, rlines = [], [], ["query-id\tcorpus-id\tscore"]
    for t, topic in enumerate(TOPICS[:queries]):
        qid = f"q{t}"
        qlines.append({"_id": qid, "text": f"what causes {topic}"})
        words = topic.split()
        for r in range(relevant):
            body = " ".join(rng.choice(FILLER) for _ in range(40))
            dlines.append(
                {"_id": f"d{t}r{r}", "title": f"{topic} mechanisms", "text": f"The causes of {topic} were studied. {body} {topic}."}
            )
            rlines.append(f"{qid}\td{t}r{r}\t1")
        for d in range(distractors):
            body = " ".join(rng.choice(FILLER) for _ in range(40))
            dlines.append({"_id": f"d{t}x{d}", "title": f"notes {d}", "text": f"{body} {words[d % len(words)]} {body}"})
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in qlines) + "\n", encoding="utf-8")
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in dlines) + "\n", encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("\n".join(rlines) + "\n", encoding="utf-8")
    return folder


def judge_qrels(folder: Path) -> dict[str, dict[str, int]]:
    """``{query text: {docid: grade on 0-3}}`` of a collection written by :func:`write_collection`."""
    texts = {json.loads(line)["_id"]: json.loads(line)["text"] for line in (folder / "queries.jsonl").read_text().splitlines()}
    out: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, docid, grade = line.split("\t")
        out.setdefault(texts[qid], {})[docid] = 3 if int(grade) == 1 else int(grade)
    return out
